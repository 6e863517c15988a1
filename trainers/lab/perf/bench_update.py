"""Performance of the GSB-MDPO update and of Playground collection (a benchmark script, not a test).

    python -m trainers.lab.perf.bench_update [--env CartpoleSwingup] [--num-envs 256] [--repeats 5]

1. The minibatch update (path log-likelihoods and drifts recomputed on stored paths, the loss, its
   gradient and Adam, plus the critic) for the `gym` and `playground` preset architectures, as effective
   GFLOP/s, next to this machine's rate for one 256-wide float32 MLP layer on the same number of rows.
   FLOPs are counted analytically: matmuls only, backward = 2x forward.
2. Rollout collection SPS (policy sampling + physics in one scan) against physics-only SPS for the same
   env and batch.
"""

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from trainers._core.config import TrainArgs
from trainers._core.envs import PlaygroundEnv
from trainers._core.envs.playground_backend import collect_playground
from trainers._core.model import ActorCritic, Optimizers, ValueMLP, trainable_mask
from trainers._core.rollout import Transition
from trainers._core.update import TrainState, make_update
from trainers.gsb_mdpo import GsbMdpo, gym_preset, playground_preset
from trainers.presets import with_fields


def _time(fn, repeats: int) -> float:
    jax.block_until_ready(fn())  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _mlp_flops(sizes: list[int]) -> int:
    return 2 * sum(a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def update_flops(args: TrainArgs, obs_dim: int, act_dim: int, rows: int) -> float:
    """Matmul FLOPs of one minibatch update over `rows` transitions (forward + 2x backward)."""
    p, c = args.policy, args.critic
    actor = _mlp_flops([obs_dim + act_dim + p.time_embed_dim] + [p.width] * p.depth + [act_dim])
    critic = _mlp_flops([obs_dim] + [c.width] * c.depth + [1])
    critic_calls = 3 + (2 if args.rollout.recompute_gae else 0)  # fwd+bwd, plus V(obs), V(final_obs)
    return rows * (3 * p.num_steps * actor + critic_calls * critic)


def bench_update(name: str, args: TrainArgs, obs_dim: int, act_dim: int, repeats: int) -> dict:
    rows = args.rollout.batch_size * args.rollout.unroll_length
    one = with_fields(
        args,
        rollout={
            "num_envs": args.rollout.batch_size,
            "unrolls_per_iteration": 1,
            "num_minibatches": 1,
            "epochs": 1,
        },
    )
    algo = GsbMdpo(args.algo)
    key = jax.random.key(0)
    spec = args.policy.spec(obs_dim, act_dim, -np.ones(act_dim), np.ones(act_dim), "bench")
    model = ActorCritic(algo.make_actor(spec, args, key=key), ValueMLP(obs_dim, args.critic, key=key))
    optimizers = Optimizers.make(args.optim, 1000)
    state = TrainState(
        model,
        optimizers.init(eqx.filter(model, trainable_mask(model))),
        key,
        jnp.zeros((), jnp.int32),
        jnp.zeros((), jnp.int32),
    )
    s, t = one.rollout.batch_size, one.rollout.unroll_length
    obs = jax.random.normal(key, (s, t, obs_dim))
    _, extras = jax.jit(lambda o: algo.act(model.actor, o, key))(obs.reshape(-1, obs_dim))
    extras = jax.tree.map(lambda x: x.reshape(s, t, *x.shape[1:]), extras)
    zeros = jnp.zeros((s, t))
    data = Transition(obs, zeros, zeros.astype(bool), zeros.astype(bool), obs, extras)
    update = eqx.filter_jit(make_update(algo, one, optimizers))
    seconds = _time(lambda: update(state, data), repeats)
    gflops = update_flops(one, obs_dim, act_dim, rows) / seconds / 1e9

    layer_rows = rows * args.policy.num_steps
    x = jax.random.normal(key, (layer_rows, 256))
    w, b = jax.random.normal(key, (256, 256)) / 16, jnp.zeros(256)
    layer = jax.jit(lambda x: jax.nn.silu(x @ w + b))
    layer_gflops = 2 * layer_rows * 256 * 256 / _time(lambda: layer(x), repeats) / 1e9
    return {"preset": name, "rows": rows, "ms": seconds * 1e3, "gflops": gflops, "layer_gflops": layer_gflops}


def bench_collection(env_name: str, num_envs: int, unroll: int, repeats: int) -> dict:
    env = PlaygroundEnv.make(env_name, num_envs)
    args = with_fields(playground_preset(env_name), rollout={"num_envs": num_envs})
    algo = GsbMdpo(args.algo)
    spec = args.policy.spec(env.obs_dim, env.act_dim, env.action_low, env.action_high, env_name)
    actor = algo.make_actor(spec, args, key=jax.random.key(0))
    env_state, obs = jax.jit(env.reset)(jax.random.key(1))

    @jax.jit
    def physics(env_state):
        def step(carry, _):
            return env.step(carry, jnp.zeros((num_envs, env.act_dim)))[0], None

        return jax.lax.scan(step, env_state, None, length=unroll)[0]

    collect = eqx.filter_jit(collect_playground)
    physics_s = _time(lambda: physics(env_state), repeats)
    collect_s = _time(
        lambda: collect(algo, env, actor, env_state, obs, jax.random.key(2), unroll, 1), repeats
    )
    steps = num_envs * unroll
    return {
        "env": env_name,
        "num_envs": num_envs,
        "physics_sps": steps / physics_s,
        "collect_sps": steps / collect_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="CartpoleSwingup")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--unroll", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"device: {jax.devices()[0].device_kind}")
    print(f"{'preset':12s} {'rows':>7s} {'ms/update':>10s} {'GFLOP/s':>8s} {'256-layer':>10s} {'ratio':>6s}")
    presets = {
        "gym": (gym_preset("HalfCheetah-v5"), 17, 6),
        "playground": (playground_preset("CartpoleSwingup"), 5, 1),
    }
    for name, (preset, obs_dim, act_dim) in presets.items():
        r = bench_update(name, preset, obs_dim, act_dim, args.repeats)
        print(
            f"{name:12s} {r['rows']:7d} {r['ms']:10.1f} {r['gflops']:8.1f} {r['layer_gflops']:10.1f} "
            f"{r['gflops'] / r['layer_gflops']:6.2f}"
        )
    c = bench_collection(args.env, args.num_envs, args.unroll, args.repeats)
    print(
        f"\ncollection ({c['env']}, {c['num_envs']} envs, playground preset policy): "
        f"{c['collect_sps']:,.0f} env-steps/s vs physics only {c['physics_sps']:,.0f} "
        f"(ratio {c['collect_sps'] / c['physics_sps']:.2f})"
    )


if __name__ == "__main__":
    main()
