"""Evaluation records shared by every trainer and env kind; each point reports deterministic-ODE and
stochastic returns. How a policy is run for them depends on the env kind (`trainers._core.envs`):

- Playground: fresh envs (`eval.num_envs`), one episode of `episode_length` steps each, as a jitted scan.
- Gymnasium: `eval.episodes` episodes in a vector env through `gsbpolicy.evaluate` (the same code users
  and the model cards use), with an `AlgorithmPredictor`.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .algorithm import AbstractAlgorithm


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


class LearningWatch:
    """Says, once, when a run is not learning: the last `STRETCH` evaluations all did no better than the first
    (a deterministic return above the first's by more than 5% of its size counts as better). Its state lives in
    the process: a resumed run starts watching again."""

    STRETCH = 4
    HINT = (
        "check the reward scale (--rollout.reward-scaling), the action bounds and the budget (--total-steps); "
        "docs/own-env.md, 'When it does not learn'"
    )

    def __init__(self):
        self.first, self.since, self.said = None, 0, False

    def after(self, record: dict) -> str | None:
        """The one-line warning after this eval `record`, when it completes the stretch; else None."""
        value = record["eval/return_deterministic"]
        if self.first is None:
            self.first = record
            return None
        first = self.first["eval/return_deterministic"]
        self.since = 0 if value > first + 0.05 * abs(first) else self.since + 1
        if self.said or self.since < self.STRETCH:
            return None
        self.said = True
        return (
            f"not learning? the last {self.STRETCH} evaluations did no better than the first ({first:.4g} at "
            f"{self.first['env_steps']:,} env steps; now {value:.4g} at {record['env_steps']:,}): {self.HINT}"
        )


def write_results(
    policy_dir, *, env_id: str, algo: str, returns, lengths, seed: int, env_steps: int, eval_seed: int
) -> dict:
    """results.json of a finished run (the schema the model cards read): the final deterministic evaluation."""
    import datetime
    import json

    from gsbpolicy._files import atomic_write_text, sha256_bytes
    from gsbpolicy.gym import env_entry_point

    from .runlog import RUN_JSON

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
        # The publisher refuses a metrics.jsonl edited after training (it would plot and quote other numbers).
        "metrics_sha256": sha256_bytes((policy_dir.parent / "metrics.jsonl").read_bytes()),
    }
    if entry_point := env_entry_point(
        env_id
    ):  # a class train() registered: how to make it in another process
        results["env_entry_point"] = entry_point
    atomic_write_text(policy_dir / "results.json", json.dumps(results, indent=2) + "\n")
    return results
