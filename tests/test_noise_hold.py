"""`rollout.noise_hold`: each env's sampling noise held for a number of steps during rollouts, on both
collectors (the same keys, so the same held noise, whichever env kind runs)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy import PolicySpec, make_policy
from trainers._core.config import RolloutArgs
from trainers._core.envs import GymnasiumEnv, PlaygroundEnv
from trainers._core.envs.gym_backend import HostCollector
from trainers._core.envs.playground_backend import collect_playground
from trainers._core.rollout import step_keys
from trainers.gsb_mdpo import GsbMdpo, GsbMdpoArgs

UNROLL, HOLD = 8, 3


def _key_data(keys):
    return np.asarray(jax.random.key_data(keys))


def test_a_hold_of_one_is_a_fresh_key_every_step():
    key = jax.random.key(0)
    np.testing.assert_array_equal(_key_data(step_keys(key, UNROLL)), _key_data(jax.random.split(key, UNROLL)))


def test_held_keys_repeat_within_a_block_and_change_between_blocks():
    keys = _key_data(step_keys(jax.random.key(0), UNROLL, HOLD))
    blocks = [[0, 1, 2], [3, 4, 5], [6, 7]]  # the last block is cut short by the unroll's end
    for block in blocks:
        assert all((keys[i] == keys[block[0]]).all() for i in block)
    firsts = [keys[block[0]].tobytes() for block in blocks]
    assert len(set(firsts)) == len(blocks)


def _first_noise(path):
    """a^(0) of every stored path, [sequences, T, act_dim]: the sampler's first noise row."""
    return np.asarray(path[:, :, 0, :])


def _assert_held(a0, hold):
    """Within each sequence (one env's unroll), a^(0) is the same inside each block of `hold` steps and
    differs between blocks (and between envs)."""
    for t in range(a0.shape[1]):
        same = np.allclose(a0[:, t], a0[:, (t // hold) * hold])
        assert same, f"step {t} does not hold the noise of step {(t // hold) * hold}"
    starts = a0[:, ::hold]
    assert not np.allclose(starts[:, 0], starts[:, 1]) and not np.allclose(a0[0], a0[1])


@pytest.fixture(scope="module")
def algorithm():
    return GsbMdpo(GsbMdpoArgs())


def _actor(obs_dim, act_dim):
    low, high = (-1.0,) * act_dim, (1.0,) * act_dim
    spec = PolicySpec(
        obs_dim=obs_dim, act_dim=act_dim, num_steps=4, width=8, depth=1, action_low=low, action_high=high
    )
    return make_policy(spec, key=jax.random.key(1))


@pytest.mark.parametrize("hold", [1, HOLD])
def test_the_gymnasium_collector_holds_each_envs_noise(algorithm, hold):
    env = GymnasiumEnv.make("Pendulum-v1", 2)
    try:
        obs = env.reset(seed=0)
        _, data = HostCollector(algorithm, env).collect(_actor(3, 1), obs, jax.random.key(2), UNROLL, 1, hold)
    finally:
        env.close()
    a0 = _first_noise(data.extras.path)
    if hold == 1:
        assert not np.allclose(a0[:, 0], a0[:, 1])
    else:
        _assert_held(a0, hold)


def test_the_playground_collector_holds_each_envs_noise_until_the_hold_is_over(algorithm):
    env = PlaygroundEnv.make("tests.jax_point_mass:PointMass", 2, episode_length=50)
    env_state, obs = env.reset(jax.random.key(3))
    collect = eqx.filter_jit(collect_playground)
    actor, key = _actor(obs.shape[-1], 2), jax.random.key(2)
    *_, held = collect(algorithm, env, actor, env_state, obs, key, UNROLL, 1, None, HOLD)  # hold_now: True
    *_, fresh = collect(algorithm, env, actor, env_state, obs, key, UNROLL, 1, None, HOLD, jnp.asarray(False))
    _assert_held(_first_noise(held.extras.path), HOLD)
    a0 = _first_noise(fresh.extras.path)
    assert all(not np.allclose(a0[:, t], a0[:, t + 1]) for t in range(UNROLL - 1))


def test_the_hold_covers_the_runs_first_env_steps_whatever_its_budget():
    rollout = RolloutArgs(noise_hold=4, noise_hold_steps=50_000)
    assert rollout.holds_noise(0) and rollout.holds_noise(49_999)
    assert not rollout.holds_noise(50_000) and not rollout.holds_noise(10**9)
    assert bool(rollout.holds_noise(jnp.asarray(10))) and not bool(rollout.holds_noise(jnp.asarray(50_000)))
    assert RolloutArgs().holds_noise(10**9)  # 0: the whole run (with noise_hold 1: nothing to hold)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("noise_hold", 0, "--rollout.noise-hold must be >= 1, got 0"),
        ("noise_hold_steps", -1, "--rollout.noise-hold-steps must be >= 0, got -1"),
    ],
)
def test_a_bad_hold_is_refused_by_name(field, value, message):
    with pytest.raises(ValueError, match=message):
        RolloutArgs(**{field: value}).validate()
