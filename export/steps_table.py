"""How many generation steps to run on the robot: return, action difference and latency of `export.onnx --steps K`.

    python -m export.steps_table --measure [--workdir DIR]   # train (if DIR lacks them), measure, write all
    python -m export.steps_table                             # rewrite the table and docs/robot.md's block
    python -m export.steps_table --check                     # fail if they are not the committed JSON's

`--measure` trains two policies with the commands in `POLICIES` (the quickstart's default GSB-MDPO policy and a
`gym`-preset one; a folder DIR/<label>/policy that already exists is used as it is), then, for each and for
K in {1, 2, 4, 8, N}: exports the deterministic policy with K steps (verified against JAX like every export),
runs `EPISODES` deterministic episodes from the reset seeds EVAL_SEED, EVAL_SEED + 1, ... with `OnnxPolicy`,
and records the mean return, the largest absolute difference of any action entry from the N-step policy's
action on the observations of the N-step policy's own episodes, and the p50/p99 latency of
`OnnxPolicy.predict` on one observation with one onnxruntime thread, the process pinned to one core. It writes
`hub_cards/results/onnx_steps.json` (the numbers, the commands, the machine's load) and, from that file alone,
`hub_cards/results/onnx_steps.md` and the `onnx-steps` block of docs/robot.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "hub_cards" / "results" / "onnx_steps.json"
TABLE = RESULTS.with_suffix(".md")
PAGE = ROOT / "docs" / "robot.md"
BLOCK = "onnx-steps"
STEPS = (1, 2, 4, 8)
EPISODES, EVAL_SEED = 20, 20_000
DIFF_OBSERVATIONS = 2_000
"""At most this many observations of the N-step episodes are compared (evenly spread over them)."""
REPEATS, ROUNDS = 4_000, 40
"""Latency: REPEATS timed calls per K, taken in ROUNDS interleaved rounds over the Ks, so that load from other
processes on a shared machine falls on every K alike."""
SAFE_RETURN, SAFE_ACTION = 0.05, 0.1
"""A K is called safe in the generated sentence when its mean return is within `SAFE_RETURN` of the N-step
policy's and its largest action difference within `SAFE_ACTION` of the narrowest action range: a return alone
can hide a different policy (a task that forgives it in simulation may not on hardware)."""
POLICIES = {
    "default": ["-m", "trainers.gsb_mdpo", "--log.no-progress"],
    "gym": ["-m", "trainers.gsb_mdpo", "--preset", "gym", "--env", "HalfCheetah-v5", "--seed", "0",
            "--total-steps", "300000", "--rollout.num-envs", "32", "--rollout.unroll-length", "64",
            "--rollout.num-minibatches", "4", "--rollout.epochs", "4", "--log.no-progress"],
}  # fmt: skip
"""label: trainer arguments (`--output-dir DIR/<label>` is added). `gym`: the gym preset (16 steps, 3x256) with
cpu-gym's rollout geometry, at 300k env steps: about 6 minutes on 2 cores."""


def _episodes(policy, env_id: str, episodes: int) -> tuple[list[float], np.ndarray]:
    """Returns of deterministic episodes from the fixed reset seeds, and every observation they visited."""
    import gymnasium

    env = gymnasium.make(env_id)
    returns, seen = [], []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=EVAL_SEED + episode)
            total, done = 0.0, False
            while not done:
                seen.append(np.asarray(obs, np.float32))
                obs, reward, terminated, truncated, _ = env.step(policy.predict(obs)[0])
                total, done = total + float(reward), terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return returns, np.stack(seen)


def _latencies(runtimes: dict, obs: np.ndarray) -> dict[int, np.ndarray]:
    """Microseconds of each `OnnxPolicy.predict(obs)` call, per K, after a warm-up."""
    for runtime in runtimes.values():
        for _ in range(200):
            runtime.predict(obs)
    times = {k: [] for k in runtimes}
    for _ in range(ROUNDS):
        for k, runtime in runtimes.items():
            for _ in range(REPEATS // ROUNDS):
                start = time.perf_counter()
                runtime.predict(obs)
                times[k].append(time.perf_counter() - start)
    return {k: np.asarray(values) * 1e6 for k, values in times.items()}


def measure_policy(folder: Path, workdir: Path) -> dict:
    """The table rows of one policy folder: one per K, the trained N last."""
    from gsbpolicy import GSBPolicy

    from .onnx import export
    from .runtime import OnnxPolicy

    policy = GSBPolicy.from_pretrained(folder).policy
    spec = policy.spec
    runtimes = {}
    for k in sorted({*STEPS, spec.num_steps}):
        path = workdir / f"{folder.parent.name}_k{k}.onnx"
        export(policy, path, steps=None if k == spec.num_steps else k, folder=folder)
        runtimes[k] = OnnxPolicy(path)
    _, seen = _episodes(runtimes[spec.num_steps], spec.env_id, EPISODES)
    compared = seen[np.linspace(0, len(seen) - 1, min(DIFF_OBSERVATIONS, len(seen))).astype(int)]
    reference = runtimes[spec.num_steps].predict(compared)[0]
    latencies = _latencies(runtimes, compared[0])
    rows = []
    for k, runtime in runtimes.items():
        returns, _ = _episodes(runtime, spec.env_id, EPISODES)
        rows.append(
            {
                "steps": k,
                "exact": k == spec.num_steps,
                "return_mean": float(np.mean(returns)),
                "return_std": float(np.std(returns)),
                "max_abs_action_diff": float(np.abs(runtime.predict(compared)[0] - reference).max()),
                "latency_p50_us": float(np.percentile(latencies[k], 50)),
                "latency_p99_us": float(np.percentile(latencies[k], 99)),
            }
        )
    results = json.loads((folder / "results.json").read_text())
    return {
        "env_id": spec.env_id,
        "trained_steps": spec.num_steps,
        "network": f"{spec.depth}x{spec.width} {spec.activation}",
        "action_span": float(np.min(np.subtract(spec.action_high, spec.action_low))),
        "final_return": results["mean"],
        "env_steps": results["env_steps"],
        "training_commit": results["git_commit"],
        "compared_observations": len(compared),
        "rows": rows,
    }


def measure(workdir: Path) -> dict:
    """Train what `workdir` lacks, measure every policy, and return the JSON of `RESULTS`."""
    from .latency import pin_to_one_core

    policies = {}
    for label, arguments in POLICIES.items():
        run_dir = workdir / label
        command = [*arguments, "--output-dir", str(run_dir)]
        if not (run_dir / "policy" / "results.json").is_file():
            print(f"training {label}: python {' '.join(command)}", flush=True)
            subprocess.run([sys.executable, *command], check=True, cwd=ROOT)
        policies[label] = {"train_command": "python " + " ".join(arguments)}
    core = pin_to_one_core()  # after training: the trainers use both cores
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        for label in POLICIES:
            print(f"measuring {label} ...", flush=True)
            policies[label] |= measure_policy(workdir / label / "policy", Path(scratch))
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return {
        "command": "python -m export.steps_table --measure",
        "measured_at_commit": commit,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "pinned_core": core,
        "load_average_start": list(load),
        "load_average_end": list(os.getloadavg()),
        "episodes": EPISODES,
        "eval_seed": EVAL_SEED,
        "latency_repeats": REPEATS,
        "latency_rounds": ROUNDS,
        "policies": policies,
    }


def safe_steps(policy: dict) -> int:
    """The fewest steps within `SAFE_RETURN` of the N-step return and `SAFE_ACTION` of its actions (N at worst)."""
    exact = next(row for row in policy["rows"] if row["exact"])
    tolerance = SAFE_RETURN * abs(exact["return_mean"])
    return min(
        row["steps"]
        for row in policy["rows"]
        if row["return_mean"] >= exact["return_mean"] - tolerance
        and row["max_abs_action_diff"] <= SAFE_ACTION * policy["action_span"]
    )


def table(data: dict) -> str:
    """The Markdown of the committed measurements: one table, then a sentence per policy."""
    lines = [
        "| policy | K steps | return (mean ± std) | max abs action diff from N | p50 latency (µs) | p99 latency (µs) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    sentences = []
    for label, policy in data["policies"].items():
        name = f"{label}: {policy['env_id']}, {policy['network']}, N = {policy['trained_steps']}"
        for row in policy["rows"]:
            k = f"{row['steps']} (N, exact)" if row["exact"] else str(row["steps"])
            lines.append(
                f"| {name} | {k} | {row['return_mean']:.1f} ± {row['return_std']:.1f} | "
                f"{row['max_abs_action_diff']:.3g} | {row['latency_p50_us']:.0f} | {row['latency_p99_us']:.0f} |"
            )
        sentences.append(
            f"- {label} (`{policy['train_command']}`, final training return {policy['final_return']:.1f} at "
            f"{policy['env_steps']} env steps; its narrowest action range is {policy['action_span']:g} wide): "
            f"the fewest steps whose mean return is within {SAFE_RETURN:.0%} of the N-step policy's and whose "
            f"actions are within {SAFE_ACTION:.0%} of that range of its actions is K = {safe_steps(policy)}."
        )
    start, end = data["load_average_start"][0], data["load_average_end"][0]
    lines += [
        "",
        f"{data['episodes']} deterministic episodes per row (reset seeds {data['eval_seed']}-"
        f"{data['eval_seed'] + data['episodes'] - 1}); latency over {data['latency_repeats']} calls of "
        f"`OnnxPolicy.predict` on one observation per K, in {data['latency_rounds']} rounds interleaved over the "
        f"Ks, one onnxruntime thread, pinned to one core of a {data['cpu_count']}-core CPU shared with other jobs "
        f"(load average {start:.1f} at the start, {end:.1f} at the end: p99 is the shared machine's as much as "
        f"the policy's); measured by `{data['command']}` at "
        f"{data['measured_at_commit'][:7]} on {data['date'][:10]} (`hub_cards/results/onnx_steps.json`).",
        "",
        *sentences,
    ]
    return "\n".join(lines) + "\n"


def with_block(page: str, content: str) -> str:
    start, end = f"<!-- {BLOCK}:start -->", f"<!-- {BLOCK}:end -->"
    head, rest = page.split(start, 1)
    return f"{head}{start}\n{content}{end}{rest.split(end, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m export.steps_table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--measure", action="store_true", help="train what is missing, measure, write all")
    parser.add_argument(
        "--workdir", type=Path, default=Path("runs/onnx_steps"), help="the policies' run folders"
    )
    parser.add_argument(
        "--check", action="store_true", help="only say whether the table and block are current"
    )
    args = parser.parse_args(argv)
    if args.measure:
        start = time.perf_counter()
        RESULTS.write_text(json.dumps(measure(args.workdir.resolve()), indent=1) + "\n")
        print(f"wrote {RESULTS} in {time.perf_counter() - start:.0f} s")
    markdown = table(json.loads(RESULTS.read_text()))
    page = PAGE.read_text()
    if args.check:
        stale = [
            str(p)
            for p, now, new in (
                (TABLE, TABLE.read_text() if TABLE.is_file() else "", markdown),
                (PAGE, page, with_block(page, markdown)),
            )
            if now != new
        ]
        if stale:
            print(f"out of date: {', '.join(stale)}; run `python -m export.steps_table`", file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(markdown)
    PAGE.write_text(with_block(page, markdown))
    print(f"wrote {TABLE} and the {BLOCK} block of {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
