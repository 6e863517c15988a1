"""Pins of what each baseline file does besides its loss (the losses are pinned in test_pins_losses): how it
builds its actor from the spec and its arguments, what `act` samples and stores for the update, the cpu
presets and every preset's default task (the `train` / `main` wiring of all five methods is pinned in
test_pins_hyperparameters). Each test names one behaviour so that a mutation of any one line in
trainers/{gaussian_ppo,dppo,fpo,fpo_pp,genpo}.py fails a test. (No test name here contains the word that mutation
runs deselect with -k.)"""

import dataclasses
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy import GaussianActor, PolicySpec, make_policy
from gsbpolicy._coupling import make_genpo
from gsbpolicy._gaussian import GaussianSpec
from gsbpolicy._policy import sample_noise
from gsbpolicy._sde import prior_log_prob
from trainers.dppo import ChainExtras, Dppo, DppoArgs, per_dim_log_probs
from trainers.fpo import CfmExtras, Fpo, FpoArgs, cfm_losses
from trainers.fpo_pp import FpoPlusPlus, FppArgs, velocity_losses
from trainers.gaussian_ppo import GaussianExtras, GaussianPpo, GaussianPpoArgs
from trainers.genpo import GenPO, GenPOArgs, GenPOExtras

BASELINES = ["gaussian_ppo", "dppo", "fpo", "fpo_pp", "genpo"]
SPEC = PolicySpec(obs_dim=3, act_dim=2, num_steps=4, width=8, depth=1, time_embed_dim=4, squash="tanh",
                  sigma_schedule="constant", sigma_max=0.3, action_low=(-1.0, -2.0), action_high=(1.0, 2.0),
                  env_id="Tiny-v0")  # fmt: skip
OBS = jax.random.normal(jax.random.key(1), (3, 3))


def same(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("method", BASELINES)
def test_each_preset_has_its_default_task_and_takes_the_given_one(method):
    presets = importlib.import_module(f"trainers.{method}").PRESETS
    defaults = {"cpu": "InvertedPendulum-v5", "playground": "CartpoleSwingup", "gym": "HalfCheetah-v5"}
    for name, env in defaults.items():
        args = presets[name](None)
        assert (args.env, args.preset) == (env, name)
    assert presets["gym"]("Walker2d-v5").env == "Walker2d-v5"
    assert presets["playground"]("FingerSpin").env == "FingerSpin"


# Each cpu preset's own fields (ours: tuned so the method learns InvertedPendulum-v5 in minutes on 2 cores).
CPU = {
    "gaussian_ppo": {
        "total_steps": 100_000,
        "rollout": {"num_envs": 32, "unroll_length": 32, "num_minibatches": 4, "epochs": 10},
        "critic": {"width": 64, "depth": 2, "activation": "tanh"},
        "optim": {"actor_lr": 3e-4, "critic_lr": 3e-4, "max_grad_norm": None, "value_coef": 0.5},
        "eval": {"num_evals": 10},
    },
    "dppo": {
        "total_steps": 150_000,
        "rollout": {"num_envs": 16, "unroll_length": 64, "num_minibatches": 4, "epochs": 8},
        "policy": {
            "squash": "tanh",
            "sigma_max": 0.1 / 0.1**0.5,
            "num_steps": 10,
            "sigma_schedule": "constant",
        },
        "optim": {"actor_lr": 1e-3, "critic_lr": 1e-3},
        "algo": dataclasses.asdict(DppoArgs(time_reversed=True)),
    },
    "fpo": {
        "total_steps": 150_000,
        "rollout": {"num_envs": 16, "unroll_length": 64, "num_minibatches": 4, "epochs": 8},
        "policy": {"squash": "tanh", "num_steps": 10, "sigma_max": 0.0},
        "algo": dataclasses.asdict(FpoArgs(time_reversed=True)),
    },
    # FPO's small run with FPO++'s objective: FppArgs' defaults, the reference's time.
    "fpo_pp": {
        "total_steps": 150_000,
        "rollout": {"num_envs": 16, "unroll_length": 64, "num_minibatches": 4, "epochs": 8},
        "policy": {"squash": "tanh", "num_steps": 10, "sigma_max": 0.0},
        "algo": dataclasses.asdict(FppArgs(time_reversed=True)),
    },
    "genpo": {
        "total_steps": 150_000,
        "rollout": {"num_envs": 16, "unroll_length": 64, "num_minibatches": 4, "epochs": 8},
        "policy": {"num_steps": 4, "width": 64, "depth": 2, "output_scale": 1.0},
    },
}


@pytest.mark.parametrize("method", BASELINES)
def test_cpu_preset_fields(method):
    args = importlib.import_module(f"trainers.{method}").PRESETS["cpu"]("Hopper-v5")
    assert args.env == "Hopper-v5"
    for group, expected in CPU[method].items():
        if not isinstance(expected, dict):
            assert getattr(args, group) == expected, group
            continue
        got = dataclasses.asdict(getattr(args, group))
        assert {k: got[k] for k in expected} == pytest.approx(expected), (method, group)


def test_genpo_humanoid_splits_1020_envs_into_6_minibatches_and_other_tasks_keep_the_table():
    presets = importlib.import_module("trainers.genpo").PRESETS
    rollout = presets["gym"]("Humanoid-v5").rollout
    assert (rollout.num_envs, rollout.num_minibatches) == (1020, 6)
    other = presets["gym"]("Ant-v5").rollout
    assert (other.num_envs, other.num_minibatches) != (1020, 6)


def test_gaussian_actor_takes_every_architecture_field_from_its_args():
    args = GaussianPpoArgs(width=8, depth=3, activation="elu", std="state", squash="tanh", init_log_std=-0.5,
                           min_std=0.01)  # fmt: skip
    key = jax.random.key(5)
    actor = GaussianPpo(args).make_actor(SPEC, None, key=key)
    want = GaussianSpec(obs_dim=3, act_dim=2, action_low=SPEC.action_low, action_high=SPEC.action_high, width=8,
                        depth=3, activation="elu", std="state", squash="tanh", init_log_std=-0.5, min_std=0.01,
                        env_id="Tiny-v0")  # fmt: skip
    assert actor.spec == want
    same(actor, GaussianActor(want, key=key))


def test_gaussian_act_stores_the_pre_squash_sample_and_its_log_density():
    actor = GaussianActor(GaussianSpec(obs_dim=3, act_dim=2, action_low=(-1.0, -2.0), action_high=(1.0, 2.0),
                                       std="state", squash="tanh"), key=jax.random.key(0))  # fmt: skip
    key = jax.random.key(6)
    actions, extras = GaussianPpo(GaussianPpoArgs()).act(actor, OBS, key)
    keys = jax.random.split(key, 3)
    sample = jnp.stack([actor.sample(OBS[i], keys[i]) for i in range(3)])
    assert isinstance(extras, GaussianExtras)
    np.testing.assert_allclose(extras.sample, sample, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        extras.log_prob, [actor.log_prob(OBS[i], sample[i]) for i in range(3)], rtol=1e-5
    )
    np.testing.assert_allclose(actions, [actor.to_env(s) for s in sample], rtol=1e-5, atol=1e-6)


def test_dppo_actor_sets_time_direction_and_parameterization_from_its_args():
    key = jax.random.key(5)
    velocity = Dppo(DppoArgs(time_reversed=True)).make_actor(SPEC, None, key=key)
    assert velocity.spec == dataclasses.replace(SPEC, time_reversed=True, parameterization="velocity")
    same(velocity, make_policy(velocity.spec, key=key))
    ddpm = Dppo(DppoArgs(ddpm=True)).make_actor(dataclasses.replace(SPEC, sigma_max=0.0), None, key=key)
    assert (ddpm.spec.parameterization, ddpm.spec.time_reversed) == ("ddpm", False)
    with pytest.raises(
        ValueError, match=r"^DPPO needs Gaussian generation steps: policy.sigma_max must be > 0$"
    ):
        Dppo(DppoArgs()).make_actor(dataclasses.replace(SPEC, sigma_max=0.0), None, key=key)


@pytest.mark.parametrize("per_dim", [False, True])
def test_dppo_act_clips_only_the_step_draws_and_stores_the_chain(per_dim):
    """The key's noise with steps 1..N clamped to +-noise_clip (a^(0) keeps its draw); the chain and its step
    log-densities, per action dimension when the clamp is per dimension."""
    algo = Dppo(DppoArgs(noise_clip=0.5, log_prob_clamp_per_dim=per_dim))
    actor = algo.make_actor(SPEC, None, key=jax.random.key(0))
    key = jax.random.key(7)
    actions, extras = algo.act(actor, OBS, key)
    noise = sample_noise(key, SPEC, (3,))
    assert float(jnp.max(jnp.abs(noise[:, 0]))) > 0.5 and float(jnp.max(jnp.abs(noise[:, 1:]))) > 0.5
    clipped = noise.at[:, 1:].set(jnp.clip(noise[:, 1:], -0.5, 0.5))
    sample = jax.vmap(actor.sample)(OBS, clipped)
    assert isinstance(extras, ChainExtras)
    np.testing.assert_array_equal(extras.path, sample.path)
    want = jax.vmap(per_dim_log_probs, in_axes=(None, 0, 0))(actor, sample.path, sample.drifts)
    np.testing.assert_allclose(extras.log_probs, want if per_dim else sample.log_probs, rtol=1e-5)
    if per_dim:
        np.testing.assert_allclose(jnp.sum(want, -1), sample.log_probs, rtol=1e-5)
    np.testing.assert_array_equal(actions, jax.vmap(actor.to_env)(sample.path[:, -1]))


TERMS = np.array([[-8.0, 1.4], [3.0, 2.5]], np.float32)
"""Two generation steps' per-dimension log-densities (2 action dims), one far below DPPO's clamp of
[-5, 2] in one dimension, one above it in both."""


@pytest.mark.parametrize(
    ("per_dim", "reduction", "clamp", "want"),
    [
        (
            True,
            "mean",
            (-5.0, 2.0),
            [(-5.0 + 1.4) / 2, (2.0 + 2.0) / 2],
        ),  # official DPPO: clamp, then average
        (True, "sum", (-5.0, 2.0), [-5.0 + 1.4, 2.0 + 2.0]),
        (True, "sum", None, [-8.0 + 1.4, 3.0 + 2.5]),
        (False, "mean", (-5.0, 2.0), [(-8.0 + 1.4) / 2, 2.0]),  # average, then clamp the step's value
        (False, "sum", (-5.0, 2.0), [-5.0, 2.0]),
        (False, "sum", None, [-8.0 + 1.4, 3.0 + 2.5]),
    ],
)
def test_dppo_step_log_probs_reduce_and_clamp_in_the_order_asked(per_dim, reduction, clamp, want):
    """Each branch of the ratio's step log-density: per-dimension input is clamped before the reduction, a
    step's summed density after it; "mean" divides by act_dim, "sum" does not; no clamp leaves values as they
    are."""
    algo = Dppo(DppoArgs(log_prob_reduction=reduction, log_prob_clamp=clamp, log_prob_clamp_per_dim=per_dim))
    terms = jnp.asarray(TERMS if per_dim else TERMS.sum(-1))
    np.testing.assert_allclose(algo.step_log_probs(terms, 2), want, rtol=1e-6)


def test_dppo_act_without_a_noise_clip_uses_the_keys_noise_as_drawn():
    algo = Dppo(DppoArgs())
    actor = algo.make_actor(SPEC, None, key=jax.random.key(0))
    _, extras = algo.act(actor, OBS, jax.random.key(7))
    sample = jax.vmap(actor.sample)(OBS, sample_noise(jax.random.key(7), SPEC, (3,)))
    np.testing.assert_array_equal(extras.path, sample.path)


def test_fpo_actor_sets_time_direction_and_iterate_clipping_from_its_args():
    key = jax.random.key(5)
    spec = dataclasses.replace(SPEC, sigma_max=0.0)
    for reversed_, clip in [(True, False), (False, True)]:
        actor = Fpo(FpoArgs(time_reversed=reversed_, clip_iterates=clip)).make_actor(spec, None, key=key)
        assert actor.spec == dataclasses.replace(spec, time_reversed=reversed_, clip_iterates=clip)
        same(actor, make_policy(actor.spec, key=key))


@pytest.mark.parametrize("additive_noise", [0.0, 0.3])
def test_fpo_act_stores_the_action_its_cfm_draws_and_their_losses(additive_noise):
    """Four keys from the one: the ODE's noise, the additive exploration noise, the CFM eps draws and the
    times t ~ U{0, 1/N, ..., (N-1)/N}; the stored losses are the old policy's on those draws."""
    spec = dataclasses.replace(SPEC, sigma_max=0.0)
    algo = Fpo(FpoArgs(num_samples=5, additive_noise=additive_noise))
    actor = algo.make_actor(spec, None, key=jax.random.key(0))
    key = jax.random.key(8)
    actions, extras = algo.act(actor, OBS, key)
    k_noise, k_add, k_eps, k_t = jax.random.split(key, 4)
    action = jax.vmap(actor.sample_final)(OBS, sample_noise(k_noise, spec, (3,)))
    if additive_noise:
        action = action + additive_noise * jax.random.normal(k_add, action.shape)
    eps = jax.random.normal(k_eps, (3, 5, 2))
    t = (jax.random.randint(k_t, (3, 5), 0, 4) / 4).astype(jnp.float32)
    assert isinstance(extras, CfmExtras) and extras.t.dtype == jnp.float32
    np.testing.assert_allclose(extras.action, action, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(extras.eps, eps)
    np.testing.assert_array_equal(extras.t, t)
    assert set(np.unique(np.asarray(t)).tolist()) <= {0.0, 0.25, 0.5, 0.75}
    want = jax.vmap(cfm_losses, in_axes=(None, 0, 0, 0, 0))(actor, OBS, action, eps, t)
    np.testing.assert_allclose(extras.cfm_losses, want, rtol=1e-5)
    np.testing.assert_allclose(actions, jax.vmap(actor.to_env)(action), rtol=1e-5, atol=1e-6)


def test_fpo_pp_actor_is_fpos_with_its_time_direction_and_iterate_clipping():
    key = jax.random.key(5)
    spec = dataclasses.replace(SPEC, sigma_max=0.0)
    for reversed_, clip in [(True, False), (False, True)]:
        actor = FpoPlusPlus(FppArgs(time_reversed=reversed_, clip_iterates=clip)).make_actor(
            spec, None, key=key
        )
        assert actor.spec == dataclasses.replace(spec, time_reversed=reversed_, clip_iterates=clip)
        same(actor, make_policy(actor.spec, key=key))


@pytest.mark.parametrize(
    ("changes", "bound"),
    [
        ({}, None),
        ({"additive_noise": 0.3, "action_clip": 0.4, "time_beta": 2.0, "loss_reduction": "mean"}, 0.4),
    ],
)
def test_fpo_pp_act_stores_the_action_its_draws_and_their_velocity_losses(changes, bound):
    """Four keys from the one: the ODE's noise, the additive noise (before the action clip), the eps draws and
    u ~ U[0, 1) with t = 0.005 + 0.99 (1 - u)^(1/beta); the stored losses are the rollout policy's."""
    spec = dataclasses.replace(SPEC, sigma_max=0.0)
    algo = FpoPlusPlus(FppArgs(num_samples=5, **changes))
    actor = algo.make_actor(spec, None, key=jax.random.key(0))
    key = jax.random.key(8)
    actions, extras = algo.act(actor, OBS, key)
    k_noise, k_add, k_eps, k_t = jax.random.split(key, 4)
    action = jax.vmap(actor.sample_final)(OBS, sample_noise(k_noise, spec, (3,)))
    if changes:
        action = action + 0.3 * jax.random.normal(k_add, action.shape)
        assert float(jnp.max(jnp.abs(action))) > bound  # the clip binds
        action = jnp.clip(action, -bound, bound)
    eps = jax.random.normal(k_eps, (3, 5, 2))
    u = jax.random.uniform(k_t, (3, 5))
    t = 0.005 + 0.99 * (1.0 - u) ** (1.0 / algo.args.time_beta)
    assert isinstance(extras, CfmExtras) and extras.t.dtype == jnp.float32
    np.testing.assert_allclose(extras.action, action, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(extras.eps, eps)
    np.testing.assert_allclose(extras.t, t, rtol=1e-6)
    assert 0.005 <= float(jnp.min(t)) and float(jnp.max(t)) <= 0.995
    want = jax.vmap(velocity_losses, in_axes=(None, 0, 0, 0, 0, None))(
        actor, OBS, action, eps, t, algo.args.loss_reduction
    )
    np.testing.assert_allclose(extras.cfm_losses, want, rtol=1e-5)
    np.testing.assert_allclose(actions, jax.vmap(actor.to_env)(action), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_samples": 0}, r"^--algo.num-samples must be >= 1, got 0$"),
        ({"clip": 0.0}, r"^--algo.clip must be > 0 \(the half-width of the trust region\), got 0.0$"),
        ({"time_beta": 0.0}, r"^--algo.time-beta must be > 0, got 0.0$"),
        ({"loss_clamp": 0.0}, r"^--algo.loss-clamp must be > 0 \(or None: off\), got 0.0$"),
        ({"negative_advantage_loss_clamp": -1.0}, r"^--algo.negative-advantage-loss-clamp must be > 0"),
        ({"log_ratio_clamp": 0.0}, r"^--algo.log-ratio-clamp must be > 0"),
        ({"advantage_clamp": 0.0}, r"^--algo.advantage-clamp must be > 0"),
        ({"action_clip": 0.0}, r"^--algo.action-clip must be > 0"),
        (
            {"additive_noise": -0.1},
            r"^--algo.additive-noise must be >= 0 \(a standard deviation\), got -0.1$",
        ),
    ],
)
def test_fpo_pp_args_refuse_what_has_no_meaning(changes, message):
    with pytest.raises(ValueError, match=message):
        FppArgs(**changes).validate()


def test_fpo_pp_args_accept_their_boundaries_and_none_for_every_bound():
    FppArgs(num_samples=1, additive_noise=0.0, time_beta=1e-3, clip=1e-3).validate()
    FppArgs(loss_clamp=None, negative_advantage_loss_clamp=None, log_ratio_clamp=None, advantage_clamp=None,
            action_clip=None).validate()  # fmt: skip


def test_genpo_actor_is_the_coupled_flow_with_the_args_mix():
    key = jax.random.key(5)
    actor = GenPO(GenPOArgs(flow_mix=0.7)).make_actor(SPEC, None, key=key)
    same(actor, make_genpo(SPEC, 0.7, key=key))
    assert float(actor.log_det()) == pytest.approx(float(make_genpo(SPEC, 0.7, key=key).log_det()))
    assert float(actor.log_det()) != pytest.approx(float(make_genpo(SPEC, 0.9, key=key).log_det()))


def test_genpo_act_pushes_the_keys_doubled_draw_and_stores_its_exact_density():
    actor = make_genpo(SPEC, 0.8, key=jax.random.key(0))
    key = jax.random.key(9)
    actions, extras = GenPO(GenPOArgs()).act(actor, OBS, key)
    x0 = jax.random.normal(key, (3, 4))
    x1 = jax.vmap(actor.forward)(OBS, x0)
    assert isinstance(extras, GenPOExtras)
    np.testing.assert_array_equal(extras.x1, x1)
    np.testing.assert_allclose(
        extras.log_prob, jax.vmap(prior_log_prob)(x0) - actor.log_det(), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(extras.log_prob, jax.vmap(actor.log_prob)(OBS, x1), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(actions, jax.vmap(actor.to_env)(x1))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"flow_mix": 0.0}, r"^--algo.flow-mix must be in \(0, 1\], got 0.0$"),
        ({"flow_mix": 1.01}, r"^--algo.flow-mix must be in \(0, 1\], got 1.01$"),
        ({"clip": 0.0}, r"^--algo.clip must be > 0 \(the half-width of PPO's ratio interval\), got 0.0$"),
        ({"compress_coef": -0.01}, r"^--algo.compress-coef must be >= 0, got -0.01$"),
    ],
)
def test_genpo_args_refuse_a_mix_outside_0_1_a_non_positive_clip_and_a_negative_compress(changes, message):
    with pytest.raises(ValueError, match=message):
        GenPOArgs(**changes).validate()


def test_genpo_args_accept_their_boundaries():
    for changes in ({"flow_mix": 1.0}, {"flow_mix": 1e-3}, {"compress_coef": 0.0}, {"clip": 0.5}):
        GenPOArgs(**changes).validate()


class CoincidentHalves:
    """A stand-in GenPO flow whose forward map returns z = y: the compress loss's epsilon is all that keeps
    its square root (and its gradient) finite there."""

    def __init__(self, actor):
        self.spec, self.log_prob = actor.spec, actor.log_prob

    def forward(self, obs, x0):
        d = self.spec.act_dim
        return jnp.concatenate([x0[:d], x0[:d]])


def test_genpo_compress_gap_is_finite_where_the_two_halves_coincide():
    actor = make_genpo(SPEC, 0.8, key=jax.random.key(0))
    algo = GenPO(GenPOArgs(compress_coef=0.5))
    _, extras = algo.act(actor, OBS, jax.random.key(9))
    loss, metrics = algo.actor_loss(CoincidentHalves(actor), OBS, extras, jnp.ones(3), jax.random.key(1))
    assert float(metrics["compress_gap"]) == pytest.approx(1e-4, rel=1e-3)  # sqrt(0 + 1e-8)
    assert np.isfinite(float(loss))
