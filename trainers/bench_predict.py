"""Single-observation latency of `GSBPolicy.predict` / `act` against the floor of one jitted call.

    python -m trainers.bench_predict [--num-steps 16] [--width 256] [--depth 3] [--repeats 2000]

Prints median and p99 in microseconds for: a jitted identity on the same-size input (the dispatch floor
of any jitted call), the jitted deterministic sampler called directly on a device array, `act`, and
`predict` (which adds input validation).
"""

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from gsbpolicy import GSBPolicy, PolicySpec, make_policy


def _timeit(fn, repeats: int) -> tuple[float, float]:
    for _ in range(50):
        fn()
    times = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - start
    return float(np.median(times) * 1e6), float(np.percentile(times, 99) * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--obs-dim", type=int, default=17)
    parser.add_argument("--act-dim", type=int, default=6)
    parser.add_argument("--num-steps", type=int, default=16)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2000)
    args = parser.parse_args()
    spec = PolicySpec(
        obs_dim=args.obs_dim,
        act_dim=args.act_dim,
        num_steps=args.num_steps,
        width=args.width,
        depth=args.depth,
        action_low=(-1.0,) * args.act_dim,
        action_high=(1.0,) * args.act_dim,
    )
    policy = GSBPolicy(make_policy(spec, key=jax.random.key(0)))
    obs = np.random.default_rng(0).normal(size=spec.obs_dim).astype(np.float32)
    obs_device = jnp.asarray(obs)
    identity = jax.jit(lambda x: x + 1.0)
    params, static = eqx.partition(policy.policy, eqx.is_array)
    sampler = jax.jit(lambda p, x: eqx.combine(p, static).act(x))
    rows = {
        "jitted identity (dispatch floor)": lambda: identity(obs_device).block_until_ready(),
        "jitted FlowPolicy.act on device array": lambda: sampler(params, obs_device).block_until_ready(),
        "GSBPolicy.act(numpy obs)": lambda: policy.act(obs),
        "GSBPolicy.predict(numpy obs)": lambda: policy.predict(obs),
    }
    flops = (
        2
        * spec.num_steps
        * sum(
            a * b
            for a, b in zip(
                [spec.obs_dim + spec.act_dim + spec.time_embed_dim] + [spec.width] * spec.depth,
                [spec.width] * spec.depth + [spec.act_dim],
                strict=True,
            )
        )
    )
    print(
        f"spec: {spec.num_steps} steps, {spec.depth}x{spec.width} {spec.activation}; {flops / 1e6:.2f} MFLOP/act"
    )
    print(f"{'call':42s} {'median us':>10s} {'p99 us':>10s}")
    for name, fn in rows.items():
        median, p99 = _timeit(fn, args.repeats)
        print(f"{name:42s} {median:10.1f} {p99:10.1f}")


if __name__ == "__main__":
    main()
