"""Generalized advantage estimation (Schulman et al. 2016) that keeps termination and truncation apart."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float


def compute_gae(
    rewards: Float[Array, " t *b"],
    values: Float[Array, " t *b"],
    next_values: Float[Array, " t *b"],
    terminated: Bool[Array, " t *b"],
    truncated: Bool[Array, " t *b"],
    gamma: float,
    lam: float,
) -> tuple[Float[Array, " t *b"], Float[Array, " t *b"]]:
    """GAE(gamma, lambda) advantages and value targets with a reverse `lax.scan` over time.

    With done_t = terminated_t | truncated_t:

        delta_t = r_t + gamma * (1 - terminated_t) * V(final_obs_t) - V(obs_t)
        A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1},    A_T = 0
        R_t     = A_t + V(obs_t)

    A truncated step bootstraps from the value of the observation it reached (time limits are not part
    of the MDP); a terminated step does not. No step carries advantage across an episode boundary. The
    last step of the rollout bootstraps from `next_values[T-1]` like any other step.

    Args:
        rewards: r_t.
        values: V(obs_t), the value of the observation acted on at step t.
        next_values: V(final_obs_t), the value of the observation step t reached before any reset.
        terminated: step t reached a terminal state.
        truncated: step t hit the time limit without terminating.
        gamma: discount factor.
        lam: GAE lambda.

    Returns:
        Advantages A_t and returns (value targets) R_t.
    """
    # `where` rather than a multiplication by (1 - terminated): a terminal state's value is never used,
    # so a non-finite one (e.g. a diverged physics state) must not leak in as 0 * nan = nan.
    bootstrap = jnp.where(terminated, 0.0, next_values)
    deltas = rewards + gamma * bootstrap - values
    keep = 1.0 - (terminated | truncated).astype(values.dtype)

    def backward(next_advantage: Array, step: tuple[Array, Array]) -> tuple[Array, Array]:
        delta, keep_t = step
        advantage = delta + gamma * lam * keep_t * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, keep), reverse=True)
    return advantages, advantages + values
