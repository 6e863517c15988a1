"""`GymnasiumEnv`: a host-side (numpy) adapter over a Gymnasium vector env in SAME_STEP autoreset mode."""

import functools
from typing import Any

import gymnasium as gym
import numpy as np
from jaxtyping import Float

from gsbpolicy.gym import checked

from .base import Timestep


class GymnasiumEnv:
    """Host-side adapter over a Gymnasium vector env in SAME_STEP autoreset mode (numpy in and out).

    In SAME_STEP mode a finished sub-env is reset inside the step that ended it: the returned
    observation is the new episode's first one and `info["final_obs"]` holds the last one. A step both
    terminated and truncated counts as terminated. Build with `GymnasiumEnv.make`.

    Args:
        vec_env: a vector env with `AutoresetMode.SAME_STEP` and 1-D Box observation and action spaces.
    """

    def __init__(self, vec_env: gym.vector.VectorEnv):
        mode = vec_env.metadata.get("autoreset_mode")
        if mode != gym.vector.AutoresetMode.SAME_STEP:
            raise ValueError(f"GymnasiumEnv needs AutoresetMode.SAME_STEP, got {mode}")
        for space in (vec_env.single_observation_space, vec_env.single_action_space):
            if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
                raise ValueError(f"GymnasiumEnv supports 1-D Box spaces only, got {space}")
        self.vec_env = vec_env

    @classmethod
    def make(
        cls, env_id: str, num_envs: int, vectorization_mode: str = "sync", **env_kwargs: Any
    ) -> "GymnasiumEnv":
        """`gym.make_vec` in SAME_STEP autoreset mode.

        Args:
            env_id: a Gymnasium id such as "Hopper-v5".
            num_envs: number of sub-envs B.
            vectorization_mode: "sync" (one process; the faster choice on 2 cores) or "async" (one
                spawned worker process per sub-env).
            **env_kwargs: passed to `gym.make` for each sub-env, e.g. `max_episode_steps`.
        """
        vector_kwargs: dict[str, Any] = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        # Each sub-env checks what it returns, so a bad observation or reward is named with its env and step
        # (not found later as a non-finite loss), and a wrong shape before gymnasium's batching trips on it.
        wrappers = [functools.partial(checked, name=env_id)]
        if vectorization_mode == "async":
            # The default "fork" copies a multithreaded process once JAX is loaded, which can deadlock.
            vector_kwargs["context"] = "spawn"
        vec_env = gym.make_vec(
            env_id,
            num_envs,
            vectorization_mode=vectorization_mode,
            vector_kwargs=vector_kwargs,
            wrappers=wrappers,
            **env_kwargs,
        )
        return cls(vec_env)

    @property
    def num_envs(self) -> int:
        return self.vec_env.num_envs

    @property
    def obs_dim(self) -> int:
        return self.vec_env.single_observation_space.shape[0]

    @property
    def act_dim(self) -> int:
        return self.vec_env.single_action_space.shape[0]

    @property
    def action_low(self) -> np.ndarray:
        """Lower action bounds [act_dim]."""
        return self.vec_env.single_action_space.low.astype(np.float32)

    @property
    def action_high(self) -> np.ndarray:
        """Upper action bounds [act_dim]."""
        return self.vec_env.single_action_space.high.astype(np.float32)

    def reset(self, seed: int | None = None) -> Float[np.ndarray, "b obs_dim"]:
        """Reset all sub-envs (sub-env i is seeded with seed + i) and return their observations."""
        obs, _ = self.vec_env.reset(seed=seed)
        return obs.astype(np.float32)

    def step(self, action: Float[np.ndarray, "b act_dim"]) -> Timestep:
        """Step all sub-envs with actions in [action_low, action_high] (clipped to them)."""
        action = np.clip(action, self.action_low, self.action_high)
        obs, reward, terminated, truncated, info = self.vec_env.step(action)
        done = terminated | truncated
        final_obs = obs.copy()
        if done.any():
            final_obs[done] = np.stack(info["final_obs"][done])
        return Timestep(
            obs=obs.astype(np.float32),
            reward=reward.astype(np.float32),
            terminated=terminated.astype(bool),
            truncated=truncated & ~terminated,
            final_obs=final_obs.astype(np.float32),
        )

    def close(self) -> None:
        self.vec_env.close()
