"""Pins for the policy maths that the other tests leave loose: each constant and each operand of the
normalizer, the schedules, the sampler and the step densities in its own closed-form check, on functions
with no network (fast, and a planted single-point bug changes the number)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy._normalizer import RunningNorm
from gsbpolicy._schedules import ConstantSigma, ExponentialSigma, LinearSigma, make_schedule, time_grid
from gsbpolicy._sde import (
    final_action_ode,
    final_action_sde,
    gaussian_log_prob,
    path_log_probs_and_drifts,
    prior_log_prob,
    sample_ode,
    sample_sde,
)

pytestmark = pytest.mark.strict_promotion


# ---------------------------------------------------------------------------------------- normalizer
def test_fresh_normalizer_is_the_identity_with_count_zero():
    norm = RunningNorm.init(3)
    assert (norm.clip, norm.eps) == (10.0, 1e-8)
    np.testing.assert_array_equal(norm.mean, 0.0)
    np.testing.assert_array_equal(norm.var, 1.0)
    assert float(norm.count) == 0.0
    x = jnp.array([0.5, -3.0, 9.0])
    np.testing.assert_allclose(norm(x), x, rtol=1e-7)


def test_init_keeps_the_clip_and_epsilon_it_is_given():
    norm = RunningNorm.init(2, clip=3.0, eps=1e-4)
    assert (norm.clip, norm.eps) == (3.0, 1e-4)
    np.testing.assert_allclose(norm(jnp.array([0.0, 5.0])), [0.0, 3.0])


def test_epsilon_is_added_to_the_variance_inside_the_square_root():
    # var 0: (x - mean) / sqrt(1e-8) = 1e-5 / 1e-4 = 0.1, finite; var 1e-8: 1e-4 / sqrt(2e-8), not
    # 1e-4 / (sqrt(1e-8) + 1e-8).
    norm = RunningNorm(jnp.zeros(2), jnp.array([0.0, 1e-8]), jnp.array(5.0))
    np.testing.assert_allclose(norm(jnp.array([1e-5, 1e-4])), [0.1, 1 / math.sqrt(2)], rtol=1e-5)


def test_clip_is_symmetric_at_its_own_constant():
    norm = RunningNorm(jnp.zeros(2), jnp.ones(2), jnp.array(1.0), clip=3.0)
    np.testing.assert_allclose(norm(jnp.array([2.5, -2.5])), [2.5, -2.5], rtol=1e-6)
    np.testing.assert_allclose(norm(jnp.array([7.0, -7.0])), [3.0, -3.0])


def test_first_update_adopts_the_batch_statistics_over_every_leading_axis():
    batch = np.random.default_rng(0).normal(3.0, 2.0, (4, 5, 2)).astype(np.float32)  # [S, T, dim]
    norm = RunningNorm.init(2).update(jnp.asarray(batch))
    flat = batch.reshape(-1, 2).astype(np.float64)
    np.testing.assert_allclose(norm.mean, flat.mean(0), rtol=1e-5)
    np.testing.assert_allclose(norm.var, flat.var(0), rtol=1e-4)  # population variance (ddof 0)
    assert float(norm.count) == 20.0
    assert (norm.clip, norm.eps) == (10.0, 1e-8)


def test_merge_weights_the_old_statistics_by_their_count():
    # Old: 10 samples, mean 0, var 1. New: 30 samples all equal to 2 (var 0). Chan et al.:
    # mean = 2 * 30/40 = 1.5; M2 = 1 * 10 + 0 + 2^2 * 10 * 30 / 40 = 40; var = 40 / 40 = 1.
    old = RunningNorm(jnp.zeros(1), jnp.ones(1), jnp.array(10.0), clip=7.0, eps=1e-6)
    new = old.update(jnp.full((30, 1), 2.0))
    np.testing.assert_allclose(new.mean, [1.5], rtol=1e-6)
    np.testing.assert_allclose(new.var, [1.0], rtol=1e-6)
    assert float(new.count) == 40.0
    assert (new.clip, new.eps) == (7.0, 1e-6)  # the static settings travel with the statistics


def test_update_keeps_the_statistics_dtype_whatever_the_batch_dtype():
    # The statistics are part of the training state (a scan carry and a checkpoint): their dtype must not
    # follow the batch's.
    half = RunningNorm(jnp.zeros(2, jnp.float16), jnp.ones(2, jnp.float16), jnp.zeros((), jnp.float16))
    new = half.update(jnp.array([[1.0, 2.0], [3.0, 4.0]], jnp.float32))
    assert new.mean.dtype == new.var.dtype == new.count.dtype == jnp.float16
    np.testing.assert_allclose(new.mean, [2.0, 3.0])


# ---------------------------------------------------------------------------------------- schedules
@pytest.mark.parametrize(
    "name, cls, expected",
    [
        ("constant", ConstantSigma, [2.0, 2.0, 2.0]),
        ("linear", LinearSigma, [2.0, 1.25, 0.5]),
        ("exponential", ExponentialSigma, [2.0, 1.0, 0.5]),
    ],
)
def test_make_schedule_builds_the_named_schedule_with_max_at_t0_and_min_at_t1(name, cls, expected):
    schedule = make_schedule(name, 2.0, 0.5)
    assert type(schedule) is cls and schedule.sigma_max == 2.0
    np.testing.assert_allclose(schedule(jnp.array([0.0, 0.5, 1.0])), expected, rtol=1e-6)


def test_time_grid_is_float32_from_zero_to_one_even_with_x64():
    grid = time_grid(5)
    assert grid.dtype == jnp.float32 and grid.shape == (6,)
    with jax.enable_x64(True):
        assert time_grid(5).dtype == jnp.float32
    np.testing.assert_allclose(grid, np.arange(6) / 5, rtol=1e-7)


# ---------------------------------------------------------------------------------------- sampler
SCHEDULE = LinearSigma(1.5, 0.5)
STEPS = 4


def drift(a, t):
    """A closed-form drift that depends on both a and t (no network)."""
    return -0.7 * a + t


def numpy_sde(noise, clip=False, sigma=True):
    """Eq. 7 in float64: a^(n+1) = a^(n) + dt f(a^(n), t_n) + sigma(t_n) sqrt(dt) eps_n."""
    dt = 1.0 / STEPS
    path, log_probs, drifts = [noise[0]], [], []
    for n in range(STEPS):
        t = n * dt
        a = path[-1]
        f = -0.7 * a + t
        mean = a + dt * f
        std = (1.5 + t * (0.5 - 1.5)) * math.sqrt(dt)
        a_next = mean + (std * noise[n + 1] if sigma else 0.0)
        a_next = np.clip(a_next, -1, 1) if clip else a_next
        z = (a_next - mean) / std
        log_probs.append(-0.5 * np.sum(z**2) - a.size * (math.log(std) + 0.5 * math.log(2 * math.pi)))
        drifts.append(f)
        path.append(a_next)
    return np.stack(path), np.array(log_probs), np.stack(drifts)


@pytest.fixture(scope="module")
def noise():
    return np.random.default_rng(1).normal(size=(STEPS + 1, 3)).astype(np.float32) * 1.5


def test_gaussian_log_prob_and_prior_closed_forms():
    x, mean = jnp.array([1.0, -2.0]), jnp.array([0.5, 0.0])
    std = jnp.float32(0.5)
    expected = -0.5 * (1.0 + 16.0) - 2 * (math.log(0.5) + 0.5 * math.log(2 * math.pi))
    assert float(gaussian_log_prob(x, mean, std)) == pytest.approx(expected, rel=1e-6)
    assert float(prior_log_prob(x)) == pytest.approx(-0.5 * 5.0 - math.log(2 * math.pi), rel=1e-6)


def test_sample_sde_path_log_probs_and_drifts_are_eq_7_and_8(noise):
    path, log_probs, drifts = numpy_sde(noise.astype(np.float64))
    assert np.abs(path[1:]).max() > 1  # the default is no clip, and it shows
    sample = sample_sde(drift, SCHEDULE, STEPS, jnp.asarray(noise))
    np.testing.assert_allclose(sample.path, path, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sample.log_probs, log_probs, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(sample.drifts, drifts, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(
        final_action_sde(drift, SCHEDULE, STEPS, jnp.asarray(noise)), sample.path[-1]
    )
    # Recomputed on the stored path, the densities and drifts are the sampled ones.
    recomputed, re_drifts = path_log_probs_and_drifts(drift, SCHEDULE, sample.path)
    np.testing.assert_allclose(recomputed, sample.log_probs, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(re_drifts, sample.drifts, rtol=1e-6, atol=1e-6)


def test_recomputed_densities_use_each_steps_own_time_and_sigma(noise):
    # A path that was not sampled from this drift: every step's density must still use t_n and sigma(t_n).
    path = jnp.asarray(noise)
    log_probs, drifts = path_log_probs_and_drifts(drift, SCHEDULE, path)
    dt = 1.0 / STEPS
    for n in range(STEPS):
        t = n * dt
        f = -0.7 * noise[n].astype(np.float64) + t
        std = (1.5 - t) * math.sqrt(dt)
        z = (noise[n + 1] - noise[n] - dt * f) / std
        expected = -0.5 * np.sum(z**2) - 3 * (math.log(std) + 0.5 * math.log(2 * math.pi))
        assert float(log_probs[n]) == pytest.approx(expected, rel=1e-5)
        np.testing.assert_allclose(drifts[n], f, rtol=1e-5, atol=1e-6)


def test_clipped_sampler_clips_every_iterate_not_the_start(noise):
    big = jnp.asarray(noise) * 3
    path, _, _ = numpy_sde(np.asarray(big, np.float64), clip=True)
    sample = sample_sde(drift, SCHEDULE, STEPS, big, clip=True)
    np.testing.assert_allclose(sample.path, path, rtol=1e-5, atol=1e-5)
    assert np.abs(np.asarray(sample.path[0])).max() > 1  # a^(0) is the noise itself
    np.testing.assert_array_equal(final_action_sde(drift, SCHEDULE, STEPS, big, clip=True), sample.path[-1])


@pytest.mark.parametrize("clip", [False, True])
def test_ode_is_the_noise_free_euler_chain_from_a0(noise, clip):
    a0 = jnp.asarray(noise[0]) * 2
    expected, _, _ = numpy_sde(
        np.concatenate([np.asarray(a0, np.float64)[None], noise[1:]]), clip, sigma=False
    )
    assert np.abs(expected).max() > 1  # so that clipping, or not, shows
    options = {"clip": True} if clip else {}  # and not clipping is the default
    path = sample_ode(drift, STEPS, a0, **options)
    np.testing.assert_allclose(path, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(final_action_ode(drift, STEPS, a0, **options), path[-1])


def test_samplers_batch_under_vmap(noise):
    batch = jnp.stack([jnp.asarray(noise), -jnp.asarray(noise)])
    paths = jax.vmap(lambda n: sample_sde(drift, SCHEDULE, STEPS, n).path)(batch)
    np.testing.assert_allclose(paths[1], numpy_sde(-noise.astype(np.float64))[0], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------- GAE
def test_gae_keeps_the_dtype_of_its_inputs():
    # Half-precision rollouts stay half precision: the episode mask takes the values' dtype, not the default
    # float (which would also break the scan, whose carry is in the values' dtype).
    from trainers._core.gae import compute_gae

    rewards, values = jnp.ones((3, 2), jnp.float16), jnp.full((3, 2), 0.5, jnp.float16)
    done = jnp.zeros((3, 2), bool)
    advantages, returns = compute_gae(rewards, values, values, done, done.at[1].set(True), 0.9, 0.8)
    assert advantages.dtype == returns.dtype == jnp.float16
    np.testing.assert_allclose(advantages[1], 1 + 0.9 * 0.5 - 0.5, rtol=1e-3)


def test_gae_of_a_one_step_rollout_is_the_td_error():
    from trainers._core.gae import compute_gae

    rewards, values, next_values = jnp.array([[1.0, 2.0]]), jnp.array([[0.5, 0.1]]), jnp.array([[2.0, 3.0]])
    terminated = jnp.array([[False, True]])
    advantages, returns = compute_gae(rewards, values, next_values, terminated, ~terminated, 0.9, 0.8)
    np.testing.assert_allclose(advantages, [[1.0 + 0.9 * 2.0 - 0.5, 2.0 - 0.1]], rtol=1e-6)
    np.testing.assert_allclose(returns, [[1.0 + 0.9 * 2.0, 2.0]], rtol=1e-6)
