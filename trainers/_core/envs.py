"""Environment adapters with one output type, `Timestep`, for MuJoCo Playground and Gymnasium.

Both adapters auto-reset finished episodes inside `step` and keep the observation the step reached in
`final_obs`, so that GAE can bootstrap a time-limit truncation from V(final_obs) while a true
termination gets no bootstrap (see `trainers._core.gae.compute_gae`).

Actions are given in the env's own bounds `[action_low, action_high]` (what `FlowPolicy.to_env`
returns; [-1, 1] for every dm_control_suite task) and are clipped to them here, so that the reward
terms that read the action (control costs) see the same action as the physics.

- `PlaygroundEnv`: a pure-functional, jittable batch of B MJX envs (dm_control_suite, impl="jax").
- `GymnasiumEnv`: a host-side (numpy) adapter over a Gymnasium vector env in SAME_STEP autoreset mode.
- `make_env`: picks one of them from the env id.
"""

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import equinox as eqx
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray
from mujoco import mjx
from mujoco_playground import MjxEnv, State, dm_control_suite

PLAYGROUND_ENVS: tuple[str, ...] = tuple(dm_control_suite.ALL_ENVS)
"""The MuJoCo Playground dm_control_suite task names `PlaygroundEnv.make` accepts."""

_AnyArray = Array | np.ndarray


class Timestep(NamedTuple):
    """What one batched env step reports; every leaf is batched over the B envs.

    Attributes:
        obs: observation to act on next; after an auto-reset, the first observation of the new episode.
        reward: reward of this step.
        terminated: the step reached a true terminal state (no bootstrap).
        truncated: the time limit was hit and the state is not terminal (bootstrap from `final_obs`).
        final_obs: observation reached by this step before any auto-reset (equals `obs` where not done).
    """

    obs: Float[_AnyArray, "b obs_dim"]
    reward: Float[_AnyArray, " b"]
    terminated: Bool[_AnyArray, " b"]
    truncated: Bool[_AnyArray, " b"]
    final_obs: Float[_AnyArray, "b obs_dim"]


class PlaygroundState(NamedTuple):
    """Carried state of a `PlaygroundEnv` (a pytree, batched over the B envs).

    Attributes:
        env_state: the current Playground states.
        first_state: the states drawn by `reset`; every env auto-resets to its own one.
        steps: physics control steps taken in the current episode (counts `action_repeat`).
    """

    env_state: State
    first_state: State
    steps: Int[Array, " b"]


def _strong(tree: Any) -> Any:
    """Drop JAX's weak types from every leaf.

    Some Playground resets (e.g. CheetahRun) return weak-typed leaves while `step` returns strong ones;
    a jitted step called first on a reset state and then on a stepped state would compile twice.
    """
    return jax.tree.map(lambda x: jnp.asarray(x, x.dtype), tree)


@contextlib.contextmanager
def _playground_promotion() -> Iterator[None]:
    """Trace Playground and MJX code under JAX's default promotion rules.

    They rely on implicit dtype and rank promotion, which strict test configs
    (`jax_numpy_dtype_promotion="strict"`, `jax_numpy_rank_promotion="raise"`) would reject.
    """
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        yield


def _finite_or_zero(x: Array) -> Array:
    return jnp.where(jnp.isfinite(x), x, 0.0)


class PlaygroundEnv(eqx.Module):
    """B MuJoCo Playground dm_control_suite envs with time limit and auto-reset, pure and jittable.

    `reset` and `step` are pure functions of their arguments; close over the env (do not pass it as a
    jit argument) so that the MJX model is a compile-time constant, and unroll steps with `lax.scan`.
    Build with `PlaygroundEnv.make`.

    Semantics:
        - Termination: Playground's `state.done` is, for every dm_control_suite task, only "the physics
          diverged" (NaN in qpos or qvel); these tasks have no terminal states. Such a step is reported
          as terminated, with non-finite reward and `final_obs` entries replaced by 0 so that one
          blow-up cannot poison a batch.
        - Truncation: an own step counter, as Brax's `EpisodeWrapper`: truncated when the episode has
          run `episode_length` physics control steps (each agent step counts `action_repeat`) and the
          step is not terminated. Playground's own `episode_length` config is not used by the env.
        - Auto-reset: a finished env restarts from the first state `reset` drew for it, the whole
          Playground state included. This is the behaviour of Brax's (and Playground's)
          `AutoResetWrapper` with cached first states, which FPO's Playground trainer uses: each env
          restarts from the same state for the whole run, and `reset` runs once. Brax keeps `info`
          (only an unused RNG key for these tasks); here it is reset with the rest.

    Attributes:
        env: the wrapped single-env Playground environment.
        name: its registry name.
        num_envs: B.
        episode_length: time limit in physics control steps.
        action_repeat: physics control steps per agent step (rewards are summed).
        obs_dim: observation size.
        act_dim: action size.
    """

    env: MjxEnv = eqx.field(static=True)
    name: str = eqx.field(static=True)
    num_envs: int = eqx.field(static=True)
    episode_length: int = eqx.field(static=True)
    action_repeat: int = eqx.field(static=True)
    obs_dim: int = eqx.field(static=True)
    act_dim: int = eqx.field(static=True)
    # Tuples, not arrays: static fields must be hashable.
    _low: tuple[float, ...] = eqx.field(static=True)
    _high: tuple[float, ...] = eqx.field(static=True)

    @classmethod
    def make(
        cls,
        name: str,
        num_envs: int,
        episode_length: int = 1000,
        action_repeat: int = 1,
        config_overrides: dict[str, Any] | None = None,
    ) -> "PlaygroundEnv":
        """Load a dm_control_suite task with the pure-JAX MJX backend.

        Args:
            name: a name from `PLAYGROUND_ENVS`, e.g. "CartpoleSwingup".
            num_envs: number of envs B stepped together.
            episode_length: time limit in physics control steps.
            action_repeat: physics control steps per agent step.
            config_overrides: extra Playground config overrides; `impl` defaults to "jax" because the
                default MuJoCo Warp backend is ~50x slower on CPU.

        Raises:
            ValueError: for an unknown name, non-positive sizes or a task with dict observations.
        """
        if name not in PLAYGROUND_ENVS:
            raise ValueError(
                f"unknown Playground env {name!r}; valid dm_control_suite names: {PLAYGROUND_ENVS}"
            )
        if min(num_envs, episode_length, action_repeat) < 1:
            raise ValueError(
                f"num_envs, episode_length and action_repeat must be >= 1, got "
                f"{num_envs}, {episode_length}, {action_repeat}"
            )
        env = dm_control_suite.load(name, config_overrides={"impl": "jax", **(config_overrides or {})})
        if jax.process_count() > 1:
            # MJX puts the model on jax.devices()[0], which only process 0 can read; every process of a
            # multi-process run keeps its own copy on one of its devices (a constant of the jitted code).
            env._mjx_model = mjx.put_model(env.mj_model, impl=env._config.impl, device=jax.local_devices()[0])
        with _playground_promotion():  # `observation_size` traces `env.reset`
            obs_dim = env.observation_size
        if not isinstance(obs_dim, int):
            raise ValueError(
                f"{name} has dict observations {obs_dim}; only flat vector observations are supported"
            )
        low, high = np.asarray(env.mj_model.actuator_ctrlrange, np.float32).T
        return cls(
            env=env,
            name=name,
            num_envs=num_envs,
            episode_length=episode_length,
            action_repeat=action_repeat,
            obs_dim=obs_dim,
            act_dim=env.action_size,
            _low=tuple(low.tolist()),
            _high=tuple(high.tolist()),
        )

    @property
    def action_low(self) -> np.ndarray:
        """Lower action bounds [act_dim] (the actuator control range)."""
        return np.asarray(self._low, np.float32)

    @property
    def action_high(self) -> np.ndarray:
        """Upper action bounds [act_dim] (the actuator control range)."""
        return np.asarray(self._high, np.float32)

    def reset(self, key: PRNGKeyArray) -> tuple[PlaygroundState, Float[Array, "b obs_dim"]]:
        """Draw B first states; they are also the states every env auto-resets to.

        Args:
            key: one PRNG key, split into B.

        Returns:
            The carried state and the first observations.
        """
        with _playground_promotion():
            env_state = _strong(jax.vmap(self.env.reset)(jax.random.split(key, self.num_envs)))
        steps = jnp.zeros(self.num_envs, jnp.int32)
        return PlaygroundState(env_state, env_state, steps), env_state.obs

    def step(
        self, state: PlaygroundState, action: Float[Array, "b act_dim"]
    ) -> tuple[PlaygroundState, Timestep]:
        """Advance all B envs by one agent step, auto-resetting the finished ones.

        Args:
            state: the carried state.
            action: actions in [action_low, action_high] (clipped to them).

        Returns:
            The next carried state and the `Timestep`.
        """
        stepped = jax.vmap(self._repeat_step)(state.env_state, action)
        steps = state.steps + self.action_repeat
        terminated = stepped.done > 0
        truncated = (steps >= self.episode_length) & ~terminated
        done = terminated | truncated
        env_state = _strong(jax.vmap(_where_tree)(done, state.first_state, stepped))
        timestep = Timestep(
            obs=env_state.obs,
            reward=_finite_or_zero(stepped.reward),
            terminated=terminated,
            truncated=truncated,
            final_obs=_finite_or_zero(stepped.obs),
        )
        return PlaygroundState(env_state, state.first_state, jnp.where(done, 0, steps)), timestep

    def _repeat_step(self, env_state: State, action: Float[Array, " act_dim"]) -> State:
        """One env, `action_repeat` physics control steps with summed reward (Brax's EpisodeWrapper)."""
        action = jnp.clip(action, jnp.asarray(self._low), jnp.asarray(self._high))

        def body(s: State, _: None) -> tuple[State, Float[Array, ""]]:
            with _playground_promotion():
                s = _strong(self.env.step(s, action))
            return s, s.reward

        env_state, rewards = jax.lax.scan(body, env_state, length=self.action_repeat)
        return env_state.replace(reward=jnp.sum(rewards))


def _where_tree(pred: Bool[Array, ""], on_true: Any, on_false: Any) -> Any:
    """Per-env select of a whole pytree (used under vmap, so `pred` is a scalar)."""
    return jax.tree.map(lambda x, y: jnp.where(pred, x, y), on_true, on_false)


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
        if vectorization_mode == "async":
            # The default "fork" copies a multithreaded process once JAX is loaded, which can deadlock.
            vector_kwargs["context"] = "spawn"
        vec_env = gym.make_vec(
            env_id, num_envs, vectorization_mode=vectorization_mode, vector_kwargs=vector_kwargs, **env_kwargs
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


def make_env(env_id: str, num_envs: int, **kwargs: Any) -> PlaygroundEnv | GymnasiumEnv:
    """Make B envs from an id: a Gymnasium id contains "-v" ("Hopper-v5"), anything else is Playground.

    Args:
        env_id: a Gymnasium id or a name from `PLAYGROUND_ENVS` ("CartpoleSwingup").
        num_envs: number of envs B.
        **kwargs: passed to `GymnasiumEnv.make` or `PlaygroundEnv.make`.

    Raises:
        ValueError: for a non-Gymnasium id that is not a Playground dm_control_suite name.
    """
    if "-v" in env_id:
        return GymnasiumEnv.make(env_id, num_envs, **kwargs)
    return PlaygroundEnv.make(env_id, num_envs, **kwargs)
