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


def step_keys(key, unroll_length: int, noise_hold: int = 1):
    """The act keys of one unroll, [unroll_length]: a new key every `noise_hold` steps, held in between.

    An algorithm's `act` draws all of its sampling noise from its key, so a held key holds each env's noise:
    the policy still answers every new observation, but its random part changes only every `noise_hold` steps
    (`rollout.noise_hold`: temporally correlated exploration, as gSDE's `sde_sample_freq` holds its noise
    matrix). With 1 these are `jax.random.split(key, unroll_length)`, every step fresh.
    """
    blocks = jax.random.split(key, -(-unroll_length // noise_hold))
    return blocks[jnp.arange(unroll_length) // noise_hold]


def time_major_to_sequences(tree):
    """[T, B, ...] -> [B, T, ...]."""
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), tree)
