"""Agreement check: Stable-Baselines3 PPO (trainers.ppo) vs Gaussian PPO in our pipeline (trainers.gaussian_ppo)
on the same Gymnasium task, budget, geometry and networks (both `cpu` presets: 32 envs x 32 steps, 4 minibatches,
10 epochs, 2x64 tanh actor and critic, state-independent std, clipped actions, lr 3e-4, gradient clip 0.5).

Each finished run is written into the result file at once, and runs already there are skipped, so the script
resumes after an interruption. The claim checked: the mean final deterministic return (results.json, the
shared evaluation code) of each method lies within one standard deviation (across seeds) of the other's.

    python -m trainers.lab.perf.compare_ppo --seeds 0 1 2 --total-steps 40000
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from gsbpolicy._files import atomic_write_text
from trainers._core.runlog import git_commit
from trainers.presets import with_fields

DEFAULT_OUT = Path("hub_cards/results/ppo_agreement.json")


def run_one(method: str, env: str, seed: int, total_steps: int, run_dir: Path) -> dict:
    """Train one method from scratch in `run_dir`; returns its final result and evaluation curve."""
    if method == "ppo":
        from trainers.ppo import Sb3Trainer, cpu_preset

        def make(args):
            return Sb3Trainer(args)
    else:
        from trainers._core.loop import Trainer
        from trainers.gaussian_ppo import GaussianPpo, cpu_preset

        def make(args):
            return Trainer(GaussianPpo(args.algo), args)

    args = with_fields(
        cpu_preset(env), seed=seed, total_steps=total_steps, output_dir=run_dir, log={"progress": False}
    )
    start = time.perf_counter()
    policy_dir = make(args).run()
    wall = time.perf_counter() - start
    results = json.loads((policy_dir / "results.json").read_text())
    evals = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in evals if r["type"] == "eval"]
    return {
        "final": results["mean"],
        "final_episode_std": results["std"],
        "wall_s": wall,
        "curve": {
            "env_steps": [r["env_steps"] for r in evals],
            "return_deterministic": [r["eval/return_deterministic"] for r in evals],
        },
    }


def summary(runs: dict) -> dict:
    """Per method: mean and population std of the final returns; `agree`: the two means differ by at most
    the larger of the two standard deviations."""
    stats = {}
    for method, per_seed in runs.items():
        if not per_seed:
            continue
        finals = [r["final"] for r in per_seed.values()]
        stats[method] = {
            "seeds": sorted(int(s) for s in per_seed),
            "final_mean": float(np.mean(finals)),
            "final_std": float(np.std(finals)),
            "final_per_seed": finals,
            # the mean over all evaluation points: less sensitive to one bad final evaluation
            "curve_mean": float(np.mean([r["curve"]["return_deterministic"] for r in per_seed.values()])),
        }
    if {"ppo", "gaussian_ppo"} <= set(stats):
        a, b = stats["ppo"], stats["gaussian_ppo"]
        gap = abs(a["final_mean"] - b["final_mean"])
        stats["agree"] = bool(gap <= max(a["final_std"], b["final_std"]))
        stats["gap"] = gap
    return stats


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="InvertedPendulum-v5")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--total-steps", type=int, default=40_000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/compare_ppo"))
    opts = parser.parse_args(argv)
    record = json.loads(opts.out.read_text()) if opts.out.exists() else {}
    from trainers.gaussian_ppo import cpu_preset

    geometry = dataclasses.asdict(cpu_preset(opts.env).rollout)
    setup = {"env": opts.env, "total_steps": opts.total_steps, "preset": "cpu", "rollout": geometry}
    if record.get("setup") != setup:
        record = {"setup": setup, "runs": {"ppo": {}, "gaussian_ppo": {}}}
    for seed in opts.seeds:
        for method in ("ppo", "gaussian_ppo"):
            if str(seed) in record["runs"][method]:
                continue
            run_dir = opts.runs_dir / opts.env / method / f"seed_{seed}_{time.strftime('%Y%m%d%H%M%S')}"
            record["runs"][method][str(seed)] = run_one(method, opts.env, seed, opts.total_steps, run_dir)
            record["summary"] = summary(record["runs"])
            record["command"] = (
                f"python -m trainers.lab.perf.compare_ppo --env {opts.env} --total-steps {opts.total_steps}"
            )
            record["git_commit"] = git_commit()["commit"]
            opts.out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(opts.out, json.dumps(record, indent=2) + "\n")
            print(f"{method} seed {seed}: final {record['runs'][method][str(seed)]['final']:.1f}", flush=True)
    for method, s in record["summary"].items():
        if isinstance(s, dict):
            print(
                f"{method:13s} final {s['final_mean']:8.1f} +- {s['final_std']:6.1f}  per seed {s['final_per_seed']}"
            )
    print(
        f"agree within one std: {record['summary'].get('agree')} (gap {record['summary'].get('gap', 0):.1f})"
    )


if __name__ == "__main__":
    main()
