"""Rollout collection with one output type for both env kinds.

`Transition` leaves are laid out [sequences, unroll_length, ...]: minibatches are made of whole sequences
so that GAE can run along time inside a minibatch (Brax/FPO recompute it there with the current critic).
"""

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from .algorithm import AbstractAlgorithm
from .distributed import constrain
from .envs import GymnasiumEnv, PlaygroundEnv


class Transition(NamedTuple):
    """One env step per entry; `extras` is whatever the algorithm's `act` stored."""

    obs: Any
    reward: Any
    terminated: Any
    truncated: Any
    final_obs: Any
    extras: Any


def _time_major_to_sequences(tree):
    """[T, B, ...] -> [B, T, ...]."""
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), tree)


def collect_playground(
    algorithm: AbstractAlgorithm,
    env: PlaygroundEnv,
    actor,
    env_state,
    obs,
    key,
    unroll_length: int,
    num_unrolls: int,
    sharding: NamedSharding | None = None,
):
    """`num_unrolls` consecutive unrolls of `unroll_length` steps as nested `lax.scan`s (jit this).

    Returns the final env state and observation, and a `Transition` of [num_unrolls * B, T, ...]. With a
    batch `sharding`, the envs (and so every step's actions and extras) stay split over the mesh's devices.
    """

    def keep_split(tree):
        return tree if sharding is None else constrain(tree, sharding)

    def step(carry, step_key):
        env_state, obs = carry
        action, extras = algorithm.act(actor, obs, step_key)
        env_state, ts = env.step(env_state, action)
        return keep_split((env_state, ts.obs)), Transition(
            obs, ts.reward, ts.terminated, ts.truncated, ts.final_obs, extras
        )

    def unroll(carry, unroll_key):
        carry, transitions = jax.lax.scan(step, carry, jax.random.split(unroll_key, unroll_length))
        return carry, _time_major_to_sequences(transitions)

    (env_state, obs), data = jax.lax.scan(unroll, (env_state, obs), jax.random.split(key, num_unrolls))
    data = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), data)
    return env_state, obs, keep_split(data)


class HostCollector:
    """Collects from a host-side Gymnasium env with a jitted act (one compile per batch shape)."""

    def __init__(self, algorithm: AbstractAlgorithm, env: GymnasiumEnv):
        self.env = env
        self._act = eqx.filter_jit(algorithm.act)

    def collect(self, actor, obs: np.ndarray, key, unroll_length: int, num_unrolls: int):
        """Same output layout as `collect_playground`; the env state lives in `self.env`."""
        sequences = []
        for unroll_key in jax.random.split(key, num_unrolls):
            steps = []
            for step_key in jax.random.split(unroll_key, unroll_length):
                action, extras = self._act(actor, jnp.asarray(obs), step_key)
                ts = self.env.step(np.asarray(action))
                steps.append(Transition(obs, ts.reward, ts.terminated, ts.truncated, ts.final_obs, extras))
                obs = ts.obs
            stacked = jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *steps)
            sequences.append(_time_major_to_sequences(stacked))
        data = jax.tree.map(lambda *xs: jnp.concatenate(xs), *sequences)
        return obs, data
