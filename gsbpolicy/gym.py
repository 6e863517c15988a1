"""Gymnasium evaluation of any SB3-style predictor (a `GSBPolicy`, an SB3 model, an ONNX runtime policy).

gymnasium is imported inside the functions, so importing gsbpolicy does not load it.
"""

import dataclasses
import functools
import importlib
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from export.runtime import check_deterministic

from ._files import read_json


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


FLOAT32_MAX = float(np.finfo(np.float32).max)


class EnvOutputError(ValueError):
    """An env returned what no policy can act on or learn from: a non-finite or float32-overflowing observation
    or reward, or an observation of another shape than its space. `record` holds the fields a stopped run
    keeps in its diverged.json (env, quantity, value, env_step)."""

    def __init__(self, message: str, record: dict):
        super().__init__(message)
        self.record = record


def _env_name(env) -> str:
    """The env's registered id, else (a vector env built from functions) its first sub-env's, else its class."""
    spec_id = getattr(getattr(env, "spec", None), "id", None)
    if spec_id is None and getattr(env, "envs", None):
        return _env_name(env.envs[0])
    return spec_id or type(getattr(env, "unwrapped", env)).__name__


def check_space_bounds(env, name: str | None = None) -> None:
    """ValueError naming the env and the index if a Box space of `env` has low > high (a space edited after
    it was built; gymnasium's own error comes later, from deep inside vectorisation)."""
    name = name or _env_name(env)
    for attribute in ("observation_space", "action_space"):
        space = getattr(env, attribute, None)
        low, high = getattr(space, "low", None), getattr(space, "high", None)
        if low is None or high is None:
            continue
        swapped = np.argwhere(np.asarray(low) > np.asarray(high))
        if swapped.size:
            i = tuple(int(j) for j in swapped[0])
            raise ValueError(
                f"the env {name}'s {attribute} has low > high at index {list(i)} "
                f"(low {np.asarray(low)[i]}, high {np.asarray(high)[i]}): fix the space's bounds"
            )


def check_env_output(name: str, call: str, step: int, obs, reward=None, shape: tuple | None = None) -> None:
    """Raise `EnvOutputError` naming the env `name`, what it returned from `call` ("reset" or "step") at
    `step` (its env steps so far), the quantity and its value, for an observation of another `shape` or
    holding NaN, inf or a value beyond float32 (the policy computes in float32), or a non-finite reward."""
    at = f"at env step {step}" if call == "step" else "from reset"
    obs = np.asarray(obs)
    if shape is not None and obs.shape != tuple(shape):
        raise EnvOutputError(
            f"the env {name} returned an observation of shape {obs.shape} {at}; its observation_space has shape "
            f"{tuple(shape)}",
            {"env": name, "quantity": "observation shape", "value": list(obs.shape), "env_step": step},
        )
    checks = [("observation", obs)] + ([] if reward is None else [("reward", np.asarray(reward, float))])
    for quantity, values in checks:
        if not np.issubdtype(values.dtype, np.number):
            continue
        bad = ~np.isfinite(values) | (np.abs(np.where(np.isfinite(values), values, 0)) > FLOAT32_MAX)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            value = values[index].item()
            label = f"{quantity}{list(index)}" if index else quantity
            why = "not finite" if not np.isfinite(value) else "too large for float32 (|x| > 3.4e38)"
            raise EnvOutputError(
                f"the env {name} returned {label} = {value!r} {at}: {why}; the policy cannot act on or learn "
                "from it, so fix (or clip) what the env returns",
                {"env": name, "quantity": label, "value": repr(value), "env_step": step},
            )


def checked(env, name: str | None = None):
    """`env` wrapped so that each reset and step checks what it returns (`check_env_output`), after its spaces'
    bounds (`check_space_bounds`). A module-level function, so that vector envs can pickle it as a wrapper."""
    name = name or _env_name(env)
    check_space_bounds(env, name)
    return _checked_class()(env, name)


@functools.cache
def _checked_class():
    import gymnasium

    class CheckedEnv(gymnasium.Wrapper):
        """Checks every observation and reward where it leaves the user's env; counts the env's steps."""

        def __init__(self, env, name: str):
            super().__init__(env)
            self.name, self.steps = name, 0

        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            check_env_output(self.name, "reset", self.steps, obs, shape=self.observation_space.shape)
            return obs, info

        def step(self, action):
            result = self.env.step(action)
            self.steps += 1
            check_env_output(
                self.name, "step", self.steps, result[0], result[1], self.observation_space.shape
            )
            return result

    return CheckedEnv


CUSTOM_NAMESPACE = "custom"
"""Gymnasium namespace of the ids `train()` gives env classes and functions ("custom/<name>-v0")."""


def entry_point_of(factory) -> str:
    """`module:qualname` of a class or function: the form of gymnasium's `entry_point`."""
    return f"{factory.__module__}:{factory.__qualname__}"


def importable(entry_point: str, factory=None) -> bool:
    """Whether another process can import `entry_point` (`module:qualname`), and find `factory` there if given:
    not for a class of a script run as `__main__`, nor one defined inside a function."""
    module, _, qualname = entry_point.partition(":")
    if module == "__main__" or "<locals>" in qualname:
        return False
    try:
        found = functools.reduce(getattr, qualname.split("."), importlib.import_module(module))
    except (ImportError, AttributeError):
        return False
    return factory is None or found is factory


def env_entry_point(env_id: str) -> str | None:
    """The `module:Class` behind a "custom/" id registered in this process (what a policy trained on it records
    so that another process can make the env again); None for other ids."""
    import gymnasium

    spec = gymnasium.registry.get(env_id) if env_id.startswith(f"{CUSTOM_NAMESPACE}/") else None
    if spec is None:
        return None
    return spec.entry_point if isinstance(spec.entry_point, str) else entry_point_of(spec.entry_point)


def makeable_env_id(env_id: str, policy) -> str:
    """`env_id`, registered first if it is a "custom/" id this process lacks and the policy's folder records its
    entry point (results.json's env_entry_point); a ValueError saying what to do where it cannot be."""
    import gymnasium

    if not env_id.startswith(f"{CUSTOM_NAMESPACE}/") or env_id in gymnasium.registry:
        return env_id
    folder = getattr(policy, "name_or_path", None)
    results = Path(folder) / "results.json" if folder is not None else None
    recorded = read_json(results) if results is not None and results.is_file() else {}
    entry_point = recorded.get("env_entry_point") if recorded.get("env_id") == env_id else None
    if entry_point and importable(entry_point):
        gymnasium.register(env_id, entry_point=entry_point)
        return env_id
    if entry_point:
        name = entry_point.partition(":")[2]
        raise ValueError(
            f"{env_id} is the class {name} of the script that trained the policy ({entry_point}), which no "
            f"other process can import: pass the env itself (evaluate(policy, {name}())), or move {name} into a "
            "module and train again"
        )
    raise ValueError(
        f"{env_id} was registered by train() in the process that trained the policy, and this one does not know "
        f"it: pass the env itself, evaluate(policy, YourEnv()), or register it first: "
        f"gymnasium.register({env_id!r}, entry_point='your_module:YourEnv')"
    )


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

    Raises:
        EnvOutputError: the env returned an observation of another shape than its space, a NaN, inf or
            beyond-float32 observation, or a NaN or inf reward (named with the env, index, value and env step).
        ValueError: the env's spaces are not the policy's or have low > high, or a "custom/" id this process
            does not know and the policy's folder cannot make (it says what to pass instead).
    """
    import gymnasium

    from .gsb_policy import GSBPolicy

    if isinstance(n_episodes, bool) or not isinstance(n_episodes, int | np.integer) or n_episodes < 1:
        raise ValueError(f"n_episodes must be an integer >= 1, got {n_episodes!r}")
    deterministic = check_deterministic(deterministic)
    if isinstance(policy, GSBPolicy):
        policy.set_seed(seed)
    owned = isinstance(env_or_id, str)
    env = gymnasium.make(makeable_env_id(env_or_id, policy)) if owned else env_or_id
    try:
        check_space_bounds(env)
        check_spaces(policy, env)
        if isinstance(env, gymnasium.vector.VectorEnv):
            returns, lengths = _run_vector(policy, env, n_episodes, deterministic, seed)
        elif isinstance(env, gymnasium.Env):
            returns, lengths = _run_single(policy, checked(env), n_episodes, deterministic, seed)
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
    # The sub-envs are the user's: what leaves them is checked here, batched (index [sub-env, ...]).
    name, shape, steps = _env_name(env), env.observation_space.shape, 0
    obs, _ = env.reset(seed=seed)
    check_env_output(name, "reset", steps, obs, shape=shape)
    resetting = np.zeros(n_envs, bool)  # NEXT_STEP mode: this step only resets these sub-envs
    while (counts < targets).any():
        action, _ = policy.predict(obs, deterministic=deterministic)
        obs, reward, terminated, truncated, _ = env.step(action)
        steps += 1
        check_env_output(name, "step", steps, obs, reward, shape)
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
            check_env_output(name, "reset", steps, obs, shape=shape)
    return returns, lengths
