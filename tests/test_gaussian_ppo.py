"""Gaussian PPO in the shared pipeline: the actor's likelihoods against numpy (with the tanh squash), the
PPO loss at the old parameters, the policy folder round trip, and a tiny end-to-end run."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy import GaussianActor, GSBPolicy, PolicyFormatError, load_policy, save_policy
from gsbpolicy._gaussian import GaussianSpec, tanh_log_det
from trainers._core.loop import Trainer
from trainers.gaussian_ppo import (
    GaussianPpo,
    GaussianPpoArgs,
    cpu_preset,
    gym_preset,
    playground_preset,
)
from trainers.presets import with_fields

TINY = {
    "rollout": {"num_envs": 2, "unroll_length": 32, "num_minibatches": 2, "epochs": 2},
    "critic": {"width": 16, "depth": 1},
    "eval": {"num_evals": 2, "episodes": 2, "final_episodes": 2},
    "log": {"checkpoint_every": 2, "progress": False},
}


def make_actor(std: str, squash: str) -> GaussianActor:
    """A 2-layer actor with non-trivial observation statistics and bounds [-1, 2] x [-3, 1]."""
    spec = GaussianSpec(obs_dim=3, act_dim=2, action_low=(-1.0, -3.0), action_high=(2.0, 1.0), width=8, depth=2,
                        activation="silu", std=std, squash=squash, init_log_std=-0.3)  # fmt: skip
    actor = GaussianActor(spec, key=jax.random.key(0))
    obs = np.random.default_rng(0).normal(1.0, 2.0, (32, 3)).astype(np.float32)
    return actor.with_normalizer(actor.normalizer.update(jnp.asarray(obs)))


def numpy_mean_std(actor: GaussianActor, obs: np.ndarray):
    """The actor's forward pass written out in float64 numpy."""
    norm = actor.normalizer
    x = np.clip(
        (obs - np.asarray(norm.mean)) / np.sqrt(np.asarray(norm.var) + norm.eps), -norm.clip, norm.clip
    )
    layers = actor.mlp.layers
    for i, layer in enumerate(layers):
        x = np.asarray(layer.weight, np.float64) @ x + np.asarray(layer.bias, np.float64)
        if i < len(layers) - 1:
            x = x / (1 + np.exp(-x))  # silu
    if actor.spec.std == "state":
        mean, s = np.split(x, 2)
        return mean, np.log1p(np.exp(s)) + actor.spec.min_std
    return x, np.exp(np.asarray(actor.log_std, np.float64))


@pytest.mark.parametrize("std, squash", [("state", "tanh"), ("param", "clip")])
def test_log_prob_entropy_and_squash_match_numpy(std, squash):
    actor = make_actor(std, squash)
    rng = np.random.default_rng(1)
    for _ in range(5):
        obs = rng.normal(0, 3, 3).astype(np.float32)
        u = rng.normal(0, 1.5, 2).astype(np.float32)
        mean, sd = numpy_mean_std(actor, obs.astype(np.float64))
        expected = np.sum(-0.5 * ((u - mean) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi))
        np.testing.assert_allclose(actor.log_prob(jnp.asarray(obs), jnp.asarray(u)), expected, rtol=1e-5)
        low, high = np.array([-1.0, -3.0]), np.array([2.0, 1.0])
        env_action = low + (np.tanh(u) + 1) / 2 * (high - low) if squash == "tanh" else np.clip(u, low, high)
        np.testing.assert_allclose(actor.to_env(jnp.asarray(u)), env_action, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(
            actor.act(jnp.asarray(obs)), actor.to_env(jnp.asarray(mean, jnp.float32)), atol=1e-5
        )
        # Entropy: Gaussian entropy, plus for tanh the log-det of the squash at one sample (Brax).
        key = jax.random.key(3)
        gaussian_entropy = np.sum(0.5 + 0.5 * np.log(2 * np.pi) + np.log(sd))
        if squash == "tanh":
            sample = np.asarray(actor.sample(jnp.asarray(obs), key), np.float64)
            gaussian_entropy += np.sum(np.log(1 - np.tanh(sample) ** 2))
        np.testing.assert_allclose(actor.entropy(jnp.asarray(obs), key), gaussian_entropy, rtol=1e-4)


def test_a_state_independent_log_std_is_clipped_to_its_range():
    """std = exp(clip(log_std, -20, 2)) (SB3's range): a log std driven far out by training stays usable."""
    actor = eqx.tree_at(lambda a: a.log_std, make_actor("param", "clip"), jnp.asarray([5.0, -30.0]))
    _, std = actor.distribution(jnp.zeros(3))
    np.testing.assert_allclose(std, np.exp([2.0, -20.0]), rtol=1e-6)


def test_tanh_log_det_is_stable_and_matches_numpy():
    u = np.array([-3.0, -0.5, 0.0, 0.7, 2.5], np.float32)
    np.testing.assert_allclose(
        tanh_log_det(jnp.asarray(u)), np.sum(np.log(1 - np.tanh(u.astype(np.float64)) ** 2)), rtol=1e-5
    )
    assert np.isfinite(tanh_log_det(jnp.array([40.0, -40.0])))  # log(1 - tanh^2) would be log(0)


def test_loss_at_old_parameters_is_minus_mean_advantage():
    actor, algo = make_actor("state", "tanh"), GaussianPpo(GaussianPpoArgs(clip=0.1))
    obs = jax.random.normal(jax.random.key(0), (64, 3))
    actions, extras = algo.act(actor, obs, jax.random.key(1))
    assert actions.shape == (64, 2) and np.all(np.asarray(actions) >= np.array([-1.0, -3.0]))
    advantages = jax.random.normal(jax.random.key(2), (64,))
    loss, metrics = algo.actor_loss(actor, obs, extras, advantages, jax.random.key(3))
    np.testing.assert_allclose(loss, -advantages.mean(), rtol=1e-5)
    assert metrics["clip_frac"] == 0 and abs(float(metrics["approx_kl"])) < 1e-6
    # A shifted old log-prob moves the ratio outside the clip: the gradient of those rows vanishes.
    shifted = extras._replace(log_prob=extras.log_prob - 1.0)
    _, metrics = algo.actor_loss(actor, obs, shifted, advantages, jax.random.key(3))
    assert metrics["clip_frac"] == 1.0


@pytest.mark.parametrize("std", ["state", "param"])
def test_policy_folder_round_trip(tmp_path, std):
    actor = make_actor(std, "tanh" if std == "state" else "clip")
    save_policy(actor, tmp_path / "policy")
    loaded = load_policy(tmp_path / "policy")
    assert loaded.spec == actor.spec
    for a, b in zip(
        jax.tree.leaves(eqx.filter(actor, eqx.is_array)),
        jax.tree.leaves(eqx.filter(loaded, eqx.is_array)),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    config = json.loads((tmp_path / "policy" / "config.json").read_text())
    config["format_version"] = 99
    (tmp_path / "policy" / "config.json").write_text(json.dumps(config))
    with pytest.raises(PolicyFormatError, match="gaussian_mlp policy of format_version 99"):
        load_policy(tmp_path / "policy")
    (tmp_path / "policy" / "config.json").write_text(
        json.dumps({**config, "format_version": 1, "spec": [3, 1]})
    )
    with pytest.raises(
        PolicyFormatError, match=r"invalid Gaussian policy spec: 'spec' must be an object, got \[3, 1\]"
    ):
        load_policy(tmp_path / "policy")
    with pytest.raises(FileNotFoundError, match="policy folder not found"):
        load_policy(tmp_path / "missing")


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="activation"):
        GaussianSpec(obs_dim=3, act_dim=1, action_low=(-1.0,), action_high=(1.0,), activation="swish")
    with pytest.raises(ValueError, match="act_dim"):
        GaussianSpec(obs_dim=3, act_dim=2, action_low=(-1.0,), action_high=(1.0,))


BOUNDS_1D = {"action_low": (-1.0,), "action_high": (1.0,)}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"std": "fixed"}, r"std must be state\|param and squash tanh\|clip, got 'fixed', 'clip'"),
        ({"squash": "sigmoid"}, r"std must be state\|param and squash tanh\|clip, got 'param', 'sigmoid'"),
        ({"action_high": (1.0, 1.0)}, "action bounds must have act_dim = 1 entries"),
        ({"obs_dim": 0}, "need obs_dim, act_dim, width >= 1 and depth >= 0"),
        (
            {"act_dim": 0, "action_low": (), "action_high": ()},
            "need obs_dim, act_dim, width >= 1 and depth >= 0",
        ),
        ({"width": 0}, "need obs_dim, act_dim, width >= 1 and depth >= 0"),
        ({"depth": -1}, "need obs_dim, act_dim, width >= 1 and depth >= 0"),
    ],
)
def test_each_invalid_gaussian_spec_field_is_named(fields, message):
    """One field wrong at a time, the others valid: each check fires on its own."""
    with pytest.raises(ValueError, match=message):
        GaussianSpec(**{"obs_dim": 3, "act_dim": 1, **BOUNDS_1D, **fields})


def test_the_smallest_gaussian_spec_is_valid():
    spec = GaussianSpec(obs_dim=1, act_dim=1, width=1, depth=0, **BOUNDS_1D)
    assert (spec.obs_dim, spec.act_dim, spec.width, spec.depth) == (1, 1, 1, 0)


def test_runs_end_to_end_and_its_folder_loads(tmp_path):
    args = with_fields(
        cpu_preset("InvertedPendulum-v5"), total_steps=4 * 64, output_dir=tmp_path / "run", **TINY
    )
    trainer = Trainer(GaussianPpo(args.algo), args)
    policy_dir = trainer.run()
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["algo"] == "gaussian_ppo"
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["type"] for r in records].count("train") == 4
    assert {"train/clip_frac", "train/approx_kl", "train/std_mean", "time/sps"} <= set(records[0])
    assert {"eval/return_deterministic", "eval/return_stochastic"} <= set(records[-1])
    results = json.loads((policy_dir / "results.json").read_text())
    assert results["algo"] == "gaussian_ppo" and results["n_episodes"] == 2 and results["env_steps"] == 256
    obs = np.array([0.01, -0.02, 0.1, 0.0], np.float32)
    action, _ = GSBPolicy.from_pretrained(policy_dir).predict(obs)
    expected = trainer.algorithm.deterministic_act(trainer.state.model.actor, jnp.asarray(obs)[None])[0]
    np.testing.assert_allclose(action, expected, atol=1e-6)


def test_presets_follow_the_paper_tables():
    pg = playground_preset("CheetahRun")  # Table 1, PPO column, with the FPO reference's actor
    assert (pg.algo.width, pg.algo.depth, pg.algo.activation, pg.algo.std, pg.algo.squash) == (
        32,
        4,
        "silu",
        "state",
        "tanh",
    )
    assert (pg.critic.width, pg.critic.depth, pg.critic.activation) == (256, 5, "silu")
    assert (
        pg.optim.actor_lr,
        pg.optim.critic_lr,
        pg.optim.value_coef,
        pg.algo.clip,
        pg.algo.entropy_coef,
    ) == (3e-4, 3e-4, 0.25, 0.1, 0.0)
    assert pg.rollout.recompute_gae and pg.rollout.reward_scaling == 10.0 and pg.total_steps == 60_000_000
    gy = gym_preset("Hopper-v5")  # Table 2, PPO column
    assert (gy.algo.width, gy.algo.depth, gy.algo.activation, gy.algo.std) == (256, 3, "elu", "param")
    assert (gy.critic.width, gy.critic.depth, gy.critic.activation) == (256, 3, "elu")
    assert (gy.optim.actor_lr, gy.optim.critic_lr, gy.optim.max_grad_norm, gy.algo.clip) == (
        1e-4,
        1e-3,
        1.0,
        0.2,
    )
    assert gy.rollout.steps_per_iteration // gy.rollout.num_minibatches == 6144 and gy.rollout.epochs == 4


def test_gaussian_folder_bytes_are_deterministic_and_non_finite_weights_are_refused(tmp_path):
    spec = GaussianSpec(obs_dim=3, act_dim=2, action_low=(-1.0, -1.0), action_high=(1.0, 1.0), width=8, depth=1,
                        activation="tanh", std="param", squash="clip", env_id="x")  # fmt: skip
    actor = GaussianActor(spec, key=jax.random.key(0))
    first, second = save_policy(actor, tmp_path / "a"), save_policy(actor, tmp_path / "b")
    for name in ("model.safetensors", "config.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    diverged = eqx.tree_at(lambda m: m.log_std, actor, actor.log_std * jnp.nan)
    with pytest.raises(ValueError, match="non-finite weights: tensor '.log_std'"):
        save_policy(diverged, tmp_path / "c")
    assert not (tmp_path / "c" / "model.safetensors").exists()
