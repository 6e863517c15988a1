"""The floors of a suite with `floors=True`: doing nothing (zero action) and uniformly random actions, scored on
every task and seed under the protocol of the trained columns' final evaluation, into
`hub_cards/results/<suite>.floors.json`, which the summary reads beside the ledger.

    python -m trainers.benchmark.floors --suite small-envs

Seconds per task: no training, only `FLOOR_EPISODES` episodes of each policy per seed, in a vector env of at
most 10 sub-envs (as the Gymnasium evaluator runs the trained columns).
"""

import dataclasses
import json
from pathlib import Path

import numpy as np

from gsbpolicy import evaluate
from gsbpolicy._files import atomic_write_text

from .._core.evaluation import eval_seed
from .ledger import RESULTS_DIR, floors_path
from .suites import SUITES, Suite

FLOOR_EPISODES = 50
"""Episodes per seed: the suite's final evaluation (`--eval.final-episodes 50`)."""
FLOORS = ("do-nothing", "random")


class Floor:
    """SB3-style `predict` of a floor: zeros, or uniform actions within the bounds from a seeded generator."""

    def __init__(self, kind: str, low, high, seed: int):
        self.kind, self.low, self.high = kind, np.asarray(low), np.asarray(high)
        self.rng = np.random.default_rng(seed)

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        shape = (len(observation), *self.low.shape)
        if self.kind == "do-nothing":
            return np.zeros(shape, np.float32), state
        return self.rng.uniform(self.low, self.high, shape).astype(np.float32), state


def _env(task: str, episodes: int):
    """The suite's evaluation env ("module:Env-v0" ids import their module, as in the trainers' evaluator)."""
    import gymnasium

    return gymnasium.make_vec(task, num_envs=min(episodes, 10), vectorization_mode="sync")


def floor_cells(suite: Suite) -> dict:
    """{"episodes": per seed, "tasks": {task: {floor: {"per_seed": [each seed's mean return], "mean": their
    mean}}}}."""
    cells = {}
    for task in suite.tasks:
        cells[task] = {}
        for kind in FLOORS:
            per_seed = []
            for seed in suite.seeds:
                env = _env(task, FLOOR_EPISODES)
                try:
                    space = env.single_action_space
                    floor = Floor(kind, space.low, space.high, seed)
                    result = evaluate(floor, env, FLOOR_EPISODES, True, eval_seed(seed, 0))
                finally:
                    env.close()
                per_seed.append(round(float(result.mean), 3))
            cells[task][kind] = {"per_seed": per_seed, "mean": round(float(np.mean(per_seed)), 3)}
    return {"episodes": FLOOR_EPISODES, "tasks": cells}


@dataclasses.dataclass
class Args:
    suite: str
    """A suite with floors (`Suite.floors`)."""
    results_dir: Path = RESULTS_DIR
    """Where `<suite>.floors.json` goes."""


def main(argv=None) -> None:
    import tyro

    args = tyro.cli(Args, args=argv, description=__doc__)
    suite = SUITES.get(args.suite)
    if suite is None or not suite.floors:
        raise SystemExit(
            f"no suite {args.suite!r} with floors; those with floors: "
            f"{[s.name for s in SUITES.values() if s.floors]}"
        )
    cells = floor_cells(suite)
    atomic_write_text(
        floors_path(args.results_dir, suite.name), json.dumps(cells, indent=1, sort_keys=True) + "\n"
    )
    for task, floors in cells["tasks"].items():
        print(task, ", ".join(f"{kind} {cell['mean']:.1f}" for kind, cell in floors.items()))


if __name__ == "__main__":
    main()
