"""Pins for the shared update (trainers/_core/update.py) with a stub algorithm whose actor loss reports
what it was given: advantages standardised per minibatch with their epsilon, the critic loss weighted by
value_coef, GAE's value targets, and the observation statistics -- the loss sees the rollout's, the state
leaves with those merged with the iteration's observations."""

import dataclasses
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

from gsbpolicy import PolicySpec, make_policy
from trainers._core.algorithm import AbstractAlgorithm
from trainers._core.config import CriticArgs, TrainArgs
from trainers._core.distributed import AXIS
from trainers._core.gae import compute_gae
from trainers._core.init_from import path_kl, strided
from trainers._core.model import ActorCritic, Optimizers, ValueMLP, trainable_mask
from trainers._core.rollout import Transition
from trainers._core.update import (
    FINITE,
    PATH_KL_STREAM,
    TrainState,
    _loss,
    _next_values,
    _values,
    all_finite,
    make_update,
    pop_finite_flags,
)
from trainers.presets import with_fields

SEQUENCES, STEPS, OBS_DIM = 4, 3, 2


class Probe(AbstractAlgorithm):
    """Actor loss 0 (with a zero-valued dependence on the actor, so it has gradients); its metrics are the
    advantages it received and the normalizer statistics the actor carried."""

    name = "probe"

    def act(self, actor, obs, key):
        raise NotImplementedError

    def actor_loss(self, actor, obs, extras, advantages, key):
        touch = 0.0 * jnp.sum(
            jax.vmap(actor.drift, in_axes=(0, 0, None))(obs, jnp.zeros((obs.shape[0], 1)), 0.0)
        )
        return touch, {
            "advantages": advantages,
            "norm_mean_0": actor.normalizer.mean[0],
            "norm_mean_1": actor.normalizer.mean[1],
            "norm_var_1": actor.normalizer.var[1],
            "norm_count": actor.normalizer.count,
            # Which sequence led the minibatch, and the loss key it was given (the key stream's pins).
            "first_obs": obs[0, 0],
            "first_extra": extras[0],
            "key_draw": jax.random.uniform(key),
        }


class NaNLossProbe(Probe):
    """A NaN loss whose gradient is finite (a constant): only the loss flag may drop."""

    def actor_loss(self, actor, obs, extras, advantages, key):
        loss, metrics = super().actor_loss(actor, obs, extras, advantages, key)
        return loss + jnp.nan, metrics


class NaNGradientProbe(Probe):
    """A finite loss (0) with a NaN gradient: d sqrt(u) / du is inf at u = 0, times du/dtheta = 0."""

    def actor_loss(self, actor, obs, extras, advantages, key):
        loss, metrics = super().actor_loss(actor, obs, extras, advantages, key)
        return loss + jnp.sqrt(loss), metrics


def make_model():
    spec = PolicySpec(obs_dim=OBS_DIM, act_dim=1, num_steps=2, width=4, depth=1, action_low=(-1.0,),
                      action_high=(1.0,))  # fmt: skip
    actor = make_policy(spec, key=jax.random.key(0))
    actor = actor.with_normalizer(actor.normalizer.update(jnp.array([[1.0, -1.0], [3.0, 7.0]])))
    return ActorCritic(actor, ValueMLP(OBS_DIM, CriticArgs(width=4, depth=1), key=jax.random.key(1)))


def make_data(seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(2.0, 3.0, (SEQUENCES, STEPS, OBS_DIM)).astype(np.float32)
    reward = rng.normal(size=(SEQUENCES, STEPS)).astype(np.float32)
    terminated = np.zeros((SEQUENCES, STEPS), bool)
    terminated[0, 1] = True
    truncated = np.zeros((SEQUENCES, STEPS), bool)
    truncated[1, 0] = True
    final_obs = np.concatenate([obs[:, 1:], rng.normal(size=(SEQUENCES, 1, OBS_DIM))], axis=1).astype(
        np.float32
    )
    # extras: what an algorithm stored at rollout, one number per step here (its index), so a test can see
    # that it travels with its observation.
    extras = np.arange(SEQUENCES * STEPS, dtype=np.float32).reshape(SEQUENCES, STEPS)
    return Transition(*map(jnp.asarray, (obs, reward, terminated, truncated, final_obs, extras)))


def args_with(**rollout) -> TrainArgs:
    rollout = {"num_envs": SEQUENCES, "unroll_length": STEPS, "num_minibatches": 1, "epochs": 1, **rollout}
    return with_fields(TrainArgs(), rollout=rollout, optim={"value_coef": 0.37})


def loss_of(model, args, advantages, returns):
    params, static = eqx.partition(model, trainable_mask(model))
    batch = (make_data(), jnp.asarray(advantages), jnp.asarray(returns))
    return _loss(params, static, Probe(), args, batch, jax.random.key(0))


@pytest.fixture(scope="module")
def model():
    return make_model()


def test_advantages_are_standardised_over_the_minibatch_with_epsilon_on_the_std(model):
    raw = np.random.default_rng(1).normal(0.5, 2.0, (SEQUENCES, STEPS)).astype(np.float32)
    _, metrics = loss_of(model, args_with(), raw, np.zeros_like(raw))
    flat = raw.reshape(-1).astype(np.float64)
    np.testing.assert_allclose(metrics["advantages"], (flat - flat.mean()) / (flat.std() + 1e-8), rtol=1e-5)
    # std 1e-4: 1e-4 / (1e-4 + 1e-8) ~ 1, where sqrt(var + 1e-8) would give 1 / sqrt(2).
    tiny = np.where(np.arange(SEQUENCES * STEPS) % 2 == 0, 1e-4, -1e-4).reshape(SEQUENCES, STEPS)
    _, metrics = loss_of(model, args_with(), tiny.astype(np.float32), np.zeros_like(tiny, np.float32))
    np.testing.assert_allclose(np.abs(metrics["advantages"]), 1 / (1 + 1e-4), rtol=1e-4)
    # Constant advantages: 0 / (0 + 1e-8) = 0, not NaN.
    _, metrics = loss_of(model, args_with(), np.full_like(raw, 3.0), np.zeros_like(raw))
    np.testing.assert_array_equal(metrics["advantages"], 0.0)


def test_advantages_pass_through_unchanged_without_normalisation(model):
    raw = np.random.default_rng(2).normal(0.5, 2.0, (SEQUENCES, STEPS)).astype(np.float32)
    _, metrics = loss_of(model, args_with(normalize_advantages=False), raw, np.zeros_like(raw))
    np.testing.assert_array_equal(metrics["advantages"], raw.reshape(-1))


def test_critic_loss_is_the_value_mse_weighted_by_value_coef(model):
    returns = np.random.default_rng(3).normal(size=(SEQUENCES, STEPS)).astype(np.float32)
    loss, metrics = loss_of(model, args_with(), np.zeros_like(returns), returns)
    values = np.asarray(jax.vmap(model.value)(make_data().obs.reshape(-1, OBS_DIM)), np.float64)
    mse = np.mean((values - returns.reshape(-1)) ** 2)
    assert float(metrics["value_loss"]) == pytest.approx(mse, rel=1e-5)
    assert float(metrics["actor_loss"]) == 0.0
    assert float(loss) == pytest.approx(0.37 * mse, rel=1e-5)


def test_recomputed_gae_uses_the_current_critic_and_keeps_termination_apart(model):
    data = make_data()
    args = args_with(
        recompute_gae=True, normalize_advantages=False, gamma=0.9, gae_lambda=0.8, reward_scaling=2.0
    )
    zeros = np.zeros((SEQUENCES, STEPS), np.float32)
    loss, metrics = loss_of(model, args, zeros, zeros)
    values = jax.vmap(jax.vmap(model.value))(data.obs)
    next_values = jax.vmap(jax.vmap(model.value))(data.final_obs)
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    advantages, returns = compute_gae(
        swap(2.0 * data.reward), swap(values), swap(next_values), swap(data.terminated), swap(data.truncated),
        0.9, 0.8,
    )  # fmt: skip
    np.testing.assert_allclose(metrics["advantages"], swap(advantages).reshape(-1), rtol=1e-5, atol=1e-6)
    mse = np.mean((np.asarray(values).reshape(-1) - np.asarray(swap(returns)).reshape(-1)) ** 2)
    assert float(metrics["value_loss"]) == pytest.approx(mse, rel=1e-5)


def initial_state(model, args):
    optimizers = Optimizers.make(args.optim, 4)
    state = TrainState(model, optimizers.init(eqx.filter(model, trainable_mask(model))), jax.random.key(2),
                       jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))  # fmt: skip
    return state, optimizers


def state_arrays(state) -> list[bytes]:
    """Every array of a train state as bytes (keys through their data), for exact comparison."""
    leaves = jax.tree.leaves(eqx.filter(state, eqx.is_array))
    return [np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x).tobytes()
            for x in leaves]  # fmt: skip


def run_update(model, args, algorithm=None, data=None, mesh=None):
    state, optimizers = initial_state(model, args)
    data = make_data() if data is None else data
    update = make_update(algorithm or Probe(), args, optimizers, mesh)
    new_state, metrics = eqx.filter_jit(update)(state, data)
    return state, data, new_state, metrics


@pytest.fixture
def one_update(model):
    # Function-scoped: a test that reads the update's results also runs (traces) it, so mutation testing,
    # which maps each function to the tests that call it, credits every such test (the compile is ~1 s).
    _, data, new_state, metrics = run_update(model, args_with(epochs=2, num_minibatches=2))
    return model, data, new_state, metrics


def test_the_loss_sees_the_rollout_normalizer_and_the_state_leaves_with_it_merged(one_update):
    model, data, new_state, metrics = one_update
    # Every minibatch of every epoch saw the statistics the rollout acted with (the means of the metrics
    # equal them only if none moved mid-update).
    np.testing.assert_allclose([metrics["norm_mean_0"], metrics["norm_mean_1"]], [2.0, 3.0], rtol=1e-6)
    assert float(metrics["norm_var_1"]) == pytest.approx(16.0, rel=1e-6)
    assert float(metrics["norm_count"]) == float(model.normalizer.count) == 2.0
    merged = model.normalizer.update(data.obs)
    np.testing.assert_allclose(new_state.model.normalizer.mean, merged.mean, rtol=1e-6)
    np.testing.assert_allclose(new_state.model.normalizer.var, merged.var, rtol=1e-6)
    assert float(new_state.model.normalizer.count) == 2.0 + SEQUENCES * STEPS


def test_the_update_counts_its_iteration_and_env_steps_and_reports_finite_flags(one_update):
    _, data, new_state, metrics = one_update
    assert int(new_state.iteration) == 1 and int(new_state.env_steps) == SEQUENCES * STEPS
    # The optimizer state leaves with the steps taken: Adam's step counts (actor and critic) at
    # epochs x minibatches = 4.
    counts = [int(x) for x in jax.tree.leaves(new_state.opt_state) if jnp.ndim(x) == 0]
    assert counts == [4, 4]
    # The next state's model is whole, its non-array parts (activations) included: it evaluates.
    assert np.isfinite(float(new_state.model.value(data.obs[0, 0])))
    assert all(bool(metrics[FINITE + name]) for name in ("loss", "gradient", "parameters"))


def test_each_epoch_draws_one_permutation_and_each_minibatch_a_loss_key_from_one_key_stream(one_update):
    """The key stream, replayed by hand: the state's key splits into the next state's key and the update's;
    each epoch splits a permutation key off it and shuffles all sequences into minibatches of
    sequences_per_iteration / num_minibatches; each minibatch splits its loss key off the same chain."""
    _, data, new_state, metrics = one_update
    key, chain = jax.random.split(jax.random.key(2))
    assert jnp.array_equal(jax.random.key_data(new_state.key), jax.random.key_data(key))
    first_obs, first_extras, key_draws = [], [], []
    for _ in range(2):  # epochs
        chain, perm_key = jax.random.split(chain)
        perm = np.asarray(jax.random.permutation(perm_key, SEQUENCES))
        for minibatch in range(2):
            chain, loss_key = jax.random.split(chain)
            first_obs.append(np.asarray(data.obs)[perm[minibatch * SEQUENCES // 2], 0, 0])
            first_extras.append(np.asarray(data.extras)[perm[minibatch * SEQUENCES // 2], 0])
            key_draws.append(float(jax.random.uniform(loss_key)))
    assert float(metrics["first_obs"]) == pytest.approx(np.mean(first_obs), rel=1e-6)
    assert float(metrics["first_extra"]) == pytest.approx(np.mean(first_extras), rel=1e-6)  # with its obs
    assert float(metrics["key_draw"]) == pytest.approx(np.mean(key_draws), rel=1e-6)


def hand_advantages(model, data, gamma=0.9, lam=0.8):
    """GAE of the sequences [S, T] with `model`'s critic, time-major [T, S]."""
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    values = jax.vmap(jax.vmap(model.value))(data.obs)
    next_values = jax.vmap(jax.vmap(model.value))(data.final_obs)
    advantages, _ = compute_gae(swap(data.reward), swap(values), swap(next_values), swap(data.terminated),
                                swap(data.truncated), gamma, lam)  # fmt: skip
    return advantages


def test_the_epochs_see_the_advantages_of_the_rollout_critic_once_per_sequence(model):
    """Without per-minibatch GAE, the advantages come from the critic the rollout ended with; every epoch
    covers every sequence once, so their mean over the epochs' minibatches is the batch mean."""
    args = args_with(epochs=2, num_minibatches=2, normalize_advantages=False, gamma=0.9, gae_lambda=0.8)
    _, data, _, metrics = run_update(model, args)
    assert float(metrics["advantages"]) == pytest.approx(
        float(hand_advantages(model, data).mean()), rel=1e-5, abs=1e-6
    )


def test_per_minibatch_gae_starts_from_the_critic_it_is_given(model):
    """With `recompute_gae`, the single minibatch of a single epoch sees the advantages of the critic before
    any step (the zeros passed in its place are never used)."""
    args = args_with(recompute_gae=True, normalize_advantages=False, gamma=0.9, gae_lambda=0.8)
    _, data, _, metrics = run_update(model, args)
    assert float(metrics["advantages"]) == pytest.approx(
        float(hand_advantages(model, data).mean()), rel=1e-5, abs=1e-6
    )


@pytest.mark.parametrize(
    ("probe", "flags", "first_bad"),
    [
        (NaNLossProbe, (False, True, True), "loss"),
        (NaNGradientProbe, (True, False, False), "gradient"),
    ],
)
def test_each_finite_flag_watches_its_own_quantity(model, probe, flags, first_bad):
    *_, metrics = run_update(model, args_with(), algorithm=probe())
    assert tuple(bool(metrics[FINITE + name]) for name in ("loss", "gradient", "parameters")) == flags
    assert pop_finite_flags(metrics)[1] == first_bad


def test_pop_finite_flags_names_the_first_quantity_that_went_bad_in_computation_order():
    base = {"actor_loss": 1.0, FINITE + "loss": True, FINITE + "gradient": True, FINITE + "parameters": True}
    assert pop_finite_flags(base) == ({"actor_loss": 1.0}, None)
    assert pop_finite_flags({**base, FINITE + "parameters": False})[1] == "parameters"
    assert (
        pop_finite_flags({**base, FINITE + "gradient": False, FINITE + "parameters": False})[1] == "gradient"
    )
    assert pop_finite_flags({**base, FINITE + "loss": False, FINITE + "gradient": False})[1] == "loss"


def test_all_finite_looks_at_every_float_leaf_and_nothing_else():
    assert bool(all_finite({"a": jnp.ones(3), "b": (jnp.zeros(2), 1.0)}))
    assert not bool(all_finite({"a": jnp.ones(3), "b": jnp.array([0.0, jnp.inf])}))
    assert not bool(all_finite([jnp.ones(2), jnp.array(jnp.nan)]))
    assert bool(all_finite({"count": jnp.array([3, 4]), "name": "x"}))  # integer and static leaves
    assert bool(all_finite({}))


def test_gymnasium_sequences_bootstrap_every_truncation_from_its_own_final_observation(model):
    """Gymnasium time limits are not in the config, so a sequence may truncate at every step: each
    V(final_obs_t) is the critic's own (the Playground shortcut would miss truncations beyond its quota)."""
    data = make_data()
    fresh = np.random.default_rng(5).normal(size=data.final_obs.shape).astype(np.float32)
    data = data._replace(truncated=jnp.ones_like(data.truncated), final_obs=jnp.asarray(fresh))
    args = args_with()
    got = _next_values(model, data, _values(model, data.obs), args)
    np.testing.assert_allclose(got, _values(model, data.final_obs), rtol=1e-6)


def test_no_path_kl_without_a_reference(one_update):
    assert not any("path_kl" in name for name in one_update[3])


def test_path_kl_init_measures_the_rollout_policy_against_the_reference_with_a_folded_key(model):
    """The policy that collected the rollout (the state before the update: its normaliser is the rollout's)
    against the reference, on strided observations, with noise folded from the state's key."""
    same = eqx.tree_at(lambda m: m.reference, model, model.actor, is_leaf=lambda x: x is None)
    *_, metrics = run_update(same, args_with())
    assert float(metrics["path_kl_init"]) == 0.0
    other = make_policy(model.actor.spec, key=jax.random.key(7))
    moved = eqx.tree_at(lambda m: m.reference, model, other, is_leaf=lambda x: x is None)
    state, data, _, metrics = run_update(moved, args_with())
    expected = path_kl(model.actor, other, strided(data.obs), jax.random.fold_in(state.key, PATH_KL_STREAM))
    assert float(expected) > 0
    assert float(metrics["path_kl_init"]) == pytest.approx(float(expected), rel=1e-6)


def test_no_path_kl_for_a_noise_free_sampler_even_with_a_reference(model):
    """Path measures of a sampler with sigma = 0 are singular: the metric is left out, not logged as None."""
    silent = dataclasses.replace(model.actor.spec, sigma_schedule="constant", sigma_max=0.0)
    ode = ActorCritic(make_policy(silent, key=jax.random.key(0)), model.critic)
    ode = eqx.tree_at(lambda m: m.reference, ode, ode.actor, is_leaf=lambda x: x is None)
    *_, metrics = run_update(ode, args_with())
    assert "path_kl_init" not in metrics


def test_a_one_device_mesh_changes_no_number_of_the_update(model):
    """With a mesh, the update constrains the batch and each minibatch to their shardings; on one device the
    constraints must leave every value as the update without a mesh computes it."""
    args = args_with(epochs=2, num_minibatches=2)
    mesh = Mesh(np.array(jax.devices()[:1]), (AXIS,))
    plain = run_update(model, args)
    meshed = run_update(model, args, mesh=mesh)
    for name in ("first_obs", "key_draw", "advantages", "value_loss"):
        assert float(meshed[3][name]) == float(plain[3][name]), name
    assert state_arrays(meshed[2]) == state_arrays(plain[2])


class CountingCritic(ValueMLP):
    """A critic that counts its traces: under `jax.vmap` one trace is one critic pass over a batch."""

    traces: ClassVar[list] = []

    def __call__(self, obs_normalized):
        CountingCritic.traces.append(obs_normalized.shape)
        return super().__call__(obs_normalized)


@pytest.mark.parametrize("env", ["InvertedPendulum-v5", "CartpoleSwingup"])
def test_per_minibatch_gae_reuses_the_value_losss_critic_pass(model, env):
    """With `recompute_gae` the loss runs the critic once over the observations (for the value loss and,
    stopped, for GAE) and once over the bootstrap observations: two passes, whatever the env kind; and the
    advantages are GAE's with the current critic."""
    counting = eqx.tree_at(
        lambda m: m.critic,
        model,
        CountingCritic(OBS_DIM, CriticArgs(width=4, depth=1), key=jax.random.key(1)),
    )
    args = with_fields(args_with(recompute_gae=True, normalize_advantages=False, gamma=0.9), env=env)
    zeros = np.zeros((SEQUENCES, STEPS), np.float32)
    CountingCritic.traces.clear()
    _, metrics = loss_of(counting, args, zeros, zeros)
    assert len(CountingCritic.traces) == 2
    advantages = hand_advantages(counting, make_data(), 0.9, args.rollout.gae_lambda)
    np.testing.assert_allclose(
        metrics["advantages"], jnp.swapaxes(advantages, 0, 1).reshape(-1), rtol=1e-5, atol=1e-6
    )


def test_playground_bootstraps_gather_only_the_needed_observations_per_sequence(model, monkeypatch):
    """The shortcut's point: the critic runs on ceil(T / episode_length) + 1 observations per sequence (the
    most truncations a sequence can hold, and its last step), not on all T."""
    from trainers._core import update

    shapes = []

    def recording(model, obs):
        shapes.append(obs.shape)
        return _values(model, obs)

    monkeypatch.setattr(update, "_values", recording)
    steps, episode_length = 12, 5
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(SEQUENCES, steps, OBS_DIM)), jnp.float32)
    flags = jnp.zeros((SEQUENCES, steps), bool)
    data = Transition(obs, jnp.zeros((SEQUENCES, steps)), flags, flags, obs, None)
    args = with_fields(TrainArgs(env="CartpoleSwingup"), rollout={"episode_length": episode_length})
    update._next_values(model, data, _values(model, obs), args)
    assert shapes == [(SEQUENCES, 4, OBS_DIM)]  # ceil(12 / 5) + 1
