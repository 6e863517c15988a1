"""Snapshot and restore of a sync Gymnasium MuJoCo vector env, so that resumed runs continue exactly.

Per sub-env: MuJoCo's full integration state (`mj_getState` with mjSTATE_INTEGRATION: time, qpos, qvel,
act, warm-start accelerations, ...), the TimeLimit step counter and the env's numpy generator state.
That is everything a Gymnasium MuJoCo v5 env carries between steps. Async vector envs keep their
sub-envs in other processes and are not supported.
"""

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


def get_state(vec_env) -> dict[str, np.ndarray]:
    """Fixed-shape arrays describing the sub-envs' complete state."""
    physics, steps, rngs = [], [], []
    for env in _sub_envs(vec_env):
        base = env.unwrapped
        state = np.empty(mujoco.mj_stateSize(base.model, _SPEC), np.float64)
        mujoco.mj_getState(base.model, base.data, state, _SPEC)
        physics.append(state)
        limit = _time_limit(env)
        steps.append(-1 if limit is None else limit._elapsed_steps)
        rngs.append(_encode_rng(base.np_random.bit_generator.state))
    return {"physics": np.stack(physics), "elapsed_steps": np.asarray(steps, np.int64), "rng": np.stack(rngs)}


def set_state(vec_env, state: dict[str, np.ndarray]) -> None:
    """Restore what `get_state` returned into a vector env of the same task and size (already reset)."""
    envs = _sub_envs(vec_env)
    rngs = np.asarray(state["rng"])
    if len(rngs) != len(envs):
        raise ValueError(f"checkpoint has {len(rngs)} sub-envs, the env has {len(envs)}")
    for env, physics, steps, rng in zip(envs, state["physics"], state["elapsed_steps"], rngs, strict=True):
        base = env.unwrapped
        mujoco.mj_setState(base.model, base.data, np.asarray(physics, np.float64), _SPEC)
        mujoco.mj_forward(base.model, base.data)
        limit = _time_limit(env)
        if limit is not None:
            limit._elapsed_steps = int(steps)
        base.np_random.bit_generator.state = _decode_rng(rng)
