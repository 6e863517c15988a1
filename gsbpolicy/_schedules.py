"""Diffusion-coefficient schedules sigma(t) on generation time t in [0, 1].

t = 0 is the noise end (a^(0) ~ N(0, I)) and t = 1 the action end, so every schedule is largest at
t = 0 (sigma_max) and smallest at t = 1 (sigma_min). Each schedule is a small final class behind one
abstract interface, in the style of diffrax's solvers.
"""

import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float


class AbstractSigmaSchedule(eqx.Module):
    """sigma(t) for t in [0, 1]; works elementwise on arrays of times."""

    @abc.abstractmethod
    def __call__(self, t: Float[Array, "*t"]) -> Float[Array, "*t"]:
        """The diffusion coefficient at generation time(s) `t`."""


class ConstantSigma(AbstractSigmaSchedule):
    """sigma(t) = sigma_max (sigma_min is ignored)."""

    sigma_max: float = eqx.field(static=True)

    def __call__(self, t):
        return jnp.full_like(t, self.sigma_max)


class LinearSigma(AbstractSigmaSchedule):
    """sigma(t) = sigma_max + t * (sigma_min - sigma_max)."""

    sigma_max: float = eqx.field(static=True)
    sigma_min: float = eqx.field(static=True)

    def __call__(self, t):
        return self.sigma_max + t * (self.sigma_min - self.sigma_max)


class ExponentialSigma(AbstractSigmaSchedule):
    """Geometric interpolation sigma(t) = sigma_max * (sigma_min / sigma_max) ** t."""

    sigma_max: float = eqx.field(static=True)
    sigma_min: float = eqx.field(static=True)

    def __call__(self, t):
        return self.sigma_max * (self.sigma_min / self.sigma_max) ** t


SCHEDULES = {"constant": ConstantSigma, "linear": LinearSigma, "exponential": ExponentialSigma}


def make_schedule(name: str, sigma_max: float, sigma_min: float) -> AbstractSigmaSchedule:
    """Build the schedule called `name` (one of `SCHEDULES`)."""
    if name == "constant":
        return ConstantSigma(sigma_max)
    return SCHEDULES[name](sigma_max, sigma_min)


def time_grid(num_steps: int) -> Float[Array, " num_steps_plus_1"]:
    """The uniform grid t_n = n / N, n = 0..N (paper eq. 5)."""
    return jnp.arange(num_steps + 1, dtype=jnp.float32) / num_steps
