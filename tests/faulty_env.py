"""A Gymnasium env that misbehaves on purpose, registered on import (`--env tests.faulty_env:FaultyNanObs-v0`):
four observations of 0.1 and a reward of 1 per step until its `at`-th step in total (counted across episodes),
which returns the `fault`. Episodes end after 20 steps (the registrations'). The tests use it to show that what
leaves a user's env is checked where it leaves it, and named in the env's own terms.
"""

import gymnasium as gym
import numpy as np

FAULTS = {
    "NanObs": "nan observation",
    "InfReward": "inf reward",
    "HugeObs": "huge observation",
    "ResetShape": "reset shape",
    "StepShape": "step shape",
    "SwappedBounds": "swapped bounds",
}
"""Registered id (Faulty<key>-v0) -> fault."""


class FaultyEnv(gym.Env):
    # Stable-Baselines3's make_vec_env asks for rgb_array frames; a blank one is all a test needs.
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, fault: str = "none", at: int = 3, act_low=(-1.0,), act_high=(1.0,), render_mode=None):
        self.fault, self.at, self.total, self.render_mode = fault, at, 0, render_mode
        # float64, as many user envs are: a value beyond float32 is representable, and must be caught.
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float64)
        self.action_space = gym.spaces.Box(np.array(act_low, np.float32), np.array(act_high, np.float32))
        if fault == "swapped bounds":  # edited after the Box was built, which gymnasium does not check
            self.action_space.low[0], self.action_space.high[0] = 1.0, -1.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(5 if self.fault == "reset shape" else 4), {}

    def render(self):
        return np.zeros((16, 16, 3), np.uint8)

    def step(self, action):
        self.total += 1
        obs, reward = np.full(4, 0.1), 1.0
        if self.total == self.at:
            if self.fault == "nan observation":
                obs[2] = np.nan
            elif self.fault == "inf reward":
                reward = np.inf
            elif self.fault == "huge observation":
                obs[1] = 1e300
            elif self.fault == "step shape":
                obs = np.zeros(3)
        return obs, reward, False, False, {}


for _name, _fault in FAULTS.items():
    # Imported both as `faulty_env` (tests/ on the path) and as `tests.faulty_env` (by a `--env` id): the first
    # import registers, the second would only make gymnasium warn that it overrides the same env.
    if f"Faulty{_name}-v0" in gym.registry:
        continue
    # Actions in [-3, 3], as InvertedPendulum-v5's: the tests' tiny policies for it act in this env too.
    kwargs = {"fault": _fault, "at": 40, "act_low": (-3.0,), "act_high": (3.0,)}
    gym.register(
        f"Faulty{_name}-v0", entry_point=f"{__name__}:FaultyEnv", kwargs=kwargs, max_episode_steps=20
    )
