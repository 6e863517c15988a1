"""Playground training: the rollout as nested `lax.scan`s inside one jitted iteration, data-parallel over a
1-D device mesh (`trainers._core.distributed`), and evaluation as one jitted scan over fresh envs."""

import dataclasses
import inspect
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding

from .. import compile_cache, distributed
from ..algorithm import AbstractAlgorithm
from ..config import TrainArgs
from ..exported_program import ExportedFunction
from ..rollout import Transition, step_keys, time_major_to_sequences
from .base import EnvBackend
from .playground_env import PlaygroundEnv


def collect_playground(
    algorithm: AbstractAlgorithm,
    env: PlaygroundEnv,
    actor,
    env_state,
    obs,
    key,
    unroll_length: int,
    num_unrolls: int,
    sharding: NamedSharding | None = None,
    noise_hold: int = 1,
    hold_now=True,
):
    """`num_unrolls` consecutive unrolls of `unroll_length` steps as nested `lax.scan`s (jit this), the act
    key held for `noise_hold` steps at a time (`step_keys`) while `hold_now` (a bool, traced or not) is true.

    Returns the final env state and observation, and a `Transition` of [num_unrolls * B, T, ...]. With a
    batch `sharding`, the envs (and so every step's actions and extras) stay split over the mesh's devices.
    """

    def keep_split(tree):
        return tree if sharding is None else distributed.constrain(tree, sharding)

    def step(carry, step_key):
        env_state, obs = carry
        action, extras = algorithm.act(actor, obs, step_key)
        env_state, ts = env.step(env_state, action)
        return keep_split((env_state, ts.obs)), Transition(
            obs, ts.reward, ts.terminated, ts.truncated, ts.final_obs, extras
        )

    def unroll(carry, unroll_key):
        keys = step_keys(unroll_key, unroll_length)
        if noise_hold > 1:
            keys = jax.lax.cond(
                hold_now, lambda: step_keys(unroll_key, unroll_length, noise_hold), lambda: keys
            )
        carry, transitions = jax.lax.scan(step, carry, keys)
        return carry, time_major_to_sequences(transitions)

    (env_state, obs), data = jax.lax.scan(unroll, (env_state, obs), jax.random.split(key, num_unrolls))
    data = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), data)
    return env_state, obs, keep_split(data)


def compile_function(fn, *, num_carry: int, name: str, args, env: PlaygroundEnv, mesh: Mesh | None):
    """`fn(*a) -> (carry, extras)` jitted: as a stored traced program (`exported_program`: a warm start skips
    tracing the physics) where the compilation cache is on and the work runs on one device, else through
    `eqx.filter_jit`."""
    folder = compile_cache.exported_folder(args.compile_cache)
    if folder is None or (mesh is not None and mesh.size > 1):
        return eqx.filter_jit(fn)
    config = {k: v for k, v in dataclasses.asdict(args).items() if k not in ("output_dir", "resume")}
    return ExportedFunction(
        fn,
        num_carry=num_carry,
        name=name,
        config=json.dumps(config, sort_keys=True, default=str),
        folder=folder,
        env_source=inspect.getsourcefile(type(env.env)),
    )


def make_playground_eval(algorithm: AbstractAlgorithm, env: PlaygroundEnv, args, mesh: Mesh | None = None):
    """A jitted `eval(actor, key, deterministic) -> ((), (returns, lengths))` over `env.num_envs` fresh
    episodes of `args.rollout.episode_length` steps (`compile_function`'s convention: nothing carried).

    With a `mesh`, the envs are split over its devices and the results gathered onto every device.
    """
    episode_length = args.rollout.episode_length

    def run(actor, key, deterministic: bool):
        reset_key, act_key = jax.random.split(key)
        env_state, obs = env.reset(reset_key)
        if mesh is not None:
            env_state, obs = distributed.constrain((env_state, obs), distributed.batch_sharding(mesh))
        zeros = jnp.zeros(obs.shape[0])

        def step(carry, step_key):
            env_state, obs, total, length, alive = carry
            if deterministic:
                action = algorithm.deterministic_act(actor, obs)
            else:
                action, _ = algorithm.act(actor, obs, step_key)
            env_state, ts = env.step(env_state, action)
            total = total + jnp.where(alive, ts.reward, 0.0)
            length = length + alive
            alive = alive & ~(ts.terminated | ts.truncated)
            return (env_state, ts.obs, total, length, alive), None

        init = (env_state, obs, zeros, zeros, jnp.ones(obs.shape[0], bool))
        (_, _, total, length, _), _ = jax.lax.scan(step, init, jax.random.split(act_key, episode_length))
        if mesh is not None:
            total, length = distributed.constrain((total, length), distributed.replicated(mesh))
        return (), (total, length)

    name = f"{getattr(algorithm, 'name', type(algorithm).__name__)}-playground-eval"
    return compile_function(run, num_carry=0, name=name, args=args, env=env, mesh=mesh)


class PlaygroundEvaluator:
    """The paper's Playground protocol: `eval.num_envs` fresh envs, one episode of `episode_length` steps
    each, as one jitted scan (compiled once per mode). With a `mesh`, the envs are split over its devices."""

    def __init__(
        self, algorithm: AbstractAlgorithm, args: TrainArgs, mesh: Mesh | None = None, train_env=None
    ):
        rollout = args.rollout
        if train_env is not None:  # the training envs' loaded task, resized
            env = train_env.with_num_envs(args.eval.num_envs)
        else:
            env = PlaygroundEnv.make(
                args.env,
                args.eval.num_envs,
                episode_length=rollout.episode_length,
                action_repeat=rollout.action_repeat,
            )
        self.mesh = mesh
        self._run = make_playground_eval(algorithm, env, args, mesh)

    def __call__(self, actor, seed: int, deterministic: bool, episodes: int | None = None):
        """Per-episode (returns, lengths); `episodes` is fixed by `eval.num_envs` here and is ignored."""
        key = jax.random.key(seed)
        if self.mesh is not None:
            key = distributed.put(key, distributed.replicated(self.mesh))
        _, (returns, lengths) = self._run(actor, key, deterministic)
        return np.asarray(returns), np.asarray(lengths)


class PlaygroundBackend(EnvBackend):
    """Playground envs split over a 1-D mesh of `devices` (default: every device of every process);
    parameters and optimizer state replicated, one jitted function per iteration (rollout + update)."""

    def __init__(self, algorithm: AbstractAlgorithm, args: TrainArgs, devices=None):
        self.algorithm, self.args, rollout = algorithm, args, args.rollout
        self.mesh = distributed.make_mesh(devices)
        self._check_mesh_sizes()
        self.env = PlaygroundEnv.make(
            args.env,
            rollout.num_envs,
            episode_length=rollout.episode_length,
            action_repeat=rollout.action_repeat,
            remember_in=compile_cache.exported_folder(args.compile_cache),
        )

    def _check_mesh_sizes(self) -> None:
        """Every batch split over the mesh must give each device the same share (clear errors, not XLA's)."""
        rollout = self.args.rollout
        distributed.check_divisible("rollout.num_envs", rollout.num_envs, self.mesh)
        distributed.check_divisible(
            "sequences per minibatch (num_envs * unrolls_per_iteration / num_minibatches)",
            rollout.batch_size,
            self.mesh,
        )
        distributed.check_divisible("eval.num_envs", self.args.eval.num_envs, self.mesh)

    def start(self, state, update, env_key):
        env, mesh = self.env, self.mesh
        state = self.place(state)

        def reset(key):
            return (), distributed.constrain(env.reset(key), distributed.batch_sharding(mesh))

        self._reset = compile_function(
            reset, num_carry=0, name="playground-reset", args=self.args, env=env, mesh=mesh
        )
        _, (self.env_state, self.obs) = self._reset(distributed.put(env_key, distributed.replicated(mesh)))
        self._iteration = compile_function(
            self._make_iteration(update),
            num_carry=3,
            mesh=mesh,
            args=self.args,
            env=env,
            name=f"{self.algorithm.name}-playground-iteration",
        )
        self.evaluator = PlaygroundEvaluator(self.algorithm, self.args, mesh, train_env=env)
        return state

    def _make_iteration(self, update):
        algorithm, env, rollout = self.algorithm, self.env, self.args.rollout
        split, whole = distributed.batch_sharding(self.mesh), distributed.replicated(self.mesh)

        def iteration(state, env_state, obs):
            state_key, rollout_key = jax.random.split(state.key)
            env_state, obs, data = collect_playground(
                algorithm,
                env,
                state.model.actor,
                env_state,
                obs,
                rollout_key,
                rollout.unroll_length,
                rollout.unrolls_per_iteration,
                split,
                rollout.noise_hold,
                rollout.holds_noise(state.env_steps),
            )
            state, metrics = update(eqx.tree_at(lambda s: s.key, state, state_key), data)
            # Rewards and dones go to every device (the host-side episode statistics read them whole).
            episodes = (data.reward, data.terminated | data.truncated)
            state, metrics, episodes = distributed.constrain((state, metrics, episodes), whole)
            env_state, obs = distributed.constrain((env_state, obs), split)
            return (state, env_state, obs), (metrics, episodes)

        return iteration

    def iteration(self, state):
        (state, self.env_state, self.obs), (metrics, episodes) = self._iteration(
            state, self.env_state, self.obs
        )
        return state, metrics, episodes

    def evaluate(self, actor, seed: int, deterministic: bool, episodes: int | None = None):
        return self.evaluator(actor, seed, deterministic, episodes)

    def place(self, state):
        return distributed.put(state, distributed.replicated(self.mesh))

    def checkpoint_tree(self):
        return (self.env_state, self.obs)

    def restore(self, tree) -> None:
        # Checkpoints hold whole arrays: lay them out on this run's mesh, whatever device count wrote them.
        self.env_state, self.obs = distributed.put(tree, distributed.batch_sharding(self.mesh))

    def close(self) -> None:
        """Nothing to release: the envs are arrays."""
