"""GAE: reverse scan vs a plain loop (CleanRL), closed forms (SB3), termination vs truncation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trainers._core.gae import compute_gae

GAMMA, LAM = 0.9, 0.8


def _loop_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """The textbook backward loop, one step at a time, in numpy."""
    advantages = np.zeros_like(values)
    next_advantage = np.zeros_like(values[0])
    for t in reversed(range(len(rewards))):
        bootstrap = np.where(terminated[t], 0.0, next_values[t])
        delta = rewards[t] + gamma * bootstrap - values[t]
        next_advantage = delta + gamma * lam * ~(terminated[t] | truncated[t]) * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values


def _gae(rewards, values, next_values, terminated, truncated, gamma=GAMMA, lam=LAM):
    arrays = (rewards, values, next_values, terminated, truncated)
    advantages, returns = compute_gae(*map(jnp.asarray, arrays), gamma, lam)
    return np.asarray(advantages), np.asarray(returns)


def _single_episode(num_steps: int):
    """One episode that terminates at its last step, with reward 1 there and 0 elsewhere; shape [T, 1]."""
    rewards = np.zeros((num_steps, 1), np.float32)
    rewards[-1] = 1.0
    terminated = np.zeros((num_steps, 1), bool)
    terminated[-1] = True
    return rewards, terminated, np.zeros_like(terminated)


def test_scan_matches_loop():
    rng = np.random.default_rng(0)
    shape = (64, 8)
    rewards, values, next_values = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    terminated = rng.random(shape) < 0.1
    truncated = (rng.random(shape) < 0.1) & ~terminated
    expected = _loop_gae(rewards, values, next_values, terminated, truncated, GAMMA, LAM)
    actual = _gae(rewards, values, next_values, terminated, truncated)
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(actual[1], expected[1], rtol=1e-5, atol=1e-5)


def test_scan_matches_loop_under_jit():
    rng = np.random.default_rng(1)
    shape = (16, 4)
    rewards, values, next_values = (jnp.asarray(rng.normal(size=shape), jnp.float32) for _ in range(3))
    terminated = jnp.asarray(rng.random(shape) < 0.2)
    truncated = jnp.asarray(rng.random(shape) < 0.2) & ~terminated
    jitted = jax.jit(compute_gae, static_argnums=(5, 6))
    eager = compute_gae(rewards, values, next_values, terminated, truncated, GAMMA, LAM)
    compiled = jitted(rewards, values, next_values, terminated, truncated, GAMMA, LAM)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("value", [0.0, 0.7])
def test_lambda_one_gives_discounted_monte_carlo_return(value):
    # With lambda = 1 the value estimates telescope away: R_t = gamma^(T-1-t) for a reward of 1 at the end.
    num_steps = 10
    rewards, terminated, truncated = _single_episode(num_steps)
    values = np.full((num_steps, 1), value, np.float32)
    advantages, returns = _gae(rewards, values, values, terminated, truncated, lam=1.0)
    expected = GAMMA ** np.arange(num_steps - 1, -1, -1, dtype=np.float32)[:, None]
    np.testing.assert_allclose(returns, expected, rtol=1e-5)
    np.testing.assert_allclose(advantages, expected - value, rtol=1e-5, atol=1e-6)


def test_zero_values_give_geometric_advantages():
    # V = 0: delta_t = r_t, so A_t = (gamma * lambda)^(T-1-t) (SB3's tests/test_gae.py idea).
    num_steps = 10
    rewards, terminated, truncated = _single_episode(num_steps)
    zeros = np.zeros((num_steps, 1), np.float32)
    advantages, _ = _gae(rewards, zeros, zeros, terminated, truncated)
    expected = (GAMMA * LAM) ** np.arange(num_steps - 1, -1, -1, dtype=np.float32)[:, None]
    np.testing.assert_allclose(advantages, expected, rtol=1e-5)


def test_lambda_zero_gives_td_errors():
    rng = np.random.default_rng(2)
    rewards, values, next_values = (rng.normal(size=(5, 3)).astype(np.float32) for _ in range(3))
    no = np.zeros((5, 3), bool)
    advantages, _ = _gae(rewards, values, next_values, no, no, lam=0.0)
    np.testing.assert_allclose(advantages, rewards + GAMMA * next_values - values, rtol=1e-5, atol=1e-6)


def test_truncation_bootstraps_from_final_obs_value_and_termination_does_not():
    # Column 0 is truncated at t = 1, column 1 terminated at t = 1; t = 2 belongs to the next episode.
    rewards = np.array([[1.0, 1.0], [2.0, 2.0], [100.0, 100.0]], np.float32)
    values = np.array([[0.5, 0.5], [0.25, 0.25], [50.0, 50.0]], np.float32)
    next_values = np.array([[0.25, 0.25], [4.0, np.nan], [60.0, 60.0]], np.float32)
    terminated = np.array([[False, False], [False, True], [False, False]])
    truncated = np.array([[False, False], [True, False], [False, False]])
    advantages, returns = _gae(rewards, values, next_values, terminated, truncated)

    a1_truncated = 2.0 + GAMMA * 4.0 - 0.25
    a1_terminated = 2.0 - 0.25  # the (nan) value of the terminal observation is never used
    np.testing.assert_allclose(advantages[1], [a1_truncated, a1_terminated], rtol=1e-6)
    delta0 = 1.0 + GAMMA * 0.25 - 0.5
    np.testing.assert_allclose(advantages[0], delta0 + GAMMA * LAM * advantages[1], rtol=1e-6)
    np.testing.assert_allclose(returns, advantages + values, rtol=1e-6)


def test_no_advantage_leaks_across_episode_boundaries():
    rng = np.random.default_rng(3)
    rewards, values, next_values = (rng.normal(size=(6, 2)).astype(np.float32) for _ in range(3))
    terminated = np.zeros((6, 2), bool)
    truncated = np.zeros((6, 2), bool)
    terminated[2, 0] = True
    truncated[2, 1] = True
    before, _ = _gae(rewards, values, next_values, terminated, truncated)
    rewards[3:] += 10.0  # change only the episodes that start after the boundary
    after, _ = _gae(rewards, values, next_values, terminated, truncated)
    np.testing.assert_array_equal(before[:3], after[:3])


def test_playground_next_values_equal_a_full_critic_pass():
    """The update's shortcut (critic passes only at sequence ends and truncations) gives V(final_obs_t)
    wherever GAE uses it, with truncations every `episode_length` steps and terminations anywhere."""
    from gsbpolicy import PolicySpec, make_policy
    from trainers._core.config import CriticArgs
    from trainers._core.model import ActorCritic, ValueMLP
    from trainers._core.rollout import Transition
    from trainers._core.update import _next_values, _values
    from trainers.gsb_mdpo import playground_preset
    from trainers.presets import with_fields

    rng = np.random.default_rng(0)
    num_seq, steps, episode_length, obs_dim = 4, 12, 5, 3
    spec = PolicySpec(obs_dim=obs_dim, act_dim=1, num_steps=2, width=8, depth=1, action_low=(-1.0,),
                      action_high=(1.0,))  # fmt: skip
    model = ActorCritic(make_policy(spec, key=jax.random.key(0)),
                        ValueMLP(obs_dim, CriticArgs(width=8, depth=1), key=jax.random.key(1)))  # fmt: skip
    chain = rng.normal(size=(num_seq, steps + 1, obs_dim)).astype(np.float32)
    final_obs = chain[:, 1:].copy()
    counters = rng.integers(0, episode_length, num_seq)[:, None] + np.arange(1, steps + 1)
    truncated = counters % episode_length == 0
    terminated = ~truncated & (rng.random((num_seq, steps)) < 0.1)
    ended = truncated | terminated
    final_obs[ended] = rng.normal(size=(ended.sum(), obs_dim))  # the state reached before the reset
    data = Transition(*map(jnp.asarray, (chain[:, :-1], np.zeros((num_seq, steps), np.float32), terminated,
                                         truncated, final_obs)), None)  # fmt: skip
    args = with_fields(playground_preset("CartpoleSwingup"), rollout={"episode_length": episode_length})
    fast = _next_values(model, data, _values(model, data.obs), args)
    full = _values(model, data.final_obs)
    np.testing.assert_allclose(
        np.where(terminated, 0, fast), np.where(terminated, 0, full), rtol=1e-5, atol=1e-6
    )
