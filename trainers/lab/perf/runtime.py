"""Table 3 at steady state: training time per env step of each of the paper's five methods after
compilation, and end to end, on one machine, at the current commit (a benchmark script).

    python -m trainers.lab.perf.runtime [--iterations 10] [--warmup 2] [--out hub_cards/results/runtime-cpu.json]

Each method trains HalfCheetah-v5 with its own Table 2 column and the paper's Gym geometry (the `gym` preset:
1024 envs x 24 steps, 4 minibatches, 4 epochs), seed 0, from a fresh run folder with the persistent
compilation cache off (so that end to end includes compiling, as a fresh run's would), one method after the
other. The training loop logs each iteration's own seconds (collection and update, not evaluation); the first
`--warmup` iterations include tracing and compiling and are left out, the next `--iterations` are the steady
state. End to end is the whole process, startup, compilation and a 2-episode final evaluation included; peak
memory is the process tree's RSS and, with nvidia-smi, its GPU memory (sampled as the benchmark runner does).

The claims page (`trainers.lab.claims`: `time_close_to_ppo_fpo_dppo`, `time_lower_than_dppo`,
`memory_comparable`) reads the file this writes. Timings mean something only on a machine doing nothing else:
the file records the load average at the start and the end.
"""

import argparse
import datetime
import importlib
import json
import os
import shutil
import sys
from pathlib import Path

from trainers._core.cli import parse
from trainers.benchmark.suites import PAPER_METHODS
from trainers.lab.perf import write_result

TASK = "HalfCheetah-v5"
EVAL_ARGS = (
    "--eval.interval-steps",
    "0",
    "--eval.num-evals",
    "1",
    "--eval.episodes",
    "2",
    "--eval.final-episodes",
    "2",
)
"""One 2-episode evaluation at the end: the table measures training."""


def steps_per_iteration(method: str, task: str) -> int:
    """Env steps per training iteration of `method`'s `gym` preset (its Table 2 column)."""
    module = importlib.import_module(f"trainers.{method}")
    return parse(
        module.Args, module.PRESETS, "gym", "", ["--preset", "gym", "--env", task]
    ).rollout.steps_per_iteration


def command(method: str, task: str, total_steps: int, directory: Path) -> list[str]:
    trainer = [sys.executable, "-m", f"trainers.{method}", "--preset", "gym", "--env", task, "--seed", "0"]
    run = ["--total-steps", str(total_steps), "--output-dir", str(directory), *EVAL_ARGS]
    return [*trainer, *run, "--log.no-progress", "--compile-cache", "off"]


def iteration_seconds(metrics_jsonl: Path, per_iteration: int) -> list[float]:
    """Each training iteration's own seconds, from the train records (steps per iteration / `time/sps`)."""
    records = [json.loads(line) for line in metrics_jsonl.read_text().splitlines() if line.strip()]
    return [per_iteration / r["time/sps"] for r in records if r.get("type") == "train"]


def measure(method: str, task: str, iterations: int, warmup: int, runs_dir: Path) -> dict:
    """One method's run: its steady-state iteration seconds, end to end and peak memory."""
    from trainers.benchmark.cost import execute

    per_iteration = steps_per_iteration(method, task)
    directory = runs_dir / method
    if directory.exists():
        shutil.rmtree(directory)  # a fresh run: nothing compiled, nothing to resume
    cmd = command(method, task, (warmup + iterations) * per_iteration, directory)
    print(f"{method}: {' '.join(cmd[1:])}", flush=True)
    cost = execute(cmd, directory)
    seconds = iteration_seconds(directory / "metrics.jsonl", per_iteration)
    if len(seconds) < warmup + iterations:
        raise RuntimeError(f"{method} logged {len(seconds)} iterations, expected {warmup + iterations}")
    return {
        "env_steps_per_iteration": per_iteration,
        "warmup_iterations": warmup,
        "warmup_seconds": seconds[:warmup],
        "iteration_seconds": seconds[warmup:],
        "end_to_end_s": cost["wall_s"],
        "env_steps": (warmup + iterations) * per_iteration,
        "peak_rss_mib": cost["peak_rss_mib"],
        "peak_gpu_mib": cost["peak_gpu_mib"],
        "command": " ".join(cmd[1:]),
    }


def default_out() -> Path:
    machine = "gpu" if shutil.which("nvidia-smi") else "cpu"
    return Path("hub_cards/results") / f"runtime-{machine}.json"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default=TASK)
    parser.add_argument("--methods", nargs="+", default=list(PAPER_METHODS), choices=PAPER_METHODS)
    parser.add_argument("--iterations", type=int, default=10, help="steady-state iterations timed per method")
    parser.add_argument("--warmup", type=int, default=2, help="first iterations left out (compilation)")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/perf/runtime"))
    parser.add_argument(
        "--out", type=Path, default=None, help="default: hub_cards/results/runtime-<cpu|gpu>.json"
    )
    args = parser.parse_args(argv)
    if args.iterations < 2 or args.warmup < 1:
        parser.error("--iterations must be at least 2 (a spread) and --warmup at least 1 (compilation)")
    started, load = datetime.datetime.now(datetime.UTC), os.getloadavg()
    methods = {m: measure(m, args.task, args.iterations, args.warmup, args.runs_dir) for m in args.methods}
    result = {
        "task": args.task,
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average_start": load,
        "geometry": "each method's gym preset (Table 2), seed 0",
        "methods": methods,
    }
    write_result(result, args.out or default_out())


if __name__ == "__main__":
    main()
