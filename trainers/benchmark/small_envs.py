"""Three small control tasks for the `small-envs` suite, written as a user writes their own `gymnasium.Env`.

Importing this module registers them with Gymnasium, so the suite names them as
`trainers.benchmark.small_envs:Reach-v0` (Gymnasium imports the module named before the colon).

- `Reach-v0`: the README's example. A point on a line steers to a target; reward minus the distance; 50 steps.
- `DoubleIntegrator-v0`: x' = v, v' = u with u in [-2, 2], dt 0.1; reward -(x^2 + 0.1 v^2 + 0.01 u^2) a step;
  100 steps from x0 ~ U(-1, 1), v0 ~ U(-0.3, 0.3). Doing nothing scores about -130, a PD controller -4.
- `Puck-v0`: a puck with drag on a walled 4 x 4 table pushed to a random goal by a force in [-5, 5]^2; reward
  100 x (progress towards the goal) - 10 x distance - a small force cost, in units as large as a user's; 150 steps.
  Written after the default was first chosen, as a check on it: a policy that pushes into a wall stays there
  (the wall stops the puck, not its speed), so a run that commits early to the wrong push scores below doing
  nothing, which scores about -1,570.
"""

import gymnasium
import numpy as np
from gymnasium import spaces


class Reach(gymnasium.Env):
    """Steer a point on a line to a target; reward: minus the distance; 50 steps an episode."""

    def __init__(self):
        self.observation_space = spaces.Box(-5.0, 5.0, (2,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.target = self.np_random.uniform(-2, 2, 2)
        self.steps = 0
        return np.array([self.x, self.target], np.float32), {}

    def step(self, action):
        self.x = float(np.clip(self.x + 0.2 * float(action[0]), -5, 5))
        self.steps += 1
        obs = np.array([self.x, self.target], np.float32)
        return obs, -abs(self.x - self.target), False, self.steps >= 50, {}

    def get_state(self):
        return {"x_target": np.array([self.x, self.target]), "steps": np.array(self.steps)}

    def set_state(self, state):
        (self.x, self.target), self.steps = state["x_target"].tolist(), int(state["steps"])


class DoubleIntegrator(gymnasium.Env):
    """Bring a unit mass to rest at the origin with a bounded force; quadratic cost; 100 steps an episode."""

    dt = 0.1

    def __init__(self):
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = spaces.Box(-2.0, 2.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = self.np_random.uniform(-1, 1)
        self.v = self.np_random.uniform(-0.3, 0.3)
        self.steps = 0
        return np.array([self.x, self.v], np.float32), {}

    def step(self, action):
        u = float(np.clip(action[0], -2.0, 2.0))
        reward = -(self.x**2 + 0.1 * self.v**2 + 0.01 * u**2)
        self.x, self.v = self.x + self.dt * self.v, self.v + self.dt * u
        self.steps += 1
        return np.array([self.x, self.v], np.float32), float(reward), False, self.steps >= 100, {}

    def get_state(self):
        return {"xv": np.array([self.x, self.v]), "steps": np.array(self.steps)}

    def set_state(self, state):
        (self.x, self.v), self.steps = state["xv"].tolist(), int(state["steps"])


class Puck(gymnasium.Env):
    """Push a puck with drag to a random goal on a walled table; progress-shaped reward; 150 steps an episode."""

    dt, drag, force = 0.05, 0.5, 5.0

    def __init__(self):
        self.observation_space = spaces.Box(-np.inf, np.inf, (6,), np.float32)
        self.action_space = spaces.Box(-self.force, self.force, (2,), np.float32)

    def _obs(self):
        return np.concatenate([self.p, self.v, self.goal]).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.p = self.np_random.uniform(-1, 1, 2)
        self.v = np.zeros(2)
        self.goal = self.np_random.uniform(-1, 1, 2)
        self.steps = 0
        return self._obs(), {}

    def step(self, action):
        u = np.clip(np.asarray(action, float), -self.force, self.force)
        before = np.linalg.norm(self.p - self.goal)
        self.v = self.v + self.dt * (u - self.drag * self.v)
        self.p = np.clip(self.p + self.dt * self.v, -2, 2)  # the walls stop the puck; its speed carries on
        after = np.linalg.norm(self.p - self.goal)
        self.steps += 1
        reward = 100.0 * (before - after) - 10.0 * after - 0.1 * float(u @ u) / self.force**2
        return self._obs(), float(reward), False, self.steps >= 150, {}

    def get_state(self):
        return {"p_v_goal": np.concatenate([self.p, self.v, self.goal]), "steps": np.array(self.steps)}

    def set_state(self, state):
        self.p, self.v, self.goal = np.split(state["p_v_goal"].astype(float), 3)
        self.steps = int(state["steps"])


for _name, _cls in (("Reach-v0", Reach), ("DoubleIntegrator-v0", DoubleIntegrator), ("Puck-v0", Puck)):
    if _name not in gymnasium.registry:
        gymnasium.register(_name, entry_point=_cls)
