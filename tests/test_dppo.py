"""DPPO (trainers/dppo.py): per-step log-densities of both presets' chains against numpy transcriptions
of the references (the FPO reference's denoising MDP and DPPO's DDPM posterior), the per-step clipped
objective, ONNX export of the DDPM policy, and tiny end-to-end runs."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy_flow import ddpm_posterior, fpo_velocity, gaussian_log_prob

from gsbpolicy import GSBPolicy, PolicySpec
from trainers._core.loop import Trainer
from trainers.dppo import REFERENCE_STEP_STD, Dppo, DppoArgs, cpu_preset, gym_preset, reference_sigma
from trainers.presets import with_fields

TINY = {
    "rollout": {"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "epochs": 2},
    "policy": {"num_steps": 4, "width": 16, "depth": 1},
    "critic": {"width": 16, "depth": 1},
    "eval": {"num_evals": 1, "interval_steps": 0, "episodes": 2, "final_episodes": 2},
    "log": {"progress": False},
}
SPEC = dict(obs_dim=3, act_dim=2, num_steps=10, width=16, depth=2, time_embed_dim=8, squash="clip",
            action_low=(-1.0, -1.0), action_high=(1.0, 1.0))  # fmt: skip
PLAYGROUND = DppoArgs(time_reversed=True)
GYM = DppoArgs(log_prob_reduction="mean", log_prob_clamp=(-5.0, 2.0), denoise_gamma=0.9, noise_clip=3.0,
               time_reversed=True, ddpm=True)  # fmt: skip


def make(algo_args: DppoArgs, **spec):
    algo = Dppo(algo_args)
    actor = algo.make_actor(PolicySpec(**{**SPEC, **spec}), None, key=jax.random.key(0))
    stats = np.random.default_rng(0).normal(1.0, 2.0, (32, 3)).astype(np.float32)
    return algo, actor.with_normalizer(actor.normalizer.update(stats))


@pytest.fixture(scope="module")
def playground_chain():
    algo, actor = make(PLAYGROUND, sigma_schedule="constant", sigma_max=reference_sigma(10))
    obs = jax.random.normal(jax.random.key(1), (3, 3))
    return algo, actor, obs, *algo.act(actor, obs, jax.random.key(2))


@pytest.fixture(scope="module")
def ddpm_chain():
    algo, actor = make(GYM, sigma_min=0.1)
    obs = jax.random.normal(jax.random.key(1), (3, 3))
    return algo, actor, obs, *algo.act(actor, obs, jax.random.key(2))


def test_playground_steps_are_the_reference_denoising_mdp(playground_chain):
    """x_{k+1} ~ N(x_k - 0.1 v_hat(x_k, tau_k), 0.05^2) with tau_k = 1 - k/10, summed over dims."""
    _, actor, obs, env_action, extras = playground_chain
    for i in range(obs.shape[0]):
        o, path = np.asarray(obs[i], np.float64), np.asarray(extras.path[i], np.float64)
        for k in range(10):
            mean = path[k] - 0.1 * fpo_velocity(actor, o, path[k], 1 - k / 10)
            hand = gaussian_log_prob(path[k + 1], mean, REFERENCE_STEP_STD).sum()
            assert float(extras.log_probs[i, k]) == pytest.approx(hand, abs=2e-4)
            # The stored step is a draw of that Gaussian: its standardized noise is O(1).
            assert np.abs((path[k + 1] - mean) / REFERENCE_STEP_STD).max() < 6
    np.testing.assert_allclose(env_action, np.clip(extras.path[:, -1], -1, 1), atol=1e-6)


def test_ddpm_steps_are_dppo_posteriors(ddpm_chain):
    """Step n = DDPM k = K-1-n: N(mu(eps_hat, clip(x0_hat)), max(posterior std, 0.1)^2), reduced as DPPO."""
    algo, actor, obs, _, extras = ddpm_chain
    K = actor.spec.num_steps
    reduced = algo.step_log_probs(extras.log_probs, actor.spec.act_dim)
    for i in range(obs.shape[0]):
        o, path = np.asarray(obs[i], np.float64), np.asarray(extras.path[i], np.float64)
        for n in range(K):
            mean, std = ddpm_posterior(actor, o, path[n], K - 1 - n)
            per_dim = gaussian_log_prob(path[n + 1], mean, std)
            assert float(extras.log_probs[i, n]) == pytest.approx(per_dim.sum(), abs=2e-4)
            assert float(reduced[i, n]) == pytest.approx(np.clip(per_dim.mean(), -5, 2), abs=1e-4)
            assert np.abs((path[n + 1] - mean) / std).max() <= 3 + 1e-3  # noise draws clamped at 3


def test_ratio_is_one_at_the_old_parameters_and_steps_are_clipped_separately(ddpm_chain):
    algo, actor, obs, _, extras = ddpm_chain
    advantages = jnp.array([1.0, -2.0, 0.5])
    discount = 0.9 ** np.arange(9, -1, -1)  # the final step gets the whole advantage
    step_adv = np.asarray(advantages)[:, None] * discount[None, :]
    loss, metrics = algo.actor_loss(actor, obs, extras, advantages, jax.random.key(0))
    assert float(metrics["ratio_mean"]) == pytest.approx(1.0, abs=1e-6)
    assert float(loss) == pytest.approx(-step_adv.mean(), abs=1e-6)
    # Shift old log-probs of the unclamped steps only: ratio e^{+-0.5} per step, clipped at 1 +- 0.2.
    reduced = np.asarray(algo.step_log_probs(extras.log_probs, 2))
    inside = (reduced > -5 + 0.5) & (reduced < 2 - 0.5)
    offset = np.where(inside, np.where(np.arange(10) % 2 == 0, 0.5, -0.5)[None, :], 0.0)
    shifted = extras._replace(
        log_probs=extras.log_probs - 2 * offset
    )  # x2: log-probs are averaged over 2 dims
    loss, _ = algo.actor_loss(actor, obs, shifted, advantages, jax.random.key(0))
    ratio = np.exp(offset)
    expected = -np.mean(np.minimum(ratio * step_adv, np.clip(ratio, 0.8, 1.2) * step_adv))
    assert float(loss) == pytest.approx(expected, rel=1e-4)


def test_official_order_clamps_each_dimension_before_the_average(ddpm_chain):
    """Official DPPO clamps every action dimension's step log-density to [-5, 2], then averages: a dimension
    far out of range stops counting on its own. The stored per-dimension terms sum to the step density."""
    _, actor, obs, _, extras = ddpm_chain
    official = Dppo(dataclasses.replace(GYM, log_prob_clamp_per_dim=True))
    _, per_dim = official.act(actor, obs, jax.random.key(2))
    assert per_dim.log_probs.shape == (*extras.log_probs.shape, actor.spec.act_dim)
    np.testing.assert_allclose(per_dim.log_probs.sum(-1), extras.log_probs, atol=2e-4)
    np.testing.assert_allclose(
        official.step_log_probs(per_dim.log_probs, 2), np.clip(per_dim.log_probs, -5, 2).mean(-1), atol=1e-6
    )
    terms = jnp.array([[-8.0, 1.4]])  # one step, two dims: the orders disagree
    assert float(official.step_log_probs(terms, 2)[0]) == pytest.approx((-5.0 + 1.4) / 2)
    mean_first = Dppo(GYM)
    assert float(mean_first.step_log_probs(terms.sum(-1), 2)[0]) == pytest.approx((-8.0 + 1.4) / 2)
    loss, metrics = official.actor_loss(actor, obs, per_dim, jnp.array([1.0, -2.0, 0.5]), jax.random.key(0))
    assert float(metrics["ratio_mean"]) == pytest.approx(1.0, abs=1e-6) and np.isfinite(float(loss))


def test_ddpm_policy_exports_to_onnx(ddpm_chain, tmp_path):
    from export import onnx as onnx_export

    _, actor, *_ = ddpm_chain
    report = onnx_export.export(actor, tmp_path / "policy.onnx", "sde")  # one mode: jax2onnx is slow
    assert report.passed, report.table()


def _check_run(args, policy_dir):
    lines = [json.loads(line) for line in (args.output_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in lines if r["type"] == "train"]
    assert len(train) == args.num_iterations and np.isfinite(train[-1]["train/actor_loss"])
    assert {"train/ratio_max", "train/clip_frac", "train/step_log_prob"} <= set(train[0])
    results = json.loads((policy_dir / "results.json").read_text())
    assert results["algo"] == "dppo" and results["n_episodes"] == 2
    policy = GSBPolicy.from_pretrained(policy_dir)
    action, _ = policy.predict(np.zeros(4, np.float32), deterministic=False)
    assert policy.action_space.contains(action)
    return policy


def test_cpu_preset_runs_end_to_end(tmp_path):
    args = with_fields(cpu_preset(None), total_steps=2 * 64, output_dir=tmp_path / "cpu", **TINY)
    policy = _check_run(args, Trainer(Dppo(args.algo), args).run())
    spec = policy.spec
    assert spec.parameterization == "velocity" and spec.time_reversed and spec.sigma_schedule == "constant"


def test_gym_preset_runs_end_to_end(tmp_path):
    tiny = {**TINY, "policy": {**TINY["policy"], "time_embed_dim": 4}}
    args = with_fields(
        gym_preset("InvertedPendulum-v5"), total_steps=2 * 64, output_dir=tmp_path / "gym", **tiny
    )
    policy = _check_run(args, Trainer(Dppo(args.algo), args).run())
    assert policy.spec.parameterization == "ddpm" and policy.spec.sigma_min == 0.1


def test_noise_free_chain_is_rejected():
    with pytest.raises(ValueError, match="sigma_max must be > 0"):
        make(PLAYGROUND, sigma_schedule="constant", sigma_max=0.0)


def test_presets_follow_the_tables():
    from trainers.dppo import playground_preset

    pg, gy = playground_preset(None), gym_preset(None)
    assert (pg.policy.num_steps, pg.policy.width, pg.policy.depth, pg.policy.time_embed_dim) == (10, 32, 4, 8)
    assert (pg.algo.clip, pg.optim.actor_lr, pg.optim.value_coef, pg.policy.output_scale) == (
        0.2,
        3e-4,
        0.25,
        0.25,
    )
    step_std = pg.policy.sigma_max * np.sqrt(1 / pg.policy.num_steps)  # sigma sqrt(dt) = 0.05 per step
    assert step_std == pytest.approx(0.05, rel=1e-12) and pg.policy.sigma_schedule == "constant"
    assert (gy.policy.num_steps, gy.policy.width, gy.policy.time_embed_dim, gy.optim.actor_lr) == (
        10,
        256,
        32,
        1e-3,
    )
    assert (
        gy.algo.ddpm and gy.policy.sigma_min == 0.1 and gy.algo.clip == 0.2 and gy.optim.max_grad_norm == 1.0
    )
    assert gy.algo.log_prob_clamp == (-5.0, 2.0) and gy.algo.log_prob_clamp_per_dim
    assert dataclasses.asdict(gy.critic) == {"width": 256, "depth": 3, "activation": "elu"}


def test_ddpm_step_of_a_time_off_the_grid_is_the_nearest_end_step():
    """`t` maps to DDPM step round(t K), kept in 0..K-1: a time before the grid reads step 0's std, not (by
    negative indexing) the last step's."""
    from gsbpolicy._ddpm import DDPMSigma, step_tables

    sigma = DDPMSigma(num_steps=5, min_std=0.0)
    stds = np.asarray(step_tables(5)["std"], np.float32) * np.sqrt(5.0)
    assert stds[0] != stds[-1]
    np.testing.assert_allclose(sigma(jnp.float32(-0.3)), stds[0], rtol=1e-6)
    np.testing.assert_allclose(sigma(jnp.float32(0.61)), stds[3], rtol=1e-6)
    np.testing.assert_allclose(sigma(jnp.float32(1.3)), stds[4], rtol=1e-6)
