"""How much of the toy's tilt any drift change can reach: the limit behind the toy's shortfall, measured.

GSB-MDPO changes only the drift of each Gaussian generation step; the prior a^(0) and the step variances
sigma(t_n)^2 dt stay fixed. Write the terminal advantage as the old policy's martingale

    A - E[A] = (V_0(a^(0)) - E[A]) + sum_n D_n,   V_n(a) = E[A | a^(n) = a],   D_n = V_{n+1}(a^(n+1)) - V_n(a^(n)),

whose terms are orthogonal, so Var(A) = Var(V_0) + sum_n E[D_n^2]. A small drift change at step n shifts
that step's mean, so its path log-ratio is linear in the step's noise eps_n (see `gsbpolicy._sde`): it can
only tilt by functions g(a^(n)) . eps_n. Of D_n it reaches the part linear in eps_n, whose energy is
||E[A eps_n | a^(n)]||^2 (c_n below). To first order in 1 / lambda, one mirror-descent iteration can
therefore realise at most the share

    reachable = sum_n E||c_n||^2 / Var(A)

of its own tilt exp(A / lambda), whatever the optimizer, minibatch or number of updates. The prior share
Var(V_0) / Var(A) and the nonlinear remainder sum_n (E[D_n^2] - E||c_n||^2) / Var(A) are out of reach.
In continuous time the remainder vanishes (every change of a diffusion's law with the same noise is a
drift change); with discrete steps and an advantage that jumps at the quadrant borders it does not.

Estimated by nested Monte Carlo on the old policy: `paths` old paths; at each of their steps `children`
fresh draws of eps_n, each continued `continuations` times to a^(N). The squared norms use the product of
two independent halves and the variances subtract the continuation noise, so every share is unbiased.

    python -m trainers.lab.toy_reachable [--toy.seed 0] [--toy.num-steps 32] [--paths 192]

Prints the shares per step and appends them to hub_cards/results/raw/toy_tilt_reachable.jsonl (one line
per old policy and preference; a rerun replaces its line).
"""

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from gsbpolicy import FlowPolicy, PolicyFormatError
from gsbpolicy._cli import FAILURE, USAGE
from gsbpolicy._files import atomic_write_text
from gsbpolicy._internal import sample_noise, time_grid
from trainers._core.cli import fail, tyro_cli
from trainers._core.runlog import read_jsonl
from trainers.lab.toy import tilt_model, tilt_settings

Advantage = Callable[[jax.Array], jax.Array]
"""A(a^(N)) for one terminal action [act_dim]."""


@dataclasses.dataclass(frozen=True)
class Args:
    """Reachable-share measurement of one toy old policy."""

    toy: tilt_settings.Args = tilt_settings.Args(out=None)
    """The toy's settings: its pretraining fields and seed pick the old policy (from the toy's cache, or
    pretrained and cached), its preference the advantage."""
    paths: int = 192
    """Old paths whose states a^(n) the shares average over."""
    children: int = 32
    """Fresh draws of eps_n per path and step (an even number: two halves)."""
    continuations: int = 64
    """Continuations to a^(N) per child, which estimate V_{n+1}."""
    key_seed: int = 0
    """Seed of the Monte Carlo draws."""


def continue_path(policy: FlowPolicy, a: jax.Array, start, eps: jax.Array) -> jax.Array:
    """a^(N) of the Euler-Maruyama path from a^(start) = a, with eps[n] driving step n (earlier rows unused)."""
    spec = policy.spec
    dt = 1.0 / spec.num_steps
    times, stds = time_grid(spec.num_steps)[:-1], policy.sigmas() * jnp.sqrt(dt)
    obs = jnp.zeros(spec.obs_dim)

    def step(a, inputs):
        n, e = inputs
        moved = a + dt * policy.drift(obs, a, times[n]) + stds[n] * e
        return jnp.where(n >= start, moved, a), None

    return jax.lax.scan(step, a, (jnp.arange(spec.num_steps), eps))[0]


@eqx.filter_jit
def _terminal_values(policy, advantage: Advantage, starts, start, key, continuations: int):
    """A at `continuations` continuations of each state in `starts` [B, act_dim] from step `start`: [B, M]."""
    noise = jax.random.normal(
        key, (starts.shape[0], continuations, policy.spec.num_steps, policy.spec.act_dim)
    )
    final = jax.vmap(lambda a, es: jax.vmap(lambda e: continue_path(policy, a, start, e))(es))(starts, noise)
    return jax.vmap(jax.vmap(advantage))(final)


@eqx.filter_jit
def _step_shares(policy, advantage: Advantage, states, n, key, children: int, continuations: int):
    """Per state a^(n) in `states` [B, act_dim]: E[D_n^2 | a^(n)] and ||c_n||^2, each unbiased."""
    spec = policy.spec
    dt = 1.0 / spec.num_steps
    step_std = policy.sigmas()[n] * jnp.sqrt(dt)
    t = time_grid(spec.num_steps)[n]
    obs = jnp.zeros(spec.obs_dim)

    def one(a, key):
        k_eps, k_cont = jax.random.split(key)
        eps = jax.random.normal(k_eps, (children, spec.act_dim))
        kids = (a + dt * policy.drift(obs, a, t))[None] + step_std * eps  # a^(n+1)
        values = _terminal_values(policy, advantage, kids, n + 1, k_cont, continuations)  # [K, M]
        v = values.mean(axis=1)  # V_{n+1}(a^(n+1)) with continuation noise of variance Var(A | kid) / M
        energy = jnp.var(v, ddof=1) - jnp.mean(jnp.var(values, axis=1, ddof=1)) / continuations
        half = children // 2
        c1, c2 = (jnp.mean(v[s, None] * eps[s], axis=0) for s in (slice(None, half), slice(half, None)))
        return energy, c1 @ c2

    return jax.vmap(one)(states, jax.random.split(key, states.shape[0]))


def reachable_shares(
    policy: FlowPolicy,
    advantage: Advantage,
    key,
    paths: int = 192,
    children: int = 32,
    continuations: int = 64,
) -> dict:
    """Shares of Var(A) under the old policy `policy`: the prior's, and per step E[D_n^2] and the part of it
    a drift change reaches; `reachable` is the sum of the latter, `nonlinear` what the steps leave."""
    if policy.spec.clip_iterates:
        raise ValueError("the decomposition needs unclipped Gaussian steps (clip_iterates is set)")
    if children < 2 or children % 2:
        raise ValueError(f"children must be an even number >= 2, got {children}")
    path_key, prior_key, step_key = jax.random.split(key, 3)
    spec = policy.spec
    obs = jnp.zeros((paths, spec.obs_dim))
    states = jax.vmap(policy.sample)(obs, sample_noise(path_key, spec, (paths,))).path  # [P, N+1, d]
    prior_values = np.asarray(_terminal_values(policy, advantage, states[:, 0], 0, prior_key, continuations))
    var_a = float(np.var(prior_values, ddof=1))
    prior = float(
        np.var(prior_values.mean(1), ddof=1) - np.var(prior_values, axis=1, ddof=1).mean() / continuations
    )
    energy, linear = [], []
    for n, k in enumerate(jax.random.split(step_key, spec.num_steps)):
        e, c = _step_shares(policy, advantage, states[:, n], jnp.asarray(n), k, children, continuations)
        energy.append(float(jnp.mean(e)) / var_a)
        linear.append(float(jnp.mean(c)) / var_a)
    return {
        "var_a": var_a,
        "prior_share": prior / var_a,
        "step_energy_share": energy,
        "step_reachable_share": linear,
        "reachable": float(np.sum(linear)),
        "nonlinear": float(np.sum(energy) - np.sum(linear)),
    }


def quadrant_advantage(preference) -> Advantage:
    table = jnp.asarray(preference, jnp.float32)
    return lambda x: table[tilt_model.quadrant(x)]


def log_path(args: Args) -> Path:
    return args.toy.results_dir / "raw" / "toy_tilt_reachable.jsonl"


def measure(args: Args) -> dict:
    """The shares for the toy old policy of `args.toy`, printed and saved in the log."""
    clock = tilt_model.Clock()
    old, _ = tilt_model.old_policy(args.toy, jax.random.split(jax.random.key(args.toy.seed), 4)[0], clock)
    print(
        f"{clock()} nested Monte Carlo: {args.paths} paths x {old.spec.num_steps} steps x {args.children} "
        f"draws x {args.continuations} continuations ...",
        flush=True,
    )
    shares = reachable_shares(
        old,
        quadrant_advantage(args.toy.preference),
        jax.random.key(args.key_seed),
        args.paths,
        args.children,
        args.continuations,
    )
    pretraining = {k: getattr(args.toy, k) for k in tilt_settings.PRETRAIN_FIELDS}
    record = {
        "pretraining": pretraining,
        "seed": args.toy.seed,
        "preference": list(args.toy.preference),
        "estimator": {
            "paths": args.paths,
            "children": args.children,
            "continuations": args.continuations,
            "key_seed": args.key_seed,
        },
    } | shares
    path = log_path(args)
    same = ("pretraining", "seed", "preference", "estimator")
    records = [r for r in read_jsonl(path, ValueError) if any(r[k] != record[k] for k in same)] + [record]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in records))
    print(f"{'step':>4s} {'E[D^2]':>8s} {'drift':>8s}")
    for n, (e, c) in enumerate(zip(shares["step_energy_share"], shares["step_reachable_share"], strict=True)):
        print(f"{n:4d} {e:8.3f} {c:8.3f}")
    print(
        f"shares of Var(A): prior {shares['prior_share']:.3f}, reachable by the drift {shares['reachable']:.3f}, "
        f"nonlinear remainder {shares['nonlinear']:.3f} (saved in {path})"
    )
    return record


def main(argv=None) -> None:
    args = tyro_cli(Args, args=argv, description=__doc__, prog="python -m trainers.lab.toy_reachable")
    try:
        tilt_settings.validate(args.toy)
        if args.paths < 2 or args.continuations < 2:
            raise ValueError(
                f"--paths and --continuations must be at least 2, got {args.paths}, {args.continuations}"
            )
        if args.children < 2 or args.children % 2:
            raise ValueError(f"--children must be an even number >= 2, got {args.children}")
    except ValueError as err:
        fail(str(err), USAGE)
    try:
        measure(args)
    except (PolicyFormatError, ValueError) as err:
        fail(str(err), FAILURE)


if __name__ == "__main__":
    main()
