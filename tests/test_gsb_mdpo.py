"""The GSB-MDPO actor loss (paper eqs. 17-20) against a hand computation, and its gradients."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy._policy import sample_noise
from trainers.gsb_mdpo import GsbMdpo, GsbMdpoArgs, PathExtras

ARGS = GsbMdpoArgs(kl_coef=0.5, ref_mix=0.1, step_clip=0.1, path_clip=0.3)

pytestmark = pytest.mark.strict_promotion


@pytest.fixture(scope="module")
def batch(tiny_policy):
    """Stored paths from the policy itself, with old log-densities and drifts shifted by known offsets."""
    spec = tiny_policy.spec
    obs = jax.random.normal(jax.random.key(0), (3, spec.obs_dim))
    sample = jax.vmap(tiny_policy.sample)(obs, sample_noise(jax.random.key(1), spec, (3,)))
    n = spec.num_steps
    # Row 0: every step inside the step clip and the path inside the path clip (no clipping);
    # row 1: some steps clipped; row 2: all steps clipped and the path clipped.
    offsets = np.zeros((3, n), np.float32)
    offsets[0] = 0.01 * np.arange(n) / n
    offsets[1, :2] = [0.5, -0.4]
    offsets[2] = -0.2
    old_log_probs = sample.log_probs - offsets  # Delta l = log p_theta - log p_k = offsets
    old_drifts = sample.drifts + 0.3 * jax.random.normal(jax.random.key(2), sample.drifts.shape)
    extras = PathExtras(sample.path, old_log_probs, old_drifts)
    advantages = jnp.array([1.0, -0.5, 2.0])
    return obs, extras, advantages, offsets


def hand_loss(policy, obs, extras, advantages, args):
    """Eqs. 17-20 written out with numpy, one path and one step at a time."""
    spec = policy.spec
    dt = 1.0 / spec.num_steps
    total = 0.0
    for i in range(obs.shape[0]):
        log_probs, drifts = (
            np.asarray(x, np.float64) for x in policy.log_probs_and_drifts(obs[i], extras.path[i])
        )
        clipped_sum = 0.0
        cost = 0.0
        for k in range(spec.num_steps):
            delta = log_probs[k] - float(extras.log_probs[i, k])
            clipped_sum += min(max(delta, -args.step_clip), args.step_clip)
            sigma = float(policy.schedule(jnp.float32(k * dt)))
            anchor = (1 - args.ref_mix) * np.asarray(extras.drifts[i, k], np.float64)
            cost += dt / (2 * sigma**2) * np.sum((drifts[k] - anchor) ** 2)
        ratio = np.exp(min(max(clipped_sum, -args.path_clip), args.path_clip))
        total += ratio * (float(advantages[i]) - args.kl_coef * cost)
    return -total / obs.shape[0]


def test_loss_matches_hand_computation_with_and_without_clipping(tiny_policy, batch):
    obs, extras, advantages, offsets = batch
    loss, metrics = GsbMdpo(ARGS).actor_loss(tiny_policy, obs, extras, advantages, jax.random.key(0))
    assert float(loss) == pytest.approx(hand_loss(tiny_policy, obs, extras, advantages, ARGS), rel=1e-4)
    expected_step_clip = np.mean(np.abs(offsets) > ARGS.step_clip)
    assert float(metrics["step_clip_frac"]) == pytest.approx(expected_step_clip, abs=1e-6)
    expected_sample_clip = np.mean(np.any(np.abs(offsets) > ARGS.step_clip, axis=-1))
    assert float(metrics["sample_clip_frac"]) == pytest.approx(expected_sample_clip, abs=1e-6)
    assert float(metrics["path_clip_frac"]) == pytest.approx(1 / 3, abs=1e-6)  # only row 2
    assert float(metrics["ratio_max"]) <= np.exp(ARGS.path_clip) + 1e-6


def test_ratio_is_one_and_cost_zero_at_the_old_policy(tiny_policy, batch):
    obs, extras, advantages, _ = batch
    log_probs, drifts = jax.vmap(tiny_policy.log_probs_and_drifts)(obs, extras.path)
    fresh = PathExtras(extras.path, log_probs, drifts)
    loss, metrics = GsbMdpo(GsbMdpoArgs(ref_mix=0.0)).actor_loss(
        tiny_policy, obs, fresh, advantages, jax.random.key(0)
    )
    assert float(metrics["ratio_mean"]) == pytest.approx(1.0, abs=1e-6)
    assert float(metrics["drift_cost"]) == pytest.approx(0.0, abs=1e-10)
    assert float(loss) == pytest.approx(-float(advantages.mean()), abs=1e-5)


def test_drift_cost_gradient_flows_when_every_ratio_is_clipped(tiny_policy, batch):
    obs, extras, advantages, _ = batch
    clipped = PathExtras(
        extras.path, extras.log_probs - 5.0, extras.drifts
    )  # every step far outside the clip
    algo = GsbMdpo(ARGS)
    params, static = eqx.partition(tiny_policy, eqx.is_inexact_array)

    def loss_of(p, kl_coef):
        policy = eqx.combine(p, static)
        algo_k = GsbMdpo(GsbMdpoArgs(kl_coef, ARGS.ref_mix, ARGS.step_clip, ARGS.path_clip))
        return algo_k.actor_loss(policy, obs, clipped, advantages, jax.random.key(0))[0]

    _, metrics = algo.actor_loss(tiny_policy, obs, clipped, advantages, jax.random.key(0))
    assert float(metrics["path_clip_frac"]) == 1.0
    grads = jax.grad(loss_of)(params, ARGS.kl_coef)
    norms = [float(jnp.linalg.norm(g)) for g in jax.tree.leaves(grads.drift_net)]
    assert sum(norms) > 0, "the drift cost must still pull the drift toward the anchor"
    # With the ratio frozen at exp(c_path), the advantage term contributes no gradient at all.
    no_kl = jax.grad(loss_of)(params, 0.0)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree.leaves(no_kl.drift_net))


def test_act_returns_the_squashed_path_end_and_stores_the_path_its_densities_and_drifts(tiny_policy):
    """Algorithm 1, line 3: the rollout acts with to_env(a^(N)) of an SDE path drawn with the key's noise and
    stores that path with its step log-densities and drifts."""
    obs = jax.random.normal(jax.random.key(3), (2, tiny_policy.spec.obs_dim))
    key = jax.random.key(4)
    actions, extras = GsbMdpo(ARGS).act(tiny_policy, obs, key)
    sample = jax.vmap(tiny_policy.sample)(obs, sample_noise(key, tiny_policy.spec, (2,)))
    np.testing.assert_array_equal(actions, jax.vmap(tiny_policy.to_env)(sample.path[:, -1]))
    assert isinstance(extras, PathExtras)
    for got, want in zip(extras, sample, strict=True):
        np.testing.assert_array_equal(got, want)
