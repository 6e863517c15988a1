"""Two small continuous-control Gymnasium environments (numpy only).

TankLevel      -- cascaded two-tank water level process (Torricelli outflows).
OverheadCrane  -- cart with a hanging load (gantry crane), move cart to x=0.
"""

import numpy as np
import gymnasium as gym
from gymnasium import spaces


class TankLevel(gym.Env):
    """Two cascaded tanks. The pump feeds the upper tank (1), which drains
    through an orifice into the lower tank (2), which drains to a sump.

    State / observation (physical units, metres): [h1, h2, h_ref]
    Action: pump flow q_in in litres/second, in [0, 1].

        A1 dh1/dt = q_in - a1 sqrt(2 g h1)
        A2 dh2/dt = a1 sqrt(2 g h1) - a2 sqrt(2 g h2)

    Levels are clipped to [0, H_MAX] (overflow is lost). Integrated with
    forward Euler on 10 sub-steps per control step of DT = 1 s.

    Reward = -(h2 - h_ref)^2 - ENERGY_COST * q_in^2   (m^2, q_in in L/s)
    """

    metadata = {"render_modes": [], "render_fps": 1}

    G = 9.81  # m/s^2
    A1 = 0.02  # tank 1 cross-section, m^2
    A2 = 0.02  # tank 2 cross-section, m^2
    a1 = 2.0e-4  # tank 1 outlet orifice area, m^2
    a2 = 1.8e-4  # tank 2 outlet orifice area, m^2
    H_MAX = 1.0  # tank height, m
    Q_MAX = 1.0  # pump max flow, L/s
    DT = 1.0  # s
    SUBSTEPS = 10
    MAX_STEPS = 200
    ENERGY_COST = 0.01  # per (L/s)^2
    REF_LOW, REF_HIGH = 0.2, 0.8  # set-point range for h2, m
    H0_LOW, H0_HIGH = 0.0, 0.6  # initial level range, m

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = spaces.Box(
            low=np.array([0.0, 0.0, 0.0], dtype=np.float32),
            high=np.array([self.H_MAX, self.H_MAX, self.H_MAX], dtype=np.float32),
            dtype=np.float32,
        )
        self.action_space = spaces.Box(
            low=np.array([0.0], dtype=np.float32),
            high=np.array([self.Q_MAX], dtype=np.float32),
            dtype=np.float32,
        )
        self.h = np.zeros(2)
        self.h_ref = 0.5
        self.t = 0

    def _obs(self):
        return np.array([self.h[0], self.h[1], self.h_ref], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.h = self.np_random.uniform(self.H0_LOW, self.H0_HIGH, size=2)
        self.h_ref = float(self.np_random.uniform(self.REF_LOW, self.REF_HIGH))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        q = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], 0.0, self.Q_MAX))
        q_m3 = q * 1e-3
        dt = self.DT / self.SUBSTEPS
        s2g = np.sqrt(2.0 * self.G)
        h1, h2 = self.h
        for _ in range(self.SUBSTEPS):
            q12 = self.a1 * s2g * np.sqrt(max(h1, 0.0))
            q2o = self.a2 * s2g * np.sqrt(max(h2, 0.0))
            h1 = min(max(h1 + dt * (q_m3 - q12) / self.A1, 0.0), self.H_MAX)
            h2 = min(max(h2 + dt * (q12 - q2o) / self.A2, 0.0), self.H_MAX)
        self.h = np.array([h1, h2])
        self.t += 1
        err = h2 - self.h_ref
        reward = -(err**2) - self.ENERGY_COST * q**2
        truncated = self.t >= self.MAX_STEPS
        return self._obs(), float(reward), False, truncated, {"error": err}


class OverheadCrane(gym.Env):
    """Cart on a horizontal rail with a point-mass load hanging on a rigid,
    massless rope (pendulum below the cart; theta = 0 is straight down,
    positive theta = load displaced towards +x).

    Observation: [x (m), x_dot (m/s), theta (rad, wrapped to [-pi, pi]),
                  theta_dot (rad/s)]
    Action: horizontal force on the cart, N, in [-10, 10].

        x_dd  = (F - b x_d + m l th_d^2 sin th + m g sin th cos th)
                / (M + m sin^2 th)
        th_dd = -(x_dd cos th + g sin th) / l - c_th th_d

    Semi-implicit Euler with dt = 0.02 s, 300 steps (6 s).

    Reward = -(x^2 + C_THETA th^2 + C_XDOT x_d^2 + C_U F^2)
    """

    metadata = {"render_modes": [], "render_fps": 50}

    G = 9.81  # m/s^2
    M = 2.0  # cart mass, kg
    m = 1.0  # load mass, kg
    L = 1.0  # rope length, m
    B_CART = 0.5  # cart viscous friction, N s/m
    C_TH = 0.05  # load angular damping, 1/s
    F_MAX = 10.0  # N
    DT = 0.02  # s
    MAX_STEPS = 300
    C_THETA = 1.0  # per rad^2
    C_XDOT = 0.1  # per (m/s)^2
    C_U = 1e-3  # per N^2
    X0 = 2.0  # initial x ~ U[-X0, X0], m
    TH0 = 0.1  # initial theta ~ U[-TH0, TH0], rad

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        high = np.array([np.inf, np.inf, np.pi, np.inf], dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.action_space = spaces.Box(
            low=np.array([-self.F_MAX], dtype=np.float32),
            high=np.array([self.F_MAX], dtype=np.float32),
            dtype=np.float32,
        )
        self.state = np.zeros(4)
        self.t = 0

    @staticmethod
    def _wrap(a):
        return (a + np.pi) % (2.0 * np.pi) - np.pi

    def _obs(self):
        x, xd, th, thd = self.state
        return np.array([x, xd, self._wrap(th), thd], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        x = self.np_random.uniform(-self.X0, self.X0)
        th = self.np_random.uniform(-self.TH0, self.TH0)
        self.state = np.array([x, 0.0, th, 0.0])
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        F = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -self.F_MAX, self.F_MAX))
        x, xd, th, thd = self.state
        s, c = np.sin(th), np.cos(th)
        m, M, l, g = self.m, self.M, self.L, self.G
        xdd = (F - self.B_CART * xd + m * l * thd**2 * s + m * g * s * c) / (M + m * s**2)
        thdd = -(xdd * c + g * s) / l - self.C_TH * thd
        # semi-implicit Euler: velocities first, then positions
        xd = xd + self.DT * xdd
        thd = thd + self.DT * thdd
        x = x + self.DT * xd
        th = th + self.DT * thd
        self.state = np.array([x, xd, th, thd])
        self.t += 1
        thw = self._wrap(th)
        reward = -(x**2 + self.C_THETA * thw**2 + self.C_XDOT * xd**2 + self.C_U * F**2)
        truncated = self.t >= self.MAX_STEPS
        return self._obs(), float(reward), False, truncated, {}
