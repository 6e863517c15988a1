"""Gymnasium training: host-side vector envs stepped from Python with a jitted act, one device of one process;
evaluation through `gsbpolicy.evaluate` (the code users and the model cards run)."""

import functools
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from gsbpolicy import evaluate
from gsbpolicy.gym import checked

from ..algorithm import AbstractAlgorithm
from ..config import TrainArgs
from ..evaluation import AlgorithmPredictor
from ..rollout import Transition, step_keys, time_major_to_sequences
from . import gym_state
from .base import EnvBackend
from .gym_env import GymnasiumEnv


class HostCollector:
    """Collects from a host-side Gymnasium env with a jitted act (one compile per batch shape)."""

    def __init__(self, algorithm: AbstractAlgorithm, env: GymnasiumEnv):
        self.env = env
        self._act = eqx.filter_jit(algorithm.act)

    def collect(self, actor, obs: np.ndarray, key, unroll_length: int, num_unrolls: int, noise_hold: int = 1):
        """Same output layout (and `noise_hold`) as `collect_playground`; the env state lives in `self.env`."""
        sequences = []
        for unroll_key in jax.random.split(key, num_unrolls):
            steps = []
            for step_key in step_keys(unroll_key, unroll_length, noise_hold):
                action, extras = self._act(actor, jnp.asarray(obs), step_key)
                ts = self.env.step(np.asarray(action))
                steps.append(Transition(obs, ts.reward, ts.terminated, ts.truncated, ts.final_obs, extras))
                obs = ts.obs
            stacked = jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *steps)
            sequences.append(time_major_to_sequences(stacked))
        data = jax.tree.map(lambda *xs: jnp.concatenate(xs), *sequences)
        return obs, data


class GymEvaluator:
    """The paper's Gymnasium protocol: `eval.episodes` episodes (or as many as asked) in a sync vector env of
    at most 10 sub-envs, through `gsbpolicy.evaluate` with a predictor built from the algorithm."""

    def __init__(self, algorithm: AbstractAlgorithm, args: TrainArgs, mesh=None):
        self.algorithm, self.env_id, self.episodes = algorithm, args.env, args.eval.episodes

    def __call__(self, actor, seed: int, deterministic: bool, episodes: int | None = None):
        """Per-episode (returns, lengths)."""
        import gymnasium

        episodes = episodes or self.episodes
        env = gymnasium.make_vec(
            self.env_id,
            num_envs=min(episodes, 10),
            vectorization_mode="sync",
            wrappers=[functools.partial(checked, name=self.env_id)],
        )
        try:
            predictor = AlgorithmPredictor(self.algorithm, actor, seed)
            result = evaluate(predictor, env, episodes, deterministic, seed)
        finally:
            env.close()
        return np.asarray(result.returns), np.asarray(result.lengths)


class GymnasiumBackend(EnvBackend):
    """A Gymnasium vector env on the host; the update runs jitted on one device (no mesh). Exact resume
    snapshots the sub-envs' physics, time limits and generators (`gym_state`)."""

    def __init__(self, algorithm: AbstractAlgorithm, args: TrainArgs, devices=None):
        if jax.process_count() > 1:
            raise ValueError(f"multi-process training needs a Playground env; {args.env} runs in one process")
        self.algorithm, self.args, self.mesh = algorithm, args, None
        self.env = GymnasiumEnv.make(
            args.env, args.rollout.num_envs, vectorization_mode=args.rollout.vectorization
        )

    def start(self, state, update, env_key):
        self.obs = self.env.reset(seed=self.args.seed)
        self.collector = HostCollector(self.algorithm, self.env)
        self._update = eqx.filter_jit(update)
        self._evaluate = GymEvaluator(self.algorithm, self.args)
        return state

    def iteration(self, state):
        rollout = self.args.rollout
        state_key, rollout_key = jax.random.split(state.key)
        self.obs, data = self.collector.collect(
            state.model.actor,
            self.obs,
            rollout_key,
            rollout.unroll_length,
            rollout.unrolls_per_iteration,
            rollout.noise_hold if rollout.holds_noise(int(state.env_steps)) else 1,
        )
        state, metrics = self._update(eqx.tree_at(lambda s: s.key, state, state_key), data)
        return state, metrics, (data.reward, data.terminated | data.truncated)

    def evaluate(self, actor, seed: int, deterministic: bool, episodes: int | None = None):
        return self._evaluate(actor, seed, deterministic, episodes)

    def place(self, state):
        return state

    def checkpoint_tree(self) -> dict:
        return {"obs": self.obs, **gym_state.get_state(self.env.vec_env)}

    def restore(self, tree) -> None:
        tree = dict(tree)
        obs = np.asarray(tree.pop("obs"))
        if not tree:  # an env without a snapshot (gym_state): keep the fresh episodes `start` began
            print(
                f"note: {self.args.env} has no get_state/set_state, so the resumed run continues with fresh "
                "episodes and will not match an uninterrupted run bit for bit",
                file=sys.stderr,
            )
            return
        self.obs = obs
        gym_state.set_state(self.env.vec_env, tree)

    def close(self) -> None:
        self.env.close()
