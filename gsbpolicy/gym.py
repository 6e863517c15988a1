"""Gymnasium evaluation of any SB3-style predictor (a `GSBPolicy`, an SB3 model, an ONNX runtime policy).

gymnasium is imported inside the functions, so importing gsbpolicy does not load it.
"""

import dataclasses
from typing import Any, Protocol

import numpy as np


class Predictor(Protocol):
    """What `evaluate` needs: SB3's `PolicyPredictor` protocol."""

    def predict(
        self, observation, state=None, episode_start=None, deterministic: bool = True
    ) -> tuple[Any, Any]: ...


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """Per-episode returns and lengths, with their mean and population standard deviation."""

    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    deterministic: bool
    seed: int

    @property
    def n_episodes(self) -> int:
        return len(self.returns)

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        """Population standard deviation (ddof 0), as SB3 and the Hub's mean_reward convention use."""
        return float(np.std(self.returns))

    def to_dict(self) -> dict:
        """The result as plain JSON values (the fields of a results.json evaluation)."""
        return {
            "mean": self.mean,
            "std": self.std,
            "n_episodes": self.n_episodes,
            "returns": list(self.returns),
            "lengths": list(self.lengths),
            "deterministic": self.deterministic,
            "seed": self.seed,
        }


def check_deterministic(deterministic) -> bool:
    """`deterministic` if it is a bool; a TypeError otherwise: `"False"` (a string from a config file or a
    command line) is truthy, and would silently run the deterministic policy."""
    if not isinstance(deterministic, bool | np.bool_):
        raise TypeError(
            f"deterministic must be True or False, got {deterministic!r} ({type(deterministic).__name__})"
        )
    return bool(deterministic)


def evaluate(
    policy: Predictor,
    env_or_id,
    n_episodes: int = 10,
    deterministic: bool = True,
    seed: int = 0,
) -> EvalResult:
    """Run `n_episodes` full episodes and return their undiscounted returns and lengths.

    Args:
        policy: anything with SB3's `predict(obs, state, episode_start, deterministic)`.
        env_or_id: a Gymnasium env id (made and closed here), a `gymnasium.Env` or a
            `gymnasium.vector.VectorEnv` (episodes are split across sub-envs as SB3 does).
        n_episodes: number of episodes.
        deterministic: passed to `predict`.
        seed: episode i of a single env is reset with seed + i; a vector env is reset once with `seed`
            (sub-env j gets seed + j). A `GSBPolicy`'s noise generator is reseeded with it too.
    """
    import gymnasium

    from .hub import GSBPolicy

    if isinstance(n_episodes, bool) or not isinstance(n_episodes, int | np.integer) or n_episodes < 1:
        raise ValueError(f"n_episodes must be an integer >= 1, got {n_episodes!r}")
    deterministic = check_deterministic(deterministic)
    if isinstance(policy, GSBPolicy):
        policy.set_seed(seed)
    owned = isinstance(env_or_id, str)
    env = gymnasium.make(env_or_id) if owned else env_or_id
    try:
        check_spaces(policy, env)
        if isinstance(env, gymnasium.vector.VectorEnv):
            returns, lengths = _run_vector(policy, env, n_episodes, deterministic, seed)
        elif isinstance(env, gymnasium.Env):
            returns, lengths = _run_single(policy, env, n_episodes, deterministic, seed)
        else:
            raise TypeError(f"expected a gymnasium Env, VectorEnv or env id, got {type(env).__name__}")
    finally:
        if owned:
            env.close()
    return EvalResult(tuple(returns), tuple(lengths), deterministic, seed)


def _policy_spaces(policy) -> tuple[tuple, tuple, np.ndarray | None, np.ndarray | None] | None:
    """(observation shape, action shape, action low, action high) a predictor declares, if it declares them: a
    `GSBPolicy` or an SB3 model through its spaces, an `OnnxPolicy` through its metadata."""
    if hasattr(policy, "obs_dim") and hasattr(policy, "act_dim"):
        return (policy.obs_dim,), (policy.act_dim,), policy.action_low, policy.action_high
    obs_space, act_space = getattr(policy, "observation_space", None), getattr(policy, "action_space", None)
    if getattr(obs_space, "shape", None) is None or getattr(act_space, "shape", None) is None:
        return None
    return (
        tuple(obs_space.shape),
        tuple(act_space.shape),
        getattr(act_space, "low", None),
        getattr(act_space, "high", None),
    )


def check_spaces(policy, env, env_name: str | None = None) -> None:
    """The env's spaces must be the policy's: the same observation shape, action shape and action bounds
    (ValueError naming the difference). A predictor that declares no spaces is not checked."""
    declared = _policy_spaces(policy)
    if declared is None:
        return
    obs_shape, act_shape, low, high = declared
    single = getattr(env, "single_observation_space", None) is not None
    env_obs = env.single_observation_space if single else env.observation_space
    env_act = env.single_action_space if single else env.action_space
    name = env_name or getattr(getattr(env, "spec", None), "id", None) or "the env"
    if tuple(env_obs.shape or ()) != obs_shape:
        raise ValueError(f"the policy takes observations of shape {obs_shape}, {name} gives {env_obs.shape}")
    if tuple(env_act.shape or ()) != act_shape:
        raise ValueError(f"the policy acts in shape {act_shape}, {name} in {env_act.shape}")
    if low is None or not hasattr(env_act, "low"):
        return
    if not (np.allclose(low, env_act.low) and np.allclose(high, env_act.high)):
        raise ValueError(
            f"the policy's action bounds [{np.asarray(low).tolist()}, {np.asarray(high).tolist()}] are not "
            f"{name}'s [{np.asarray(env_act.low).tolist()}, {np.asarray(env_act.high).tolist()}]"
        )


def _run_single(policy, env, n_episodes, deterministic, seed):
    returns, lengths = [], []
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, length, done = 0.0, 0, False
        while not done:
            action, _ = policy.predict(obs, deterministic=deterministic)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            length += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(length)
    return returns, lengths


def _run_vector(policy, env, n_episodes, deterministic, seed):
    from gymnasium.vector import AutoresetMode

    n_envs = env.num_envs
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    # Same split as SB3's evaluate_policy, so short episodes of fast sub-envs do not bias the sample.
    targets = np.array([(n_episodes + i) // n_envs for i in range(n_envs)])
    counts = np.zeros(n_envs, int)
    totals, lens = np.zeros(n_envs), np.zeros(n_envs, int)
    returns, lengths = [], []
    obs, _ = env.reset(seed=seed)
    resetting = np.zeros(n_envs, bool)  # NEXT_STEP mode: this step only resets these sub-envs
    while (counts < targets).any():
        action, _ = policy.predict(obs, deterministic=deterministic)
        obs, reward, terminated, truncated, _ = env.step(action)
        live = ~resetting
        totals[live] += reward[live]
        lens[live] += 1
        done = (terminated | truncated) & live
        for i in np.flatnonzero(done):
            if counts[i] < targets[i]:
                returns.append(float(totals[i]))
                lengths.append(int(lens[i]))
                counts[i] += 1
            totals[i], lens[i] = 0.0, 0
        if mode == AutoresetMode.NEXT_STEP:
            resetting = done
        elif mode == AutoresetMode.DISABLED and done.any():
            obs, _ = env.reset(options={"reset_mask": done})
    return returns, lengths
