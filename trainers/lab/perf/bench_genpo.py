"""What GenPO costs: its closed-form log-determinant against the references' jacrev + slogdet, and GenPO
against GSB-MDPO in training (a benchmark script, not a test).

    python -m trainers.lab.perf.bench_genpo update [--rows 512] [--repeats 3]   (--repeats 0: memory plan only)
    python -m trainers.lab.perf.bench_genpo train [--env HalfCheetah-v5] [--num-envs 32] [--iterations 8]

`update`: one actor-loss gradient (PPO surrogate + compress on fresh samples) at the gym preset's networks
(HalfCheetah-v5: obs 17, act 6, 16 steps, 3x256), with log pi_theta(x_N | s) computed (a) as
log N(f^{-1}(x_N)) - 2 d N log p (gsbpolicy.GenPOFlow) and (b) as the references do, log N(f^{-1}(x_N)) +
slogdet(jacrev(f^{-1})(x_N)) with the full 2d x 2d Jacobian (FlowRL `log_prob_via_inverse`); and GSB-MDPO's
actor-loss gradient at its own gym preset for scale. Reports the median time and XLA's planned temporary
memory of the compiled gradient (device-independent).

`train`: each trainer in its own process on the same env and geometry (gym preset networks, `--num-envs`
envs x 24 steps, 4 minibatches, 4 epochs); reports steady-state seconds per 1M env steps (collection +
update, first iteration excluded as it compiles) and the process's peak RSS.
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from gsbpolicy import GenPOFlow
from gsbpolicy._internal import prior_log_prob
from trainers.genpo import GenPO, gym_preset
from trainers.presets import with_fields


class JacrevFlow(eqx.Module):
    """The references' likelihood on top of the same flow: slogdet of the autodiff Jacobian of the inverse."""

    flow: GenPOFlow

    @property
    def spec(self):
        return self.flow.spec

    def forward(self, obs, x0):
        return self.flow.forward(obs, x0)

    def log_prob(self, obs, x1):
        jacobian = jax.jacrev(self.flow.inverse, argnums=1)(obs, x1)
        return prior_log_prob(self.flow.inverse(obs, x1)) + jnp.linalg.slogdet(jacobian)[1]


def _actor_setup(algo, args, rows: int, obs_dim: int = 17, act_dim: int = 6):
    """An actor for HalfCheetah-v5's sizes and a minibatch of `rows` stored samples from it."""
    spec = args.policy.spec(obs_dim, act_dim, -np.ones(act_dim), np.ones(act_dim), "bench")
    actor = algo.make_actor(spec, args, key=jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (rows, obs_dim))
    _, extras = eqx.filter_jit(algo.act)(actor, obs, jax.random.key(2))
    return actor, (obs, extras, jax.random.normal(jax.random.key(3), (rows,)))


def _time_actor_grad(algo, model, batch, repeats: int) -> tuple[float, float]:
    """Median seconds of one jitted actor-loss value-and-grad, and XLA's planned temporary memory (MB)."""
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(p):
        return algo.actor_loss(eqx.combine(p, static), *batch, jax.random.key(4))[0]

    compiled = jax.jit(jax.value_and_grad(loss)).lower(params).compile()
    memory = compiled.memory_analysis()
    seconds = float("nan")  # --repeats 0: XLA's memory plan only, nothing is run
    if repeats:
        jax.block_until_ready(compiled(params))  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(compiled(params))
            times.append(time.perf_counter() - start)
        seconds = float(np.median(times))
    return seconds, memory.temp_size_in_bytes / 2**20 if memory is not None else float("nan")


def bench_update(rows: int, repeats: int) -> list[dict]:
    from trainers.gsb_mdpo import GsbMdpo
    from trainers.gsb_mdpo import gym_preset as gsb_gym_preset

    genpo_args, gsb_args = gym_preset("HalfCheetah-v5"), gsb_gym_preset("HalfCheetah-v5")
    genpo, gsb = GenPO(genpo_args.algo), GsbMdpo(gsb_args.algo)
    actor, batch = _actor_setup(genpo, genpo_args, rows)
    gsb_actor, gsb_batch = _actor_setup(gsb, gsb_args, rows)
    variants = (
        ("GenPO closed form", genpo, actor, batch),
        ("GenPO jacrev+slogdet", genpo, JacrevFlow(actor), batch),
        ("GSB-MDPO (its gym preset)", gsb, gsb_actor, gsb_batch),
    )
    results = []
    for name, algo, model, data in variants:
        seconds, temp_mb = _time_actor_grad(algo, model, data, repeats)
        results.append({"variant": name, "rows": rows, "ms": 1e3 * seconds, "temp_mb": temp_mb})
    return results


def train_child(algo_name: str, env: str, num_envs: int, iterations: int) -> dict:
    """Runs in its own process so that ru_maxrss is this trainer's alone."""
    from trainers._core.loop import Trainer

    if algo_name == "genpo":
        from trainers.genpo import GenPO as algorithm_type
        from trainers.genpo import gym_preset as preset
    else:
        from trainers.gsb_mdpo import GsbMdpo as algorithm_type
        from trainers.gsb_mdpo import gym_preset as preset
    with tempfile.TemporaryDirectory() as tmp:
        rollout = {"num_envs": num_envs, "unroll_length": 24, "num_minibatches": 4, "epochs": 4}
        args = with_fields(
            preset(env),
            total_steps=iterations * num_envs * 24,
            output_dir=Path(tmp) / "run",
            rollout=rollout,
            eval={"interval_steps": 10**9, "episodes": 1, "final_episodes": 1},
            log={"progress": False, "checkpoint_every": 10**6},
        )
        Trainer(algorithm_type(args.algo), args).run()
        lines = [json.loads(line) for line in (args.output_dir / "metrics.jsonl").read_text().splitlines()]
    sps = [r["time/sps"] for r in lines if r["type"] == "train"][1:]
    return {
        "algo": algo_name,
        "env": env,
        "num_envs": num_envs,
        "s_per_1M_steps": 1e6 / float(np.median(sps)),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["update", "train", "train-child"])
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--algo", default="genpo", help="train-child only")
    args = parser.parse_args()
    print(f"device: {jax.devices()[0].device_kind}", file=sys.stderr)
    if args.mode == "update":
        for r in bench_update(args.rows, args.repeats):
            print(
                f"{r['variant']:26s} rows {r['rows']:6d}  {r['ms']:10.1f} ms  {r['ms'] / r['rows']:8.3f} ms/row"
                f"  XLA temp {r['temp_mb']:9.1f} MB"
            )
    elif args.mode == "train-child":
        print(json.dumps(train_child(args.algo, args.env, args.num_envs, args.iterations)))
    else:
        for algo in ("gsb_mdpo", "genpo"):
            command = [
                sys.executable,
                "-m",
                "trainers.lab.perf.bench_genpo",
                "train-child",
                "--algo",
                algo,
                "--env",
                args.env,
                "--num-envs",
                str(args.num_envs),
                "--iterations",
                str(args.iterations),
            ]
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"{r['algo']:9s} {r['env']} {r['num_envs']} envs: {r['s_per_1M_steps']:8.0f} s per 1M env steps, "
                f"peak RSS {r['peak_rss_mb']:7.0f} MB"
            )


if __name__ == "__main__":
    main()
