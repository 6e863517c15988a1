"""Epochs x minibatches of gradient steps, scanned inside one jit (the Brax structure).

GAE happens here: once on the whole batch with the rollout's critic, or per minibatch with the current
critic (`rollout.recompute_gae`, as Brax PPO and the FPO reference do). The critic loss is shared by
every algorithm; only the actor loss comes from the algorithm.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gsbpolicy._internal import env_kind

from .algorithm import AbstractAlgorithm
from .config import TrainArgs
from .distributed import AXIS, constrain
from .gae import compute_gae
from .init_from import path_kl, strided
from .model import ActorCritic, Optimizers, trainable_mask
from .return_norm import ReturnNorm
from .rollout import Transition


class TrainState(eqx.Module):
    """Everything that changes during training (saved whole in checkpoints)."""

    model: ActorCritic
    opt_state: Any
    key: jax.Array
    iteration: jax.Array
    env_steps: jax.Array
    return_norm: ReturnNorm | None = None
    """Running discounted-return statistics (`rollout.normalize_rewards`); None when rewards are not normalised."""


def _values(model: ActorCritic, obs):
    """V over any leading batch shape of raw observations."""
    flat = obs.reshape(-1, obs.shape[-1])
    return jax.vmap(model.value)(flat).reshape(obs.shape[:-1])


def _next_values(model: ActorCritic, data: Transition, values, args: TrainArgs):
    """V(final_obs_t) for sequences [S, T].

    Where step t did not end an episode, final_obs_t is obs_{t+1}, whose value is already in `values`.
    Only the last step of each sequence and truncated steps need a new critic pass; terminated steps are
    never bootstrapped. With a known time limit (Playground's `episode_length`) a sequence holds at most
    ceil(T / episode_length) truncations, so a fixed number of gathered observations per sequence covers
    them all: the critic runs on about 2 observations per sequence instead of T (with the per-minibatch
    GAE of the Playground presets this was a third of the update's critic work). Gymnasium time limits
    are not known here, so those keep the full pass.
    """
    if env_kind(args.env) == "gymnasium":
        return _values(model, data.final_obs)
    num_steps = values.shape[1]
    per_sequence = -(-num_steps // args.rollout.episode_length) + 1
    needed = data.truncated.at[:, -1].set(True)
    # The first `per_sequence` needed positions of each sequence (stable: needed ones first, in order).
    index = jnp.argsort(~needed, axis=1, stable=True)[:, :per_sequence]
    gathered = jnp.take_along_axis(data.final_obs, index[..., None], axis=1)
    shifted = jnp.concatenate([values[:, 1:], values[:, -1:]], axis=1)
    # At gathered positions that were not needed, final_obs_t = obs_{t+1}: the same value either way.
    return jax.vmap(lambda row, i, v: row.at[i].set(v))(shifted, index, _values(model, gathered))


def _gae(model: ActorCritic, data: Transition, args: TrainArgs, values=None):
    """Advantages and value targets for sequences [S, T] (GAE runs along T); `values` = V(obs) if known."""
    values = jax.lax.stop_gradient(_values(model, data.obs) if values is None else values)
    next_values = jax.lax.stop_gradient(_next_values(model, data, values, args))
    time_major = jax.tree.map(
        lambda x: jnp.swapaxes(x, 0, 1),
        (data.reward * args.rollout.reward_scaling, values, next_values, data.terminated, data.truncated),
    )
    advantages, returns = compute_gae(*time_major, args.rollout.gamma, args.rollout.gae_lambda)
    return jnp.swapaxes(advantages, 0, 1), jnp.swapaxes(returns, 0, 1)


def _flatten(tree):
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), tree)


def _loss(params, static, algorithm: AbstractAlgorithm, args: TrainArgs, batch, key):
    model: ActorCritic = eqx.combine(params, static)
    data, advantages, returns = batch
    values = _values(model, data.obs)  # one critic pass: the value loss and (stopped) the recomputed GAE
    if args.rollout.recompute_gae:
        advantages, returns = _gae(model, data, args, values)
    advantages, returns, values, data = _flatten((advantages, returns, values, data))
    if args.rollout.normalize_advantages:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    actor_loss, metrics = algorithm.actor_loss(model.actor, data.obs, data.extras, advantages, key)
    value_loss = jnp.mean((values - returns) ** 2)
    metrics = {**metrics, "actor_loss": actor_loss, "value_loss": value_loss}
    return actor_loss + args.optim.value_coef * value_loss, metrics


FINITE = "finite/"
"""Prefix of the update's finiteness flags among its metrics ("finite/loss", "finite/gradient",
"finite/parameters"): true when that quantity held no NaN or inf in any minibatch of the iteration. They
are reduced inside the jitted update, so checking them costs no extra device round trip."""
FINITE_QUANTITIES = ("loss", "gradient", "parameters")
"""In the order they are computed: the first non-finite one is where the trouble started."""


class NonFiniteError(RuntimeError):
    """Training produced a NaN or inf; the run stops before saving anything of that iteration."""


def pop_finite_flags(metrics: dict) -> tuple[dict, str | None]:
    """`metrics` without the `FINITE` flags, and the first quantity (in the order they are computed: loss,
    gradient, parameters) that went non-finite, or None when all stayed finite."""
    bad = next((name for name in FINITE_QUANTITIES if not metrics[FINITE + name]), None)
    return {k: v for k, v in metrics.items() if not k.startswith(FINITE)}, bad


def all_finite(tree) -> jax.Array:
    """One boolean: every array leaf of `tree` is free of NaN and inf."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(eqx.filter(tree, eqx.is_inexact_array))]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def _minibatch_step(algorithm: AbstractAlgorithm, args: TrainArgs, optimizers: Optimizers, static):
    """One gradient step on one minibatch, as a `lax.scan` body over minibatches. Scan carries must be arrays
    only: the model's static parts (activations, specs) are closed over."""

    def step(carry, batch):
        arrays, opt_state, key = carry
        key, loss_key = jax.random.split(key)
        model = eqx.combine(arrays, static)
        params, frozen = eqx.partition(model, trainable_mask(model))
        grad_fn = jax.value_and_grad(_loss, has_aux=True)
        (loss, metrics), grads = grad_fn(params, frozen, algorithm, args, batch, loss_key)
        params, opt_state = optimizers.update(grads, opt_state, params)
        finite = {"loss": all_finite(loss), "gradient": all_finite(grads)}
        return (eqx.filter(eqx.combine(params, frozen), eqx.is_array), opt_state, key), (metrics, finite)

    return step


def _epoch(rollout, minibatch_step, split):
    """One pass over the iteration's sequences in a fresh order, as a `lax.scan` body over epochs."""

    def epoch(carry, _):
        arrays, opt_state, key, batch = carry
        key, perm_key = jax.random.split(key)
        # One permutation of all the iteration's sequences, as on one device, even when they are split
        # over several: each minibatch is a uniform draw from the global batch and a run's numbers do not
        # depend on the device count (only float summation order does). Brax-style per-device shuffling
        # would draw stratified minibatches (an equal share from each device's envs) and tie the numbers
        # to the device count. The batch is whole on every device (see `make_update`), so each device picks
        # its share of each minibatch locally.
        perm = jax.random.permutation(perm_key, rollout.sequences_per_iteration)
        minibatches = jax.tree.map(
            lambda x: x[perm].reshape(rollout.num_minibatches, rollout.batch_size, *x.shape[1:]), batch
        )
        minibatches = split(minibatches, PartitionSpec(None, AXIS))
        (arrays, opt_state, key), metrics = jax.lax.scan(
            minibatch_step, (arrays, opt_state, key), minibatches
        )
        return (arrays, opt_state, key, batch), metrics

    return epoch


def _advantage_inputs(model: ActorCritic, data: Transition, args: TrainArgs):
    """(data, advantages, value targets) for the epochs. When GAE is recomputed per minibatch both are None
    (empty pytrees): the loss computes its own, and there is nothing to shuffle for them."""
    if args.rollout.recompute_gae:
        return (data, None, None)
    return (data, *_gae(model, data, args))


def _normalized_rewards(state: TrainState, data: Transition, args: TrainArgs):
    """(data with its rewards divided by the running return std, the updated statistics) when
    `rollout.normalize_rewards`, else (data, None). The statistics take in this rollout first (as VecNormalize
    does, step by step)."""
    if state.return_norm is None:
        return data, None
    return_norm = state.return_norm.update(data.reward, data.terminated | data.truncated, args.rollout.gamma)
    return data._replace(reward=data.reward * return_norm.reward_scale()), return_norm


def _next_state(
    model: ActorCritic,
    opt_state,
    key,
    state: TrainState,
    data: Transition,
    metrics,
    finite,
    return_norm: ReturnNorm | None = None,
):
    """The state after the epochs, and the iteration's mean metrics with their `FINITE` flags."""
    metrics = jax.tree.map(jnp.mean, metrics)
    if return_norm is not None:
        metrics["reward_scale"] = return_norm.reward_scale()
    # Observation statistics move only after the update: the stored old log-densities and drifts
    # were computed with the rollout's normalizer, and the loss must compare against the same one.
    model = model.with_normalizer(model.normalizer.update(data.obs))
    state = TrainState(
        model, opt_state, key, state.iteration + 1, state.env_steps + data.reward.size, return_norm
    )
    finite = {**jax.tree.map(jnp.all, finite), "parameters": all_finite(model)}
    return state, {**metrics, **{FINITE + name: ok for name, ok in finite.items()}}


def _reference_metrics(state: TrainState, data: Transition) -> dict:
    """`path_kl_init` for a fine-tuning run: how far the policy that collected this iteration's rollout has
    moved from the pretrained one. Its noise is folded from the state's key, leaving the run's own key stream
    (and so every other number) as it would be without the measurement."""
    reference = state.model.reference
    if reference is None:
        return {}
    key = jax.random.fold_in(state.key, PATH_KL_STREAM)
    kl = path_kl(state.model.actor, reference, strided(data.obs), key)
    return {} if kl is None else {"path_kl_init": kl}


PATH_KL_STREAM = 0x9A7
"""`fold_in` tag of the noise `path_kl_init` is estimated with."""


def make_update(
    algorithm: AbstractAlgorithm, args: TrainArgs, optimizers: Optimizers, mesh: Mesh | None = None
):
    """A jittable `update(state, data) -> (state, metrics)` over one iteration's sequences; `metrics` holds
    the iteration's mean losses and diagnostics and its `FINITE` flags.

    With a `mesh`, every minibatch is split over its devices (parameters and optimizer state replicated):
    each device computes its share of the minibatch's loss terms, and the means over the minibatch become
    all-reduces, so the gradient is that of the global minibatch. The iteration's batch itself is copied
    whole onto every device once, for the shuffle (memory: one batch per device).
    """
    rollout = args.rollout

    def split(tree, spec: PartitionSpec):
        return tree if mesh is None else constrain(tree, NamedSharding(mesh, spec))

    def update(state: TrainState, data: Transition) -> tuple[TrainState, dict]:
        arrays, static = eqx.partition(state.model, eqx.is_array)
        epoch = _epoch(rollout, _minibatch_step(algorithm, args, optimizers, static), split)
        key, update_key = jax.random.split(state.key)
        data, return_norm = _normalized_rewards(state, data, args)
        # Gather the iteration's batch onto every device once (one all-gather), so that the global shuffle
        # of each epoch needs no communication; left split, XLA would move the whole batch every epoch.
        batch = split(_advantage_inputs(state.model, data, args), PartitionSpec())
        (arrays, opt_state, _, _), (metrics, finite) = jax.lax.scan(
            epoch, (arrays, state.opt_state, update_key, batch), length=rollout.epochs
        )
        new_state, metrics = _next_state(
            eqx.combine(arrays, static), opt_state, key, state, data, metrics, finite, return_norm
        )
        return new_state, {**metrics, **_reference_metrics(state, data)}

    return update
