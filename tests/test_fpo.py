"""FPO (trainers/fpo.py): the sampler and CFM loss against a numpy transcription of the official FPO
reference (its reversed time), the ratio at the old parameters, and tiny end-to-end runs."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy_flow import fpo_cfm_loss, fpo_euler

from gsbpolicy import GSBPolicy, PolicySpec
from gsbpolicy._policy import sample_noise
from trainers._core.loop import Trainer
from trainers.fpo import Fpo, FpoArgs, cpu_preset, gym_preset
from trainers.presets import with_fields

TINY = {
    "rollout": {"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "epochs": 2},
    "policy": {"num_steps": 4, "width": 16, "depth": 1},
    "critic": {"width": 16, "depth": 1},
    "eval": {"num_evals": 1, "interval_steps": 0, "episodes": 2, "final_episodes": 2},
    "log": {"progress": False},
}


@pytest.fixture(scope="module")
def reference_actor():
    """The playground configuration in small: sigma 0, the reference's time fed to the net, tanh."""
    spec = PolicySpec(obs_dim=3, act_dim=2, num_steps=10, width=16, depth=2, time_embed_dim=8,
                      sigma_schedule="constant", sigma_max=0.0, action_low=(-1.0, -1.0),
                      action_high=(1.0, 1.0))  # fmt: skip
    algo = Fpo(FpoArgs(num_samples=5, time_reversed=True))
    actor = algo.make_actor(spec, None, key=jax.random.key(0))
    obs_stats = np.random.default_rng(0).normal(1.0, 2.0, (32, 3)).astype(np.float32)
    return algo, actor.with_normalizer(actor.normalizer.update(obs_stats))


@pytest.fixture(scope="module")
def rollout(reference_actor):
    algo, actor = reference_actor
    obs = jax.random.normal(jax.random.key(1), (6, 3))
    env_action, extras = algo.act(actor, obs, jax.random.key(2))
    return obs, env_action, extras


def test_sampler_is_the_reference_euler_chain(reference_actor):
    _, actor = reference_actor
    obs = np.array([0.3, -1.0, 2.0], np.float32)
    noise = np.asarray(sample_noise(jax.random.key(3), actor.spec), np.float32)
    expected = fpo_euler(actor, obs, noise[0], actor.spec.num_steps)  # the reference ignores the rest
    np.testing.assert_allclose(actor.sample_final(obs, noise), expected, atol=1e-5)
    clipped = dataclasses.replace(actor.spec, clip_iterates=True)
    actor_c = dataclasses.replace(actor, spec=clipped)
    expected = fpo_euler(actor_c, obs, 3 * noise[0], actor.spec.num_steps, clip=True)
    np.testing.assert_allclose(actor_c.sample_final(obs, 3 * noise), expected, atol=1e-5)


def test_stored_cfm_losses_match_the_reference_loss(reference_actor, rollout):
    _, actor = reference_actor
    obs, env_action, extras = rollout
    np.testing.assert_allclose(env_action, jnp.tanh(extras.action), atol=1e-6)
    n = actor.spec.num_steps
    t = np.asarray(extras.t)
    assert set(np.round(t.ravel() * n).astype(int)) <= set(range(n))  # the grid, never t = 1
    for i in range(obs.shape[0]):
        for j in range(t.shape[1]):
            tau = 1.0 - float(t[i, j])  # reference time
            args = (np.asarray(obs[i], np.float64), np.asarray(extras.action[i], np.float64))
            hand = fpo_cfm_loss(actor, *args, np.asarray(extras.eps[i, j], np.float64), tau)
            assert float(extras.cfm_losses[i, j]) == pytest.approx(hand, rel=1e-5, abs=1e-7)


def test_ratio_is_one_at_the_old_parameters_and_clipped_objective(reference_actor, rollout):
    algo, actor = reference_actor
    obs, _, extras = rollout
    advantages = jnp.linspace(-1.0, 1.0, obs.shape[0])
    loss, metrics = algo.actor_loss(actor, obs, extras, advantages, jax.random.key(0))
    assert float(metrics["ratio_mean"]) == 1.0 and float(metrics["ratio_max"]) == 1.0
    assert float(loss) == pytest.approx(-float(advantages.mean()), abs=1e-7)
    # Old losses 0.3 higher -> ratio e^0.3 > 1 + clip: positive advantages are clipped at 1.05.
    shifted = extras._replace(cfm_losses=extras.cfm_losses + 0.3)
    loss, metrics = algo.actor_loss(actor, obs, shifted, advantages, jax.random.key(0))
    a = np.asarray(advantages, np.float64)
    expected = -np.mean(np.minimum(np.exp(0.3) * a, 1.05 * a))
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(metrics["clip_frac"]) == 1.0
    positive = Fpo(FpoArgs(num_samples=5, positive_advantages_only=True))
    loss, _ = positive.actor_loss(actor, obs, shifted, advantages, jax.random.key(0))
    assert float(loss) == pytest.approx(-np.mean(1.05 * np.maximum(a, 0)), rel=1e-5)


def test_clipped_reference_policy_exports_to_onnx(reference_actor, tmp_path):
    from export import onnx as onnx_export

    _, actor = reference_actor
    actor = dataclasses.replace(actor, spec=dataclasses.replace(actor.spec, clip_iterates=True))
    report = onnx_export.export(actor, tmp_path / "policy.onnx", "ode")  # one mode: jax2onnx is slow
    assert report.passed, report.table()


def _check_run(args, policy_dir):
    lines = [json.loads(line) for line in (args.output_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in lines if r["type"] == "train"]
    assert len(train) == args.num_iterations and np.isfinite(train[-1]["train/actor_loss"])
    assert {"train/cfm_loss", "train/ratio_max", "train/clip_frac"} <= set(train[0])
    results = json.loads((policy_dir / "results.json").read_text())
    assert results["algo"] == "fpo" and results["n_episodes"] == 2
    policy = GSBPolicy.from_pretrained(policy_dir)
    action, _ = policy.predict(np.zeros(4, np.float32), deterministic=False)
    assert policy.action_space.contains(action)
    return policy


def test_cpu_preset_runs_end_to_end(tmp_path):
    args = with_fields(cpu_preset(None), total_steps=2 * 64, output_dir=tmp_path / "cpu", **TINY)
    policy = _check_run(args, Trainer(Fpo(args.algo), args).run())
    assert policy.spec.time_reversed and policy.spec.sigma_max == 0.0 and policy.spec.squash == "tanh"


def test_gym_preset_runs_end_to_end(tmp_path):
    """FlowRL's sampler: learnable Fourier time features, per-iterate clip, additive noise."""
    tiny = {**TINY, "policy": {**TINY["policy"], "time_embed_dim": 4}}
    args = with_fields(
        gym_preset("InvertedPendulum-v5"), total_steps=2 * 64, output_dir=tmp_path / "gym", **tiny
    )
    policy = _check_run(args, Trainer(Fpo(args.algo), args).run())
    assert policy.spec.clip_iterates and policy.spec.time_embedding == "fourier"


def test_presets_follow_the_tables():
    from trainers.fpo import playground_preset

    pg, gy = playground_preset(None), gym_preset(None)
    assert (pg.policy.num_steps, pg.policy.width, pg.policy.depth, pg.policy.time_embed_dim) == (10, 32, 4, 8)
    assert (pg.algo.num_samples, pg.algo.clip, pg.optim.actor_lr, pg.optim.value_coef) == (
        8,
        0.05,
        3e-4,
        0.25,
    )
    assert pg.policy.sigma_max == 0.0 and pg.algo.time_reversed and pg.policy.squash == "tanh"
    assert (gy.policy.width, gy.policy.depth, gy.policy.time_embed_dim, gy.optim.actor_lr) == (
        256,
        3,
        16,
        1e-4,
    )
    assert (gy.algo.additive_noise, gy.algo.clip, gy.optim.critic_lr, gy.optim.max_grad_norm) == (
        0.1,
        0.05,
        1e-3,
        1.0,
    )
    assert gy.critic.activation == "elu" and gy.algo.clip_iterates and gy.policy.squash == "clip"
    # The FPO paper's surrogate (both advantage signs); FlowRL's positive-only form is opt-in.
    assert not gy.algo.positive_advantages_only
