"""Throughput of same-pipeline Gaussian PPO (trainers.gaussian_ppo, playground preset networks) against Brax PPO
(`brax.training.agents.ppo.train`) on the same Playground task, batch geometry and machine.

Geometry (the issue's): 1024 envs, unroll 30, batch 512 sequences x 16 minibatches (8 unrolls per env and
iteration, 245,760 env steps), 4 epochs; both with 4x32 SiLU tanh-Gaussian actors with a state-dependent std,
5x256 SiLU critics, lr 3e-4, clip 0.1, value coef 0.25, entropy 0, reward scaling 10, gamma 0.995, GAE
recomputed per minibatch, observation normalization, 1000-step episodes, impl="jax" physics.

End-to-end env-steps/s = env steps / wall time of the whole training call (compilation, evaluation and
checkpoints included); "steady" is the rate of training iterations alone (Brax's own `training/sps`; our
`time/sps` after the first, compiling, iteration). Differences that remain: Brax evaluates once per eval point
(deterministic) where we evaluate deterministic and stochastic; Brax does not bootstrap time-limit truncations
by default. Timings are only meaningful on an otherwise idle machine.

    python -m trainers.lab.perf.bench_brax_ppo --env CartpoleSwingup --total-steps 3000000
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gsbpolicy._files import atomic_write_text

NUM_ENVS, UNROLL, BATCH, MINIBATCHES, EPOCHS = 1024, 30, 512, 16, 4
STEPS_PER_ITERATION = UNROLL * BATCH * MINIBATCHES


def _device_put_replicated(x, devices):
    """jax 0.10 removed `jax.device_put_replicated`, which brax 0.14.2's ppo.train still calls."""
    return jax.tree.map(lambda a: jax.device_put(jnp.stack([jnp.asarray(a)] * len(devices)), devices[0]), x)


def run_brax(env_name: str, total_steps: int, seed: int, num_evals: int) -> dict:
    from brax.training.agents.ppo import networks, train
    from mujoco_playground import dm_control_suite, wrapper

    if not hasattr(jax, "device_put_replicated"):
        jax.device_put_replicated = _device_put_replicated
    env = dm_control_suite.load(env_name, config_overrides={"impl": "jax"})
    eval_env = dm_control_suite.load(env_name, config_overrides={"impl": "jax"})
    factory = lambda obs_size, act_size, preprocess_observations_fn: networks.make_ppo_networks(  # noqa: E731
        obs_size,
        act_size,
        preprocess_observations_fn=preprocess_observations_fn,
        policy_hidden_layer_sizes=(32,) * 4,
        value_hidden_layer_sizes=(256,) * 5,
        activation=jax.nn.silu,
        distribution_type="tanh_normal",
        state_dependent_std=True,
    )
    progress = []
    start = time.perf_counter()
    train.train(
        env,
        num_timesteps=total_steps,
        num_envs=NUM_ENVS,
        episode_length=1000,
        action_repeat=1,
        wrap_env_fn=wrapper.wrap_for_brax_training,
        learning_rate=3e-4,
        entropy_cost=0.0,
        discounting=0.995,
        unroll_length=UNROLL,
        batch_size=BATCH,
        num_minibatches=MINIBATCHES,
        num_updates_per_batch=EPOCHS,
        normalize_observations=True,
        reward_scaling=10.0,
        clipping_epsilon=0.1,
        gae_lambda=0.95,
        vf_loss_coefficient=0.25,
        network_factory=factory,
        seed=seed,
        num_evals=num_evals,
        eval_env=eval_env,
        num_eval_envs=128,
        deterministic_eval=True,
        progress_fn=lambda step, metrics: progress.append((step, {k: float(v) for k, v in metrics.items()})),
    )
    wall = time.perf_counter() - start
    steps, last = progress[-1]
    steady = [m["training/sps"] for _, m in progress if "training/sps" in m]
    return {
        "env_steps": steps,
        "wall_s": wall,
        "sps_end_to_end": steps / wall,
        "sps_steady": float(np.median(steady)) if steady else None,
        "final_return": last["eval/episode_reward"],
    }


def run_ours(env_name: str, total_steps: int, seed: int, num_evals: int, run_dir: Path) -> dict:
    from trainers._core.loop import Trainer
    from trainers.gaussian_ppo import GaussianPpo, playground_preset
    from trainers.presets import with_fields

    args = with_fields(
        playground_preset(env_name),
        seed=seed,
        total_steps=total_steps,
        output_dir=run_dir,
        rollout={
            "num_envs": NUM_ENVS,
            "unroll_length": UNROLL,
            "unrolls_per_iteration": BATCH * MINIBATCHES // NUM_ENVS,
            "num_minibatches": MINIBATCHES,
            "epochs": EPOCHS,
        },
        eval={"num_evals": num_evals, "num_envs": 128},
        log={"progress": False, "checkpoint_every": 10**9},
    )
    assert args.rollout.steps_per_iteration == STEPS_PER_ITERATION
    start = time.perf_counter()
    policy_dir = Trainer(GaussianPpo(args.algo), args).run()
    wall = time.perf_counter() - start
    results = json.loads((policy_dir / "results.json").read_text())
    train = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steady = [r["time/sps"] for r in train if r["type"] == "train" and r["iteration"] > 1]
    return {
        "env_steps": results["env_steps"],
        "wall_s": wall,
        "sps_end_to_end": results["env_steps"] / wall,
        "sps_steady": float(np.median(steady)) if steady else None,
        "final_return": results["mean"],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="CartpoleSwingup")
    parser.add_argument("--total-steps", type=int, default=3_000_000, help="env steps per method")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--num-evals", type=int, default=2, help="evaluation points (Brax counts the initial one)"
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the numbers to this JSON file")
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_ours(opts.env, opts.total_steps, opts.seed, max(1, opts.num_evals - 1), Path(tmp) / "run")
    brax = run_brax(opts.env, opts.total_steps, opts.seed, opts.num_evals)
    result = {
        "env": opts.env,
        "geometry": dict(
            num_envs=NUM_ENVS,
            unroll_length=UNROLL,
            batch_size=BATCH,
            num_minibatches=MINIBATCHES,
            epochs=EPOCHS,
        ),
        "gaussian_ppo": ours,
        "brax_ppo": brax,
        "ratio_end_to_end": ours["sps_end_to_end"] / brax["sps_end_to_end"],
        "device": str(jax.devices()[0].device_kind),
    }
    if ours["sps_steady"] and brax["sps_steady"]:
        result["ratio_steady"] = ours["sps_steady"] / brax["sps_steady"]
    for name in ("gaussian_ppo", "brax_ppo"):
        r = result[name]
        steady = f"{r['sps_steady']:,.0f}" if r["sps_steady"] else "n/a"
        print(
            f"{name:13s} {r['env_steps']:>10,d} steps  {r['wall_s']:7.1f} s  end-to-end {r['sps_end_to_end']:8,.0f} "
            f"steps/s  steady {steady:>8s} steps/s  final return {r['final_return']:.1f}"
        )
    print(
        f"ratio (ours / Brax): end-to-end {result['ratio_end_to_end']:.2f}, steady {result.get('ratio_steady', float('nan')):.2f}"
    )
    if opts.out:
        atomic_write_text(opts.out, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
