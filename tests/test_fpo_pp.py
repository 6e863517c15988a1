"""FPO++ (trainers/fpo_pp.py): its velocity CFM loss against numpy transcriptions of FlowRL's ("u" output mode,
t = 0 noise) and of the FPO reference's reversed time, the first step's gradient (all ratios 1: the advantage-
weighted flow-matching gradient whatever the trust region), and what every algorithm goes through: training from
the command line and from Python, loading (`GSBPolicy.from_pretrained`, `load_policy`), ONNX export and a model
card. The loss's terms one by one are pinned in test_pins_losses, `act` and the presets in test_pins_baselines and
test_pins_hyperparameters."""

import json
import shutil

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy_flow import fpo_velocity, net

from gsbpolicy import GSBPolicy, PolicySpec, evaluate, load_policy
from trainers import fpo_pp
from trainers.fpo_pp import FpoPlusPlus, FppArgs, velocity_losses

TINY = [
    "--env", "InvertedPendulum-v5", "--seed", "0", "--total-steps", "256", "--rollout.num-envs", "4",
    "--rollout.unroll-length", "32", "--rollout.num-minibatches", "2", "--rollout.epochs", "2",
    "--policy.num-steps", "4", "--policy.width", "16", "--policy.depth", "1", "--critic.width", "16",
    "--critic.depth", "1", "--eval.num-evals", "1", "--eval.episodes", "2", "--eval.final-episodes", "2",
    "--log.no-progress",
]  # fmt: skip
"""Two iterations of 128 steps of a tiny flow policy and critic, one evaluation."""


def _actor(time_reversed: bool):
    spec = PolicySpec(obs_dim=3, act_dim=2, num_steps=8, width=16, depth=2, time_embed_dim=8,
                      sigma_schedule="constant", sigma_max=0.0, action_low=(-1.0, -1.0),
                      action_high=(1.0, 1.0))  # fmt: skip
    algo = FpoPlusPlus(FppArgs(num_samples=5, time_reversed=time_reversed))
    actor = algo.make_actor(spec, None, key=jax.random.key(0))
    stats = np.random.default_rng(0).normal(1.0, 2.0, (32, 3)).astype(np.float32)
    return algo, actor.with_normalizer(actor.normalizer.update(stats))


def flowrl_u_loss(actor, obs, action, eps, t, reduction):
    """FlowRL's "u" mode (t = 0 noise): a_t = (1 - t) eps + t a, target a - eps, the squared error reduced."""
    a_t = (1 - t) * eps + t * action
    err = (net(actor, obs, a_t, t) - (action - eps)) ** 2
    return {"mean": err.mean(), "sum": err.sum(), "sqrt": err.sum() / np.sqrt(err.size)}[reduction]


def reference_u_loss(actor, obs, action, eps, tau):
    """The same loss in the FPO reference's time (tau = 1 noise): v_hat(x_tau, tau) ~ eps - a."""
    x_tau = tau * eps + (1 - tau) * action
    return np.sum((fpo_velocity(actor, obs, x_tau, tau) - (eps - action)) ** 2) / np.sqrt(action.size)


@pytest.mark.parametrize("reduction", ["mean", "sum", "sqrt"])
def test_velocity_loss_is_flowrls_u_mode(reduction):
    _, actor = _actor(time_reversed=False)
    rng = np.random.default_rng(1)
    obs, action = rng.normal(size=3), rng.normal(size=2)
    eps, t = rng.normal(size=(4, 2)), np.array([0.005, 0.3, 0.7, 0.995])
    ours = velocity_losses(actor, *(jnp.asarray(x, jnp.float32) for x in (obs, action, eps, t)), reduction)
    hand = [flowrl_u_loss(actor, obs, action, eps[i], t[i], reduction) for i in range(4)]
    np.testing.assert_allclose(ours, hand, rtol=1e-5, atol=1e-7)


def test_stored_losses_in_the_reversed_time_are_the_references():
    algo, actor = _actor(time_reversed=True)
    obs = jax.random.normal(jax.random.key(1), (3, 3))
    env_action, extras = algo.act(actor, obs, jax.random.key(2))
    np.testing.assert_allclose(env_action, jnp.tanh(extras.action), atol=1e-6)
    for i in range(3):
        for j in range(5):
            args = (np.asarray(obs[i], np.float64), np.asarray(extras.action[i], np.float64))
            eps = np.asarray(extras.eps[i, j], np.float64)
            hand = reference_u_loss(actor, *args, eps, 1.0 - float(extras.t[i, j]))
            assert float(extras.cfm_losses[i, j]) == pytest.approx(hand, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("trust_region", ["aspo", "ppo", "spo"])
def test_the_first_step_is_the_advantage_weighted_flow_matching_gradient(trust_region):
    """At the rollout's parameters every ratio is 1, where PPO's clip is inactive and SPO's penalty has zero
    gradient: the loss is -mean A and its gradient that of mean_{b,i} A_b l_i (the paper: per-sample and
    averaged ratios give the same first step)."""
    algo, actor = _actor(time_reversed=False)
    algo = FpoPlusPlus(FppArgs(num_samples=5, trust_region=trust_region))
    obs = jax.random.normal(jax.random.key(1), (6, 3))
    _, extras = algo.act(actor, obs, jax.random.key(2))
    advantages = jnp.linspace(-1.5, 1.0, 6)
    params, static = eqx.partition(actor, eqx.is_inexact_array)

    def loss(p):
        return algo.actor_loss(eqx.combine(p, static), obs, extras, advantages, jax.random.key(0))

    def weighted(p):
        new = jax.vmap(velocity_losses, in_axes=(None, 0, 0, 0, 0, None))(
            eqx.combine(p, static), obs, extras.action, extras.eps, extras.t, "sqrt"
        )
        return jnp.mean(advantages[:, None] * new)

    (value, metrics), grads = jax.value_and_grad(loss, has_aux=True)(params)
    assert float(value) == pytest.approx(-float(advantages.mean()), abs=1e-6)
    assert float(metrics["ratio_mean"]) == 1.0 and float(metrics["clip_frac"]) == 0.0
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(jax.grad(weighted)(params)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-7)


# ------------------------------------------------------------------------------ what every algorithm goes through
@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("fpo_pp") / "run"
    fpo_pp.main([*TINY, "--preset", "cpu", "--log.export-onnx", "--output-dir", str(out)])
    return out


def test_it_trains_end_to_end_from_the_command_line_and_loads_both_ways(finished):
    run = json.loads((finished / "run.json").read_text())
    assert run["algo"] == "fpo_pp" and run["module"] == "trainers.fpo_pp" and run["args"]["preset"] == "cpu"
    records = [json.loads(line) for line in (finished / "metrics.jsonl").read_text().splitlines()]
    assert [r["type"] for r in records] == ["train", "train", "eval"]
    assert {"train/cfm_loss", "train/ratio_max", "train/clip_frac", "train/approx_kl"} <= set(records[0])
    assert all(np.isfinite(r["train/actor_loss"]) for r in records[:2])
    policy = GSBPolicy.from_pretrained(finished / "policy")
    assert policy.kind == "flow" and policy.spec.time_reversed and policy.spec.sigma_max == 0.0
    module = load_policy(finished / "policy")
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    # Zero-noise evaluation (FPO++'s): the deterministic action is the flow integrated from a^(0) = 0.
    np.testing.assert_allclose(policy.predict(obs)[0], jax.vmap(module.act)(obs), atol=1e-6)
    zero = np.zeros((5, *policy.noise_shape), np.float32)
    np.testing.assert_allclose(policy.act(obs, zero), policy.predict(obs)[0], atol=1e-6)
    assert np.isfinite(evaluate(policy, "InvertedPendulum-v5", n_episodes=2, seed=0).returns).all()


def test_its_onnx_export_acts_as_the_policy(finished, tmp_path):
    from export import onnx as onnx_export
    from export.runtime import OnnxPolicy

    policy = GSBPolicy.from_pretrained(finished / "policy")
    obs = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    for path in (finished / "policy" / "policy.onnx", tmp_path / "again.onnx"):
        if not path.exists():
            assert onnx_export.main([str(finished / "policy"), "--out", str(path)]) == 0
        np.testing.assert_allclose(OnnxPolicy(path).predict(obs)[0], policy.predict(obs)[0], atol=1e-5)


def test_its_run_publishes_a_card_that_names_its_own_command(finished, tmp_path):
    from hub_cards import publish

    run = tmp_path / "run"
    shutil.copytree(finished, run, ignore=shutil.ignore_patterns("run.lock"))
    assert publish.main([str(run), "--repo-id", "org/fpo-pp", "--dry-run", "--no-video"]) == 0
    card = (run / "hub" / "README.md").read_text()
    assert "python -m trainers.fpo_pp --preset cpu" in card and "FPO++" in card


def test_it_trains_end_to_end_from_python_with_the_gym_preset(tmp_path):
    """The Python API with FlowRL's column (additive noise 0.02, the +-2 action clip, ELU, Fourier time features)
    made tiny; the stored actions respect the clip."""
    tiny = {"rollout": {"num_envs": 4, "unroll_length": 32, "num_minibatches": 2, "epochs": 1},
            "policy": {"num_steps": 4, "width": 16, "depth": 1, "time_embed_dim": 4},
            "critic": {"width": 16, "depth": 1},
            "eval": {"num_evals": 1, "interval_steps": 0, "episodes": 2, "final_episodes": 2},
            "log": {"progress": False}}  # fmt: skip
    policy = fpo_pp.train(
        "InvertedPendulum-v5", preset="gym", total_steps=128, output_dir=tmp_path / "gym", **tiny
    )
    assert isinstance(policy, GSBPolicy) and policy.spec.activation == "elu"
    assert policy.spec.time_embedding == "fourier" and policy.spec.squash == "clip"
    assert not policy.spec.clip_iterates and policy.spec.output_scale == 1.0
    with pytest.raises(ValueError, match=r"--algo\.action-clip must be > 0"):
        fpo_pp.train("InvertedPendulum-v5", algo={"action_clip": 0.0}, output_dir=tmp_path / "bad")
