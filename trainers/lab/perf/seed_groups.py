"""Several seeds in one process (`--seeds`) against the same seeds one after another (a benchmark script).

    python -m trainers.lab.perf.seed_groups --env CartpoleSwingup [--suite cpu-playground] [--sizes 3 5]
        [--iterations 3] [--algo gsb_mdpo] [--out FILE.json]

For each size n it trains seeds 0..n-1 of `--algo` on `--env` for `--iterations` iterations, twice, each as
a user would: once as ONE process (`--seeds 0 ... n-1`) and once as n processes one after another
(`--seed i`). Each of the two starts from an empty persistent compilation cache of its own, so the separate
runs compile once and read the cache afterwards, exactly as they do for a user now; without the cache they
would compile n times. Measured per arm: end-to-end wall-clock (process starts to exits, evaluations and
checkpoints included) and steady-state throughput in env steps per second over all seeds (from the
iterations after the first, which compiles). Geometry: `--suite`'s preset and arguments (default
cpu-playground: 256 envs x 4 unrolls of 32 steps per iteration); `--suite paper-playground` is the paper's
Table 1 geometry (about 1M steps per iteration: for a GPU). Prints and writes one JSON object.
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


def trainer_command(opts, steps_per_iteration: int, seeds: list[int], out: Path) -> list[str]:
    suite = SUITES[opts.suite]
    seed_args = ["--seeds", *map(str, seeds)] if len(seeds) > 1 else ["--seed", str(seeds[0])]
    return [
        sys.executable,
        "-m",
        f"trainers.{opts.algo}",
        "--preset",
        suite.preset,
        "--env",
        opts.env,
        *seed_args,
        *suite.args,
        "--total-steps",
        str(opts.iterations * steps_per_iteration),
        "--eval.num-evals",
        "1",
        "--log.no-progress",
        "--output-dir",
        str(out),
    ]


def steps_per_iteration(opts) -> int:
    """From a dry parse of the same command (the trainer's own config), without training."""
    from trainers.registry import get_algo

    suite = SUITES[opts.suite]
    module = __import__(f"trainers.{opts.algo}", fromlist=["PRESETS"])
    from trainers._core.cli import parse

    args = parse(
        module.Args, module.PRESETS, "cpu", "", ["--preset", suite.preset, "--env", opts.env, *suite.args]
    )
    get_algo(opts.algo)  # an unknown --algo is named by the registry
    return args.rollout.steps_per_iteration


def run(cmd: list[str], cache: Path) -> float:
    env = {**os.environ, "GSBPOLICY_COMPILE_CACHE": str(cache), "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(f"error: {' '.join(cmd[1:])} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def iteration_seconds(run_dir: Path) -> list[float]:
    """Seconds of each training iteration after the first (from the run's own clock)."""
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    walls = [r["time/wall_s"] for r in lines if r["type"] == "train"]
    return [b - a for a, b in zip(walls, walls[1:], strict=False)]


def measure(opts, size: int, work: Path, per_iteration: int) -> dict:
    seeds = list(range(size))
    grouped_dir = work / f"grouped_{size}"
    grouped_wall = run(
        trainer_command(opts, per_iteration, seeds, grouped_dir), work / f"cache_grouped_{size}"
    )
    # The group's iterations take the same time in every seed's folder; all n seeds advance in each.
    grouped_it = statistics.median(iteration_seconds(grouped_dir / "seed_0"))
    print(
        json.dumps({"seeds": size, "grouped_wall_s": grouped_wall, "grouped_iteration_s": grouped_it}),
        flush=True,
    )
    separate_walls, separate_its = [], []
    for seed in seeds:
        one = work / f"separate_{size}" / f"seed_{seed}"
        separate_walls.append(
            run(trainer_command(opts, per_iteration, [seed], one), work / f"cache_separate_{size}")
        )
        separate_its.append(statistics.median(iteration_seconds(one)))
        print(
            json.dumps(
                {"seed": seed, "separate_wall_s": separate_walls[-1], "iteration_s": separate_its[-1]}
            ),
            flush=True,
        )
    grouped_sps = size * per_iteration / grouped_it
    separate_sps = per_iteration / statistics.mean(separate_its)
    return {
        "seeds": size,
        "grouped_wall_s": grouped_wall,
        "separate_wall_s": sum(separate_walls),
        "separate_wall_s_each": separate_walls,
        "wall_ratio_separate_over_grouped": sum(separate_walls) / grouped_wall,
        "grouped_env_steps_per_s": grouped_sps,
        "separate_env_steps_per_s": separate_sps,
        "throughput_ratio_grouped_over_separate": grouped_sps / separate_sps,
    }


def hardware() -> dict:
    import jax

    device = jax.devices()[0]
    return {"platform": device.platform, "device_kind": device.device_kind, "cpu_count": os.cpu_count()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m trainers.lab.perf.seed_groups",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--env", default="CartpoleSwingup")
    parser.add_argument("--suite", default="cpu-playground", choices=sorted(SUITES))
    parser.add_argument("--algo", default="gsb_mdpo")
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--out", type=Path)
    opts = parser.parse_args(argv)
    if opts.iterations < 2:
        parser.error("--iterations must be at least 2 (the first one compiles)")
    if min(opts.sizes) < 2:
        parser.error("--sizes must be at least 2 (a group of one is a single run)")
    per_iteration = steps_per_iteration(opts)
    result = {
        "env": opts.env,
        "suite": opts.suite,
        "algo": opts.algo,
        "iterations": opts.iterations,
        "env_steps_per_iteration_per_seed": per_iteration,
        "hardware": hardware(),
        "sizes": [],
        "load_average_start": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for size in opts.sizes:
            result["sizes"].append(measure(opts, size, Path(tmp), per_iteration))
            print(json.dumps(result["sizes"][-1]), flush=True)
    write_result(result, opts.out)


if __name__ == "__main__":
    main()
