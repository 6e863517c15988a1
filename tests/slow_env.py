"""A Gymnasium env whose step can be made slow, registered on import (`--env tests.slow_env:SlowPointMass-v0`):
a point mass on a line pushed toward the origin, each step sleeping `GSBPOLICY_TEST_STEP_SLEEP` seconds (none
unless the variable is set). The sleep changes how long a run takes, never what it computes, so the Slurm
tests can make a run outlast a time limit without loading the CPU, and compare it with the same run done fast.
"""

import os
import time

import gymnasium as gym
import numpy as np

SLEEP_VAR = "GSBPOLICY_TEST_STEP_SLEEP"


class SlowPointMass(gym.Env):
    """Position and velocity; reward exp(-position^2); 50 steps an episode (the registration's). Its state can
    be read and restored (`trainers._core.envs.gym_state.StatefulEnv`), so runs on it resume exactly."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self):
        self._sleep = float(os.environ.get(SLEEP_VAR, "0"))
        self._state = np.zeros(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._state = np.array([self.np_random.uniform(-1.0, 1.0), 0.0])
        return self._state.astype(np.float32), {}

    def get_state(self) -> dict[str, np.ndarray]:
        """What the next steps depend on besides `np_random`: a resumed run continues the same episodes."""
        return {"state": self._state.copy()}

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        self._state = np.array(state["state"], dtype=np.float64)

    def step(self, action):
        time.sleep(self._sleep)
        position, velocity = self._state
        velocity = velocity + 0.1 * (float(np.clip(action[0], -1.0, 1.0)) - 0.1 * velocity)
        self._state = np.array([position + 0.1 * velocity, velocity])
        return self._state.astype(np.float32), float(np.exp(-(self._state[0] ** 2))), False, False, {}


gym.register("SlowPointMass-v0", entry_point=SlowPointMass, max_episode_steps=50)
