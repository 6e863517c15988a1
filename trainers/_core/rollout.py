"""The layout of a rollout, the same for every env kind (the collectors are in `trainers._core.envs`).

`Transition` leaves are laid out [sequences, unroll_length, ...]: minibatches are made of whole sequences
so that GAE can run along time inside a minibatch (Brax/FPO recompute it there with the current critic).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class Transition(NamedTuple):
    """One env step per entry; `extras` is whatever the algorithm's `act` stored."""

    obs: Any
    reward: Any
    terminated: Any
    truncated: Any
    final_obs: Any
    extras: Any


def time_major_to_sequences(tree):
    """[T, B, ...] -> [B, T, ...]."""
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), tree)
