"""Euler-Maruyama and Euler ODE samplers, and step log-densities and drifts on a stored path.

Conventions (paper eqs. 5-8): t_n = n/N, dt = 1/N, a^(0) ~ N(0, I) and

    a^(n+1) = a^(n) + dt * f(a^(n), t_n) + sigma(t_n) * sqrt(dt) * eps_n,   eps_n ~ N(0, I),

so each step is Gaussian with mean a^(n) + dt * f and covariance sigma(t_n)^2 * dt * I. `drift_fn(a, t)`
is the drift with the state already bound. Noise is always an input array: row 0 is a^(0), row n+1 is
eps_n. Every function here works on one sample; batch with `jax.vmap`. With `clip` every iterate
a^(n), n >= 1, is clipped to [-1, 1] (FlowRL's `clip_sampler`; only meaningful without noise, where no
step density is needed).
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._schedules import AbstractSigmaSchedule, time_grid
from ._types import Action, Drifts, Noise, Path, Scalar, StepValues

DriftFn = Callable[[Action, Scalar], Action]

# The float32 value of log(2 pi), computed without JAX: an array op at import time would start the XLA
# backend, after which `jax.distributed.initialize` (multi-process training) can no longer run.
_LOG_2PI = float(np.float32(math.log(2 * math.pi)))


class PathSample(NamedTuple):
    """A sampled generation path with what the trainers store at rollout time."""

    path: Path
    """a^(0:N), shape [N+1, act_dim]; the pre-squash action is path[-1]."""
    log_probs: StepValues
    """log p(a^(n+1) | a^(n), s) for n = 0..N-1 (paper eq. 8 factors), constants included."""
    drifts: Drifts
    """f(a^(n), t_n, s) for n = 0..N-1."""


def gaussian_log_prob(x: Action, mean: Action, std: Scalar) -> Scalar:
    """log N(x; mean, std^2 I), summed over dimensions, normalising constant included."""
    z = (x - mean) / std
    return -0.5 * jnp.sum(z**2) - x.shape[-1] * (jnp.log(std) + 0.5 * _LOG_2PI)


def prior_log_prob(a0: Action) -> Scalar:
    """log N(a^(0); 0, I) of the prior (independent of the policy, so it cancels in every ratio)."""
    return gaussian_log_prob(a0, jnp.zeros_like(a0), jnp.ones(()))


def _step_std(schedule: AbstractSigmaSchedule, t: Scalar, dt: float) -> Scalar:
    return schedule(t) * jnp.sqrt(dt)


def _clip(a: Action, clip: bool) -> Action:
    return jnp.clip(a, -1.0, 1.0) if clip else a


def sample_sde(
    drift_fn: DriftFn, schedule: AbstractSigmaSchedule, num_steps: int, noise: Noise, clip: bool = False
) -> PathSample:
    """Euler-Maruyama sampling (paper eq. 7) driven by the given standard normal `noise` [N+1, act_dim]."""
    dt = 1.0 / num_steps
    ts = time_grid(num_steps)[:-1]

    def step(a, inputs):
        t, eps = inputs
        f = drift_fn(a, t)
        mean = a + dt * f
        std = _step_std(schedule, t, dt)
        a_next = _clip(mean + std * eps, clip)
        return a_next, (a_next, gaussian_log_prob(a_next, mean, std), f)

    _, (rest, log_probs, drifts) = jax.lax.scan(step, noise[0], (ts, noise[1:]))
    return PathSample(jnp.concatenate([noise[:1], rest]), log_probs, drifts)


def sample_ode(drift_fn: DriftFn, num_steps: int, a0: Action, clip: bool = False) -> Path:
    """Deterministic Euler integration of da = f dt from `a0` (zeros give the deterministic policy)."""
    dt = 1.0 / num_steps

    def step(a, t):
        a_next = _clip(a + dt * drift_fn(a, t), clip)
        return a_next, a_next

    _, rest = jax.lax.scan(step, a0, time_grid(num_steps)[:-1])
    return jnp.concatenate([a0[None], rest])


def final_action_ode(drift_fn: DriftFn, num_steps: int, a0: Action, clip: bool = False) -> Action:
    """a^(N) of `sample_ode` without stacking the path (the deployed and exported fast path)."""
    dt = 1.0 / num_steps

    def step(a, t):
        return _clip(a + dt * drift_fn(a, t), clip), None

    return jax.lax.scan(step, a0, time_grid(num_steps)[:-1])[0]


def final_action_sde(
    drift_fn: DriftFn, schedule: AbstractSigmaSchedule, num_steps: int, noise: Noise, clip: bool = False
) -> Action:
    """a^(N) of `sample_sde` without the path, log-densities or drifts."""
    dt = 1.0 / num_steps

    def step(a, inputs):
        t, eps = inputs
        return _clip(a + dt * drift_fn(a, t) + _step_std(schedule, t, dt) * eps, clip), None

    return jax.lax.scan(step, noise[0], (time_grid(num_steps)[:-1], noise[1:]))[0]


def path_log_probs_and_drifts(
    drift_fn: DriftFn, schedule: AbstractSigmaSchedule, path: Path
) -> tuple[StepValues, Drifts]:
    """Per-step log-densities and drifts of a stored path under `drift_fn`.

    The steps are independent given the path, but they are evaluated one after the other (`lax.map`):
    under the caller's batch vmap each step is then one [batch, width] matmul chain whose activations
    stay in cache, which measured 1.7x faster for a training update (3x256 MLP, 16 steps, 6144 paths on
    CPU; `python -m trainers.bench_update`) than vmapping over steps as well.
    """
    num_steps = path.shape[0] - 1
    dt = 1.0 / num_steps
    ts = time_grid(num_steps)[:-1]

    def one(a, a_next, t):
        f = drift_fn(a, t)
        return gaussian_log_prob(a_next, a + dt * f, _step_std(schedule, t, dt)), f

    return jax.lax.map(lambda step: one(*step), (path[:-1], path[1:], ts))
