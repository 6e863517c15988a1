"""The SDE maths: step log-densities, samplers, schedules and the path-KL drift cost (paper eqs. 7-8, 15)."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy import PolicySpec, make_policy
from gsbpolicy._policy import sample_noise
from gsbpolicy._schedules import ConstantSigma, ExponentialSigma, LinearSigma, time_grid

pytestmark = pytest.mark.strict_promotion


def numpy_gaussian_log_prob(x, mean, std):
    x, mean = np.asarray(x, np.float64), np.asarray(mean, np.float64)
    var = np.float64(std) ** 2
    return float(np.sum(-0.5 * (x - mean) ** 2 / var - 0.5 * np.log(2 * np.pi * var)))


def test_time_grid_is_uniform():
    np.testing.assert_allclose(time_grid(4), [0.0, 0.25, 0.5, 0.75, 1.0])


@pytest.mark.parametrize(
    "schedule, expected",
    [
        (ConstantSigma(0.7), [0.7, 0.7, 0.7]),
        (LinearSigma(3.0, 0.3), [3.0, 1.65, 0.3]),
        (ExponentialSigma(3.0, 1.0), [3.0, 3.0 * (1 / 3) ** 0.5, 1.0]),
    ],
)
def test_schedules_run_from_sigma_max_to_sigma_min(schedule, expected):
    np.testing.assert_allclose(schedule(jnp.array([0.0, 0.5, 1.0])), expected, rtol=1e-6)


def test_step_log_density_matches_numpy(tiny_policy, getkey):
    spec = tiny_policy.spec
    obs = jax.random.normal(getkey(), (spec.obs_dim,))
    sample = tiny_policy.sample(obs, sample_noise(getkey(), spec))
    dt = 1.0 / spec.num_steps
    sigmas = np.asarray(tiny_policy.sigmas())
    for n in range(spec.num_steps):
        a, a_next = sample.path[n], sample.path[n + 1]
        f = tiny_policy.drift(obs, a, jnp.float32(n * dt))
        expected = numpy_gaussian_log_prob(a_next, a + dt * f, sigmas[n] * np.sqrt(dt))
        assert float(sample.log_probs[n]) == pytest.approx(expected, rel=1e-5, abs=1e-4)
        np.testing.assert_allclose(sample.drifts[n], f, rtol=1e-6, atol=1e-6)


def test_recorded_log_probs_equal_recomputed_so_ratio_is_one(tiny_policy, getkey):
    spec = tiny_policy.spec
    obs = jax.random.normal(getkey(), (32, spec.obs_dim))
    sample = jax.vmap(tiny_policy.sample)(obs, sample_noise(getkey(), spec, (32,)))
    log_probs, drifts = jax.vmap(tiny_policy.log_probs_and_drifts)(obs, sample.path)
    np.testing.assert_allclose(log_probs, sample.log_probs, atol=2e-5)
    np.testing.assert_allclose(drifts, sample.drifts, atol=1e-6)
    path_ratio = jnp.exp(jnp.sum(log_probs - sample.log_probs, axis=-1))
    np.testing.assert_allclose(path_ratio, 1.0, atol=1e-4)


def test_log_prob_includes_prior(tiny_policy, getkey):
    spec = tiny_policy.spec
    obs = jnp.zeros(spec.obs_dim)
    sample = tiny_policy.sample(obs, sample_noise(getkey(), spec))
    prior = numpy_gaussian_log_prob(sample.path[0], np.zeros(spec.act_dim), 1.0)
    total = tiny_policy.log_prob(obs, sample.path)
    assert float(total) == pytest.approx(prior + float(jnp.sum(sample.log_probs)), rel=1e-5)


def test_sde_with_vanishing_sigma_equals_ode(tiny_spec, getkey):
    spec = PolicySpec(**{**tiny_spec.to_dict(), "sigma_schedule": "constant", "sigma_max": 1e-12})
    policy = make_policy(spec, key=getkey())
    obs = jax.random.normal(getkey(), (spec.obs_dim,))
    noise = sample_noise(getkey(), spec).at[0].set(0.0)
    np.testing.assert_allclose(policy.sample(obs, noise).path, policy.sample_ode(obs), atol=1e-9)
    # ODE from a sampled a^(0) follows the same drift from there.
    noise = sample_noise(getkey(), spec)
    np.testing.assert_allclose(policy.sample(obs, noise).path, policy.sample_ode(obs, noise[0]), atol=1e-9)


def test_every_sampler_clips_its_iterates_when_the_spec_asks(tiny_spec, getkey):
    """`clip_iterates` (FlowRL's clip_sampler): the ODE path, the noise-free SDE path, their final actions
    and `act` all keep a^(1..N) in [-1, 1]; a drift this large would leave it on the first step."""
    spec = PolicySpec(**{**tiny_spec.to_dict(), "sigma_schedule": "constant", "sigma_max": 0.0, "sigma_min": 0.0,
                         "clip_iterates": True, "output_scale": 50.0})  # fmt: skip
    policy = make_policy(spec, key=getkey())
    obs = jax.random.normal(getkey(), (spec.obs_dim,))
    unclipped = make_policy(dataclasses.replace(spec, clip_iterates=False), key=getkey())
    unclipped = eqx.tree_at(lambda p: p.drift_net, unclipped, policy.drift_net)
    assert float(jnp.max(jnp.abs(unclipped.sample_ode(obs)[1:]))) > 1.5  # the clip binds
    path = policy.sample_ode(obs)
    assert float(jnp.max(jnp.abs(path[1:]))) == 1.0
    noise = sample_noise(getkey(), spec).at[0].set(0.0)
    np.testing.assert_allclose(policy.sample(obs, noise).path, path, atol=1e-6)
    np.testing.assert_allclose(policy.sample_final(obs, noise), path[-1], atol=1e-6)
    np.testing.assert_allclose(policy.act(obs), policy.to_env(path[-1]), atol=1e-6)


def test_act_is_the_squashed_end_of_the_paths(tiny_policy, getkey):
    obs = jax.random.normal(getkey(), (tiny_policy.spec.obs_dim,))
    noise = sample_noise(getkey(), tiny_policy.spec)
    np.testing.assert_allclose(
        tiny_policy.act(obs), tiny_policy.to_env(tiny_policy.sample_ode(obs)[-1]), atol=1e-6
    )
    expected = tiny_policy.to_env(tiny_policy.sample(obs, noise).path[-1])
    np.testing.assert_allclose(tiny_policy.act_stochastic(obs, noise), expected, atol=1e-6)


def test_ode_is_deterministic_and_starts_at_zero(tiny_policy):
    obs = jnp.ones(tiny_policy.spec.obs_dim)
    path = tiny_policy.sample_ode(obs)
    assert path.shape == (tiny_policy.spec.num_steps + 1, tiny_policy.spec.act_dim)
    np.testing.assert_array_equal(path[0], 0.0)
    np.testing.assert_array_equal(path, tiny_policy.sample_ode(obs))


def test_actions_are_squashed_into_bounds(tiny_spec, getkey):
    low, high = np.array(tiny_spec.action_low), np.array(tiny_spec.action_high)
    big = jnp.array([50.0, -50.0])
    for squash in ("tanh", "clip"):
        policy = make_policy(PolicySpec(**{**tiny_spec.to_dict(), "squash": squash}), key=getkey())
        np.testing.assert_allclose(policy.to_env(big), [high[0], low[1]], rtol=1e-6)
        np.testing.assert_allclose(policy.to_env(jnp.zeros(2)), (low + high) / 2, rtol=1e-6)
    # `none` neither squashes nor rescales; bounds, when the spec has them, still hold (a plain clip).
    inside = jnp.array([0.5, -1.5])
    policy = make_policy(PolicySpec(**{**tiny_spec.to_dict(), "squash": "none"}), key=getkey())
    np.testing.assert_array_equal(policy.to_env(big), [high[0], low[1]])
    np.testing.assert_array_equal(policy.to_env(inside), inside)
    unbounded = {**tiny_spec.to_dict(), "squash": "none", "action_low": None, "action_high": None}
    np.testing.assert_array_equal(make_policy(PolicySpec(**unbounded), key=getkey()).to_env(big), big)


@pytest.mark.parametrize("squash", ["tanh", "clip"])
def test_rescaled_actions_never_round_past_a_bound(tiny_spec, getkey, squash):
    # In float32, low + (high - low) is 0.00297 + 1 ulp here: a saturated squash would leave the bounds.
    low, high = np.float32(-53.695324), np.float32(0.00297038)
    assert low + (high - low) > high
    changes = {"act_dim": 1, "squash": squash, "action_low": (float(low),), "action_high": (float(high),)}
    policy = make_policy(PolicySpec(**{**tiny_spec.to_dict(), **changes}), key=getkey())
    assert policy.to_env(jnp.array([50.0]))[0] == high


def test_drift_cost_matches_monte_carlo_path_kl(getkey):
    """Eq. 15 (discretised Girsanov) equals E_{P_a}[log P_a - log P_b] for a shared sigma schedule."""
    spec = PolicySpec(
        obs_dim=3,
        act_dim=2,
        num_steps=8,
        width=16,
        depth=1,
        output_scale=1.0,
        sigma_schedule="linear",
        sigma_max=1.0,
        sigma_min=0.5,
        action_low=(-1, -1),
        action_high=(1, 1),
    )
    policy_a = make_policy(spec, key=getkey())
    policy_b = make_policy(spec, key=getkey())
    num_paths = 20_000
    obs = jnp.tile(jnp.array([0.3, -1.0, 0.5]), (num_paths, 1))
    sample = jax.vmap(policy_a.sample)(obs, sample_noise(getkey(), spec, (num_paths,)))
    log_p_a = jax.vmap(policy_a.log_prob)(obs, sample.path)
    log_p_b = jax.vmap(policy_b.log_prob)(obs, sample.path)
    _, drifts_b = jax.vmap(policy_b.log_probs_and_drifts)(obs, sample.path)
    dt = 1.0 / spec.num_steps
    sigmas = policy_a.sigmas()[None, :]
    cost = jnp.sum(dt / (2 * sigmas**2) * jnp.sum((sample.drifts - drifts_b) ** 2, axis=-1), axis=-1)
    log_ratio = np.asarray(log_p_a - log_p_b, np.float64)
    cost = np.asarray(cost, np.float64)
    assert cost.mean() > 0.05  # the two policies really differ
    stderr = np.std(log_ratio - cost) / np.sqrt(num_paths)
    assert abs(log_ratio.mean() - cost.mean()) < 4 * stderr + 1e-4
