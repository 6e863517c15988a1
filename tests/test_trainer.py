"""The shared training loop through the GSB-MDPO trainer: run folder, determinism, kill-and-resume,
learning, the CLI, and the Playground path."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gsbpolicy import GSBPolicy
from trainers._core.loop import Trainer
from trainers._core.rundir import RunFolderError
from trainers.gsb_mdpo import GsbMdpo, cpu_preset, playground_preset
from trainers.presets import with_fields

TINY = {
    "rollout": {"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "epochs": 2},
    "policy": {"num_steps": 4, "width": 16, "depth": 1},
    "critic": {"width": 16, "depth": 1},
    "eval": {"num_evals": 2, "episodes": 2, "final_episodes": 2},
    "log": {"checkpoint_every": 2, "progress": False},
}


def tiny_args(tmp_path, name, **changes):
    args = with_fields(
        cpu_preset("InvertedPendulum-v5"), total_steps=6 * 64, output_dir=tmp_path / name, **TINY
    )
    return with_fields(args, **changes)


def records(run_dir):
    """metrics.jsonl without wall-clock fields."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/")} for line in lines]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    args = tiny_args(tmp_path_factory.mktemp("runs"), "reference")
    policy_dir = Trainer(GsbMdpo(args.algo), args).run()
    return args, policy_dir


def test_run_folder_is_complete_and_loadable(reference_run):
    args, policy_dir = reference_run
    run_dir = args.output_dir
    run = json.loads((run_dir / "run.json").read_text())
    assert run["algo"] == "gsb_mdpo" and run["args"]["rollout"]["num_envs"] == 4
    assert {"commit", "dirty"} <= set(run["git"]) and run["packages"]["jax"]
    kinds = [r["type"] for r in records(run_dir)]
    assert kinds.count("train") == 6 and kinds.count("eval") == 2
    assert {"train/step_clip_frac", "train/path_kl_drift", "train/ratio_max"} <= set(records(run_dir)[0])
    results = json.loads((policy_dir / "results.json").read_text())
    assert results["n_episodes"] == 2 and results["env_steps"] == 6 * 64 and results["deterministic"]
    policy = GSBPolicy.from_pretrained(policy_dir)
    action, _ = policy.predict(np.zeros(4, np.float32))
    assert policy.action_space.contains(action)
    assert policy.spec.env_id == "InvertedPendulum-v5" and policy.spec.num_steps == 4


def test_tensorboard_scalars_and_onnx_export(tmp_path):
    args = tiny_args(
        tmp_path, "tb", total_steps=64, log={"tensorboard": True, "progress": False, "export_onnx": True}
    )
    policy_dir = Trainer(GsbMdpo(args.algo), args).run()
    assert list((args.output_dir / "tensorboard").glob("events.out.tfevents.*"))
    from export.runtime import OnnxPolicy

    obs = np.linspace(-1, 1, 4, dtype=np.float32)
    onnx_action, _ = OnnxPolicy(policy_dir / "policy.onnx").predict(obs)
    np.testing.assert_allclose(onnx_action, GSBPolicy.from_pretrained(policy_dir).predict(obs)[0], atol=1e-5)


def test_same_seed_gives_identical_metrics(tmp_path, reference_run):
    args = tiny_args(tmp_path, "again")
    Trainer(GsbMdpo(args.algo), args).run()
    assert records(args.output_dir) == records(reference_run[0].output_dir)


def test_a_longer_run_of_the_same_seed_repeats_the_shorter_ones_iterations(tmp_path, reference_run):
    """With a constant learning rate a run trained further is the shorter run continued, whatever its evaluation
    schedule: what would let finetune-cpu-gym's `gaussian_ppo:demonstrator-continued` (seed 0) repeat the
    demonstrator's run on the same machine and commit (its committed seed 0 ran on neither, so its page calls the
    column the demonstrator's recipe rerun)."""
    args = tiny_args(
        tmp_path, "longer", total_steps=8 * 64, eval={"num_evals": 3, "episodes": 2, "final_episodes": 2}
    )
    assert not args.optim.actor_cosine_decay
    Trainer(GsbMdpo(args.algo), args).run()
    train = [r for r in records(args.output_dir) if r["type"] == "train"]
    shorter = [r for r in records(reference_run[0].output_dir) if r["type"] == "train"]
    assert len(train) == 8 and train[:6] == shorter


def test_killed_run_resumes_exactly(tmp_path, reference_run, monkeypatch):
    args = tiny_args(tmp_path, "killed")
    trainer = Trainer(GsbMdpo(args.algo), args)
    original = Trainer.collect_and_update
    calls = []

    def crash_in_fifth_iteration(self):
        calls.append(1)
        if len(calls) == 5:  # after the checkpoint of iteration 4, in the middle of iteration 5
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(Trainer, "collect_and_update", crash_in_fifth_iteration)
    with pytest.raises(KeyboardInterrupt):
        trainer.run()
    monkeypatch.setattr(Trainer, "collect_and_update", original)
    with pytest.raises(RunFolderError, match="interrupted run; pass --resume"):
        Trainer(GsbMdpo(args.algo), args)
    original_run = json.loads((args.output_dir / "run.json").read_text())
    # Checkpoint cadence and progress display cannot alter results: a resume may change them.
    resumed = with_fields(args, resume=True, log={"checkpoint_every": 3, "progress": False})
    Trainer(GsbMdpo(resumed.algo), resumed).run()
    assert records(args.output_dir) == records(reference_run[0].output_dir)
    run = json.loads((args.output_dir / "run.json").read_text())
    assert run["args"] == original_run["args"] and run["started"] == original_run["started"]
    (resume,) = run["resumes"]
    assert resume["changed"] == {
        "log.checkpoint_every": {"old": 2, "new": 3},
        "resume": {"old": False, "new": True},
    }
    assert {"git", "packages", "device", "started"} <= set(resume)


@pytest.mark.slow
def test_gsb_mdpo_learns_inverted_pendulum(tmp_path):
    # The first of 10 evaluations comes after 3 iterations (3,072 env steps), before the policy balances.
    args = with_fields(cpu_preset(None), total_steps=30_720, output_dir=tmp_path / "learn",
                       eval={"num_evals": 10}, log={"progress": False})  # fmt: skip
    Trainer(GsbMdpo(args.algo), args).run()
    evals = [r for r in records(args.output_dir) if r["type"] == "eval"]
    first, last = evals[0]["eval/return_deterministic"], evals[-1]["eval/return_deterministic"]
    assert last > 500 and last > 5 * first, (first, last)


def test_playground_path_runs_end_to_end_and_resumes_exactly(tmp_path, monkeypatch):
    """The jitted Playground path (rollout scan, env state in the checkpoint), on a pure-JAX Playground env:
    the path is the same for every Playground env (the MJX tasks' own steps are tested in test_envs.py), and
    this one compiles in seconds where an MJX task took 80 s here."""
    # Imports Playground: here, not when the tests are collected.
    from trainers._core.envs.playground_env import _reset_shapes

    args = with_fields(
        playground_preset("tests.jax_point_mass:PointMass"),
        total_steps=3 * 2 * 32 * 20,
        output_dir=tmp_path / "playground",
        rollout={"num_envs": 32, "unroll_length": 20, "unrolls_per_iteration": 2, "num_minibatches": 4,
                 "epochs": 1, "episode_length": 50},
        policy={"width": 8, "depth": 1},
        critic={"width": 16, "depth": 1},
        eval={"num_evals": 1, "num_envs": 4},
        log={"progress": False, "checkpoint_every": 1},
    )  # fmt: skip
    policy_dir = Trainer(GsbMdpo(args.algo), args).run()
    kinds = [r["type"] for r in records(args.output_dir)]
    assert kinds == ["train", "train", "train", "eval"]
    results = json.loads((policy_dir / "results.json").read_text())
    assert results["n_episodes"] == 4 and all(length == 50 for length in results["lengths"])
    assert GSBPolicy.from_pretrained(policy_dir).spec.obs_dim == 4

    killed = with_fields(args, output_dir=tmp_path / "killed")
    original, calls = Trainer.collect_and_update, []

    def crash_in_third_iteration(self):
        calls.append(1)
        if len(calls) == 3:  # the env states of iteration 2's end are in the checkpoint, not its first ones
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(Trainer, "collect_and_update", crash_in_third_iteration)
    with pytest.raises(KeyboardInterrupt):
        Trainer(GsbMdpo(killed.algo), killed).run()
    monkeypatch.setattr(Trainer, "collect_and_update", original)
    resumed = with_fields(killed, resume=True)
    env_traces = _reset_shapes.cache_info().misses
    trainer = Trainer(GsbMdpo(resumed.algo), resumed)
    trainer.run()
    assert records(killed.output_dir) == records(args.output_dir)
    # The resumed run ran the reset, iteration and evaluations that the first run traced and stored (that a
    # stored program computes what `eqx.filter_jit` does, bit for bit, is test_exported_program.py's), and read
    # the observation size the first run found: it never traced the env.
    evaluations = trainer.backend.evaluator._run.loaded  # one program per mode: deterministic, stochastic
    assert trainer.backend._iteration.loaded == trainer.backend._reset.loaded == [True]
    assert evaluations == [True] * len(evaluations) != []
    assert _reset_shapes.cache_info().misses == env_traces


def test_cli_help_documents_every_group():
    out = subprocess.run(
        [sys.executable, "-m", "trainers.gsb_mdpo", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    for flag in ("--env", "--seed", "--total-steps", "--output-dir", "--resume", "--preset", "--algo.kl-coef",
                 "--rollout.num-envs", "--policy.sigma-schedule", "--optim.actor-lr"):  # fmt: skip
        assert flag in out.stdout, flag


def test_presets_follow_the_paper_tables():
    pg = playground_preset("BallInCup")
    assert (pg.rollout.num_envs, pg.rollout.unroll_length, pg.rollout.batch_size, pg.rollout.num_minibatches) == (
        2048, 30, 1024, 32)  # fmt: skip
    assert pg.rollout.epochs == 16 and pg.rollout.gamma == 0.95 and pg.rollout.reward_scaling == 10.0
    assert playground_preset("CheetahRun").rollout.gamma == 0.995
    assert (pg.algo.kl_coef, pg.algo.ref_mix, pg.algo.step_clip, pg.algo.path_clip) == (0.8, 0.0, 0.1, 0.3)
    assert (pg.policy.num_steps, pg.policy.sigma_max, pg.policy.sigma_min) == (8, 3.0, 1.0)
    assert pg.total_steps == 60_000_000 and pg.optim.value_coef == 0.1
    from trainers.gsb_mdpo import gym_preset

    gy = gym_preset("Hopper-v5")
    assert gy.rollout.steps_per_iteration == 1024 * 24 and gy.rollout.batch_size * 24 == 6144
    assert (gy.algo.kl_coef, gy.algo.ref_mix, gy.algo.path_clip) == (0.08, 0.02, 0.4)
    assert gy.optim.actor_cosine_decay and gy.optim.max_grad_norm == 1.0 and gy.optim.actor_lr == 7.5e-4
    assert (gy.policy.num_steps, gy.policy.sigma_schedule, gy.policy.sigma_min) == (16, "linear", 0.3)


def test_the_run_folders_walk_returns_to_no_file_more_than_twice():
    """Issue 66's measure of a loop you can read: following the run folder from `python -m trainers.gsb_mdpo`
    to the saved policy (`tests/regression/walk.py`: a tiny run, each place read once in call order) enters no
    file it has left more than twice."""
    root = Path(__file__).resolve().parents[1]
    walk = subprocess.run(
        [sys.executable, str(root / "tests" / "regression" / "walk.py"), "--max", "2"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert walk.returncode == 0, walk.stdout[-3000:] + walk.stderr[-2000:]
