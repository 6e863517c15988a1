"""Stable-Baselines3 `VecEnv`s over the shared env adapters (imports SB3, hence torch: used by trainers.ppo only).

- `PlaygroundVecEnv`: the batched, jitted `PlaygroundEnv` (cached first states for auto-reset, own time limit)
  behind SB3's numpy VecEnv interface: a finished env's last observation is in `info["terminal_observation"]`
  and a time-limit end sets `info["TimeLimit.truncated"]`, which SB3 PPO uses to bootstrap truncations.
- `ScaleReward`: rewards times a constant (Brax's `reward_scaling`); SB3's VecNormalize only has a running
  return-std scaling.
- `make_sb3_env`: the stack trainers.ppo trains on; `EpisodeCollector`: the episodes a rollout finished.
"""

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecMonitor, VecNormalize

from gsbpolicy._internal import env_kind
from gsbpolicy.gym import checked

from .._core.config import TrainArgs
from .._core.envs import PlaygroundEnv


class PlaygroundVecEnv(VecEnv):
    """SB3 VecEnv over a `PlaygroundEnv` of B envs; `seed(s)` makes the next `reset` draw from key(s)."""

    def __init__(self, env: PlaygroundEnv):
        self.env = env
        self._reset_fn = jax.jit(env.reset)
        self._step_fn = jax.jit(env.step)
        self._state = None
        self._actions = None
        observation_space = spaces.Box(-np.inf, np.inf, (env.obs_dim,), np.float32)
        action_space = spaces.Box(env.action_low, env.action_high, dtype=np.float32)
        super().__init__(env.num_envs, observation_space, action_space)

    def reset(self) -> np.ndarray:
        seed = self._seeds[0]
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.int32).max))
        self._state, obs = self._reset_fn(jax.random.key(seed))
        self._reset_seeds()
        return np.asarray(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = jnp.asarray(actions, jnp.float32)

    def step_wait(self):
        if self._state is None:
            raise RuntimeError("PlaygroundVecEnv.step before reset")
        self._state, ts = self._step_fn(self._state, self._actions)
        obs, reward, terminated, truncated, final_obs = (np.asarray(x) for x in ts)
        dones = terminated | truncated
        infos = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            infos[i] = {"terminal_observation": final_obs[i], "TimeLimit.truncated": bool(truncated[i])}
        return obs, reward.astype(np.float32), dones, infos

    def close(self) -> None:
        self._state = None

    def get_attr(self, attr_name, indices=None):
        if attr_name == "render_mode":  # asked by VecEnv.__init__; these envs do not render
            return [None] * len(self._indices(indices))
        raise AttributeError(f"PlaygroundVecEnv has no per-env attribute {attr_name!r}")

    def set_attr(self, attr_name, value, indices=None) -> None:
        raise AttributeError(f"PlaygroundVecEnv cannot set per-env attribute {attr_name!r}")

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        raise AttributeError(f"PlaygroundVecEnv has no per-env method {method_name!r}")

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)


class ScaleReward(VecEnvWrapper):
    """Multiply rewards by `scale` before the learner sees them (apply outside any episode monitor)."""

    def __init__(self, venv: VecEnv, scale: float):
        super().__init__(venv)
        self.scale = scale

    def reset(self) -> np.ndarray:
        return self.venv.reset()

    def step_wait(self):
        obs, reward, dones, infos = self.venv.step_wait()
        return obs, reward * np.float32(self.scale), dones, infos


def make_sb3_env(args: TrainArgs, normalize_reward: bool = False) -> tuple[VecEnv, VecNormalize]:
    """Monitored envs -> VecNormalize (observations, RunningNorm's eps and clip; rewards too with
    `normalize_reward`, by the running std of the discounted return, as rl-baselines3-zoo's
    `normalize: true`) -> ScaleReward.

    Returns the env to train on and the VecNormalize layer (its `obs_rms` is part of the policy).
    Episode statistics are taken below the reward scaling, so they are in the task's own reward units.
    """
    rollout = args.rollout
    if env_kind(args.env) == "gymnasium":
        # Each env checks what it returns (gsbpolicy.gym.checked), as the JAX trainers' envs do.
        venv = make_vec_env(
            args.env,
            rollout.num_envs,
            seed=args.seed,
            wrapper_class=checked,
            wrapper_kwargs={"name": args.env},
        )
    else:
        env = PlaygroundEnv.make(args.env, rollout.num_envs, rollout.episode_length, rollout.action_repeat)
        venv = VecMonitor(PlaygroundVecEnv(env))
    normalizer = VecNormalize(
        venv, norm_obs=True, norm_reward=normalize_reward, clip_obs=10.0, epsilon=1e-8, gamma=rollout.gamma
    )
    if rollout.reward_scaling == 1.0:
        return normalizer, normalizer
    return ScaleReward(normalizer, rollout.reward_scaling), normalizer


class EpisodeCollector(BaseCallback):
    """Collects (return, length) of the episodes finished since the last `pop` (Monitor's `info["episode"]`)."""

    def __init__(self):
        super().__init__()
        self._finished: list[tuple[float, int]] = []

    def _on_step(self) -> bool:
        infos = self.locals["infos"]
        self._finished += [
            (float(i["episode"]["r"]), int(i["episode"]["l"])) for i in infos if "episode" in i
        ]
        return True

    def pop(self) -> dict:
        """The shared loop's episode summary keys for the episodes finished since the last call."""
        finished, self._finished = self._finished, []
        if not finished:
            return {"train/episodes": 0}
        returns, lengths = zip(*finished, strict=True)
        return {
            "train/episodes": len(returns),
            "train/episode_return": float(np.mean(returns)),
            "train/episode_length": float(np.mean(lengths)),
        }
