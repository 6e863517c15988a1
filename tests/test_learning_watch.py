"""A run that is not learning says so once, with what to look at (`trainers._core.evaluation.LearningWatch`)."""

import gymnasium
import numpy as np
from gymnasium import spaces

from trainers import gsb_mdpo
from trainers._core.evaluation import LearningWatch


def evals(*returns):
    return [{"eval/return_deterministic": r, "env_steps": 1000 * i} for i, r in enumerate(returns, 1)]


def warnings(*returns):
    watch = LearningWatch()
    return [line for line in map(watch.after, evals(*returns)) if line]


def test_four_evaluations_no_better_than_the_first_give_one_line_naming_what_to_check():
    (line,) = warnings(-64.0, -63.0, -65.0, -62.0, -64.0, -64.0, -63.0)
    assert line.startswith("not learning? the last 4 evaluations did no better than the first (-64 at 1,000")
    assert (
        "reward scale" in line and "action bounds" in line and "docs/own-env.md" in line and "\n" not in line
    )


def test_a_run_that_improves_or_is_still_early_says_nothing():
    assert warnings(-64.0, -50.0, -40.0, -30.0, -20.0, -10.0) == []
    assert warnings(0.0, 0.0, 0.0, 0.0) == []  # three after the first: not yet a stretch
    assert warnings(100.0, 96.0, 104.0, 99.0, 180.0, 99.0) == []  # +4% is noise; the fifth counts


def test_a_run_that_learned_and_then_fell_back_is_told_too():
    assert len(warnings(-100.0, -10.0, -100.0, -120.0, -100.0, -101.0)) == 1


class Flat(gymnasium.Env):
    """Nothing to learn: every step costs 1 whatever the action."""

    observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), -1.0, False, self.t >= 8, {}


def test_a_real_run_on_an_env_with_nothing_to_learn_prints_the_line_once(tmp_path, capsys):
    gsb_mdpo.train(Flat, output_dir=tmp_path / "run", total_steps=6 * 64, rollout={"num_envs": 4, "unroll_length": 16,
                   "num_minibatches": 2, "epochs": 1}, policy={"width": 8, "depth": 1, "num_steps": 2},
                   critic={"width": 8, "depth": 1}, eval={"num_evals": 6, "episodes": 2, "final_episodes": 2},
                   log={"progress": False})  # fmt: skip
    assert (
        capsys.readouterr().out.count("not learning? the last 4 evaluations did no better than the first")
        == 1
    )
