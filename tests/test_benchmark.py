"""The benchmark runner and the ledger-generated summaries: a real (tiny) suite run, skipping and resume
rules, the aggregation arithmetic, and that the committed summaries match the committed ledgers."""

import ast
import concurrent.futures
import dataclasses
import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest

from gsbpolicy._cli import CommandError
from trainers import registry
from trainers._core.runfolder import DIVERGED_FILE
from trainers._core.runlog import git_commit
from trainers.benchmark import aggregate, arguments, compare, cost, ledger, local, plan, report, runner, stats
from trainers.benchmark.arguments import BenchArgs
from trainers.benchmark.executor import Executor
from trainers.benchmark.suites import SUITES, Suite, Variant
from trainers.benchmark.summary import FEW_COLUMNS, summarize

TINY_TRAINER = ("--rollout.num-envs", "4", "--rollout.unroll-length", "16", "--rollout.num-minibatches", "2",
                "--rollout.epochs", "1", "--policy.num-steps", "2", "--policy.width", "8", "--policy.depth", "1",
                "--critic.width", "8", "--critic.depth", "1", "--eval.num-evals", "2", "--eval.episodes", "1",
                "--eval.final-episodes", "2")  # fmt: skip


@pytest.fixture
def tiny_suite(monkeypatch):
    suite = Suite(
        name="tiny",
        description="test suite.",
        tasks=("InvertedPendulum-v5",),
        total_steps=128,
        seeds=(0, 1),
        preset="cpu",
        variants=(Variant("gsb_mdpo", "gsb_mdpo"), Variant("lambda=0", "gsb_mdpo", ("--algo.kl-coef", "0"))),
        args=TINY_TRAINER,
        budget_note="tiny",
        kind="ablation",
    )
    monkeypatch.setitem(SUITES, "tiny", suite)
    return suite


def test_suite_run_writes_ledger_and_summaries_then_skips(tiny_suite, tmp_path, capsys):
    # Two runs at once: the ledger gets both lines, written by the runner's one thread as runs finish.
    args = BenchArgs(suite="tiny", methods=("lambda=0",), seeds=(0, 1), runs_dir=tmp_path / "runs",
                               results_dir=tmp_path / "results", jobs=2)  # fmt: skip
    assert runner.run_suite(args) == 0
    records = sorted(ledger.read_ledger(tmp_path / "results" / "tiny.runs.jsonl"), key=lambda r: r["seed"])
    assert [(r["variant"], r["seed"], r["concurrent_runs"]) for r in records] == [
        ("lambda=0", 0, 2),
        ("lambda=0", 1, 2),
    ]
    record = records[0]
    assert (record["task"], record["variant"], record["seed"]) == ("InvertedPendulum-v5", "lambda=0", 0)
    assert "--algo.kl-coef 0" in record["command"] and record["final"]["env_steps"] == 128
    assert record["cost"]["wall_s"] > 0 and record["cost"]["peak_rss_mib"] > 50
    assert 0 < record["cost"]["trainer_wall_s"] <= record["cost"]["wall_s"]
    assert len(record["curve"]["env_steps"]) == 2 and len(record["step_clip_frac"]["value"]) == 2
    assert len(record["sample_clip_frac"]["value"]) == 2  # App. C.2's count: samples with a clipped step
    summary = json.loads((tmp_path / "results" / "tiny.json").read_text())
    entry = summary["tasks"]["InvertedPendulum-v5"]["lambda=0"]
    finals = [r["final"]["mean"] for r in records]
    assert entry["final_mean"] == pytest.approx(sum(finals) / 2, abs=1e-3) and entry["seeds"] == [0, 1]
    assert (tmp_path / "results" / "tiny.png").read_bytes()[:4] == b"\x89PNG"
    assert "lambda=0" in (tmp_path / "results" / "tiny.md").read_text()
    # Finished runs are skipped: a second call has nothing to do.
    capsys.readouterr()
    assert runner.run_suite(args) == 0
    assert "0 runs to do" in capsys.readouterr().out


def test_a_run_that_diverged_is_recorded_with_its_last_return_and_a_crash_is_not(
    tiny_suite, tmp_path, monkeypatch, capsys
):
    results = tmp_path / "results"
    args = BenchArgs(suite="tiny", methods=("gsb_mdpo",), seeds=(0, 1), runs_dir=tmp_path / "runs",
                               results_dir=results)  # fmt: skip

    def fake_train(cmd, folders, sample_interval):
        (directory,) = folders
        directory.mkdir(parents=True)
        evals = [{"type": "eval", "iteration": i, "env_steps": 64 * i, "eval/return_deterministic": 10.0 * i,
                  "eval/return_deterministic_std": 1.0, "eval/return_stochastic": 5.0} for i in (1, 2)]  # fmt: skip
        trains = [{"type": "train", "iteration": 2, "env_steps": 128, "time/wall_s": 3.0}]
        (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*evals, *trains]))
        (directory / "run.json").write_text(
            json.dumps({"git": {"commit": "abc"}, "packages": {}, "device": "cpu"})
        )
        if directory.name == "seed_0":  # what the trainer's lifecycle writes when an update goes non-finite
            stop = {
                "iteration": 3,
                "quantity": "gradient",
                "checkpoint_iteration": 2,
                "date": "2026-11-28T00:00:00",
            }
            (directory / DIVERGED_FILE).write_text(json.dumps(stop))
        raise RuntimeError("exit code 1")

    monkeypatch.setattr(local, "run_trainer", fake_train)
    assert runner.run_suite(args) == 1  # seed 1 crashed: a failure, and no ledger line
    (record,) = ledger.read_ledger(results / "tiny.runs.jsonl")
    assert record["seed"] == 0 and record["diverged"]["iteration"] == 3
    assert record["final"] == {"mean": 20.0, "std": 1.0, "n_episodes": None, "deterministic": True,
                               "env_steps": 128}  # fmt: skip
    table = (results / "tiny.md").read_text()
    assert "20.0 (1 seed) (1 diverged)" in table
    assert (
        "gsb_mdpo on InvertedPendulum-v5 seed 0 (non-finite gradient in iteration 3; last evaluation at 128"
        in table
    )
    # The diverged run is done: a second call plans only the crashed one.
    capsys.readouterr()
    assert runner.run_suite(BenchArgs(**{**vars(args), "resume": True, "dry_run": True})) == 0
    assert "1 runs to do" in capsys.readouterr().out


def test_a_killed_attempt_still_counts_toward_wall_clock(tmp_path, monkeypatch):
    monkeypatch.setattr(cost, "PROGRESS_EVERY_S", 0.1)
    sleep = [sys.executable, "-c", "import time; time.sleep(1.0)"]
    first = cost.execute(sleep, tmp_path)
    progress = json.loads((tmp_path / cost.ATTEMPT_FILE).read_text())
    assert 0.5 < progress["wall_s"] <= first["wall_s"] and progress["peak_rss_mib"] > 0
    # The runner is killed before it records `first`: the next attempt counts the progress it left.
    second = cost.execute([sys.executable, "-c", "pass"], tmp_path)
    total = cost.accumulate_cost(tmp_path, second)
    assert total["attempts"] == 2
    assert total["wall_s"] == pytest.approx(progress["wall_s"] + second["wall_s"])
    assert not (tmp_path / cost.ATTEMPT_FILE).exists()


def test_a_run_records_other_trainers_sharing_the_machine(tmp_path, monkeypatch):
    # A second runner's run (or one started by hand) slows this run; `--jobs` cannot see it, the scan does.
    assert cost.is_trainer(["python", "-m", "trainers.gsb_mdpo", "--env", "Hopper-v5"])
    assert not cost.is_trainer(["python", "-m", "trainers.benchmark", "--suite", "cpu-gym"])
    assert not cost.is_trainer(["python", "-m", "pytest", "trainers.gsb_mdpo"])
    # Only processes carrying this test's marker count, so the machine's other work cannot change the count.
    marker = f"marker-{tmp_path.name}"
    monkeypatch.setattr(cost, "is_trainer", lambda cmdline: marker in cmdline)
    monkeypatch.setattr(cost, "OTHERS_EVERY_S", 0.1)
    sleep = [sys.executable, "-c", "import time; time.sleep(1.5)", marker]
    alone = cost.execute(sleep, tmp_path / "alone")  # its own process carries the marker too
    assert (alone["other_trainers_peak"], alone["shared_fraction"]) == (0, 0.0)
    with subprocess.Popen(sleep) as other:
        shared = cost.execute(sleep, tmp_path / "shared")
        other.kill()
    assert shared["other_trainers_peak"] == 1 and shared["shared_fraction"] > 0.5
    record = {"concurrent_runs": 1, "cost": shared}
    assert ledger.shared_machine(record) and not ledger.shared_machine({**record, "cost": alone})


@pytest.mark.parametrize("left", ["metrics.jsonl", "run.json"])
def test_interrupted_run_needs_resume(tiny_suite, tmp_path, capsys, left):
    # A run killed before its first metrics line leaves only run.json, which the trainer counts as a run:
    # the runner must resume it too, not start it fresh (the trainer refuses that).
    args = BenchArgs(suite="tiny", methods=("gsb_mdpo",), seeds=(1,), runs_dir=tmp_path / "runs",
                               results_dir=tmp_path / "results", dry_run=True)  # fmt: skip
    directory = plan.run_dir(args, tiny_suite, "InvertedPendulum-v5", tiny_suite.variants[0], 1)
    directory.mkdir(parents=True)
    (directory / left).write_text("")
    with pytest.raises(CommandError, match="--resume"):
        runner.run_suite(args)
    resumed = BenchArgs(**{**vars(args), "resume": True})
    capsys.readouterr()
    assert runner.run_suite(resumed) == 0  # dry run: prints the --resume command
    assert capsys.readouterr().out.rstrip().endswith("--resume")


def test_a_run_finished_in_another_suite_is_reused_not_retrained(tiny_suite, tmp_path, monkeypatch, capsys):
    results, variant = tmp_path / "results", tiny_suite.variants[0]
    args = BenchArgs(suite="tiny", methods=("gsb_mdpo",), seeds=(0,), runs_dir=tmp_path / "runs",
                               results_dir=results)  # fmt: skip
    # The same trainer args under another suite's output folder.
    cmd = plan.command(tiny_suite, plan.Run("InvertedPendulum-v5", variant, 0, tmp_path / "elsewhere"), False)
    other = {**_record("gsb_mdpo", 0, 7.0, [7.0]), "suite": "other", "command": " ".join(cmd[1:])}
    ledger.append_ledger(results / "other.runs.jsonl", other)
    monkeypatch.setattr(local, "run_trainer", lambda *a: pytest.fail("a finished run was trained again"))
    assert runner.run_suite(args) == 0
    (record,) = ledger.read_ledger(results / "tiny.runs.jsonl")
    assert record["reused_from"] == "other" and record["suite"] == "tiny" and record["final"]["mean"] == 7.0
    assert json.loads((results / "tiny.json").read_text())["num_runs"] == 1
    assert "gsb_mdpo on InvertedPendulum-v5 from other" in (results / "tiny.md").read_text()
    # Different trainer args (the lambda=0 variant) are a different run.
    capsys.readouterr()
    assert runner.run_suite(BenchArgs(**{**vars(args), "methods": ("lambda=0",), "dry_run": True})) == 0
    out = capsys.readouterr().out
    assert "--algo.kl-coef 0" in out and "the same run is in" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--suite", "nope"], "unknown suite 'nope'"),
        (["--suite", "tiny", "--methods", "sac"], "no method/variant 'sac'"),
        (["--suite", "tiny", "--tasks", "Hopper-v5"], "no task 'Hopper-v5'"),
        (["--suite", "tiny", "--seeds", "7"], "no seed 7"),
        (["--suite", "tiny", "--jobs", "0"], "--jobs must be at least 1"),
        (
            ["--suite", "tiny", "--sample-interval", "0"],
            "--sample-interval must be a finite number of seconds > 0",
        ),
        (["--suite", "tiny", "--runs-dir", "FILE"], "--runs-dir .* is a file, not a folder"),
        (["--suite", "tiny", "--results-dir", "FILE"], "--results-dir .* is a file, not a folder"),
        (["--suite", "tiny", "--results-dir", "BADLEDGER"], "tiny.runs.jsonl line 1 is not valid JSON"),
        (["--suite", "tiny", "--executor", "slurm", "--slurm.time", "90"], "--slurm.time must be HH:MM:SS"),
        (["--suite", "tiny", "--executor", "slurm", "--slurm.time", "00:00:00"], "at least 00:01:00"),
        (["--suite", "tiny", "--executor", "slurm", "--slurm.extra", "account"], "takes KEY=VALUE pairs"),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.extra", "time=2:00:00"],
            "time: the runner sets it",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.cpus-per-job", "0"],
            "cpus-per-job must be at least 1",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.poll-s", "0"],
            "--slurm.poll-s must be a finite number",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.poll-s", "inf"],
            r"--slurm\.poll-s must be a finite .*got inf",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.poll-s", "nan"],
            r"--slurm\.poll-s must be a finite .*got nan",
        ),
        (
            ["--suite", "tiny", "--sample-interval", "inf"],
            "--sample-interval must be a finite number of seconds > 0",
        ),
        (
            [
                "--suite",
                "tiny",
                "--executor",
                "slurm",
                "--slurm.time",
                "00:01:00",
                "--slurm.signal-delay-s",
                "60",
            ],
            r"--slurm\.signal-delay-s 60 must be below the time limit --slurm\.time 00:01:00 \(60 s\)",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.partition", "gpu\necho owned"],
            r"--slurm\.partition must not hold control characters, got 'gpu\\necho owned'",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.partition", "gpu $(reboot)"],
            r"--slurm\.partition must be a Slurm name \(letters, digits",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.extra", "mem=32G\nrm -rf ~"],
            r"--slurm\.extra mem must not hold control characters",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.extra", "account=lab;reboot"],
            r"--slurm\.extra account must be a Slurm name",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.extra", "qos=high normal"],
            r"--slurm\.extra qos must be a Slurm name",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--slurm.time", "04:00:00\x1b"],
            r"--slurm\.time must not hold control characters",
        ),
        (
            ["--suite", "tiny", "--executor", "slurm", "--runs-dir", "runs\n#SBATCH --x"],
            r"--runs-dir must not hold control characters",
        ),
        (["--suite", "tiny", "--executor", "slurm", "--jobs", "2"], "--jobs is the local executor's"),
        (["--suite", "tiny", "--slurm.partition", "gpu"], r"--slurm\.\* needs --executor slurm"),
        (["--suite", "tiny", "--wait"], "--wait needs --executor slurm"),
        (["--suite", "tiny", "--status"], "--status only looks; drop --dry-run"),
        (["--suite", "tiny", "--executor", "cluster"], "cluster"),
    ],
)
def test_bad_runner_arguments_are_one_line_usage_errors(tiny_suite, tmp_path, capsys, argv, message):
    (tmp_path / "FILE").write_text("x")
    (tmp_path / "BADLEDGER").mkdir()
    (tmp_path / "BADLEDGER" / "tiny.runs.jsonl").write_text("{not json\n")
    argv = [str(tmp_path / a) if a in ("FILE", "BADLEDGER") else a for a in argv]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exit_info:
        runner.main([*argv, "--dry-run"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: ") and re.search(message, err)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written


def test_submitting_where_there_is_no_slurm_is_one_line_and_trains_nothing(
    tiny_suite, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no srun
    monkeypatch.setattr(local, "run_trainer", lambda *a: pytest.fail("a run trained locally"))
    argv = ["--suite", "tiny", "--executor", "slurm", "--runs-dir", str(tmp_path / "runs"), "--results-dir",
            str(tmp_path / "results")]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        runner.main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert err.startswith("error: --executor slurm needs Slurm's sbatch and srun on PATH")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


def test_an_sbatch_answer_without_a_job_id_is_one_line(tiny_suite, tmp_path, monkeypatch, capsys):
    """sbatch exits 0 but says no job id (a site wrapper's answer): one line, not submitit's traceback."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, answer in (("sbatch", "sbatch: submitted, see the portal"), ("srun", "")):
        (bin_dir / name).write_text(f"#!/bin/sh\necho '{answer}'\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(local, "run_trainer", lambda *a: pytest.fail("a run trained locally"))
    argv = ["--suite", "tiny", "--executor", "slurm", "--runs-dir", str(tmp_path / "runs"), "--results-dir",
            str(tmp_path / "results")]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        runner.main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(
        "error: sbatch answered without a job id (Could not make sense of sbatch output "
    ), err
    assert "sbatch: submitted, see the portal" in err and "look with squeue" in err


def test_runners_merging_at_once_add_each_run_to_the_ledger_exactly_once(tmp_path):
    # Slurm jobs leave their runs' lines in the run folders, and whichever runner looks merges them (a --wait, a
    # --status, a second submission), maybe several at once: under the ledger's lock each run goes in once. flock
    # locks belong to each open of the lock file, so threads contend for it as processes do.
    records = [_record("gsb_mdpo", seed, float(seed), [1.0]) for seed in range(12)]
    path = tmp_path / "tiny.runs.jsonl"
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        added = list(pool.map(lambda start: ledger.append_ledger(path, *records[start:]), [0, 3, 6, 9] * 4))
    assert sorted(r["seed"] for r in ledger.read_ledger(path)) == list(range(12))
    assert sorted(r["seed"] for batch in added for r in batch) == list(range(12))
    assert ledger.append_ledger(path, records[0]) == []  # a run already in it is not added again


def test_by_default_a_suite_runs_outside_the_source_tree_and_is_compared_with_the_committed_one(
    tiny_suite, tmp_path, monkeypatch, capsys
):
    runs = tmp_path / "runs"
    args = BenchArgs(suite="tiny", methods=("gsb_mdpo",), seeds=(0,), runs_dir=runs)
    assert arguments.results_folder(args) == runs / "tiny"
    # A sibling suite's ledger in the default layout is found, so its run is reused, not retrained.
    cmd = plan.command(
        tiny_suite, plan.Run("InvertedPendulum-v5", tiny_suite.variants[0], 0, tmp_path / "x"), False
    )
    other = {**_record("gsb_mdpo", 0, 7.0, [7.0]), "suite": "other", "command": " ".join(cmd[1:])}
    ledger.append_ledger(runs / "other" / "other.runs.jsonl", other)
    monkeypatch.setattr(local, "run_trainer", lambda *a: pytest.fail("a finished run was trained again"))
    committed = tmp_path / "committed"
    committed.mkdir()
    (committed / "tiny.json").write_text(json.dumps({"tasks": {"InvertedPendulum-v5": {"gsb_mdpo": {
        "final_mean": 9.0, "final_std": 1.0, "seeds": [0, 1, 2]}}}}))  # fmt: skip
    monkeypatch.setattr(runner, "COMMITTED", committed)
    monkeypatch.setattr(runner, "write_comparison", lambda s, d: compare.write_comparison(s, d, committed))
    assert runner.run_suite(args) == 0
    out = capsys.readouterr().out
    assert f"results in {runs / 'tiny'}" in out
    row = "| InvertedPendulum-v5 | gsb_mdpo | 7.0 ± 0.0 (seeds 0) | 9.0 ± 1.0 (seeds 0, 1, 2) |"
    assert row in out and row in (runs / "tiny" / "tiny.comparison.md").read_text()
    assert (runs / "tiny" / "tiny.runs.jsonl").exists() and not (committed / "tiny.runs.jsonl").exists()


def test_publish_writes_only_the_committed_results():
    args = BenchArgs(suite="tiny", publish=True)
    assert arguments.results_folder(args) == arguments.COMMITTED
    elsewhere = BenchArgs(suite="tiny", publish=True, results_dir=arguments.COMMITTED.parent)
    with pytest.raises(CommandError, match="--publish writes into .*; drop --results-dir"):
        arguments.results_folder(elsewhere)


def test_seeds_are_grouped_by_the_registry_capability_and_run_by_the_registry_module(tiny_suite, tmp_path):
    """--group-seeds merges the seeds of a Playground task x variant whose algorithm declares `vmapped_seeds`;
    the trainer command runs the registry's `module`. Neither reads an algorithm's name."""
    registry.register(registry.Algorithm("solo", "Solo", "flow", module="tests.solo", vmapped_seeds=False))
    try:
        task = "tests.jax_point_mass:PointMass"
        variants = (Variant("gsb_mdpo", "gsb_mdpo"), Variant("solo", "solo"))
        runs = [
            plan.Run(task, v, seed, tmp_path / v.name / f"seed_{seed}") for v in variants for seed in (0, 1)
        ]
        singles = [plan.Job((run,), tuple(plan.command(tiny_suite, run, False))) for run in runs]
        jobs = plan.group_runs(tiny_suite, singles)
    finally:
        registry.unregister("solo")
    assert [(job.variant.name, job.seeds) for job in jobs] == [
        ("solo", (0,)),
        ("solo", (1,)),
        ("gsb_mdpo", (0, 1)),
    ]
    assert jobs[0].command[1:3] == ("-m", "tests.solo")
    grouped = jobs[2].command
    assert grouped[grouped.index("--seeds") : grouped.index("--seeds") + 3] == ("--seeds", "0", "1")
    assert grouped[grouped.index("--output-dir") + 1] == str(tmp_path / "gsb_mdpo")


def test_the_executors_share_one_interface():
    choices = typing.get_args(typing.get_type_hints(BenchArgs)["executor"])
    assert set(runner.EXECUTORS) == set(choices)
    assert all(issubclass(executor, Executor) for executor in runner.EXECUTORS.values())


def _benchmark_imports() -> dict[str, set[str]]:
    """Per module of trainers/benchmark: the modules of the package it imports (function-level imports
    included)."""
    root = Path(runner.__file__).parent
    modules = {path.stem for path in root.glob("*.py")}
    graph = {}
    for path in root.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                parts = node.module.split(".")
                if parts[:2] == ["trainers", "benchmark"]:
                    found |= {parts[2]} if len(parts) > 2 else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {
                    a.name.split(".")[2] for a in node.names if a.name.startswith("trainers.benchmark.")
                }
        graph[path.stem] = (found & modules) - {path.stem}
    return graph


def test_the_benchmark_package_has_no_import_cycle():
    graph = _benchmark_imports()
    below = {}  # module -> every module it reaches

    def reach(module, path):
        if module in path:
            pytest.fail(f"import cycle: {' -> '.join([*path[path.index(module) :], module])}")
        if module not in below:
            below[module] = set().union(*({m, *reach(m, [*path, module])} for m in graph[module]))
        return below[module]

    for module in sorted(graph):
        reach(module, [])
    # The seam: the executors never import the runner that chooses them, nor each other.
    assert "runner" not in set().union(*(below[m] for m in graph if m not in ("runner", "__main__")))
    assert "slurm_suite" not in below["local"] and "local" not in below["slurm_suite"]


def _record(variant, seed, final, curve, cost=10.0):
    return {"task": "InvertedPendulum-v5", "variant": variant, "method": "gsb_mdpo", "seed": seed,
            "final": {"mean": final, "std": 0.0, "n_episodes": 2, "deterministic": True, "env_steps": 300},
            "curve": {"env_steps": [100, 200, 300][: len(curve)], "deterministic": curve, "stochastic": curve},
            "step_clip_frac": None, "cost": {"wall_s": cost, "peak_rss_mib": 100.0, "mean_rss_mib": 80.0},
            "git": {"commit": "abc"}, "hardware": {"cpu": "x", "cores": 2, "gpu": None}}  # fmt: skip


def test_summary_arithmetic(tiny_suite):
    records = [_record("gsb_mdpo", 0, 10.0, [1.0, 2.0, 10.0]), _record("gsb_mdpo", 1, 20.0, [3.0, 4.0]),
               _record("lambda=0", 0, 5.0, [0.0, 1.0, 5.0], cost=20.0)]  # fmt: skip
    summary = summarize("tiny", records)
    entry = summary["tasks"]["InvertedPendulum-v5"]["gsb_mdpo"]
    assert entry["final_mean"] == 15.0 and entry["final_std"] == 7.071  # sample std across seeds (ddof = 1)
    # Only evaluation points every seed reached enter the curve.
    assert entry["curve"] == {"env_steps": [100, 200], "mean": [2.0, 3.0], "std": [1.414, 1.414],
                              "last_per_seed": [2.0, 4.0]}  # fmt: skip
    assert list(summary["tasks"]["InvertedPendulum-v5"]) == ["gsb_mdpo", "lambda=0"]  # suite order
    table = report.markdown(summary)
    assert "**15.0 ± 7.1 (2)**" in table and "5.0 (1 seed)" in table and "± 0.0" not in table
    assert "Hardware: x, 2 cores, GPU none." in table
    assert "minutes end to end (on the hardware above): gsb_mdpo 0.2, lambda=0 0.3." in table
    # A suite that ran on two machines gives each machine's fastest runs, never one mixed minimum.
    gpu_run = {**_record("gsb_mdpo", 2, 12.0, [1.0]), "cost": {"wall_s": 6.0}}
    gpu_run["hardware"] = {"cpu": "y", "cores": 16, "gpu": "H200"}
    table = report.markdown(summarize("tiny", [*records, gpu_run]))
    assert (
        "end to end on x, 2 cores, GPU none: gsb_mdpo 0.2, lambda=0 0.3; on y, 16 cores, GPU H200: gsb_mdpo 0.1."
        in table
    )


def test_a_suite_with_several_tasks_gets_each_machines_cost_per_task_and_column(tiny_suite, monkeypatch):
    monkeypatch.setitem(
        SUITES, "tiny", dataclasses.replace(tiny_suite, tasks=("InvertedPendulum-v5", "Hopper-v5"))
    )
    cpu = [_record("gsb_mdpo", 0, 10.0, [10.0], cost=120.0), _record("gsb_mdpo", 1, 10.0, [10.0], cost=60.0),
           {**_record("lambda=0", 0, 5.0, [5.0], cost=30.0), "task": "Hopper-v5"}]  # fmt: skip
    gpu = {
        **_record("gsb_mdpo", 2, 12.0, [12.0], cost=6.0),
        "hardware": {"cpu": "y", "cores": 16, "gpu": "H200"},
    }
    table = report.markdown(summarize("tiny", [*cpu, gpu]))
    # The fastest run of each (task, column) on each machine, never a minimum mixed across machines.
    assert "minutes end to end on x, 2 cores, GPU none:\n\n| task | gsb_mdpo | lambda=0 |" in table
    assert "| InvertedPendulum-v5 | 1.0 | - |\n| Hopper-v5 | - | 0.5 |" in table
    assert "minutes end to end on y, 16 cores, GPU H200:" in table
    assert "| InvertedPendulum-v5 | 0.1 | - |\n| Hopper-v5 | - | - |" in table
    # One task: the fastest-run line already says it all.
    assert "per task and column" not in report.markdown(summarize("tiny", cpu[:2]))


def test_a_task_no_run_ever_scored_on_is_named_as_unable_to_rank(tiny_suite):
    # A sparse reward no run reached: ties everywhere, which must not read as evidence of equal methods.
    flat = [_record("gsb_mdpo", 0, 0.0, [0.0, 0.0]), _record("lambda=0", 0, 0.0, [0.0, 0.0])]
    summary = summarize("tiny", flat)
    assert summary["tasks"]["InvertedPendulum-v5"]["gsb_mdpo"]["constant_return"] == 0.0
    assert "returned the same value on: InvertedPendulum-v5 (0)" in report.markdown(summary)
    # One run that ever moved, even at an intermediate evaluation, is a signal.
    moved = [flat[0], _record("lambda=0", 0, 0.0, [1.0, 0.0])]
    summary = summarize("tiny", moved)
    assert summary["tasks"]["InvertedPendulum-v5"]["lambda=0"]["constant_return"] is None
    assert "returned the same value" not in report.markdown(summary)


def _runs(variant, finals, task="InvertedPendulum-v5"):
    return [{**_record(variant, seed, final, [final]), "task": task} for seed, final in enumerate(finals)]


def test_ablation_verdicts_come_from_the_probability_of_improvement_interval(tiny_suite):
    # lambda=0 below every default seed: P(lambda=0 > gsb_mdpo) = 0 in every resample, so "worse".
    summary = summarize("tiny", _runs("gsb_mdpo", [9.0, 10.0, 11.0]) + _runs("lambda=0", [6.0, 7.0, 8.0]))
    entries = summary["tasks"]["InvertedPendulum-v5"]
    assert entries["gsb_mdpo"]["comparison"] is None and entries["gsb_mdpo"]["compared_with"] is None
    assert entries["lambda=0"]["comparison"] == {"of": "lambda=0", "over": "gsb_mdpo", "p_improvement": 0.0,
                                                 "ci": [0.0, 0.0], "verdict": "worse", "rank_p": 0.1}  # fmt: skip
    assert entries["gsb_mdpo"]["iqm"] == 10.0 and entries["gsb_mdpo"]["ci"] == [9.0, 11.0]
    table = report.markdown(summary)
    # 3 seeds against 3: the smallest rank-test p is 0.10, so the page says how many seed pairs, not "worse".
    assert "| vs gsb_mdpo: 0.00 [0.00, 0.00] ahead in 0 of 9 pairs (rank test p = 0.10) |" in table
    four = summarize(
        "tiny", _runs("gsb_mdpo", [9.0, 10.0, 11.0, 12.0]) + _runs("lambda=0", [5.0, 6.0, 7.0, 8.0])
    )
    assert "| vs gsb_mdpo: 0.00 [0.00, 0.00] worse (rank test p = 0.03) |" in report.markdown(four)
    assert "| 10.0 [9.0, 11.0] |" in table
    # Overlapping seeds: the interval straddles 0.5.
    overlap = summarize("tiny", _runs("gsb_mdpo", [9.0, 10.0, 11.0]) + _runs("lambda=0", [5.0, 9.5, 14.0]))
    assert (
        overlap["tasks"]["InvertedPendulum-v5"]["lambda=0"]["comparison"]["verdict"]
        == "inconclusive (3 seeds)"
    )
    # Two seeds that do not overlap give the interval [0, 0], but too few seeds for a verdict; one seed has
    # no interval at all.
    few = summarize("tiny", _runs("gsb_mdpo", [9.0, 10.0]) + _runs("lambda=0", [1.0, 2.0, 3.0]))
    c = few["tasks"]["InvertedPendulum-v5"]["lambda=0"]["comparison"]
    assert c["ci"] == [0.0, 0.0] and c["verdict"] == "inconclusive (3 vs 2 seeds)"
    one = summarize("tiny", _runs("gsb_mdpo", [9.0]) + _runs("lambda=0", [1.0, 2.0, 3.0]))
    entries = one["tasks"]["InvertedPendulum-v5"]
    assert entries["lambda=0"]["comparison"]["p_improvement"] is None and entries["gsb_mdpo"]["ci"] is None
    assert "(3 vs 1 seeds: too few for a test)" in report.markdown(one) and "| 9.0 |" in report.markdown(one)
    assert one["aggregate_iqm"] is None  # one task: the per-task IQM says it all


def test_ablation_table_compares_ode_with_sde_evaluation(tiny_suite):
    runs = _runs("gsb_mdpo", [9.0, 10.0, 11.0])
    for r in runs:
        r["curve"] = {**r["curve"], "stochastic": [r["final"]["mean"] - 5.0]}
    summary = summarize("tiny", runs)
    assert summary["tasks"]["InvertedPendulum-v5"]["gsb_mdpo"]["ode_vs_sde"]["verdict"] == "better"
    assert (
        "| InvertedPendulum-v5 | gsb_mdpo | 10.0 | 5.0 | 1.00 [1.00, 1.00] ahead in 9 of 9 pairs (rank test p = 0.10) |"
        in report.markdown(summary)
    )


@pytest.fixture
def two_task_suite(monkeypatch):
    suite = Suite(name="two", description="test suite.", tasks=("Hopper-v5", "HalfCheetah-v5"),
                  total_steps=300, seeds=(0, 1, 2), preset="cpu", variants=_methods("dppo", "genpo", "gsb_mdpo"))  # fmt: skip
    monkeypatch.setitem(SUITES, "two", suite)
    return suite


def _methods(*names):
    return tuple(Variant(name, name) for name in names)


def test_benchmark_verdicts_read_gsb_mdpo_against_each_column_and_aggregate_normalised_iqm(two_task_suite):
    records = (_runs("gsb_mdpo", [10.0, 11.0, 12.0], "Hopper-v5") + _runs("dppo", [1.0, 2.0, 3.0], "Hopper-v5")
               + _runs("gsb_mdpo", [100.0, 110.0, 120.0], "HalfCheetah-v5")
               + _runs("dppo", [200.0, 220.0, 240.0], "HalfCheetah-v5")
               + _runs("genpo", [5.0, 6.0, 7.0], "Hopper-v5"))  # fmt: skip
    summary = summarize("two", records)
    hopper, cheetah = summary["tasks"]["Hopper-v5"], summary["tasks"]["HalfCheetah-v5"]
    assert (
        hopper["dppo"]["comparison"]["of"] == "gsb_mdpo"
        and hopper["dppo"]["comparison"]["verdict"] == "better"
    )
    assert cheetah["dppo"]["comparison"]["verdict"] == "worse"
    agg = summary["aggregate_iqm"]
    # Each task divided by its best column mean (gsb_mdpo's 11 on Hopper, dppo's 220 on HalfCheetah).
    assert agg["normalised_by"] == {"Hopper-v5": 11.0, "HalfCheetah-v5": 220.0}
    assert agg["columns"]["dppo"]["iqm"] == pytest.approx(
        np.mean([2 / 11, 3 / 11, 200 / 220, 220 / 220]), abs=1e-3
    )
    assert "genpo" not in agg["columns"]  # it did not run every task
    table = report.markdown(summary)
    assert (
        "P(gsb_mdpo > column)" in table
        and "| 1.00 [1.00, 1.00] ahead in 9 of 9 pairs (rank test p = 0.10) |" in table
    )
    assert "Aggregate IQM over Hopper-v5, HalfCheetah-v5, on normalised returns" in table
    assert "(not yet run on every task: genpo)." in table
    assert "no run yet" not in table
    only_hopper = report.markdown(summarize("two", _runs("gsb_mdpo", [10.0, 11.0], "Hopper-v5")))
    assert "Tasks of this suite with no run yet (not in the tables above): HalfCheetah-v5." in only_hopper


def test_a_task_being_filled_in_stays_out_of_the_aggregate_until_most_columns_ran_its_seeds(monkeypatch):
    suite = Suite(name="three", description="test suite.", tasks=("Hopper-v5", "HalfCheetah-v5", "Swimmer-v5"),
                  total_steps=300, seeds=(0, 1, 2), preset="cpu", variants=_methods("dppo", "gsb_mdpo"))  # fmt: skip
    monkeypatch.setitem(SUITES, "three", suite)
    complete = [*_runs("gsb_mdpo", [10.0, 11.0, 12.0], "Hopper-v5"), *_runs("dppo", [1.0, 2.0, 3.0], "Hopper-v5"),
                *_runs("gsb_mdpo", [4.0, 5.0, 6.0], "HalfCheetah-v5"), *_runs("dppo", [6.0, 7.0, 8.0], "HalfCheetah-v5")]  # fmt: skip
    before = summarize("three", complete)["aggregate_iqm"]
    why = FEW_COLUMNS.format(seeds=3)
    # One seed of one column on the new task, then one seed of every column: without the rule dppo would
    # first leave the aggregate, then every column would drop to that one seed.
    partial = [*complete, *_runs("gsb_mdpo", [30.0], "Swimmer-v5")]
    first_seeds = [*partial, *_runs("dppo", [3.0], "Swimmer-v5")]
    for records in (partial, first_seeds):
        agg = summarize("three", records)["aggregate_iqm"]
        assert agg["tasks"] == ["Hopper-v5", "HalfCheetah-v5"]
        assert agg["left_out"] == {"Swimmer-v5": why}
        assert agg["columns"] == before["columns"]
    table = report.markdown(summarize("three", first_seeds))
    assert f"Left out of the aggregate: Swimmer-v5 ({why})." in table
    swimmer = [*_runs("gsb_mdpo", [30.0, 31.0, 32.0], "Swimmer-v5"), *_runs("dppo", [3.0, 4.0], "Swimmer-v5")]
    two_dppo_seeds = summarize("three", [*complete, *swimmer])["aggregate_iqm"]
    assert two_dppo_seeds["left_out"] == {"Swimmer-v5": why}
    third = {**_record("dppo", 2, 5.0, [5.0]), "task": "Swimmer-v5"}
    done = summarize("three", [*complete, *swimmer, third])
    assert done["aggregate_iqm"]["tasks"] == ["Hopper-v5", "HalfCheetah-v5", "Swimmer-v5"]
    assert done["aggregate_iqm"]["left_out"] == {}
    assert done["aggregate_iqm"]["columns"]["dppo"]["seeds"] == [0, 1, 2]


def test_a_reference_column_is_scored_on_the_paper_columns_scale_without_setting_it(monkeypatch):
    suite = Suite(name="ref", description="test suite.", tasks=("Hopper-v5", "HalfCheetah-v5"), total_steps=300,
                  seeds=(0, 1, 2), preset="cpu", variants=(*_methods("dppo", "gsb_mdpo"), Variant("sb3_ppo:zoo", "ppo")))  # fmt: skip
    monkeypatch.setitem(SUITES, "ref", suite)
    records = (_runs("gsb_mdpo", [10.0, 11.0, 12.0], "Hopper-v5") + _runs("dppo", [1.0, 2.0, 3.0], "Hopper-v5")
               + _runs("gsb_mdpo", [100.0, 110.0, 120.0], "HalfCheetah-v5")
               + _runs("dppo", [200.0, 220.0, 240.0], "HalfCheetah-v5"))  # fmt: skip
    without = summarize("ref", records)["aggregate_iqm"]
    zoo = _runs("sb3_ppo:zoo", [20.0, 22.0, 24.0], "Hopper-v5") + _runs(
        "sb3_ppo:zoo", [440.0] * 3, "HalfCheetah-v5"
    )
    summary = summarize("ref", records + zoo)
    agg = summary["aggregate_iqm"]
    assert agg["normalised_by"] == without["normalised_by"] == {"Hopper-v5": 11.0, "HalfCheetah-v5": 220.0}
    assert {v: agg["columns"][v]["iqm"] for v in ("dppo", "gsb_mdpo")} == {
        v: without["columns"][v]["iqm"] for v in ("dppo", "gsb_mdpo")
    }
    assert agg["columns"]["sb3_ppo:zoo"]["iqm"] == pytest.approx(
        2.0
    )  # twice the best paper column on each task
    assert "so 1.00 is the best paper column there and a reference column can exceed it" in report.markdown(
        summary
    )


def test_the_page_reads_out_gsb_mdpo_against_each_reference_column_and_names_unrun_columns(monkeypatch):
    """Per task, the reference columns' verdicts in words (the comparison table's, by the same rule); a planned
    column with no run yet is named as such, so a column just added is visible before its runs."""
    suite = Suite(name="ref", description="test suite.", tasks=("Hopper-v5", "HalfCheetah-v5"), total_steps=300,
                  seeds=(0, 1, 2), preset="cpu",
                  variants=(*_methods("dppo", "gsb_mdpo"), Variant("fpo_pp", "fpo_pp"), Variant("sb3_ppo:zoo", "ppo")))  # fmt: skip
    monkeypatch.setitem(SUITES, "ref", suite)
    records = (_runs("gsb_mdpo", [10.0, 11.0, 12.0], "Hopper-v5") + _runs("dppo", [1.0, 2.0, 3.0], "Hopper-v5")
               + _runs("fpo_pp", [20.0, 22.0, 24.0], "Hopper-v5") + _runs("fpo_pp", [5.0, 30.0], "HalfCheetah-v5")
               + _runs("gsb_mdpo", [100.0, 110.0, 120.0], "HalfCheetah-v5"))  # fmt: skip
    text = report.markdown(summarize("ref", records))
    assert (
        "- Hopper-v5: gsb_mdpo is ahead of `fpo_pp` in 0 of 9 pairs (P = 0.00 [0.00, 0.00], rank test p = 0.10)."
        in text
    )
    assert (
        "- HalfCheetah-v5: gsb_mdpo is ahead of `fpo_pp` in 6 of 6 pairs (P = 1.00 [1.00, 1.00], rank test p = 0.20)."
        in text
    )
    assert "`dppo`" not in text  # a paper column's verdicts stay in the table only
    assert "Columns of this suite with no run yet (not in the tables above): sb3_ppo:zoo (reference)." in text
    ran_all = report.markdown(summarize("ref", records + _runs("sb3_ppo:zoo", [1.0] * 3, "Hopper-v5")))
    assert "no run yet (not in the tables above): sb3_ppo" not in ran_all
    assert "- Hopper-v5: gsb_mdpo is ahead of `fpo_pp` in 0 of 9 pairs" in ran_all
    assert "is ahead of `sb3_ppo:zoo` in 9 of 9 pairs" in ran_all


def test_statistics_match_rliable_and_are_reproducible():
    from rliable import metrics

    rng = np.random.default_rng(0)
    for n_x, n_y in ((3, 3), (5, 2), (4, 7)):
        x, y = rng.integers(0, 4, (n_x, 3)).astype(float), rng.integers(0, 4, (n_y, 3)).astype(float)  # ties
        assert stats.iqm(x) == pytest.approx(metrics.aggregate_iqm(x))
        assert stats.probability_of_improvement(x, y) == pytest.approx(
            metrics.probability_of_improvement(x, y)
        )
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first = stats.compare([1.0, 5.0, 3.0, 8.0], [2.0, 4.0, 2.5])
    assert np.array_equal(np.random.get_state()[1], before)  # the caller's global generator is untouched
    assert stats.compare([1.0, 5.0, 3.0, 8.0], [2.0, 4.0, 2.5]) == first
    assert stats.iqm_interval([[1.0], [2.0], [3.0], [4.0]]) == stats.iqm_interval(
        [[1.0], [2.0], [3.0], [4.0]]
    )


def test_a_verdict_carries_the_rank_test_that_says_how_much_a_few_seeds_can_show():
    # Seeds that do not overlap: the bootstrap interval is [1, 1] at any count, the exact rank test is not.
    assert stats.compare([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])["ci"] == [1.0, 1.0]
    assert stats.rank_test_p([4.0, 5.0, 6.0], [1.0, 2.0, 3.0]) == pytest.approx(2 / 20)  # 3 vs 3: the best
    assert stats.rank_test_p(range(5, 10), range(5)) == pytest.approx(2 / 252)
    assert stats.compare([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])["rank_p"] == 0.1
    assert stats.compare([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])["rank_p"] == 1.0  # ties
    # Ties are counted exactly (midranks over every split), not by a normal approximation.
    assert stats.rank_test_p([0.0, 899.0, 903.0], [0.0, 0.0, 0.0]) == pytest.approx(0.4)
    assert stats.compare([1.0], [1.0, 2.0, 3.0])["rank_p"] is None


def test_mixed_hardware_is_counted_per_machine_and_named_per_seed(tiny_suite):
    gpu = {**_record("lambda=0", 0, 5.0, [5.0]), "hardware": {"cpu": "y", "cores": 16, "gpu": "H200"},
           "concurrent_runs": 5}  # fmt: skip
    cpu = [_record("gsb_mdpo", 0, 10.0, [10.0]), _record("gsb_mdpo", 1, 11.0, [11.0])]
    summary = summarize("tiny", [*cpu, gpu])
    table = report.markdown(summary)
    assert (
        "Hardware: x, 2 cores, GPU none (2 runs); y, 16 cores, GPU H200 (1 run); each seed's machine" in table
    )
    assert "(1 of 3 runs shared the machine with another run)" in table
    entries = summary["tasks"]["InvertedPendulum-v5"]
    assert entries["gsb_mdpo"]["hardware_per_seed"] == ["x, 2 cores, GPU none"] * 2
    assert entries["lambda=0"]["hardware_per_seed"] == ["y, 16 cores, GPU H200"]


def test_a_generated_block_is_replaced_and_a_text_without_it_left_as_it_is():
    readme = "a\n<!-- headline:start -->\nold\n<!-- headline:end -->\nb\n"
    assert aggregate.with_block(readme, "headline", "new\n") == (
        "a\n<!-- headline:start -->\nnew\n<!-- headline:end -->\nb\n"
    )
    assert aggregate.with_block("no block here\n", "headline", "new\n") == "no block here\n"


def test_the_headline_gives_the_budgets_of_the_tasks_that_ran_not_of_the_whole_suite():
    def suite(tasks):
        columns = {"gsb_mdpo": {"iqm": 0.9, "ci": [0.8, 1.0]}}
        budgets = {"A": 50_000, "B": 1_000_000, "C": 5_000_000}
        return {
            "suite": "s",
            "aggregate_iqm": {"tasks": tasks, "columns": columns},
            "budget_by_task": budgets,
        }

    assert "| 2 tasks, 50,000 to 1,000,000 env steps |" in aggregate.headline({"s": suite(["A", "B"])})
    assert "| 1 task, 5,000,000 env steps |" in aggregate.headline({"s": suite(["C"])})


def test_the_cost_table_gives_a_suite_with_budgets_by_task_their_range_not_the_default():
    def row(suite):
        rows = [{"suite": suite, "planned": 1, "runs": 0, "hours": 0.0, "hardware": []}]
        return report.TEMPLATES.get_template("cost.md.jinja").render(rows=rows)

    by_task = SUITES["gym-continuous"]
    assert "50,000 to 5,000,000 env steps by task" in row(by_task)
    one = dataclasses.replace(by_task, task_steps=(("Pendulum-v1", 1_000_000),))
    assert "1,000,000 env steps each" in row(dataclasses.replace(one, total_steps=1_000_000))
    assert "100,000 to 1,000,000 env steps by task" in row(dataclasses.replace(one, total_steps=100_000))


def test_the_cost_table_counts_a_run_copied_from_another_suite_where_it_ran_not_again(tiny_suite, tmp_path):
    ran = _record("lambda=0", 0, 5.0, [5.0], cost=1800.0)
    copied = {**_record("gsb_mdpo", 0, 7.0, [7.0], cost=3600.0), "reused_from": "other"}
    (tmp_path / "tiny.runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (ran, copied)))
    (row,) = [r for r in aggregate.cost_rows(tmp_path) if r["suite"].name == "tiny"]
    assert row["runs"] == 2 and row["hours"] == 0.5


def test_check_flags_missing_summaries_and_pages(tiny_suite, tmp_path, monkeypatch):
    monkeypatch.setattr(stats, "BOOTSTRAP_REPS", 50)  # this test is about files; regenerations follow
    records = _runs("gsb_mdpo", [9.0, 10.0, 11.0]) + _runs("lambda=0", [6.0, 7.0, 8.0])
    (tmp_path / "tiny.runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    readme = tmp_path / "README.md"
    readme.write_text("x\n<!-- headline:start -->\nold\n<!-- headline:end -->\n")
    stale = aggregate.stale_files(tmp_path, readme)
    assert {str(tmp_path / name) for name in ("tiny.json", "tiny.md", "tiny.png")} <= set(stale)
    assert str(tmp_path / "claims.md") not in stale  # the claims are the lab's (tests/lab/test_aggregate.py)
    assert str(readme) in stale
    aggregate.write_suites(None, tmp_path, readme)
    assert "old" in readme.read_text()  # only the committed results folder writes the real README
    assert aggregate.stale_files(tmp_path, readme) == [str(readme)]
    readme.write_text(
        aggregate.with_block(
            readme.read_text(), "headline", aggregate.headline(aggregate.summaries(tmp_path))
        )
    )
    assert aggregate.stale_files(tmp_path, readme) == []
    assert "| suite | budget | aggregate IQM" in readme.read_text()
    assert (tmp_path / "tiny.md").read_text().startswith("# tiny\n") and "![Learning curves of tiny" in (
        tmp_path / "tiny.md"
    ).read_text()


def test_unknown_suite_to_regenerate_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        aggregate.main(["--suite", "nope"])
    assert exit_info.value.code == 2 and "no ledger for nope" in capsys.readouterr().err
    with pytest.raises(
        ValueError, match="nope.runs.jsonl: trainers/benchmark/suites.py defines no suite 'nope'"
    ):
        summarize("nope", [])


def test_committed_summaries_match_committed_ledgers():
    assert aggregate.stale_files() == [], "run `python -m trainers.benchmark.aggregate` and commit the result"


def test_suites_are_consistent():
    for suite in SUITES.values():
        assert len(set(suite.variant_names)) == len(suite.variants)
        assert suite.kind in ("benchmark", "ablation", "compute", "finetune", "confirmatory")
        assert {v.baseline for v in suite.variants} <= set(suite.variant_names)  # every control is a column
    assert SUITES["paper-playground"].total_steps == 60_000_000 and len(SUITES["paper-playground"].tasks) == 8
    assert SUITES["paper-gym"].total_steps == 40_000_000 and len(SUITES["paper-gym"].seeds) == 5
    assert np.all([s.startswith("--") for s in SUITES["cpu-gym"].args[::2]])


def test_published_results_do_not_make_the_next_run_dirty(tmp_path):
    # `--publish` rewrites the results, the cards' tables and the README after every run of a suite; only a
    # change to code may mark the runs after it as dirty.
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)  # fmt: skip

    for name in ("README.md", "hub_cards/results/suite.md", "trainers/algo.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("one\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "start")
    assert git_commit(tmp_path)["dirty"] is False
    (tmp_path / "README.md").write_text("two\n")
    (tmp_path / "hub_cards/results/suite.md").write_text("two\n")
    assert git_commit(tmp_path)["dirty"] is False
    (tmp_path / "trainers/algo.py").write_text("two\n")
    assert git_commit(tmp_path)["dirty"] is True
