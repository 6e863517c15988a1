"""Snapshot and restore of a sync Gymnasium MuJoCo vector env, so that resumed runs continue exactly.

Per sub-env: MuJoCo's full integration state (`mj_getState` with mjSTATE_INTEGRATION: time, qpos, qvel,
act, warm-start accelerations, ...), the TimeLimit step counter and the env's numpy generator state.
That is everything a Gymnasium MuJoCo v5 env carries between steps. Async vector envs keep their
sub-envs in other processes and are not supported.
"""

import json

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


def _encode(obj) -> np.ndarray:
    return np.frombuffer(json.dumps(obj).encode(), np.uint8).copy()


def get_state(vec_env) -> dict[str, np.ndarray]:
    """Arrays describing the sub-envs' complete state (JSON-encoded generator states as uint8)."""
    physics, steps, rngs = [], [], []
    for env in _sub_envs(vec_env):
        base = env.unwrapped
        state = np.empty(mujoco.mj_stateSize(base.model, _SPEC), np.float64)
        mujoco.mj_getState(base.model, base.data, state, _SPEC)
        physics.append(state)
        limit = _time_limit(env)
        steps.append(-1 if limit is None else limit._elapsed_steps)
        rngs.append(base.np_random.bit_generator.state)
    return {"physics": np.stack(physics), "elapsed_steps": np.asarray(steps, np.int64), "rng": _encode(rngs)}


def set_state(vec_env, state: dict[str, np.ndarray]) -> None:
    """Restore what `get_state` returned into a vector env of the same task and size (already reset)."""
    envs = _sub_envs(vec_env)
    rngs = json.loads(bytes(np.asarray(state["rng"], np.uint8)).decode())
    if len(rngs) != len(envs):
        raise ValueError(f"checkpoint has {len(rngs)} sub-envs, the env has {len(envs)}")
    for env, physics, steps, rng in zip(envs, state["physics"], state["elapsed_steps"], rngs, strict=True):
        base = env.unwrapped
        mujoco.mj_setState(base.model, base.data, np.asarray(physics, np.float64), _SPEC)
        mujoco.mj_forward(base.model, base.data)
        limit = _time_limit(env)
        if limit is not None:
            limit._elapsed_steps = int(steps)
        base.np_random.bit_generator.state = rng
