"""What every env kind shares: the step output `Timestep` and the `EnvBackend` interface a training run uses.

Both env adapters (`PlaygroundEnv`, `GymnasiumEnv`) auto-reset finished episodes inside `step` and keep the
observation the step reached in `final_obs`, so that GAE can bootstrap a time-limit truncation from
V(final_obs) while a true termination gets no bootstrap (see `trainers._core.gae.compute_gae`).

Actions are given in the env's own bounds `[action_low, action_high]` (what `FlowPolicy.to_env` returns;
[-1, 1] for every dm_control_suite task) and are clipped to them there, so that the reward terms that read
the action (control costs) see the same action as the physics.
"""

import abc
from typing import Any, NamedTuple

import numpy as np
from jax.sharding import Mesh
from jaxtyping import Array, Bool, Float

_AnyArray = Array | np.ndarray


class Timestep(NamedTuple):
    """What one batched env step reports; every leaf is batched over the B envs.

    Attributes:
        obs: observation to act on next; after an auto-reset, the first observation of the new episode.
        reward: reward of this step.
        terminated: the step reached a true terminal state (no bootstrap).
        truncated: the time limit was hit and the state is not terminal (bootstrap from `final_obs`).
        final_obs: observation reached by this step before any auto-reset (equals `obs` where not done).
    """

    obs: Float[_AnyArray, "b obs_dim"]
    reward: Float[_AnyArray, " b"]
    terminated: Bool[_AnyArray, " b"]
    truncated: Bool[_AnyArray, " b"]
    final_obs: Float[_AnyArray, "b obs_dim"]


class EnvBackend(abc.ABC):
    """The env side of one training run: its envs, how an iteration collects and updates on them, how a policy
    is evaluated, and the env part of a checkpoint. `trainers._core.envs.make_backend` picks the kind.

    Attributes:
        env: the training envs (`obs_dim`, `act_dim`, `action_low`, `action_high`).
        mesh: the devices the batch is split over (None: one device, host-side envs).
    """

    env: Any
    mesh: Mesh | None

    @abc.abstractmethod
    def start(self, state, update, env_key):
        """Reset the envs and prepare the jitted iteration around `update(state, data) -> (state, metrics)`;
        returns `state` laid out where the iteration expects it."""

    @abc.abstractmethod
    def iteration(self, state):
        """One rollout from the current envs and one `update` on it: `(state, metrics, (rewards, dones))`,
        rewards and dones laid out [sequences, unroll_length] for the episode statistics."""

    @abc.abstractmethod
    def evaluate(self, actor, seed: int, deterministic: bool, episodes: int | None = None):
        """Per-episode (returns, lengths) of `actor` as numpy, on fresh envs seeded by `seed`."""

    @abc.abstractmethod
    def place(self, state):
        """A training state (e.g. just loaded from a checkpoint) laid out where the iteration expects it."""

    @abc.abstractmethod
    def checkpoint_tree(self) -> Any:
        """The envs' carried state as a pytree of arrays (the env part of a checkpoint)."""

    @abc.abstractmethod
    def restore(self, tree: Any) -> None:
        """Continue from what `checkpoint_tree` returned (a skeleton of it is `checkpoint_tree()` itself)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the envs' resources."""
