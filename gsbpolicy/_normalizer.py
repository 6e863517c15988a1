"""Running observation normalizer, part of the deployed policy.

Keeping the statistics inside the policy (rather than in an env wrapper, as SB3's VecNormalize and
PureJaxRL do) means a saved, exported or downloaded policy can never silently receive raw observations.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


class RunningNorm(eqx.Module):
    """Running mean/variance of observations with a parallel (Chan et al.) Welford merge.

    The statistics are arrays so they are saved with the weights, but `__call__` stops their gradient
    and the trainers exclude them from the optimiser, so they are frozen for learning.
    """

    mean: Float[Array, " dim"]
    var: Float[Array, " dim"]
    count: Float[Array, ""]
    clip: float = eqx.field(static=True, default=10.0)
    eps: float = eqx.field(static=True, default=1e-8)

    @staticmethod
    def init(dim: int, clip: float = 10.0, eps: float = 1e-8) -> "RunningNorm":
        """Identity statistics (mean 0, var 1) with count 0."""
        return RunningNorm(jnp.zeros(dim), jnp.ones(dim), jnp.zeros(()), clip, eps)

    def __call__(self, obs: Float[Array, "*batch dim"]) -> Float[Array, "*batch dim"]:
        mean, var = jax.lax.stop_gradient((self.mean, self.var))
        return jnp.clip((obs - mean) / jnp.sqrt(var + self.eps), -self.clip, self.clip)

    def update(self, batch: Float[Array, "n dim"]) -> "RunningNorm":
        """Merge the statistics of `batch` (any leading shape, flattened) into the running ones."""
        batch = batch.reshape(-1, batch.shape[-1]).astype(self.mean.dtype)
        n = jnp.asarray(batch.shape[0], self.count.dtype)
        b_mean = batch.mean(axis=0)
        b_var = batch.var(axis=0)
        total = self.count + n
        delta = b_mean - self.mean
        mean = self.mean + delta * (n / total)
        # Parallel variance merge: M2 = M2_a + M2_b + delta^2 * n_a * n_b / n. With count 0 the prior
        # (var 1) gets weight 0, so the first update simply adopts the batch statistics.
        m2 = self.var * self.count + b_var * n + delta**2 * (self.count * n / total)
        return RunningNorm(mean, m2 / total, total, self.clip, self.eps)
