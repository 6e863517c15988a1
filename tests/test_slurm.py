"""The benchmark runner on a real Slurm (`--executor slurm`): a one-node cluster on 127.0.0.1 started once for
this file (tests/slurm_cluster.py), tiny suites submitted to it through submitit, and what they leave compared
with the same suites run by the local executor. Without root or the Slurm packages these tests skip, saying
which; `.ci/run` installs the packages and sets GSBPOLICY_REQUIRE_SLURM, which turns the skip into a failure.

The long suite's task sleeps in every step when `GSBPOLICY_TEST_STEP_SLEEP` is set (tests/slow_env.py): that
makes a run last past a scancel or a time limit without loading the CPU, and its numbers are those of the same
run done without sleeping, which is the uninterrupted reference.
"""

import concurrent.futures
import dataclasses
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from gsbpolicy._cli import CommandError
from tests.slow_env import SLEEP_VAR
from tests.slurm_cluster import SlurmCluster, unavailable
from trainers._core.runlog import read_jsonl
from trainers.benchmark import plan, runner, slurm
from trainers.benchmark.arguments import BenchArgs, results_folder
from trainers.benchmark.ledger import ledger_path, run_key
from trainers.benchmark.slurm_options import SlurmArgs
from trainers.benchmark.suites import SUITES, Suite, Variant

GEOMETRY = ("--rollout.num-envs", "4", "--rollout.unroll-length", "16", "--rollout.num-minibatches", "2",
            "--rollout.epochs", "1", "--rollout.episode-length", "50", "--policy.num-steps", "2", "--policy.width",
            "8", "--policy.depth", "1", "--critic.width", "8", "--critic.depth", "1", "--eval.num-evals", "2",
            "--eval.episodes", "2", "--eval.final-episodes", "2", "--eval.num-envs", "4")  # fmt: skip
SLOW_TASK = "tests.slow_env:SlowPointMass-v0"
TINY = Suite(
    name="slurm-tiny",
    description="test suite: a Playground and a Gymnasium task, two seeds, four iterations each.",
    tasks=("tests.jax_point_mass:PointMass", SLOW_TASK),
    total_steps=256,
    seeds=(0, 1),
    preset="cpu",
    variants=(Variant("gsb_mdpo", "gsb_mdpo"),),
    args=GEOMETRY,
    budget_note="tiny",
    kind="ablation",
)
LONG = Suite(
    name="slurm-long",
    description="test suite: one run of 128 iterations, a checkpoint after each; `broken` is refused by its trainer.",
    tasks=(SLOW_TASK,),
    total_steps=8192,
    seeds=(0,),
    preset="cpu",
    variants=(
        Variant("gsb_mdpo", "gsb_mdpo"),
        Variant("broken", "gsb_mdpo", ("--rollout.num-minibatches", "3")),
    ),
    args=(*GEOMETRY, "--log.checkpoint-every", "1"),
    budget_note="long enough to stop",
    kind="ablation",
)
NOT_RESULTS = ("cost", "hardware", "finished", "concurrent_runs", "slurm")
"""Ledger fields that say where, when and how fast a run trained, not what it computed."""


WHY_NOT = unavailable()
if WHY_NOT is not None and os.environ.get("GSBPOLICY_REQUIRE_SLURM"):
    pytest.fail(WHY_NOT, pytrace=False)
if WHY_NOT is not None:
    pytest.skip(WHY_NOT, allow_module_level=True)  # one line for the whole file


@pytest.fixture(scope="module")
def cluster():
    root = Path(tempfile.mkdtemp(prefix="gsbpolicy-slurm-"))
    cluster = SlurmCluster(root)
    cluster.start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", str(cluster.conf))
        patch.setitem(SUITES, TINY.name, TINY)
        patch.setitem(SUITES, LONG.name, LONG)
        patch.delenv(SLEEP_VAR, raising=False)
        yield cluster
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def reference(cluster, tmp_path_factory) -> Path:
    """The long suite's run done by the local executor, without sleeping: the uninterrupted run."""
    root = tmp_path_factory.mktemp("reference")
    assert runner.run_suite(bench(LONG, root, methods=("gsb_mdpo",))) == 0
    return folder(bench(LONG, root), LONG, "gsb_mdpo")


def bench(suite: Suite, root: Path, **changes) -> BenchArgs:
    return BenchArgs(suite=suite.name, runs_dir=root / "runs", results_dir=root / "results", **changes)


def on_slurm(**changes) -> SlurmArgs:
    """The test node has no GPU and 2 cores; --wait looks every half second."""
    return SlurmArgs(**{"gpus_per_job": 0, "cpus_per_job": 1, "time": "00:10:00", "poll_s": 0.5, **changes})


def folder(args, suite: Suite, variant: str, seed: int = 0, task: str | None = None) -> Path:
    return plan.run_dir(args, suite, task or suite.tasks[0], suite.variant(variant), seed)


def ledger(args) -> list[dict]:
    return read_jsonl(ledger_path(results_folder(args), args.suite))


def results(record: dict) -> dict:
    kept = {k: v for k, v in record.items() if k not in NOT_RESULTS}
    return {**kept, "command": plan.trainer_args(record["command"])}


def metrics(run: Path) -> list[dict]:
    """The run's metrics without the clock's fields."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/")} for line in lines]


def iterations(run: Path) -> int:
    path = run / "metrics.jsonl"
    return path.read_text().count('"type": "train"') if path.exists() else 0


def until(ready, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.2)


def run_within(args, timeout_s: float, cluster: SlurmCluster) -> int:
    """`run_suite(args)`, its jobs cancelled if it has not returned after `timeout_s` (so --wait ends)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(runner.run_suite, args)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            cluster.run("scancel", "--name", f"gsbpolicy-{args.suite}", check=False)
            future.result()
            pytest.fail(f"the suite did not finish on Slurm within {timeout_s} s")


def job_of(run: Path) -> str:
    return json.loads((run / slurm.JOB_FILE).read_text())["job_id"]


def status(args, capsys) -> str:
    capsys.readouterr()
    assert runner.run_suite(dataclasses.replace(args, status=True, wait=False)) == 0
    return capsys.readouterr().out


def test_a_suite_on_slurm_records_what_the_same_suite_records_locally(cluster, tmp_path, capsys):
    # With --group-seeds: the Playground task's two seeds train in one process (one job), the Gymnasium task's
    # one seed a process, locally as on Slurm.
    local = bench(TINY, tmp_path / "local", group_seeds=True)
    assert runner.run_suite(local) == 0
    remote = bench(TINY, tmp_path / "slurm", group_seeds=True, executor="slurm", slurm=on_slurm(), wait=True)
    assert run_within(remote, 600, cluster) == 0
    # Three jobs of one array ended on the node at overlapping times; each run is in the ledger once.
    records = sorted(ledger(remote), key=run_key)
    assert [run_key(r) for r in records] == sorted(run_key(r) for r in ledger(local))
    jobs = [r["slurm"]["job_id"] for r in records]
    assert len(records) == 4 and len(set(jobs)) == 3 and len({job.split("_")[0] for job in jobs}) == 1
    assert [r["seed_group"] is not None for r in records] == [True, True, False, False]
    assert [results(r) for r in records] == [results(r) for r in sorted(ledger(local), key=run_key)]
    assert all(r["cost"]["wall_s"] > 0 and r["concurrent_runs"] == 1 for r in records)
    # The summaries are generated from the ledger: equal but for the cost and hardware they report.
    assert summary(remote) == summary(local)
    assert "slurm-tiny: this checkout's runs beside the committed results" in capsys.readouterr().out
    # Everything is done: a second submission submits nothing and leaves the ledger as it is.
    before = ledger_path(results_folder(remote), TINY.name).read_bytes()
    assert runner.run_suite(dataclasses.replace(remote, wait=False)) == 0
    assert "0 runs to do" in capsys.readouterr().out
    assert ledger_path(results_folder(remote), TINY.name).read_bytes() == before
    assert "4 runs: 4 done" in status(remote, capsys)


def summary(args) -> dict:
    """The suite's summary without wall-clock (the runs' durations and when they started), memory and hardware."""

    def strip(value):
        if isinstance(value, dict):
            return {
                k: strip(v)
                for k, v in value.items()
                if not any(
                    w in k for w in ("wall", "started", "rss", "gpu_mib", "hardware", "cost", "machine")
                )
            }
        return [strip(v) for v in value] if isinstance(value, list) else value

    return strip(json.loads((results_folder(args) / f"{args.suite}.json").read_text()))


def test_a_cancelled_job_resumed_finishes_as_the_uninterrupted_run(
    cluster, reference, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(SLEEP_VAR, "0.005")  # 128 iterations of 64 steps: about a minute
    args = bench(LONG, tmp_path, methods=("gsb_mdpo",), executor="slurm", slurm=on_slurm())
    assert runner.run_suite(args) == 0  # submitted; without --wait the runner returns
    run = folder(args, LONG, "gsb_mdpo")
    job = job_of(run)
    assert f"({'Slurm job ' + job})" in status(args, capsys)  # pending or running
    until(lambda: iterations(run) >= 3, 120, "the job's third iteration")
    cluster.run("scancel", job)
    until(lambda: not slurm.job_states({job})[job].live, 60, "the cancelled job's end")
    assert iterations(run) < 128 and not (run / slurm.RECORD_FILE).exists()
    assert f"failed (Slurm job {job} ended CANCELLED" in status(args, capsys)
    with pytest.raises(CommandError, match="holds an interrupted run; pass --resume"):
        runner.run_suite(args)
    monkeypatch.setenv(SLEEP_VAR, "0")
    assert run_within(dataclasses.replace(args, resume=True, wait=True), 300, cluster) == 0
    assert job_of(run) != job  # submitted again, as a new job
    assert "terminated (SIGTERM)" in (run / "train.log").read_text()  # the first attempt was stopped mid-run
    assert metrics(run) == metrics(reference)
    (record,) = ledger(args)
    uninterrupted = json.loads((reference / "policy" / "results.json").read_text())
    assert record["final"] == {key: uninterrupted[key] for key in record["final"]}


def test_a_job_stopped_at_its_time_limit_is_requeued_and_finishes_as_the_uninterrupted_run(
    cluster, reference, tmp_path, monkeypatch
):
    # At least 70 s of steps, whatever the CPU: past a one-minute limit, whose signal comes 29-59 s into the job
    # (1 s before the limit, rounded down to Slurm's 30 s checks).
    monkeypatch.setenv(SLEEP_VAR, "0.008")
    limited = on_slurm(time="00:01:00", signal_delay_s=1, max_requeues=5)
    args = bench(LONG, tmp_path, methods=("gsb_mdpo",), executor="slurm", slurm=limited, wait=True)
    assert run_within(args, 480, cluster) == 0
    run = folder(args, LONG, "gsb_mdpo")
    (record,) = ledger(args)
    assert record["slurm"]["restarts"] >= 1 and record["slurm"]["job_id"] == job_of(run)
    assert "this job is timed-out" in Path(json.loads((run / slurm.JOB_FILE).read_text())["log"]).read_text()
    assert "terminated (SIGTERM)" in (run / "train.log").read_text()
    assert metrics(run) == metrics(reference)


def test_a_failed_job_is_reported_with_its_state_and_log_and_never_recorded(cluster, tmp_path, capsys):
    args = bench(LONG, tmp_path, methods=("broken",), executor="slurm", slurm=on_slurm(), wait=True)
    assert run_within(args, 180, cluster) == 1
    run = folder(args, LONG, "broken")
    job, log = job_of(run), Path(json.loads((run / slurm.JOB_FILE).read_text())["log"])
    err = capsys.readouterr().err
    assert f"FAILED {SLOW_TASK} broken seed 0: Slurm job {job} ended FAILED, exit code 1; log {log}" in err
    assert "is not divisible by num_minibatches = 3" in log.read_text()  # the trainer's own line, in the log
    assert ledger(args) == [] and not (run / slurm.RECORD_FILE).exists()
    assert f"broken seed 0: failed (Slurm job {job} ended FAILED" in status(args, capsys)


def test_options_sbatch_refuses_are_one_line_and_leave_nothing_behind(cluster, tmp_path, capsys):
    args = bench(LONG, tmp_path, methods=("gsb_mdpo",), executor="slurm", slurm=on_slurm(partition="nosuch"))
    with pytest.raises(CommandError, match="sbatch refused the jobs: .*invalid partition"):
        runner.run_suite(args)
    run = folder(args, LONG, "gsb_mdpo")
    assert not (run / slurm.JOB_FILE).exists() and ledger(args) == []
