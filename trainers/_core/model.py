"""The trained model (actor + critic), its trainable filter and the optimizers."""

import equinox as eqx
import jax
import optax

from gsbpolicy._internal import ACTIVATIONS, RunningNorm

from .config import CriticArgs, OptimArgs


class ValueMLP(eqx.Module):
    """V(s) = MLP(s_normalized) for one observation."""

    mlp: eqx.nn.MLP

    def __init__(self, obs_dim: int, args: CriticArgs, *, key):
        self.mlp = eqx.nn.MLP(
            obs_dim, "scalar", args.width, args.depth, ACTIVATIONS[args.activation], key=key
        )

    def __call__(self, obs_normalized):
        return self.mlp(obs_normalized)


class ActorCritic(eqx.Module):
    """An actor with a `normalizer` field (the deployed policy) and a critic sharing that normalizer.

    `reference`: for a fine-tuning run (`--init-from`), the pretrained policy as it was loaded, never
    trained; the update measures how far the actor has moved from it (`path_kl_init`). None otherwise.
    """

    actor: eqx.Module
    critic: ValueMLP
    reference: eqx.Module | None = None

    @property
    def normalizer(self) -> RunningNorm:
        return self.actor.normalizer

    def value(self, obs):
        """V(s) for one raw observation."""
        return self.critic(self.normalizer(obs))

    def with_normalizer(self, normalizer: RunningNorm) -> "ActorCritic":
        return eqx.tree_at(lambda m: m.actor.normalizer, self, normalizer)


def trainable_mask(model: ActorCritic):
    """True on every inexact array except the observation statistics, which the rollout updates instead.

    Excluding them (rather than relying on their zero gradient) keeps Adam's state and any weight decay
    away from them.
    """
    mask = jax.tree.map(eqx.is_inexact_array, model)
    mask = eqx.tree_at(lambda m: m.actor.normalizer, mask, replace_fn=_all_false)
    # The reference policy is a fixed yardstick, not a parameter: no gradient step or Adam state for it.
    return (
        mask if model.reference is None else eqx.tree_at(lambda m: m.reference, mask, replace_fn=_all_false)
    )


def _all_false(tree):
    return jax.tree.map(lambda _: False, tree)


def _adam(
    lr: float,
    cosine: bool,
    max_grad_norm: float | None,
    num_updates: int,
    frozen_updates: int = 0,
    decay_updates: int | None = None,
):
    """Adam at `lr` (cosine-decayed to 0 over the updates after the frozen ones, or over `decay_updates` of
    them when given: a schedule longer than the run); the first `frozen_updates` updates have learning rate 0,
    which leaves the parameters exactly as they are (Adam's moments still follow the gradients, so the first
    real step is not taken on empty statistics)."""
    if frozen_updates >= num_updates:  # frozen for the whole run (a pretrained policy scored, never trained)
        return optax.set_to_zero()
    span = (decay_updates or num_updates) - frozen_updates
    schedule = optax.cosine_decay_schedule(lr, span) if cosine else lr
    if frozen_updates:
        after = schedule if cosine else optax.constant_schedule(lr)
        schedule = optax.join_schedules([optax.constant_schedule(0.0), after], [frozen_updates])
    adam = optax.adam(schedule)
    return adam if max_grad_norm is None else optax.chain(optax.clip_by_global_norm(max_grad_norm), adam)


class Optimizers(eqx.Module):
    """Separate Adam optimizers for actor and critic.

    Adam is elementwise, so with equal learning rates and no clipping this equals one joint optimizer;
    separate ones let the presets give the critic its own learning rate and clip each network on its own.
    """

    actor: optax.GradientTransformation = eqx.field(static=True)
    critic: optax.GradientTransformation = eqx.field(static=True)

    @staticmethod
    def make(
        args: OptimArgs, num_updates: int, actor_frozen_updates: int = 0, decay_updates: int | None = None
    ) -> "Optimizers":
        """`actor_frozen_updates`: the actor's learning rate is 0 for this many first updates (a critic
        warm-up before fine-tuning a pretrained actor); `decay_updates`: the updates a cosine decay spans (None:
        the run's `num_updates`)."""
        return Optimizers(
            _adam(
                args.actor_lr,
                args.actor_cosine_decay,
                args.max_grad_norm,
                num_updates,
                actor_frozen_updates,
                decay_updates,
            ),
            _adam(
                args.critic_lr, args.critic_cosine_decay, args.max_grad_norm, num_updates, 0, decay_updates
            ),
        )

    def init(self, params: ActorCritic):
        return (self.actor.init(params.actor), self.critic.init(params.critic))

    def update(self, grads: ActorCritic, state, params: ActorCritic):
        actor_updates, actor_state = self.actor.update(grads.actor, state[0], params.actor)
        critic_updates, critic_state = self.critic.update(grads.critic, state[1], params.critic)
        updates = ActorCritic(actor_updates, critic_updates)
        return eqx.apply_updates(params, updates), (actor_state, critic_state)
