"""Each coefficient of each actor loss in its own role, and each baseline's ratio exactly as its paper
defines it, by closed forms on stored data with known offsets (the existing per-algorithm tests check the
full formulas once; these vary one thing at a time, so a coefficient used in another's place, a clip on
the wrong quantity or a ratio averaged in the wrong place changes a number here)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy import GaussianActor
from gsbpolicy._gaussian import GaussianSpec
from gsbpolicy._policy import sample_noise
from trainers.dppo import ChainExtras, Dppo, DppoArgs
from trainers.fpo import Fpo, FpoArgs
from trainers.fpo_pp import FpoPlusPlus, FppArgs, clamp_straight_through, trust_region_objective
from trainers.gaussian_ppo import GaussianPpo, GaussianPpoArgs
from trainers.gsb_mdpo import GsbMdpo, GsbMdpoArgs, PathExtras

ADVANTAGES = jnp.array([1.0, -0.5, 2.0])


# ---------------------------------------------------------------------------------------- GSB-MDPO
@pytest.fixture(scope="module")
def fresh(tiny_policy):
    """Paths from the policy with its own log-densities and drifts: ratio 1 and drift cost 0."""
    spec = tiny_policy.spec
    obs = jax.random.normal(jax.random.key(0), (3, spec.obs_dim))
    sample = jax.vmap(tiny_policy.sample)(obs, sample_noise(jax.random.key(1), spec, (3,)))
    log_probs, drifts = jax.vmap(tiny_policy.log_probs_and_drifts)(obs, sample.path)
    return obs, PathExtras(sample.path, log_probs, drifts)


def gsb_loss(policy, obs, extras, **coefs):
    args = GsbMdpoArgs(**{"kl_coef": 0.0, "ref_mix": 0.0, "step_clip": 0.1, "path_clip": 0.4, **coefs})
    loss, metrics = GsbMdpo(args).actor_loss(policy, obs, extras, ADVANTAGES, jax.random.key(0))
    return float(loss), metrics


def with_step_offsets(extras, offsets):
    """Old log-densities lowered by `offsets`, so log p_theta - log p_k = offsets per step."""
    return extras._replace(log_probs=extras.log_probs - jnp.asarray(offsets, jnp.float32))


def weights(policy):
    """Delta t / (2 sigma(t_n)^2) per step (eq. 18), in float64."""
    n = policy.spec.num_steps
    sigmas = np.array([float(policy.schedule(jnp.float32(k / n))) for k in range(n)])
    return (1.0 / n) / (2.0 * sigmas**2)


def test_step_clip_bounds_each_steps_log_ratio(tiny_policy, fresh):
    obs, extras = fresh
    n = tiny_policy.spec.num_steps
    one_big_step = np.zeros((3, n), np.float32)
    one_big_step[:, 2] = 0.5  # clipped to c_step = 0.1; the path (0.1) is inside c_path
    loss, metrics = gsb_loss(tiny_policy, obs, with_step_offsets(extras, one_big_step), step_clip=0.1)
    assert loss == pytest.approx(-math.exp(0.1) * float(ADVANTAGES.mean()), rel=1e-5)
    assert float(metrics["step_clip_frac"]) == pytest.approx(1 / n)
    assert (
        float(metrics["sample_clip_frac"]) == 1.0
    )  # every sample has its one clipped step (App. C.2's count)
    assert float(metrics["path_clip_frac"]) == 0.0
    loss, _ = gsb_loss(tiny_policy, obs, with_step_offsets(extras, -one_big_step), step_clip=0.2)
    assert loss == pytest.approx(-math.exp(-0.2) * float(ADVANTAGES.mean()), rel=1e-5)


def test_path_clip_bounds_the_summed_step_log_ratios(tiny_policy, fresh):
    obs, extras = fresh
    n = tiny_policy.spec.num_steps
    small_steps = np.full((3, n), 0.09, np.float32)  # each inside c_step; their sum 0.54 is not inside 0.4
    loss, metrics = gsb_loss(tiny_policy, obs, with_step_offsets(extras, small_steps), path_clip=0.4)
    assert loss == pytest.approx(-math.exp(0.4) * float(ADVANTAGES.mean()), rel=1e-5)
    assert float(metrics["step_clip_frac"]) == 0.0 and float(metrics["path_clip_frac"]) == 1.0
    assert float(metrics["ratio_max"]) == pytest.approx(math.exp(0.4), rel=1e-5)
    loss, _ = gsb_loss(tiny_policy, obs, with_step_offsets(extras, -small_steps), path_clip=0.3)
    assert loss == pytest.approx(-math.exp(-0.3) * float(ADVANTAGES.mean()), rel=1e-5)
    loss, _ = gsb_loss(tiny_policy, obs, with_step_offsets(extras, small_steps), path_clip=1.0)
    assert loss == pytest.approx(-math.exp(0.09 * n) * float(ADVANTAGES.mean()), rel=1e-5)
    # The k3 path-KL diagnostic uses the unclipped sum.
    raw = 0.09 * n
    assert float(metrics["path_kl_k3"]) == pytest.approx(math.expm1(raw) - raw, rel=1e-4)


@pytest.mark.parametrize("step", [0, 4])
def test_kl_coef_weighs_the_drift_cost_with_each_steps_dt_over_two_sigma_squared(tiny_policy, fresh, step):
    obs, extras = fresh
    delta = np.zeros(extras.drifts.shape, np.float32)
    delta[:, step] = [0.3, -0.4]  # |delta|^2 = 0.25 at one step of every path
    moved = extras._replace(drifts=extras.drifts + delta)
    cost = weights(tiny_policy)[step] * 0.25
    loss, metrics = gsb_loss(tiny_policy, obs, moved, kl_coef=0.7)
    assert float(metrics["drift_cost"]) == pytest.approx(cost, rel=1e-4)
    assert float(metrics["path_kl_drift"]) == pytest.approx(cost, rel=1e-4)
    assert loss == pytest.approx(-float(ADVANTAGES.mean()) + 0.7 * cost, rel=1e-5)
    loss_zero, _ = gsb_loss(tiny_policy, obs, moved, kl_coef=0.0)
    assert loss_zero == pytest.approx(-float(ADVANTAGES.mean()), rel=1e-6)


def test_ref_mix_scales_the_old_drift_as_one_minus_eta(tiny_policy, fresh):
    # f_k = f_theta: C_eta = sum_n w_n |f_theta - (1 - eta) f_theta|^2 = eta^2 sum_n w_n |f_n|^2.
    obs, extras = fresh
    energy = np.sum(weights(tiny_policy)[None] * np.sum(np.asarray(extras.drifts, np.float64) ** 2, -1), -1)
    loss, metrics = gsb_loss(tiny_policy, obs, extras, kl_coef=0.5, ref_mix=0.3)
    assert float(metrics["drift_cost"]) == pytest.approx(0.09 * energy.mean(), rel=1e-4)
    assert loss == pytest.approx(-float(ADVANTAGES.mean()) + 0.5 * 0.09 * energy.mean(), rel=1e-4)
    assert float(metrics["path_kl_drift"]) == pytest.approx(0.0, abs=1e-9)  # KL to P_k itself: eta = 0


def test_the_clipped_ratio_weighs_advantage_minus_cost_per_path(tiny_policy, fresh):
    obs, extras = fresh
    n = tiny_policy.spec.num_steps
    offsets = np.zeros((3, n), np.float32)
    offsets[0, 0], offsets[1, 1], offsets[2, :] = 0.05, -0.3, 0.09  # ratios e^0.05, e^-0.1, e^0.4
    ratios = np.exp([0.05, -0.1, 0.4])
    delta = np.zeros(extras.drifts.shape, np.float32)
    delta[0, 0], delta[1, 3], delta[2, 5] = [0.5, 0.0], [0.0, 1.0], [0.2, 0.2]
    costs = weights(tiny_policy)[[0, 3, 5]] * np.array([0.25, 1.0, 0.08])
    moved = with_step_offsets(extras, offsets)._replace(drifts=extras.drifts + delta)
    loss, metrics = gsb_loss(tiny_policy, obs, moved, kl_coef=0.6)
    expected = -np.mean(ratios * (np.asarray(ADVANTAGES, np.float64) - 0.6 * costs))
    assert loss == pytest.approx(expected, rel=1e-4)
    # The diagnostics: the clipped ratios' mean and max, and the advantages' mean and std as given.
    assert float(metrics["ratio_mean"]) == pytest.approx(ratios.mean(), rel=1e-5)
    assert float(metrics["ratio_max"]) == pytest.approx(ratios.max(), rel=1e-5)
    advantages = np.asarray(ADVANTAGES, np.float64)
    assert float(metrics["adv_mean"]) == pytest.approx(advantages.mean(), rel=1e-6)
    assert float(metrics["adv_std"]) == pytest.approx(advantages.std(), rel=1e-6)


# ---------------------------------------------------------------------------------------- Gaussian PPO
@pytest.fixture(scope="module")
def gaussian():
    spec = GaussianSpec(obs_dim=3, act_dim=2, action_low=(-1.0, -1.0), action_high=(1.0, 1.0), width=8, depth=1,
                        activation="tanh", std="param", squash="clip", init_log_std=-0.5)  # fmt: skip
    actor = GaussianActor(spec, key=jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (4, 3))
    _, extras = GaussianPpo(GaussianPpoArgs()).act(actor, obs, jax.random.key(2))
    return actor, obs, extras


def ppo_surrogate(ratio, advantages, eps):
    return np.minimum(ratio * advantages, np.clip(ratio, 1 - eps, 1 + eps) * advantages)


def test_gaussian_ppo_ratio_and_clip_epsilon(gaussian):
    actor, obs, extras = gaussian
    offsets = np.array([0.5, -0.5, 0.05, -0.3], np.float32)  # log pi_new - log pi_old per row
    advantages = np.array([1.0, 1.0, -2.0, -1.0], np.float32)
    shifted = extras._replace(log_prob=extras.log_prob - offsets)
    for eps in (0.1, 0.25):
        algo = GaussianPpo(GaussianPpoArgs(clip=eps))
        loss, metrics = algo.actor_loss(actor, obs, shifted, jnp.asarray(advantages), jax.random.key(3))
        ratio = np.exp(offsets.astype(np.float64))
        assert float(loss) == pytest.approx(-ppo_surrogate(ratio, advantages, eps).mean(), rel=1e-5)
        assert float(metrics["clip_frac"]) == pytest.approx(np.mean(np.abs(ratio - 1) > eps))
        assert float(metrics["ratio_max"]) == pytest.approx(math.exp(0.5), rel=1e-5)
        assert float(metrics["ratio_mean"]) == pytest.approx(ratio.mean(), rel=1e-5)
        assert float(metrics["approx_kl"]) == pytest.approx(np.mean(np.expm1(offsets) - offsets), rel=1e-4)
        assert float(metrics["adv_mean"]) == pytest.approx(advantages.mean(), rel=1e-6)
        assert float(metrics["adv_std"]) == pytest.approx(advantages.std(), rel=1e-6)
        assert float(metrics["std_mean"]) == pytest.approx(math.exp(-0.5), rel=1e-5)  # init_log_std -0.5


def test_gaussian_ppo_entropy_coef_subtracts_its_multiple_of_the_entropy(gaussian):
    actor, obs, extras = gaussian
    advantages = jnp.array([1.0, -1.0, 0.5, 2.0])
    base, metrics = GaussianPpo(GaussianPpoArgs(entropy_coef=0.0)).actor_loss(
        actor, obs, extras, advantages, jax.random.key(3)
    )
    with_bonus, _ = GaussianPpo(GaussianPpoArgs(entropy_coef=0.05)).actor_loss(
        actor, obs, extras, advantages, jax.random.key(3)
    )
    # std = exp(-0.5) in both dims: H = 2 (0.5 + 0.5 log 2 pi - 0.5) per state.
    entropy = 2 * (0.5 * math.log(2 * math.pi))
    assert float(metrics["entropy"]) == pytest.approx(entropy, rel=1e-5)
    assert float(with_bonus) == pytest.approx(float(base) - 0.05 * entropy, rel=1e-5)


# ---------------------------------------------------------------------------------------- FPO
@pytest.fixture(scope="module")
def fpo_rollout(tiny_policy):
    algo = Fpo(FpoArgs(num_samples=4, clip=0.05))
    obs = jax.random.normal(jax.random.key(5), (3, tiny_policy.spec.obs_dim))
    _, extras = algo.act(tiny_policy, obs, jax.random.key(6))
    return obs, extras


def test_fpo_ratio_exponentiates_the_average_cfm_loss_difference(tiny_policy, fpo_rollout):
    # rho = exp(mean_i l_old - mean_i l_new): per-sample shifts that average to 0.02, 0.0 and -0.03 give
    # those log-ratios; exp-then-average (or the opposite sign) would not.
    obs, extras = fpo_rollout
    shifts = np.array([[0.5, -0.42, 0.1, -0.1], [1.0, -1.0, 0.3, -0.3], [-0.12, 0.0, 0.0, 0.0]], np.float32)
    old_higher = extras._replace(cfm_losses=extras.cfm_losses + shifts)
    advantages = jnp.array([1.0, -1.0, 2.0])
    _, metrics = Fpo(FpoArgs(num_samples=4, clip=0.05)).actor_loss(
        tiny_policy, obs, old_higher, advantages, jax.random.key(0)
    )
    log_ratios = shifts.astype(np.float64).mean(1)
    assert float(metrics["ratio_mean"]) == pytest.approx(np.exp(log_ratios).mean(), rel=1e-5)
    assert float(metrics["ratio_max"]) == pytest.approx(np.exp(log_ratios).max(), rel=1e-5)
    k3 = np.mean(np.expm1(log_ratios) - log_ratios)
    assert float(metrics["approx_kl"]) == pytest.approx(k3, rel=1e-3)
    assert float(metrics["cfm_loss"]) == pytest.approx(float(jnp.mean(extras.cfm_losses)), rel=1e-5)
    assert float(metrics["adv_mean"]) == pytest.approx(2 / 3, rel=1e-6)


@pytest.mark.parametrize("eps", [0.01, 0.05])
def test_fpo_clip_epsilon(tiny_policy, fpo_rollout, eps):
    obs, extras = fpo_rollout
    log_ratios = np.array([0.03, -0.03, 0.005], np.float32)
    shifted = extras._replace(cfm_losses=extras.cfm_losses + log_ratios[:, None])
    advantages = np.array([1.0, -1.0, 2.0], np.float32)
    loss, metrics = Fpo(FpoArgs(num_samples=4, clip=eps)).actor_loss(
        tiny_policy, obs, shifted, jnp.asarray(advantages), jax.random.key(0)
    )
    ratio = np.exp(log_ratios.astype(np.float64))
    assert float(loss) == pytest.approx(-ppo_surrogate(ratio, advantages, eps).mean(), rel=1e-5)
    assert float(metrics["clip_frac"]) == pytest.approx(np.mean(np.abs(ratio - 1) > eps))


# ---------------------------------------------------------------------------------------- FPO++
def fpp_loss(policy, obs, extras, advantages, **changes):
    """FPO++'s loss with every bound off unless `changes` sets it (the defaults are FPO++'s code's)."""
    off = {"loss_clamp": None, "negative_advantage_loss_clamp": None, "log_ratio_clamp": None,
           "advantage_clamp": None}  # fmt: skip
    args = FppArgs(**{"num_samples": extras.t.shape[1], "clip": 0.05, **off, **changes})
    loss, metrics = FpoPlusPlus(args).actor_loss(
        policy, obs, extras, jnp.asarray(advantages, jnp.float32), jax.random.key(0)
    )
    return float(loss), metrics


def fpp_rollout(policy, batch: int, num_samples: int):
    obs = jax.random.normal(jax.random.key(7), (batch, policy.spec.obs_dim))
    _, extras = FpoPlusPlus(FppArgs(num_samples=num_samples)).act(policy, obs, jax.random.key(8))
    return obs, extras


def with_log_ratios(extras, log_ratios):
    """Stored losses raised by `log_ratios`, so that l_old - l_new = log_ratios per draw."""
    return extras._replace(cfm_losses=extras.cfm_losses + jnp.asarray(log_ratios, jnp.float32))


RATIOS = np.array([[1.2, 0.9], [1.2, 0.9]])
"""Two actions (advantage +1, then -1), two draws each: one ratio above 1 + eps, one below 1 - eps."""


@pytest.mark.parametrize(
    ("mode", "psi"),
    [
        # A = +1: PPO min(1.2, 1.05) = 1.05 and min(0.9, 0.95) = 0.9; A = -1: SPO -1.2 - (0.2^2) / 0.1 = -1.6 and
        # -0.9 - (0.1^2) / 0.1 = -1.0 (PPO would give min(-1.2, -1.05) = -1.2 and min(-0.9, -0.95) = -0.95).
        ("aspo", [1.05, 0.9, -1.6, -1.0]),
        ("ppo", [1.05, 0.9, -1.2, -0.95]),
        ("spo", [1.2 - 0.4, 0.9 - 0.1, -1.6, -1.0]),
    ],
)
def test_fpo_pp_trust_region_by_hand(tiny_policy, mode, psi):
    """L = -mean over actions and draws of psi(rho_i, A): ASPO is PPO's clip for A >= 0 and SPO's penalty
    rho A - |A| / (2 eps) (rho - 1)^2 for A < 0 (eps = 0.05), each draw with its own ratio."""
    obs, extras = fpp_rollout(tiny_policy, 2, 2)
    loss, metrics = fpp_loss(tiny_policy, obs, with_log_ratios(extras, np.log(RATIOS)), [1.0, -1.0],
                             trust_region=mode)  # fmt: skip
    assert loss == pytest.approx(-np.mean(psi), rel=1e-5)
    assert float(metrics["ratio_mean"]) == pytest.approx(1.05, rel=1e-5)
    assert float(metrics["ratio_max"]) == pytest.approx(1.2, rel=1e-5)
    assert float(metrics["clip_frac"]) == 1.0
    assert float(metrics["approx_kl"]) == pytest.approx(np.mean(RATIOS - 1 - np.log(RATIOS)), rel=1e-4)
    assert float(metrics["adv_mean"]) == 0.0
    assert float(metrics["cfm_loss"]) == pytest.approx(float(jnp.mean(extras.cfm_losses)), rel=1e-6)


@pytest.mark.parametrize("eps", [0.05, 0.2])
def test_fpo_pp_ratio_is_per_draw_not_of_the_average(tiny_policy, eps):
    """rho_i = exp(l_i^old - l_i^new) for each draw (eq. 10): shifts whose average is 0 still move the loss;
    FPO's exp(mean) would give ratio 1 for the first action and the bare advantage."""
    obs, extras = fpp_rollout(tiny_policy, 3, 4)
    shifts = np.array([[0.5, -0.5, 0.1, -0.1], [0.3, 0.2, -0.02, 0.0], [-0.12, 0.04, -0.3, 0.08]])
    advantages = np.array([1.0, -0.7, -2.0])
    loss, metrics = fpp_loss(tiny_policy, obs, with_log_ratios(extras, shifts), advantages, clip=eps)
    ratio, a = np.exp(shifts), advantages[:, None]
    ppo = np.minimum(ratio * a, np.clip(ratio, 1 - eps, 1 + eps) * a)
    spo = ratio * a - np.abs(a) / (2 * eps) * (ratio - 1) ** 2
    assert loss == pytest.approx(-np.mean(np.where(a >= 0, ppo, spo)), rel=1e-5)
    assert float(metrics["ratio_mean"]) == pytest.approx(ratio.mean(), rel=1e-5)
    assert float(metrics["clip_frac"]) == pytest.approx(np.mean(np.abs(ratio - 1) > eps))


def test_fpo_pp_spo_pulls_a_negative_advantage_ratio_back_to_one_minus_eps():
    """d psi / d rho for A = -1, eps = 0.05: SPO's is A - |A| (rho - 1) / eps, zero at rho = 0.95, pushing a
    ratio of 1.2 down (-5) and one of 0.9 up (+1); PPO's clip gives 0.9 no gradient and 1.2 the bare A."""
    grad = jax.grad(lambda r, mode: trust_region_objective(r, -1.0, 0.05, mode))
    assert [float(grad(r, "aspo")) for r in (1.2, 0.9, 0.95)] == pytest.approx([-5.0, 1.0, 0.0], abs=1e-5)
    assert [float(grad(r, "ppo")) for r in (1.2, 0.9)] == pytest.approx([-1.0, 0.0])
    # A >= 0 is PPO's clip in ASPO: the bare A inside 1 +- eps, nothing above it.
    positive = jax.grad(lambda r, a: trust_region_objective(r, a, 0.05, "aspo"))
    assert [float(positive(r, 1.0)) for r in (1.0, 1.2)] == pytest.approx([1.0, 0.0])
    assert float(positive(1.2, 0.0)) == 0.0


def test_fpo_pp_log_ratio_clamp_bounds_the_ratio_but_not_its_gradient(tiny_policy):
    obs, extras = fpp_rollout(tiny_policy, 2, 2)
    big = with_log_ratios(extras, [[12.0, 0.0], [0.0, 0.0]])
    _, bounded = fpp_loss(tiny_policy, obs, big, [1.0, 1.0], log_ratio_clamp=10.0)
    _, free = fpp_loss(tiny_policy, obs, big, [1.0, 1.0])
    assert float(bounded["ratio_max"]) == pytest.approx(math.exp(10.0), rel=1e-5)
    assert float(free["ratio_max"]) == pytest.approx(math.exp(12.0), rel=1e-5)
    x = jnp.array([-3.0, 9.0, 12.0])
    np.testing.assert_allclose(clamp_straight_through(x, 10.0), [-3.0, 9.0, 10.0])
    np.testing.assert_allclose(
        jax.grad(lambda v: jnp.sum(clamp_straight_through(v, 10.0)))(x), [1.0, 1.0, 1.0]
    )


def test_fpo_pp_loss_clamp_bounds_both_losses(tiny_policy):
    """l_old + 30 bounded at 2.5 against l_new bounded at 2.5: the log-ratio is 2.5 - min(l, 2.5) per draw."""
    obs, extras = fpp_rollout(tiny_policy, 2, 3)
    losses = np.asarray(extras.cfm_losses, np.float64)
    assert losses.min() < 2.5 < losses.max()  # the bound binds on some draws only
    _, metrics = fpp_loss(tiny_policy, obs, with_log_ratios(extras, np.full((2, 3), 30.0)), [1.0, 1.0],
                          loss_clamp=2.5)  # fmt: skip
    new = np.minimum(losses, 2.5)
    assert float(metrics["ratio_mean"]) == pytest.approx(np.exp(2.5 - new).mean(), rel=1e-5)
    assert float(metrics["cfm_loss"]) == pytest.approx(new.mean(), rel=1e-5)


def test_fpo_pp_negative_advantage_clamp_bounds_only_their_current_loss(tiny_policy):
    obs, extras = fpp_rollout(tiny_policy, 2, 3)
    losses = np.asarray(extras.cfm_losses, np.float64)
    assert losses.min() < 2.0 < losses.max()
    _, metrics = fpp_loss(tiny_policy, obs, extras, [1.0, -1.0], negative_advantage_loss_clamp=2.0)
    new = losses.copy()
    new[1] = np.minimum(new[1], 2.0)  # the second action's advantage is negative
    assert float(metrics["ratio_mean"]) == pytest.approx(np.exp(losses - new).mean(), rel=1e-5)
    assert float(metrics["cfm_loss"]) == pytest.approx(new.mean(), rel=1e-5)


def test_fpo_pp_advantage_clamp(tiny_policy):
    """At ratio 1 every psi is the advantage itself, so the loss is minus the mean clipped advantage."""
    obs, extras = fpp_rollout(tiny_policy, 3, 2)
    advantages = [3.0, -0.5, -2.0]
    loss, metrics = fpp_loss(tiny_policy, obs, extras, advantages, advantage_clamp=1.0)
    assert loss == pytest.approx(-np.mean([1.0, -0.5, -1.0]), rel=1e-5)
    assert float(metrics["adv_mean"]) == pytest.approx(np.mean([1.0, -0.5, -1.0]), rel=1e-6)
    assert fpp_loss(tiny_policy, obs, extras, advantages)[0] == pytest.approx(-0.5 / 3, rel=1e-5)


# ---------------------------------------------------------------------------------------- DPPO
def test_dppo_ratio_is_per_denoising_step_and_the_final_step_gets_the_whole_advantage(tiny_policy, fresh):
    # The velocity chain with summed step densities: one step's offset gives that step (only) the ratio
    # e^offset, clipped at 1 +- eps; step n's advantage is A gamma_denoise^(N-1-n).
    obs, extras = fresh
    n = tiny_policy.spec.num_steps
    offsets = np.zeros((3, n), np.float32)
    offsets[0, n - 1], offsets[1, 0], offsets[2, 2] = 0.5, -0.05, 0.1
    chain = ChainExtras(extras.path, extras.log_probs - offsets)
    algo = Dppo(DppoArgs(clip=0.2, denoise_gamma=0.5))
    loss, metrics = algo.actor_loss(tiny_policy, obs, chain, ADVANTAGES, jax.random.key(0))
    ratio = np.exp(offsets.astype(np.float64))
    step_adv = np.asarray(ADVANTAGES, np.float64)[:, None] * 0.5 ** np.arange(n - 1, -1, -1)[None, :]
    assert float(loss) == pytest.approx(-ppo_surrogate(ratio, step_adv, 0.2).mean(), rel=1e-5)
    assert float(metrics["ratio_max"]) == pytest.approx(math.exp(0.5), rel=1e-5)
    assert float(metrics["clip_frac"]) == pytest.approx(1 / (3 * n))
    assert float(metrics["ratio_mean"]) == pytest.approx(ratio.mean(), rel=1e-5)
    assert float(metrics["approx_kl"]) == pytest.approx(np.mean(np.expm1(offsets) - offsets), rel=1e-4)
    assert float(metrics["step_log_prob"]) == pytest.approx(float(jnp.mean(extras.log_probs)), rel=1e-5)
    assert float(metrics["adv_mean"]) == pytest.approx(float(jnp.mean(ADVANTAGES)), rel=1e-6)
