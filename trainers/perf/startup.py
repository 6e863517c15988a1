"""Time to the first finished training iteration, cold and warm compilation cache (a benchmark script).

    python -m trainers.perf.startup [--repeats 2] [--out FILE.json]

For each case (the README's default run: `python -m trainers.gsb_mdpo`, InvertedPendulum-v5 with the cpu
preset; and a Playground run: CartpoleSwingup with the cpu-playground suite's geometry) it starts the trainer
as a user would, from an empty persistent compilation cache (cold), then again with the cache that run filled
(warm), and for reference with the cache off. The clock runs from starting the process to the first
iteration's record appearing in metrics.jsonl (process start, imports, env construction, tracing and
compiling the iteration, and the iteration itself); the process is then stopped. Prints and writes one JSON
object with every measurement and the warm/cold ratio.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainers.benchmark.suites import SUITES
from trainers.perf import write_result

CASES = {
    "default (InvertedPendulum-v5, cpu preset)": ["--log.no-progress"],
    "Playground (CartpoleSwingup, cpu-playground geometry)": [
        "--preset", "playground", "--env", "CartpoleSwingup", *SUITES["cpu-playground"].args, "--log.no-progress",
    ],
}  # fmt: skip


def first_iteration_seconds(argv: list[str], cache: str, out: Path) -> float:
    """Seconds from process start to the first train record; the process is stopped then."""
    env = {**os.environ, "GSBPOLICY_COMPILE_CACHE": cache}
    metrics = out / "metrics.jsonl"
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "trainers.gsb_mdpo", *argv, "--output-dir", str(out)],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        while not (metrics.exists() and metrics.read_text().strip()):
            if process.poll() is not None:
                raise SystemExit(
                    f"error: the trainer exited early:\n{process.stderr.read().decode()[-2000:]}"
                )
            time.sleep(0.05)
        return time.perf_counter() - start
    finally:
        process.kill()
        process.wait()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trainers.perf.startup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--repeats", type=int, default=2, help="cold/warm pairs per case (fresh cache each)")
    parser.add_argument("--out", type=Path)
    opts = parser.parse_args(argv)
    result = {"load_average_start": os.getloadavg(), "cpu_count": os.cpu_count(), "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for number, (name, case) in enumerate(CASES.items()):
            cold, warm, off = [], [], []
            for repeat in range(opts.repeats):
                cache, run = str(tmp / f"cache_{number}_{repeat}"), tmp / f"run_{number}_{repeat}"
                cold.append(first_iteration_seconds(case, cache, run / "cold"))
                warm.append(first_iteration_seconds(case, cache, run / "warm"))
                off.append(first_iteration_seconds(case, "off", run / "off"))
                print(json.dumps({"case": name, "cold_s": cold[-1], "warm_s": warm[-1], "off_s": off[-1]}),
                      flush=True)  # fmt: skip
            result["cases"][name] = {"cold_s": cold, "warm_s": warm, "cache_off_s": off,
                                     "warm_over_cold": statistics.median(warm) / statistics.median(cold)}  # fmt: skip
    write_result(result, opts.out)


if __name__ == "__main__":
    main()
