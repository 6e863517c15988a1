"""Env adapters: termination, truncation, auto-reset and final observations, for Playground and Gymnasium.

The Playground tests share one jitted reset + `lax.scan` rollout (one XLA compile, ~10 s on 2 CPU cores).
"""

import subprocess
import sys

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trainers._core.envs import PLAYGROUND_ENVS, GymnasiumEnv, PlaygroundEnv, Timestep, make_env

# ---- Playground --------------------------------------------------------------------------------------

NUM_ENVS = 3
EPISODE_LENGTH = 5
NUM_STEPS = 12
DIVERGED = 0  # this env starts from a NaN state, so its first step terminates


@pytest.fixture(scope="module")
def cartpole() -> PlaygroundEnv:
    return PlaygroundEnv.make("CartpoleSwingup", NUM_ENVS, episode_length=EPISODE_LENGTH)


def _scan_rollout(env: PlaygroundEnv, key, num_steps: int):
    """Example: reset, then `num_steps` uniform random-action steps as one `lax.scan` in one jit.

    The env is closed over (not a jit argument), so its MJX model is a compile-time constant.
    """

    @jax.jit
    def run(key):
        reset_key, action_key = jax.random.split(key)
        state, first_obs = env.reset(reset_key)
        # Make env DIVERGED's physics blow up on its first step (its cached first state stays clean).
        qvel = state.env_state[".data.qvel"].at[DIVERGED].set(jnp.nan)
        state = state._replace(env_state={**state.env_state, ".data.qvel": qvel})

        def body(state, key):
            action = jax.random.uniform(key, (env.num_envs, env.act_dim), minval=-1.0, maxval=1.0)
            state, timestep = env.step(state, action)
            return state, (timestep, state.steps)

        _, (timesteps, steps) = jax.lax.scan(body, state, jax.random.split(action_key, num_steps))
        return first_obs, timesteps, steps

    return jax.device_get(run(key))


@pytest.fixture(scope="module")
def rollout(cartpole):
    return _scan_rollout(cartpole, jax.random.key(0), NUM_STEPS)


def test_playground_properties(cartpole):
    assert (cartpole.obs_dim, cartpole.act_dim) == (5, 1)
    np.testing.assert_array_equal(cartpole.action_low, [-1.0])
    np.testing.assert_array_equal(cartpole.action_high, [1.0])
    assert "CartpoleSwingup" in PLAYGROUND_ENVS and "CheetahRun" in PLAYGROUND_ENVS


def test_playground_shapes_and_dtypes(rollout):
    first_obs, timesteps, _ = rollout
    assert first_obs.shape == (NUM_ENVS, 5)
    assert isinstance(timesteps, Timestep)
    assert timesteps.obs.shape == timesteps.final_obs.shape == (NUM_STEPS, NUM_ENVS, 5)
    assert timesteps.obs.dtype == timesteps.final_obs.dtype == timesteps.reward.dtype == np.float32
    assert timesteps.terminated.dtype == timesteps.truncated.dtype == np.bool_
    assert all(np.isfinite(leaf).all() for leaf in timesteps)


def test_playground_truncates_at_episode_length(rollout):
    _, timesteps, steps = rollout
    healthy = [i for i in range(NUM_ENVS) if i != DIVERGED]
    expected = np.zeros(NUM_STEPS, bool)
    expected[EPISODE_LENGTH - 1 :: EPISODE_LENGTH] = True  # steps 4 and 9
    for i in healthy:
        np.testing.assert_array_equal(timesteps.truncated[:, i], expected)
        np.testing.assert_array_equal(steps[:, i], (np.arange(NUM_STEPS) + 1) % EPISODE_LENGTH)
    assert not timesteps.terminated[:, healthy].any()


def test_playground_auto_resets_to_first_state_and_keeps_final_obs(rollout):
    first_obs, timesteps, _ = rollout
    done = timesteps.terminated | timesteps.truncated
    for t, i in zip(*np.nonzero(done), strict=True):
        # Brax/FPO behaviour: each env restarts from the first state `reset` drew for it.
        np.testing.assert_array_equal(timesteps.obs[t, i], first_obs[i])
        assert not np.allclose(timesteps.final_obs[t, i], timesteps.obs[t, i])
    np.testing.assert_array_equal(timesteps.final_obs[~done], timesteps.obs[~done])


def test_playground_diverged_physics_terminates(rollout):
    _, timesteps, steps = rollout
    assert timesteps.terminated[0, DIVERGED] and not timesteps.truncated[0, DIVERGED]
    assert timesteps.reward[0, DIVERGED] == 0.0
    # Cart position and velocities went NaN and are reported as 0; the pole angle still comes from the
    # kinematics of the pre-step (finite) positions.
    np.testing.assert_array_equal(timesteps.final_obs[0, DIVERGED, [0, 3, 4]], 0.0)
    assert not timesteps.terminated[1:, DIVERGED].any()
    # Its step counter restarted with the new episode: truncations come one step later than the others.
    np.testing.assert_array_equal(np.nonzero(timesteps.truncated[:, DIVERGED])[0], [5, 10])
    assert steps[0, DIVERGED] == 0


@pytest.mark.parametrize("name", ["CartpoleSwingup", "CheetahRun"])
def test_playground_state_types_are_stable(name):
    # A jitted step hits its cache on a stepped state only if shapes, dtypes and weak types are unchanged.
    # CheetahRun's raw reset has a weak-typed leaf (data.time); `reset` must hide it. Traced, not compiled.
    env = PlaygroundEnv.make(name, 2, action_repeat=2)
    state, _ = jax.eval_shape(env.reset, jax.random.key(0))
    next_state, _ = jax.eval_shape(env.step, state, jnp.zeros((2, env.act_dim)))
    assert jax.tree.structure(state) == jax.tree.structure(next_state)
    for before, after in zip(jax.tree.leaves(state), jax.tree.leaves(next_state), strict=True):
        assert (before.shape, before.dtype, before.weak_type) == (after.shape, after.dtype, after.weak_type)
        assert not before.weak_type


def test_playground_rejects_unknown_names():
    with pytest.raises(ValueError, match="CartpoleSwingup"):
        PlaygroundEnv.make("Cartpole", 2)


# ---- Gymnasium ---------------------------------------------------------------------------------------

GYM_ID = "InvertedPendulum-v5"  # random actions topple the pole within a few steps


def _random_actions(env: GymnasiumEnv, num_steps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(env.action_low, env.action_high, (num_steps, env.num_envs, env.act_dim))


def _reference_run(actions: np.ndarray, seed: int, **make_kwargs) -> list[dict[str, np.ndarray]]:
    """The same episodes with independent single envs, reset by hand; what the adapter must report."""
    envs = [gym.make(GYM_ID, **make_kwargs) for _ in range(actions.shape[1])]
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
    records = []
    for step_actions in actions:
        record = {key: [] for key in ("obs", "reward", "terminated", "truncated", "final_obs")}
        for env, action in zip(envs, step_actions, strict=True):
            obs, reward, terminated, truncated, _ = env.step(action)
            record["final_obs"].append(obs)
            if terminated or truncated:
                obs, _ = env.reset()
            record["obs"].append(obs)
            record["reward"].append(reward)
            record["terminated"].append(terminated)
            record["truncated"].append(truncated and not terminated)
        records.append({key: np.asarray(value) for key, value in record.items()})
    for env in envs:
        env.close()
    return records


@pytest.mark.parametrize("vectorization_mode", ["sync", "async"])
def test_gymnasium_matches_single_env_reference(vectorization_mode):
    seed, num_steps, limit = 3, 30, 8
    env = GymnasiumEnv.make(GYM_ID, 4, vectorization_mode=vectorization_mode, max_episode_steps=limit)
    actions = _random_actions(env, num_steps, seed)
    obs = env.reset(seed=seed)
    assert obs.shape == (4, env.obs_dim) and obs.dtype == np.float32
    timesteps = [env.step(a) for a in actions]
    env.close()

    for timestep, expected in zip(
        timesteps, _reference_run(actions, seed, max_episode_steps=limit), strict=True
    ):
        for field in Timestep._fields:
            np.testing.assert_allclose(getattr(timestep, field), expected[field], rtol=1e-6, err_msg=field)
    terminated = np.stack([t.terminated for t in timesteps])
    truncated = np.stack([t.truncated for t in timesteps])
    assert terminated.any() and truncated.any(), "the seed should show both kinds of episode end"
    done = terminated | truncated
    obs, final_obs = np.stack([t.obs for t in timesteps]), np.stack([t.final_obs for t in timesteps])
    for t, i in zip(*np.nonzero(done), strict=True):
        assert not np.allclose(final_obs[t, i], obs[t, i])
    np.testing.assert_array_equal(final_obs[~done], obs[~done])


def test_gymnasium_terminated_and_truncated_counts_as_terminated():
    push = np.full((1, 1), 3.0)  # a constant full push topples the pole deterministically
    probe = gym.make(GYM_ID)
    probe.reset(seed=0)
    termination_step = next(k for k in range(1, 100) if probe.step(push[0])[2])
    probe.close()
    raw = gym.make(GYM_ID, max_episode_steps=termination_step)
    raw.reset(seed=0)
    for _ in range(termination_step):
        _, _, terminated, truncated, _ = raw.step(push[0])
    raw.close()
    assert terminated and truncated, "Gymnasium reports both flags at this step"

    env = GymnasiumEnv.make(GYM_ID, 1, max_episode_steps=termination_step)
    env.reset(seed=0)
    timesteps = [env.step(push) for _ in range(termination_step)]
    env.close()
    last = timesteps[-1]
    assert last.terminated[0] and not last.truncated[0]
    assert not any(t.terminated[0] or t.truncated[0] for t in timesteps[:-1])


def test_gymnasium_properties():
    env = GymnasiumEnv.make(GYM_ID, 2)
    assert (env.num_envs, env.obs_dim, env.act_dim) == (2, 4, 1)
    np.testing.assert_array_equal(env.action_low, [-3.0])
    np.testing.assert_array_equal(env.action_high, [3.0])
    env.close()


# ---- make_env ----------------------------------------------------------------------------------------


def test_make_env_dispatch():
    env = make_env(GYM_ID, 2)
    assert isinstance(env, GymnasiumEnv)
    env.close()
    assert isinstance(make_env("CartpoleSwingup", 2), PlaygroundEnv)
    with pytest.raises(ValueError, match="not a Playground task"):
        make_env("NoSuchTask", 2)


def test_playground_imports_without_torch_or_warp_and_leaves_them_importable():
    """Playground would import torch and NVIDIA Warp (~3 s of a 2-core start) for backends never used here;
    they stay unloaded, MJX knows Warp is unavailable, and the process can still import torch itself."""
    script = (
        "import sys; import trainers._core.envs.playground_env\n"
        "assert not {'torch', 'warp'} & set(sys.modules), sorted({'torch', 'warp'} & set(sys.modules))\n"
        "from mujoco.mjx import warp; assert not warp.WARP_INSTALLED\n"
        "import torch; torch.zeros(1)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == ""  # MJX's notice about the missing Warp is not printed


def test_evaluation_envs_share_the_training_envs_loaded_task():
    train = PlaygroundEnv.make("tests.jax_point_mass:PointMass", 8, episode_length=20, action_repeat=2)
    small = train.with_num_envs(3)
    assert small.env is train.env and small.num_envs == 3
    assert (small.episode_length, small.action_repeat) == (20, 2)
    _, obs = small.reset(jax.random.key(0))
    assert obs.shape == (3, train.obs_dim)
