"""Snapshot and restore of a sync Gymnasium vector env, so that resumed runs continue exactly.

Per sub-env, for a Gymnasium MuJoCo env: MuJoCo's full integration state (`mj_getState` with
mjSTATE_INTEGRATION: time, qpos, qvel, act, warm-start accelerations, ...), the TimeLimit step counter and the
env's numpy generator state. That is everything a Gymnasium MuJoCo v5 env carries between steps.

Any other env (a user's own) resumes exactly when it implements the small `StatefulEnv` protocol:
`get_state() -> dict[str, np.ndarray]` (fixed shapes, everything its next steps depend on besides
`np_random`) and `set_state(state)`. An env with neither has no snapshot: a resumed run starts fresh episodes
(seeded as at the start), which is a valid continuation but not the uninterrupted run's.
Async vector envs keep their sub-envs in other processes and are not supported.
"""

from typing import Protocol, runtime_checkable

import gymnasium as gym
import mujoco
import numpy as np

_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION


def _sub_envs(vec_env) -> list:
    if not isinstance(vec_env, gym.vector.SyncVectorEnv):
        raise TypeError("exact resume needs a sync vector env (rollout.vectorization=sync)")
    return list(vec_env.envs)


def _time_limit(env) -> gym.wrappers.TimeLimit | None:
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            return env
        env = env.env
    return None


_MASK64 = (1 << 64) - 1


def _encode_rng(state: dict) -> np.ndarray:
    """A PCG64 state (Gymnasium's generator) as 6 uint64: state and inc (128-bit each), then the
    buffered uint32 flag and value."""
    if state["bit_generator"] != "PCG64":
        raise TypeError(f"exact resume supports PCG64 env generators, got {state['bit_generator']}")
    s, inc = state["state"]["state"], state["state"]["inc"]
    words = [s & _MASK64, s >> 64, inc & _MASK64, inc >> 64, state["has_uint32"], state["uinteger"]]
    return np.asarray(words, np.uint64)


def _decode_rng(words: np.ndarray) -> dict:
    w = [int(x) for x in words]
    return {
        "bit_generator": "PCG64",
        "state": {"state": w[0] | (w[1] << 64), "inc": w[2] | (w[3] << 64)},
        "has_uint32": w[4],
        "uinteger": w[5],
    }


@runtime_checkable
class StatefulEnv(Protocol):
    """What a non-MuJoCo env implements for exact resume (see the module docstring)."""

    def get_state(self) -> dict[str, np.ndarray]: ...

    def set_state(self, state: dict[str, np.ndarray]) -> None: ...


def _is_mujoco(base) -> bool:
    return isinstance(getattr(base, "model", None), mujoco.MjModel) and hasattr(base, "data")


def can_snapshot(vec_env) -> bool:
    """Whether `get_state` captures everything (a MuJoCo env or a `StatefulEnv`)."""
    base = _sub_envs(vec_env)[0].unwrapped
    return _is_mujoco(base) or isinstance(base, StatefulEnv)


def _own_state(base) -> dict[str, np.ndarray]:
    """The env's own state: MuJoCo's integration state, or what a `StatefulEnv` reports (keys prefixed)."""
    if _is_mujoco(base):
        physics = np.empty(mujoco.mj_stateSize(base.model, _SPEC), np.float64)
        mujoco.mj_getState(base.model, base.data, physics, _SPEC)
        return {"physics": physics}
    return {f"env.{key}": np.asarray(value) for key, value in base.get_state().items()}


def _set_own_state(base, state: dict[str, np.ndarray]) -> None:
    if _is_mujoco(base):
        mujoco.mj_setState(base.model, base.data, np.asarray(state["physics"], np.float64), _SPEC)
        mujoco.mj_forward(base.model, base.data)
    else:
        base.set_state({key.removeprefix("env."): value for key, value in state.items()})


def get_state(vec_env) -> dict[str, np.ndarray]:
    """Fixed-shape arrays describing the sub-envs' complete state ({} for an env `can_snapshot` refuses)."""
    if not can_snapshot(vec_env):
        return {}
    own, steps, rngs = [], [], []
    for env in _sub_envs(vec_env):
        base = env.unwrapped
        own.append(_own_state(base))
        limit = _time_limit(env)
        steps.append(-1 if limit is None else limit._elapsed_steps)
        rngs.append(_encode_rng(base.np_random.bit_generator.state))
    stacked = {key: np.stack([state[key] for state in own]) for key in own[0]}
    return {**stacked, "elapsed_steps": np.asarray(steps, np.int64), "rng": np.stack(rngs)}


def set_state(vec_env, state: dict[str, np.ndarray]) -> None:
    """Restore what `get_state` returned into a vector env of the same task and size (already reset)."""
    envs = _sub_envs(vec_env)
    rngs = np.asarray(state["rng"])
    if len(rngs) != len(envs):
        raise ValueError(f"checkpoint has {len(rngs)} sub-envs, the env has {len(envs)}")
    own_keys = [key for key in state if key not in ("elapsed_steps", "rng")]
    for i, (env, steps, rng) in enumerate(zip(envs, state["elapsed_steps"], rngs, strict=True)):
        base = env.unwrapped
        _set_own_state(base, {key: np.asarray(state[key][i]) for key in own_keys})
        limit = _time_limit(env)
        if limit is not None:
            limit._elapsed_steps = int(steps)
        base.np_random.bit_generator.state = _decode_rng(rng)
