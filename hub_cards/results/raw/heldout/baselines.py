"""Baselines for the envs in envs.py: do-nothing, uniform random, hand-designed.

evaluate(env_cls, policy_fn, episodes=50, seed=10000) -> (mean, std)

policy_fn is called as policy_fn(obs) -> action. If it has a `reset`
attribute, policy_fn.reset(env, episode_seed) is called after each env reset
(used for the random policy's RNG and the PI controller's integrator).
"""

import numpy as np

from envs import TankLevel, OverheadCrane


def evaluate(env_cls, policy_fn, episodes=50, seed=10000):
    env = env_cls()
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        if hasattr(policy_fn, "reset"):
            policy_fn.reset(env, seed + i)
        ret, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(policy_fn(obs))
            ret += r
            done = term or trunc
        returns.append(ret)
    env.close()
    returns = np.asarray(returns)
    return float(returns.mean()), float(returns.std())


class ConstantPolicy:
    def __init__(self, value):
        self.value = np.array([value], dtype=np.float32)

    def __call__(self, obs):
        return self.value


class RandomPolicy:
    """Uniform random actions from the env's action space, seeded per episode."""

    def reset(self, env, ep_seed):
        self.space = env.action_space
        self.space.seed(ep_seed)

    def __call__(self, obs):
        return self.space.sample()


class TankPI:
    """PI on the lower-tank level with steady-state feedforward
    q_ff = a2 sqrt(2 g h_ref) (in L/s), clipped to [0, Q_MAX],
    with conditional-integration anti-windup."""

    def __init__(self, kp=6.0, ki=0.05):
        self.kp, self.ki = kp, ki

    def reset(self, env, ep_seed):
        self.env = env
        self.integ = 0.0

    def __call__(self, obs):
        env_cls = self.env
        h1, h2, href = (float(v) for v in obs)
        q_ff = env_cls.a2 * np.sqrt(2.0 * env_cls.G * href) * 1e3
        e = href - h2
        u_unsat = q_ff + self.kp * e + self.ki * (self.integ + e * env_cls.DT)
        u = min(max(u_unsat, 0.0), env_cls.Q_MAX)
        if u == u_unsat:  # only integrate when not saturated
            self.integ += e * env_cls.DT
        return np.array([u], dtype=np.float32)


def dlqr(A, B, Q, R, iters=5000):
    P = Q.copy()
    for _ in range(iters):
        K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
        P_new = Q + A.T @ P @ (A - B @ K)
        if np.max(np.abs(P_new - P)) < 1e-10:
            P = P_new
            break
        P = P_new
    K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
    return K


class CraneLQR:
    """Discrete LQR on the crane linearised about the hanging equilibrium,
    u = -K [x, x_dot, theta, theta_dot], saturated at +-F_MAX."""

    def __init__(self, q=(1.0, 0.1, 1.0, 0.0), r=1e-3, env_cls=OverheadCrane):
        E = env_cls
        M, m, l, g, b, c = E.M, E.m, E.L, E.G, E.B_CART, E.C_TH
        # continuous linearisation, state [x, xd, th, thd]
        Ac = np.array(
            [
                [0, 1, 0, 0],
                [0, -b / M, m * g / M, 0],
                [0, 0, 0, 1],
                [0, b / (M * l), -(m * g / M + g) / l, -c],
            ]
        )
        Bc = np.array([[0], [1 / M], [0], [-1 / (M * l)]])
        dt = E.DT
        # semi-implicit Euler discretisation (velocities updated first)
        Av = np.eye(4) + dt * Ac
        Bv = dt * Bc
        Ad, Bd = Av.copy(), Bv.copy()
        Ad[0] = Av[0] + dt * Av[1]
        Ad[2] = Av[2] + dt * Av[3]
        Bd[0] = Bv[0] + dt * Bv[1]
        Bd[2] = Bv[2] + dt * Bv[3]
        self.K = dlqr(Ad, Bd, np.diag(q), np.array([[r]]))
        self.f_max = E.F_MAX

    def __call__(self, obs):
        u = float(-(self.K @ np.asarray(obs, dtype=np.float64))[0])
        return np.array([np.clip(u, -self.f_max, self.f_max)], dtype=np.float32)


def main():
    rows = [
        (
            "TankLevel",
            TankLevel,
            [
                ("do-nothing (pump off, q=0)", ConstantPolicy(0.0)),
                ("uniform random", RandomPolicy()),
                ("PI + feedforward", TankPI()),
            ],
        ),
        (
            "OverheadCrane",
            OverheadCrane,
            [
                ("do-nothing (F=0)", ConstantPolicy(0.0)),
                ("uniform random", RandomPolicy()),
                ("LQR (saturated)", CraneLQR()),
            ],
        ),
    ]
    for name, cls, pols in rows:
        print(f"{name}  (50 episodes, reset seeds 10000..10049)")
        for pname, pol in pols:
            mu, sd = evaluate(cls, pol)
            print(f"  {pname:28s} {mu:10.3f} +- {sd:8.3f}")


if __name__ == "__main__":
    main()
