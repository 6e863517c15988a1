"""GSBPolicy as users call it: predict/act contract, input validation, determinism, evaluation."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from gsbpolicy import GSBPolicy, PolicySpec, evaluate, make_policy

pytestmark = pytest.mark.strict_promotion


@pytest.fixture(scope="module")
def policy(tiny_policy):
    return GSBPolicy(tiny_policy)


@pytest.fixture(scope="module")
def pendulum_policy():
    import jax

    spec = PolicySpec(
        obs_dim=3, act_dim=1, num_steps=4, width=16, depth=1, action_low=(-2,), action_high=(2,)
    )
    return GSBPolicy(make_policy(spec, key=jax.random.key(0)))


def test_predict_single_and_batch_shapes_and_bounds(policy):
    spec = policy.spec
    rng = np.random.default_rng(0)
    single, state = policy.predict(rng.normal(size=spec.obs_dim) * 100, state="s")
    assert single.shape == (spec.act_dim,) and state == "s"
    batch, _ = policy.predict(rng.normal(size=(7, spec.obs_dim)) * 100, deterministic=False)
    assert batch.shape == (7, spec.act_dim) and batch.dtype == np.float32
    assert policy.action_space.contains(single)
    assert all(policy.action_space.contains(a) for a in batch)


@pytest.mark.parametrize("squash", ["tanh", "clip", "none"])
def test_to_env_squashes_then_rescales_to_the_bounds(tiny_spec, squash):
    """a^(N) -> env action for each squash: tanh or clip to [-1, 1] then the affine map onto [low, high];
    `none` keeps a^(N) and only clips it to the bounds."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    policy = make_policy(dataclasses.replace(tiny_spec, squash=squash), key=jax.random.key(0))
    a = np.array([[0.5, -0.5], [3.0, -3.0], [-0.2, 4.0]], np.float32)
    low, high = np.array(tiny_spec.action_low), np.array(tiny_spec.action_high)
    unit = {"tanh": np.tanh(a), "clip": np.clip(a, -1.0, 1.0)}.get(squash)
    expected = np.clip(a, low, high) if unit is None else low + 0.5 * (unit + 1.0) * (high - low)
    np.testing.assert_allclose(jax.vmap(policy.to_env)(jnp.asarray(a)), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_to_env_keeps_the_dtype_of_the_action_it_is_given(tiny_policy, dtype):
    """The bounds are cast to the action's dtype, so a half-precision a^(N) gives a half-precision env action
    (the same action as in float32, to that precision) instead of being promoted to float32."""
    import jax.numpy as jnp

    action = jnp.asarray([3.0, -3.0], dtype)
    env_action = tiny_policy.to_env(action)
    assert env_action.dtype == jnp.dtype(dtype)
    expected = tiny_policy.to_env(action.astype(jnp.float32))
    np.testing.assert_allclose(np.asarray(env_action, np.float32), expected, rtol=2e-2, atol=2e-2)


def test_predict_matches_act_and_module(policy):
    obs = np.random.default_rng(1).normal(size=(5, policy.spec.obs_dim)).astype(np.float32)
    action, _ = policy.predict(obs)
    np.testing.assert_array_equal(action, policy.act(obs))
    np.testing.assert_allclose(action[2], policy.policy.act(obs[2]), atol=1e-6)


def test_stochastic_predict_uses_seeded_noise(policy):
    obs = np.zeros((4, policy.spec.obs_dim), np.float32)
    policy.set_seed(3)
    first, _ = policy.predict(obs, deterministic=False)
    policy.set_seed(3)
    again, _ = policy.predict(obs, deterministic=False)
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first[0], first[1])


def test_deterministic_predict_is_bitwise_repeatable_across_processes(tmp_path, policy):
    policy.save_pretrained(tmp_path)
    obs = np.random.default_rng(5).normal(size=(3, policy.spec.obs_dim)).astype(np.float32)
    np.save(tmp_path / "obs.npy", obs)
    script = (
        "import sys, numpy as np; from gsbpolicy import GSBPolicy; "
        f"p = GSBPolicy.from_pretrained({str(tmp_path)!r}); "
        f"sys.stdout.write(p.predict(np.load({str(tmp_path / 'obs.npy')!r}))[0].tobytes().hex())"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    outputs.add(policy.predict(obs)[0].tobytes().hex())
    outputs.add(policy.predict(obs)[0].tobytes().hex())
    assert len(outputs) == 1


def test_evaluate_single_env_reports_episodes(pendulum_policy):
    result = evaluate(pendulum_policy, "Pendulum-v1", n_episodes=3, seed=1)
    assert result.n_episodes == 3 and result.lengths == (200, 200, 200)
    assert result.mean == pytest.approx(np.mean(result.returns))
    assert result.std == pytest.approx(np.std(result.returns))  # population std
    again = evaluate(pendulum_policy, "Pendulum-v1", n_episodes=3, seed=1)
    assert again.returns == result.returns


def test_evaluate_vector_env_counts_each_episode_once():
    """InvertedPendulum episodes end at different times, so NEXT_STEP resets must not be counted."""
    import jax

    spec = PolicySpec(obs_dim=4, act_dim=1, num_steps=2, width=8, depth=1, action_low=(-3,), action_high=(3,))
    policy = GSBPolicy(make_policy(spec, key=jax.random.key(1)))
    env = gym.make_vec("InvertedPendulum-v5", num_envs=3)
    result = evaluate(policy, env, n_episodes=7, deterministic=False, seed=0)
    env.close()
    assert result.n_episodes == 7
    singles = evaluate(policy, "InvertedPendulum-v5", n_episodes=3, deterministic=False, seed=0)
    # InvertedPendulum-v5 pays +1 per step except the terminating one, so return == length - 1 exactly;
    # a counted NEXT_STEP reset step would add a step without reward.
    assert result.returns == tuple(float(x - 1) for x in result.lengths)
    assert singles.returns == tuple(float(x - 1) for x in singles.lengths)


def test_sb3_evaluate_policy_scores_gsbpolicy_unchanged(pendulum_policy):
    common = pytest.importorskip("stable_baselines3.common")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    venv = make_vec_env("Pendulum-v1", n_envs=2, seed=4)
    returns, lengths = evaluate_policy(
        pendulum_policy, venv, n_eval_episodes=4, return_episode_rewards=True, warn=False
    )
    assert common is not None and len(returns) == 4
    ours = evaluate(pendulum_policy, gym.make_vec("Pendulum-v1", num_envs=2), n_episodes=4, seed=4)
    np.testing.assert_allclose(sorted(returns), sorted(ours.returns), rtol=1e-5)
    assert sorted(lengths) == sorted(ours.lengths)


@pytest.mark.parametrize("parameterization", ["velocity", "ddpm"])
def test_make_policy_builds_each_part_from_its_own_spec_fields(parameterization):
    """Every architecture field reaches the part it configures (none left at a default that happens to match)."""
    import jax

    from gsbpolicy._ddpm import DDPMSigma
    from gsbpolicy._networks import ACTIVATIONS, FourierEmbedding
    from gsbpolicy._schedules import LinearSigma

    spec = PolicySpec(obs_dim=3, act_dim=2, num_steps=5, width=12, depth=3, activation="tanh",
                      time_embedding="fourier", time_embed_dim=6, output_scale=0.7, sigma_schedule="linear",
                      sigma_max=1.5, sigma_min=0.2, obs_clip=4.0, obs_eps=1e-3, parameterization=parameterization,
                      action_low=(-1.0, -1.0), action_high=(1.0, 1.0), env_id="Tiny-v0")  # fmt: skip
    policy = make_policy(spec, key=jax.random.key(0))
    net = policy.drift_net
    assert isinstance(net.embedding, FourierEmbedding) and net.embedding.freqs.shape == (3,)
    assert (net.mlp.in_size, net.mlp.out_size, net.mlp.width_size, net.mlp.depth) == (3 + 2 + 6, 2, 12, 3)
    assert net.mlp.activation is ACTIVATIONS["tanh"] and net.output_scale == 0.7
    assert (policy.normalizer.mean.shape, policy.normalizer.clip, policy.normalizer.eps) == ((3,), 4.0, 1e-3)
    if parameterization == "ddpm":
        assert isinstance(policy.schedule, DDPMSigma)
        assert (policy.schedule.num_steps, policy.schedule.min_std) == (5, 0.2)
    else:
        assert isinstance(policy.schedule, LinearSigma)
        assert (policy.schedule.sigma_max, policy.schedule.sigma_min) == (1.5, 0.2)


@pytest.mark.parametrize(
    ("parameterization", "time_reversed"), [("velocity", False), ("velocity", True), ("ddpm", False)]
)
def test_the_drift_is_the_net_output_read_in_the_specs_time_and_parameterization(
    parameterization, time_reversed
):
    """The sampler's drift at (a, t): the network fed the normalised observation and t, or 1 - t for a
    time-reversed spec (the FPO reference's clock); a DDPM policy's network predicts noise, which
    `_ddpm.drift` turns into the drift of step t."""
    import jax
    import jax.numpy as jnp

    from gsbpolicy import _ddpm

    spec = PolicySpec(obs_dim=3, act_dim=2, num_steps=4, width=8, depth=1, time_reversed=time_reversed,
                      parameterization=parameterization, action_low=(-1.0, -1.0), action_high=(1.0, 1.0))  # fmt: skip
    policy = make_policy(spec, key=jax.random.key(0))
    obs, a = jnp.asarray([0.5, -1.0, 2.0]), jnp.asarray([0.3, -0.2])
    drift = policy._drift_fn(obs)
    for t in (0.0, 0.25, 0.75):
        output = policy.drift_net(policy.normalizer(obs), a, 1.0 - t if time_reversed else t)
        expected = _ddpm.drift(output, a, t, spec.num_steps) if parameterization == "ddpm" else output
        np.testing.assert_allclose(drift(a, jnp.float32(t)), expected, rtol=1e-6, atol=1e-7)
