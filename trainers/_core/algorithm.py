"""The interface an on-policy algorithm implements; everything else is shared."""

import abc
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray

from gsbpolicy import PolicySpec, make_policy, save_policy

from .config import TrainArgs


class AbstractAlgorithm(eqx.Module):
    """An algorithm = how it acts (and what it stores at rollout in `extras`) + its actor loss.

    The core owns rollouts, GAE, advantage normalization, the critic loss, optimizers, evaluation,
    logging, checkpoints and the policy folder. `name` is the algorithm's CLI/module name.
    """

    name: eqx.AbstractClassVar[str]

    def make_actor(self, spec: PolicySpec, args: TrainArgs, *, key: PRNGKeyArray) -> eqx.Module:
        """The actor; by default a `FlowPolicy` for `spec` (it must have a `normalizer` field)."""
        return make_policy(spec, key=key)

    @abc.abstractmethod
    def act(
        self, actor: eqx.Module, obs: Float[Array, "b obs_dim"], key: PRNGKeyArray
    ) -> tuple[Float[Array, "b act_dim"], Any]:
        """Sample env actions (inside the action bounds) for a batch and return what the loss needs later."""

    @abc.abstractmethod
    def actor_loss(
        self,
        actor: eqx.Module,
        obs: Float[Array, "n obs_dim"],
        extras: Any,
        advantages: Float[Array, " n"],
        key: PRNGKeyArray,
    ) -> tuple[Float[Array, ""], dict[str, Array]]:
        """The actor loss on a flat minibatch and its diagnostics (scalars)."""

    def save_actor(self, actor: eqx.Module, directory: Path) -> None:
        """Write the deployable policy folder (config.json + model.safetensors) for the actor."""
        save_policy(actor, directory)

    def deterministic_act(
        self, actor: eqx.Module, obs: Float[Array, "b obs_dim"]
    ) -> Float[Array, "b act_dim"]:
        """Deterministic env actions for evaluation (the flow policy's ODE from a^(0) = 0 by default)."""
        return jax.vmap(actor.act)(obs)
