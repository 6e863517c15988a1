"""`PlaygroundEnv`: a pure-functional, jittable batch of B MuJoCo Playground envs (dm_control_suite, MJX
impl="jax") with its own time limit and auto-reset to cached first states.

Your own JAX env trains on this path too: subclass `mujoco_playground.MjxEnv`, register it with
`mujoco_playground.dm_control_suite.register_environment(name, EnvClass, default_config)` when its module is
imported, and pass `module:name` as the env id (the module is imported first, as Gymnasium's "module:Env-v0"
ids are), or `name` in a process that has already imported it.
"""

import contextlib
import dataclasses
import functools
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ..exported_program import remembered
from ._playground_import import MjxEnv, State, dm_control_suite, mjx
from .base import Timestep

PLAYGROUND_ENVS: tuple[str, ...] = tuple(dm_control_suite.ALL_ENVS)
"""MuJoCo Playground's own dm_control_suite task names (`PlaygroundEnv.make` also takes registered envs)."""


def resolve_playground_env(env_id: str) -> str:
    """The registered name of a Playground env id, importing the module of a "module:name" id first (so that
    it can register its env, as `gymnasium.make` does for "module:Env-v0").

    Raises:
        ValueError: when the module cannot be imported or the name is not registered with
            `dm_control_suite.register_environment` (nor one of Playground's own tasks).
    """
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ValueError(f"env {env_id!r}: cannot import {module!r} ({err})") from None
    try:
        dm_control_suite.get_default_config(name)  # Playground's public registry lookup
    except ValueError:
        unregistered = f"{module!r} did not register {name!r} with dm_control_suite.register_environment; "
        where = unregistered if module else ""
        raise ValueError(
            f"unknown env {env_id!r}: {where}not a Gymnasium id and not a Playground task {PLAYGROUND_ENVS} "
            f"(your own JAX env: register it with mujoco_playground.dm_control_suite.register_environment "
            f"and pass 'module:name')"
        ) from None
    return name


class PlaygroundState(NamedTuple):
    """Carried state of a `PlaygroundEnv` (a pytree, batched over the B envs).

    The Playground states are kept flat, as {pytree path: array} (".data.qpos", ".obs", ...): the same
    arrays under their own names, in a structure that plain dicts give. A stored traced program
    (`exported_program`) can then return them, and a warm start that loads its programs never traces
    `reset` to learn the Playground state's structure. `PlaygroundEnv.nest` gives the Playground `State`.

    Attributes:
        env_state: the current Playground states, flat.
        first_state: the states drawn by `reset`, flat; every env auto-resets to its own one.
        steps: physics control steps taken in the current episode (counts `action_repeat`).
    """

    env_state: dict[str, Array]
    first_state: dict[str, Array]
    steps: Int[Array, " b"]


# A stored reset program returns this state; jax.export writes named tuples only when they are registered.
jax.export.register_namedtuple_serialization(PlaygroundState, serialized_name="trainers.PlaygroundState")


@functools.cache  # one trace of `reset` per loaded Playground env, made where a step or `observation_size` needs it
def _reset_shapes(env: MjxEnv) -> State:
    """The shapes and dtypes of one `env.reset` (a Playground `State` of `jax.ShapeDtypeStruct`)."""
    with _playground_promotion():
        return jax.eval_shape(env.reset, jax.random.key(0))


def _flatten(state: State) -> dict[str, Array]:
    return {jax.tree_util.keystr(path): leaf for path, leaf in jax.tree_util.tree_leaves_with_path(state)}


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
        remember_in: Path | None = None,
    ) -> "PlaygroundEnv":
        """Load a dm_control_suite task with the pure-JAX MJX backend.

        Args:
            name: a name from `PLAYGROUND_ENVS`, e.g. "CartpoleSwingup", or a registered env as
                "module:name" or "name" (see the module docstring).
            num_envs: number of envs B stepped together.
            episode_length: time limit in physics control steps.
            action_repeat: physics control steps per agent step.
            config_overrides: extra Playground config overrides; `impl` defaults to "jax" because the
                default MuJoCo Warp backend is ~50x slower on CPU.
            remember_in: a folder where the observation size is kept across processes (finding it traces
                `reset`, a second or more of a warm start), keyed as stored traced programs are
                (`exported_program.remembered`); None finds it in every process.

        Raises:
            ValueError: for an unknown name, non-positive sizes or a task with dict observations.
        """
        registered = resolve_playground_env(name)
        if min(num_envs, episode_length, action_repeat) < 1:
            raise ValueError(
                f"num_envs, episode_length and action_repeat must be >= 1, got "
                f"{num_envs}, {episode_length}, {action_repeat}"
            )
        config = {"impl": "jax", **(config_overrides or {})}
        env = _load(registered, config)
        obs_dim = remembered(
            remember_in,
            "observation-size",
            {"env": registered, "config": config},
            type(env),
            lambda: jax.tree.map(lambda x: x.shape[-1], _reset_shapes(env).obs),
        )
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

    def with_num_envs(self, num_envs: int) -> "PlaygroundEnv":
        """The same task, time limit and action repeat for another number of envs, sharing this one's loaded
        Playground env (the evaluation envs of a run: no second model load or trace of its reset)."""
        return dataclasses.replace(self, num_envs=num_envs)

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
        flat = _flatten(env_state)
        return PlaygroundState(flat, flat, steps), env_state.obs

    def nest(self, flat: dict[str, Array]) -> State:
        """The Playground `State` of a flat `PlaygroundState.env_state` (or `first_state`), at trace time: its
        structure comes from one traced `reset` per loaded env."""
        treedef = jax.tree.structure(_reset_shapes(self.env))
        return jax.tree.unflatten(treedef, [flat[name] for name in _flatten(_reset_shapes(self.env))])

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
        stepped = jax.vmap(self._repeat_step)(self.nest(state.env_state), action)
        steps = state.steps + self.action_repeat
        terminated = stepped.done > 0
        truncated = (steps >= self.episode_length) & ~terminated
        done = terminated | truncated
        env_state = _strong(jax.vmap(_where_tree)(done, self.nest(state.first_state), stepped))
        timestep = Timestep(
            obs=env_state.obs,
            reward=_finite_or_zero(stepped.reward),
            terminated=terminated,
            truncated=truncated,
            final_obs=_finite_or_zero(stepped.obs),
        )
        return PlaygroundState(_flatten(env_state), state.first_state, jnp.where(done, 0, steps)), timestep

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


def _load(registered: str, config: dict):
    """The Playground env `registered` with `config` overrides, its MJX model where this process can read it."""
    env = dm_control_suite.load(registered, config_overrides=config)
    if jax.process_count() > 1:
        # MJX puts the model on jax.devices()[0], which only process 0 can read; every process of a
        # multi-process run keeps its own copy on one of its devices (a constant of the jitted code).
        env._mjx_model = mjx.put_model(env.mj_model, impl=env._config.impl, device=jax.local_devices()[0])
    return env
