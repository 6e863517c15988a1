"""Time to the first finished training iteration, cold and warm compilation cache (a benchmark script).

    python -m trainers.lab.perf.startup [--repeats 2] [--out FILE.json]

For each case (the README's default run: `python -m trainers.gsb_mdpo`, InvertedPendulum-v5 with the cpu
preset; and a Playground run: CartpoleSwingup with the cpu-playground suite's geometry) it starts the trainer
as a user would, from an empty persistent compilation cache (cold), then again with the cache that run filled
(warm), and for reference with the cache off. The clock runs from starting the process to the first
iteration's record appearing in metrics.jsonl (process start, imports, env construction, tracing and
compiling the iteration, and the iteration itself); the process is stopped at the second iteration's record,
whose training time is the iteration's own cost once compiled. That cost is part of every arm and no cache
can remove it (a Playground iteration on a CPU is mostly physics), so the startup overhead -- time to the
first record less one compiled iteration -- is reported beside it. Prints and writes one JSON object with
every measurement and the warm/cold ratios.
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
from trainers.lab.perf import write_result

CASES = {
    "default (InvertedPendulum-v5, cpu preset)": ["--log.no-progress"],
    "Playground (CartpoleSwingup, cpu-playground geometry)": [
        "--preset",
        "playground",
        "--env",
        "CartpoleSwingup",
        *SUITES["cpu-playground"].args,
        "--log.no-progress",
    ],
}


def _train_records(text: str) -> list[dict]:
    """The train records among the complete lines of metrics.jsonl's `text`."""
    complete = text[: text.rfind("\n") + 1].splitlines()
    return [record for line in complete if (record := json.loads(line))["type"] == "train"]


def first_iteration_seconds(argv: list[str], cache: str, out: Path) -> tuple[float, float]:
    """Seconds from process start to the first train record, and the second iteration's training seconds
    (from its record); the process is stopped at the second record."""
    env = {**os.environ, "GSBPOLICY_COMPILE_CACHE": cache}
    metrics = out / "metrics.jsonl"
    start = time.perf_counter()
    first = None
    process = subprocess.Popen(
        [sys.executable, "-m", "trainers.gsb_mdpo", *argv, "--output-dir", str(out)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        while True:
            text = metrics.read_text() if metrics.exists() else ""
            if first is None and text.strip():
                first = time.perf_counter() - start
            records = _train_records(text)
            if len(records) >= 2:
                return first, records[1]["time/wall_s"] - records[0]["time/wall_s"]
            if process.poll() is not None:
                raise SystemExit(
                    f"error: the trainer exited early:\n{process.stderr.read().decode()[-2000:]}"
                )
            time.sleep(0.05)
    finally:
        process.kill()
        process.wait()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m trainers.lab.perf.startup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--repeats", type=int, default=2, help="cold/warm pairs per case (fresh cache each)")
    parser.add_argument("--out", type=Path)
    opts = parser.parse_args(argv)
    result = {"load_average_start": os.getloadavg(), "cpu_count": os.cpu_count(), "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for number, (name, case) in enumerate(CASES.items()):
            arms = {"cold_s": [], "warm_s": [], "cache_off_s": [], "iteration_s": []}
            for repeat in range(opts.repeats):
                cache, run = str(tmp / f"cache_{number}_{repeat}"), tmp / f"run_{number}_{repeat}"
                for arm, folder in (("cold_s", cache), ("warm_s", cache), ("cache_off_s", "off")):
                    seconds, iteration = first_iteration_seconds(case, folder, run / arm)
                    arms[arm].append(seconds)
                    arms["iteration_s"].append(iteration)
                print(
                    json.dumps({"case": name, **{arm: values[-1] for arm, values in arms.items()}}),
                    flush=True,
                )
            iteration = statistics.median(arms["iteration_s"])
            cold, warm = statistics.median(arms["cold_s"]), statistics.median(arms["warm_s"])
            result["cases"][name] = {
                **arms,
                "warm_over_cold": warm / cold,
                "overhead_warm_over_cold": (warm - iteration) / (cold - iteration),
            }
    write_result(result, opts.out)


if __name__ == "__main__":
    main()
