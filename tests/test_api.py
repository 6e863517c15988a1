"""The Python training API on a user's own Gymnasium env (the README's custom-env example, executed)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from gsbpolicy import GSBPolicy, evaluate
from trainers import gsb_mdpo
from trainers._core.api import register_env, with_overrides
from trainers._core.loop import Trainer


class Reach(gymnasium.Env):
    """Move a point on a line to a target: observation (position, target), action a velocity in [-1, 1],
    reward minus the distance after the step; 50 steps an episode. `get_state`/`set_state` make a resumed
    run exact (everything the next steps depend on besides `np_random`)."""

    def __init__(self):
        self.observation_space = spaces.Box(-5.0, 5.0, (2,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._steps = 0

    def _obs(self):
        return np.array([self._x, self._target], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._x, self._target = self.np_random.uniform(-2, 2, 2)
        self._steps = 0
        return self._obs(), {}

    def step(self, action):
        self._x = float(np.clip(self._x + 0.2 * float(action[0]), -5, 5))
        self._steps += 1
        return self._obs(), -abs(self._x - self._target), False, self._steps >= 50, {}

    def get_state(self):
        return {"x_target": np.array([self._x, self._target]), "steps": np.array(self._steps)}

    def set_state(self, state):
        (self._x, self._target), self._steps = state["x_target"].tolist(), int(state["steps"])


class ReachNoState(Reach):
    """The same env without the snapshot methods."""

    get_state = None
    set_state = None


TINY = {
    "total_steps": 4096,
    "rollout": {"num_envs": 8, "unroll_length": 32, "epochs": 4},
    "policy": {"width": 32, "depth": 2, "num_steps": 4},
    "critic": {"width": 32, "depth": 2},
    "eval": {"num_evals": 2, "episodes": 4, "final_episodes": 4},
    "log": {"progress": False},
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("custom") / "run"
    return gsb_mdpo.train(Reach, output_dir=out, **TINY), out


def test_a_custom_env_trains_loads_and_evaluates(trained):
    policy, out = trained
    assert isinstance(policy, GSBPolicy)
    assert (out / "policy" / "results.json").is_file() and (out / "checkpoint").is_dir()
    assert not (
        out / "best_policy"
    ).exists()  # keeping the best evaluated policy is an option, never the default
    loaded = GSBPolicy.from_pretrained(out / "policy")
    env = gymnasium.make_vec("custom/Reach-v0", num_envs=2)
    result = evaluate(loaded, env, n_episodes=4, seed=1)
    env.close()
    assert np.isfinite(result.returns).all() and len(result.returns) == 4
    obs = np.array([0.0, 1.0], np.float32)
    np.testing.assert_array_equal(loaded.predict(obs)[0], policy.predict(obs)[0])


def test_a_class_trained_on_is_recorded_by_entry_point_and_evaluates_in_a_new_process(trained):
    """The README's own-env flow, saved and evaluated in a second process: `custom/Reach-v0` exists only where
    train() registered it, and results.json's entry point makes it again there."""
    _, out = trained
    results = json.loads((out / "policy" / "results.json").read_text())
    assert results["env_id"] == "custom/Reach-v0" and results["env_entry_point"] == f"{__name__}:Reach"
    script = (
        "from gsbpolicy import GSBPolicy, evaluate\n"
        f"policy = GSBPolicy.from_pretrained({str(out / 'policy')!r})\n"
        "print(evaluate(policy, policy.spec.env_id, n_episodes=2).n_episodes)\n"
    )
    tests = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-2000:]


def _records(run_dir):
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in lines]


def _crash_in_third_iteration(monkeypatch, iteration: int = 3):
    original, calls = Trainer.collect_and_update, []

    def crash(self):
        calls.append(1)
        if len(calls) == iteration:  # by default after the checkpoint of iteration 2
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(Trainer, "collect_and_update", crash)
    return original


@pytest.mark.parametrize("env, exact", [(Reach, True), (ReachNoState, False)])
def test_a_custom_env_resumes_exactly_when_it_has_a_snapshot(
    trained, tmp_path, monkeypatch, capsys, env, exact
):
    out = tmp_path / "run"
    original = _crash_in_third_iteration(monkeypatch)
    options = {**TINY, "log": {"progress": False, "checkpoint_every": 2}}
    with pytest.raises(KeyboardInterrupt):
        gsb_mdpo.train(env, output_dir=out, **options)
    monkeypatch.setattr(Trainer, "collect_and_update", original)
    gsb_mdpo.train(env, output_dir=out, resume=True, **options)
    note = "continues with fresh episodes" in capsys.readouterr().err
    assert note is not exact
    if exact:  # the uninterrupted run checkpoints at another cadence, which cannot change results
        assert _records(out) == _records(trained[1])
    else:
        assert len(_records(out)) == len(_records(trained[1]))


def test_resume_after_the_end_is_refused_as_a_finished_run(trained):
    _, out = trained
    with pytest.raises(ValueError, match="already holds a finished run"):
        gsb_mdpo.train(Reach, output_dir=out, **TINY)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown option 'total_step'"):
        gsb_mdpo.train(Reach, total_step=10)
    with pytest.raises(ValueError, match=r"unknown rollout option\(s\) \['envs'\]"):
        gsb_mdpo.train(Reach, rollout={"envs": 2})
    with pytest.raises(ValueError, match="unknown preset 'fast'"):
        gsb_mdpo.train(Reach, preset="fast")
    with pytest.raises(ValueError, match="not an env instance"):
        gsb_mdpo.train(Reach(), total_steps=10)
    with pytest.raises(ValueError, match="cannot import 'no_such_module'"):
        gsb_mdpo.train("no_such_module:Foo-v0")


def test_a_callable_keeps_its_id_and_a_second_one_of_that_name_is_refused():
    assert register_env(Reach) == register_env(Reach) == "custom/Reach-v0"

    def Reach2():  # noqa: N802 - named like the class it stands in for
        return Reach()

    Reach2.__name__ = "Reach"
    with pytest.raises(ValueError, match="another callable is already registered as custom/Reach-v0"):
        register_env(Reach2)


def test_overrides_replace_fields_and_update_groups():
    args = with_overrides(gsb_mdpo.cpu_preset("Hopper-v5"), {"seed": 3, "rollout": {"num_envs": 4}})
    assert args.seed == 3 and args.rollout.num_envs == 4 and args.rollout.unroll_length == 32


def test_keep_best_keeps_the_best_evaluation_beside_the_last_and_the_last_line_names_both(tmp_path, capsys):
    """`log={"keep_best": True}` (`--log.keep-best`): `best_policy/` holds the policy of the best deterministic
    evaluation in metrics.jsonl (it reproduces that evaluation's return on the same episodes), labelled by its
    best.json; `policy/` stays the last iteration's; the run ends with one line naming both with their returns."""
    from trainers._core.evaluation import eval_seed

    out = tmp_path / "run"
    options = {**TINY, "eval": {"num_evals": 4, "episodes": 4, "final_episodes": 4}}
    gsb_mdpo.train(Reach, output_dir=out, **{**options, "log": {"progress": False, "keep_best": True}})
    last_line = capsys.readouterr().out.splitlines()[-1]
    evals = [r for r in _records(out) if r["type"] == "eval"]
    best = max(evals, key=lambda r: r["eval/return_deterministic"])
    record = json.loads((out / "best_policy" / "best.json").read_text())
    assert "policy/ is the last iteration's" in record["label"]
    assert (record["iteration"], record["mean"]) == (best["iteration"], best["eval/return_deterministic"])
    env = gymnasium.make_vec("custom/Reach-v0", num_envs=4, vectorization_mode="sync")
    again = evaluate(
        GSBPolicy.from_pretrained(out / "best_policy"), env, 4, True, eval_seed(0, best["iteration"])
    )
    assert again.mean == pytest.approx(record["mean"], rel=1e-5)
    results = json.loads((out / "policy" / "results.json").read_text())
    assert results["env_steps"] == options["total_steps"] and not (out / "best_policy.pending").exists()
    assert last_line == (
        f"policy saved to {out / 'policy'}: return {results['mean']:.1f} +/- {results['std']:.1f} over 4 "
        f"deterministic episodes on custom/Reach-v0; best evaluated policy (return {record['mean']:.1f} over 4 "
        f"episodes at {record['env_steps']:,} env steps) saved to {out / 'best_policy'}"
    )


@pytest.mark.parametrize(
    "num_evals, checkpoint_every, killed_in",
    [(8, 8, 3), (16, 2, 4)],
    ids=["before any checkpoint", "after one"],
)
def test_keep_best_after_a_resume_is_the_best_of_the_evaluations_the_run_kept(
    tmp_path, monkeypatch, num_evals, checkpoint_every, killed_in
):
    """A run killed after an evaluation that beat every earlier one but before a checkpoint covered it: the
    candidate it left (`best_policy.pending`) goes with the evaluations the resume discards, and the resumed
    run's best is again the best evaluation of its metrics.jsonl (the first evaluation is not at iteration 1, so
    a stale candidate would otherwise be promoted by the first checkpoint)."""
    out = tmp_path / "run"
    options = {
        **TINY,
        "eval": {"num_evals": num_evals, "episodes": 4, "final_episodes": 4},
    }  # of 16 iterations
    log = {"progress": False, "checkpoint_every": checkpoint_every, "keep_best": True}
    original = _crash_in_third_iteration(monkeypatch, killed_in)
    with pytest.raises(KeyboardInterrupt):
        gsb_mdpo.train(Reach, output_dir=out, **{**options, "log": log})
    pending = json.loads((out / "best_policy.pending" / "best.json").read_text())
    assert pending["iteration"] == killed_in - 1 and pending["iteration"] > (2 if killed_in == 4 else 0)
    monkeypatch.setattr(Trainer, "collect_and_update", original)
    gsb_mdpo.train(Reach, output_dir=out, resume=True, **{**options, "log": log})
    evals = [r for r in _records(out) if r["type"] == "eval"]
    best = max(evals, key=lambda r: r["eval/return_deterministic"])
    record = json.loads((out / "best_policy" / "best.json").read_text())
    assert (record["iteration"], record["mean"]) == (best["iteration"], best["eval/return_deterministic"])
