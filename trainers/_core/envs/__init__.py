"""Training envs, one backend per env kind behind one interface (`EnvBackend`), chosen once from the env id.

- `PlaygroundEnv` / `PlaygroundBackend`: a jittable batch of MuJoCo Playground envs; the rollout is a
  `lax.scan` inside the jitted iteration, split over a device mesh.
- `GymnasiumEnv` / `GymnasiumBackend`: a host-side Gymnasium vector env stepped from Python.
- `backend_type` (by `gsbpolicy._envid.env_kind`) -> `make_backend` for a training run, `make_evaluator` for a trainer
  that brings its own envs (SB3), `make_env` for the bare env adapter.
"""

import importlib
from typing import Any

from gsbpolicy._internal import env_kind

from ..algorithm import AbstractAlgorithm
from ..config import TrainArgs
from .base import EnvBackend, Timestep

_KINDS = {
    "playground": (".playground_env:PlaygroundEnv", ".playground_backend:PlaygroundBackend",
                   ".playground_backend:PlaygroundEvaluator"),
    "gymnasium": (".gym_env:GymnasiumEnv", ".gym_backend:GymnasiumBackend", ".gym_backend:GymEvaluator"),
}  # fmt: skip
"""env kind -> (env adapter, training backend, evaluator): the one place an env kind picks its code. Modules are
imported on first use: MJX and Playground take seconds to import, which a Gymnasium run should not pay."""

_LAZY = {"PLAYGROUND_ENVS": ".playground_env", "PlaygroundEnv": ".playground_env", "GymnasiumEnv": ".gym_env"}


def _load(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module, __name__), name)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_env(env_id: str, num_envs: int, **kwargs: Any) -> "PlaygroundEnv | GymnasiumEnv":  # noqa: F821
    """Make B envs from an id: a Gymnasium id ("Hopper-v5") or a name from `PLAYGROUND_ENVS`.

    Args:
        env_id: a Gymnasium id or a Playground dm_control_suite name ("CartpoleSwingup").
        num_envs: number of envs B.
        **kwargs: passed to `GymnasiumEnv.make` or `PlaygroundEnv.make`.

    Raises:
        ValueError: for a non-Gymnasium id that is not a Playground dm_control_suite name.
    """
    return _load(_KINDS[env_kind(env_id)][0]).make(env_id, num_envs, **kwargs)


def make_backend(algorithm: AbstractAlgorithm, args: TrainArgs, devices=None) -> EnvBackend:
    """The training envs of `args.env` (and, for Playground, the mesh over `devices`, default all)."""
    return _load(_KINDS[env_kind(args.env)][1])(algorithm, args, devices)


def make_evaluator(algorithm: AbstractAlgorithm, args: TrainArgs):
    """`evaluate(actor, seed, deterministic, episodes=None) -> (returns, lengths)` by the protocol of
    `args.env`'s kind, on one device (for trainers with their own training envs)."""
    return _load(_KINDS[env_kind(args.env)][2])(algorithm, args)


__all__ = [
    "PLAYGROUND_ENVS",
    "EnvBackend",
    "GymnasiumEnv",
    "PlaygroundEnv",
    "Timestep",
    "make_backend",
    "make_env",
    "make_evaluator",
]
