"""Reward normalisation by the running standard deviation of the discounted return (training only).

The rewards the critic and GAE see are divided by the running std of each env's discounted return
R_t = gamma * R_{t-1} + r_t (reset at every episode end): SB3's `VecNormalize(norm_reward=True)`, the
"reward scaling" of Engstrom et al. (2020). It puts the value targets of any task near unit scale, which is
what a small critic trained by Adam at a fixed learning rate can follow; the actor is unaffected by the
scale (advantages are standardised per minibatch). The statistics are part of the training state (saved in
checkpoints, so a resumed run matches an uninterrupted one) and never part of the deployed policy, which
acts on raw observations through its own observation normaliser.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from gsbpolicy._internal import RunningNorm


class ReturnNorm(eqx.Module):
    """Each env's running discounted return and the running mean/variance of those returns."""

    returns: Float[Array, " envs"]
    """R_t of each env's current episode (after the last collected step)."""
    stats: RunningNorm
    """Running statistics of every R_t seen so far (dim 1)."""

    @staticmethod
    def init(num_envs: int) -> "ReturnNorm":
        return ReturnNorm(jnp.zeros(num_envs), RunningNorm.init(1))

    def update(self, reward: Float[Array, "seq t"], done: Bool[Array, "seq t"], gamma: float) -> "ReturnNorm":
        """Advance every env's return over one iteration's rollout and merge the returns into the statistics.

        `reward`/`done`: [num_unrolls * num_envs, T], the rollout layout (unroll-major: sequence u * B + b is
        env b's u-th unroll), so each env's steps are put back in time order before the scan.
        """
        num_envs = self.returns.shape[0]
        seqs, steps = reward.shape
        unrolls = seqs // num_envs

        def per_env_time_major(x):  # [U * B, T] -> [U * T, B]
            return x.reshape(unrolls, num_envs, steps).transpose(0, 2, 1).reshape(unrolls * steps, num_envs)

        def step(ret, x):
            r, d = x
            ret = gamma * ret + r
            return jnp.where(d, 0.0, ret), ret

        final, returns = jax.lax.scan(
            step,
            self.returns,
            (per_env_time_major(reward).astype(self.returns.dtype), per_env_time_major(done)),
        )
        return ReturnNorm(final, self.stats.update(returns.reshape(-1, 1)))

    def reward_scale(self) -> Float[Array, ""]:
        """1 / std of the discounted return: what the rewards are multiplied by."""
        return jax.lax.stop_gradient(1.0 / jnp.sqrt(self.stats.var[0] + 1e-8))
