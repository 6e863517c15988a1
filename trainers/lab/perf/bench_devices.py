"""End-to-end training throughput against the number of devices (a benchmark script, not a test).

    python -m trainers.lab.perf.bench_devices [--env CartpoleSwingup] [--device-counts 1 2] [--iterations 2]
        [--num-envs N] [--unrolls-per-iteration U] [--num-minibatches M] [--epochs E]

For each device count it starts a fresh process that trains the GSB-MDPO `playground` preset (Table 1
geometry unless the flags shrink it) on the first that many devices through the real `Trainer`
(data-parallel rollout + update, see trainers/_core/distributed.py), times `--iterations` iterations
after one warm-up iteration (which compiles), and prints one JSON object with every measurement.

On a CPU the devices are forced host devices (XLA_FLAGS=--xla_force_host_platform_device_count): they
share the same cores, so expect little gain; the point there is that the same program runs. On a GPU
node the devices are the GPUs, e.g. the full preset on 1, 2, 4 and 8 GPUs:

    python -m trainers.lab.perf.bench_devices --device-counts 1 2 4 8 --iterations 2
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _geometry(opts) -> dict:
    names = ("num_envs", "unrolls_per_iteration", "num_minibatches", "epochs")
    return {name: getattr(opts, name) for name in names if getattr(opts, name) is not None}


def worker(opts) -> dict:
    """Train on the first `opts.worker` devices of this process; returns the measurements."""
    import jax

    from trainers._core.loop import Trainer
    from trainers.gsb_mdpo import GsbMdpo, playground_preset
    from trainers.presets import with_fields

    devices = jax.devices()[: opts.worker]
    if len(devices) < opts.worker:
        raise SystemExit(f"asked for {opts.worker} devices, this machine has {len(jax.devices())}")
    with tempfile.TemporaryDirectory() as tmp:
        args = with_fields(
            playground_preset(opts.env),
            output_dir=Path(tmp) / "run",
            rollout=_geometry(opts),
            matmul_precision=opts.matmul_precision,
            log={"progress": False},
        )
        args = with_fields(args, total_steps=(opts.iterations + 1) * args.rollout.steps_per_iteration)
        start = time.perf_counter()
        trainer = Trainer(GsbMdpo(args.algo), args, devices=devices)
        setup_s = time.perf_counter() - start
        start = time.perf_counter()
        trainer._collect_and_update()  # compiles; metrics come back as floats, so this waits for the device
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(opts.iterations):
            trainer._collect_and_update()
        seconds = time.perf_counter() - start
    steps = args.rollout.steps_per_iteration
    return {
        "env": args.env,
        "devices": len(devices),
        "device_kind": devices[0].device_kind,
        "platform": devices[0].platform,
        "matmul_precision": args.matmul_precision,
        "rollout": {
            k: getattr(args.rollout, k)
            for k in ("num_envs", "unroll_length", "unrolls_per_iteration", "num_minibatches", "epochs")
        },
        "steps_per_iteration": steps,
        "setup_s": round(setup_s, 2),
        "first_iteration_s": round(first_s, 2),
        "timed_iterations": opts.iterations,
        "seconds_per_iteration": round(seconds / opts.iterations, 4),
        "env_steps_per_s": round(steps * opts.iterations / seconds, 1),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="CartpoleSwingup", help="Playground dm_control_suite task")
    parser.add_argument("--device-counts", type=int, nargs="+", default=[1, 2], help="one process per count")
    parser.add_argument("--iterations", type=int, default=2, help="timed iterations (after one warm-up)")
    parser.add_argument("--num-envs", type=int, help="default: the preset's (2048)")
    parser.add_argument("--unrolls-per-iteration", type=int, help="default: the preset's (16)")
    parser.add_argument("--num-minibatches", type=int, help="default: the preset's (32)")
    parser.add_argument("--epochs", type=int, help="default: the preset's (16)")
    parser.add_argument("--matmul-precision", default="highest", choices=["default", "high", "highest"])
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # internal: run one device count here
    opts = parser.parse_args(argv)
    if opts.worker is not None:
        print("RESULT " + json.dumps(worker(opts)), flush=True)
        return
    # Forced host devices exist only for the CPU platform; the flag is ignored when JAX runs on GPUs.
    flags = (
        f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={max(opts.device_counts)}"
    )
    results = []
    for count in opts.device_counts:
        own = sys.argv[1:] if argv is None else argv
        command = [sys.executable, "-m", "trainers.lab.perf.bench_devices", *own, "--worker", str(count)]
        proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "XLA_FLAGS": flags})
        if proc.returncode:
            raise SystemExit(f"{count} device(s) failed:\n{proc.stderr[-3000:]}")
        line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
        results.append(json.loads(line.removeprefix("RESULT ")))
    single = results[0]["env_steps_per_s"]
    for r in results:
        r["speedup_vs_first"] = round(r["env_steps_per_s"] / single, 3)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
