"""Evaluation with the paper's protocols; each point reports deterministic-ODE and stochastic returns.

- Playground: fresh envs (`eval.num_envs`), one episode of `episode_length` steps each, as a jitted scan.
- Gymnasium: `eval.episodes` episodes in a vector env through `gsbpolicy.evaluate` (the same code users
  and the model cards use), with a predictor built from the algorithm.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from gsbpolicy import evaluate

from .algorithm import AbstractAlgorithm
from .distributed import batch_sharding, constrain, replicated
from .envs import PlaygroundEnv


def make_playground_eval(
    algorithm: AbstractAlgorithm, env: PlaygroundEnv, episode_length: int, mesh: Mesh | None = None
):
    """A jitted `eval(actor, key, deterministic) -> (returns, lengths)` over `env.num_envs` fresh episodes.

    With a `mesh`, the envs are split over its devices and the results gathered onto every device.
    """

    def run(actor, key, deterministic: bool):
        reset_key, act_key = jax.random.split(key)
        env_state, obs = env.reset(reset_key)
        if mesh is not None:
            env_state, obs = constrain((env_state, obs), batch_sharding(mesh))
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
        return (total, length) if mesh is None else constrain((total, length), replicated(mesh))

    return eqx.filter_jit(run)


class AlgorithmPredictor:
    """SB3-style `predict` over an algorithm's actor, so any trainer's policy runs through `evaluate`."""

    def __init__(self, algorithm: AbstractAlgorithm, actor, seed: int):
        self._deterministic = eqx.filter_jit(algorithm.deterministic_act)
        self._stochastic = eqx.filter_jit(algorithm.act)
        self.actor = actor
        self.key = jax.random.key(seed)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        obs = jnp.asarray(np.asarray(observation, np.float32).reshape(-1, np.shape(observation)[-1]))
        if deterministic:
            action = self._deterministic(self.actor, obs)
        else:
            self.key, key = jax.random.split(self.key)
            action, _ = self._stochastic(self.actor, obs, key)
        action = np.asarray(action)
        return (action[0] if np.ndim(observation) == 1 else action), state


def evaluate_gym(
    algorithm: AbstractAlgorithm, actor, env_id: str, episodes: int, seed: int, deterministic: bool
):
    """Per-episode returns and lengths over `episodes` episodes run in a sync vector env."""
    import gymnasium

    env = gymnasium.make_vec(env_id, num_envs=min(episodes, 10), vectorization_mode="sync")
    try:
        result = evaluate(AlgorithmPredictor(algorithm, actor, seed), env, episodes, deterministic, seed)
    finally:
        env.close()
    return np.asarray(result.returns), np.asarray(result.lengths)


def eval_seed(train_seed: int, iteration: int) -> int:
    """The seed of the evaluation after `iteration`: distinct per point and never the training stream."""
    return 1_000_003 * (train_seed + 1) + iteration


def eval_record(iteration: int, env_steps: int, evaluate) -> dict:
    """A metrics.jsonl eval line: deterministic and stochastic returns; `evaluate(deterministic)` gives
    per-episode (returns, lengths)."""
    record = {"type": "eval", "iteration": iteration, "env_steps": env_steps}
    for mode, deterministic in (("deterministic", True), ("stochastic", False)):
        returns, lengths = evaluate(deterministic)
        record[f"eval/return_{mode}"] = float(returns.mean())
        record[f"eval/return_{mode}_std"] = float(returns.std())
        record[f"eval/length_{mode}"] = float(lengths.mean())
    return record


def write_results(policy_dir, *, env_id: str, algo: str, returns, lengths, seed: int, env_steps: int,
                  eval_seed: int) -> dict:  # fmt: skip
    """results.json of a finished run (the schema the model cards read): the final deterministic evaluation."""
    import datetime
    import json

    from .runlog import RUN_JSON, atomic_write_text

    # The commit of the code that ran, as run.json recorded it when this process started (at the last
    # resume, if any): HEAD itself may have moved on if commits were made while the run trained.
    run = json.loads((policy_dir.parent / RUN_JSON).read_text())
    git = (run.get("resumes") or [run])[-1]["git"]
    results = {
        "env_id": env_id,
        "algo": algo,
        "mean": float(returns.mean()),
        "std": float(returns.std()),  # population std, as the Hub's mean_reward convention
        "n_episodes": int(returns.size),
        "returns": returns.tolist(),
        "lengths": lengths.astype(int).tolist(),
        "deterministic": True,
        "seeds": [seed],
        "eval_seed": eval_seed,
        "env_steps": env_steps,
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    atomic_write_text(policy_dir / "results.json", json.dumps(results, indent=2) + "\n")
    return results
