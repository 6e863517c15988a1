"""A suite on Slurm (`python -m trainers.benchmark --executor slurm`), the runner's side: the runs to do go out
as one job array (`slurm.submit`), one array task per run or seed group (`slurm_job.TrainerJob`), and each
run folder notes its job (`slurm.JOB_FILE`). Jobs leave each finished run's ledger line in its folder
(`slurm.RECORD_FILE`); every invocation of the runner merges those into the ledger first
(`merge_job_records`), so the ledger and the summaries catch up whenever the runner looks: `--wait` merges
as jobs end, `--status` shows each run's state from the ledger, its folder and Slurm (`run_states`).
"""

import dataclasses
import sys
import time
from pathlib import Path

from gsbpolicy._files import read_json

from .._core.rundir import holds_started_run
from . import runner, slurm
from .suites import Suite, Variant


def _folder(args, suite: Suite, run: tuple[str, Variant, int]) -> Path:
    task, variant, seed = run
    return runner.run_dir(args, suite, task, variant, seed)


def merge_job_records(args, suite: Suite, runs: list[tuple[str, Variant, int]], ledger: Path) -> list[dict]:
    """Add to the ledger the lines that jobs left in the folders of `runs` (those not in it yet); returns
    them. Exactly once per run however many runners merge at the same time (`runner.append_ledger`)."""
    held = {runner.run_key(r) for r in runner.read_ledger(ledger)}
    found = []
    for run in runs:
        path = _folder(args, suite, run) / slurm.RECORD_FILE
        if (run[0], run[1].name, run[2]) not in held and path.is_file():
            found.append(read_json(path))
    added = runner.append_ledger(ledger, *found)
    for record in added:
        runner.report_record(record)
    return added


@dataclasses.dataclass(frozen=True)
class RunState:
    state: str
    """done, running, pending, failed (its last Slurm job ended without a result), interrupted (started
    outside Slurm, not finished) or not started."""
    detail: str = ""

    @property
    def live(self) -> bool:
        return self.state in ("running", "pending")


def run_states(
    args, suite: Suite, runs: list[tuple[str, Variant, int]], ledger: Path
) -> dict[tuple, RunState]:
    """Each run's state, keyed by (task, variant name, seed)."""
    done = {runner.run_key(r): r for r in runner.read_ledger(ledger)}
    jobs = {}
    for run in runs:
        folder = _folder(args, suite, run)
        if (run[0], run[1].name, run[2]) not in done and not (folder / slurm.RECORD_FILE).is_file():
            jobs[run] = slurm.read_job_file(folder)
    slurm_states = slurm.job_states({job["job_id"] for job in jobs.values() if job})
    states = {}
    for run in runs:
        key, folder, job = (run[0], run[1].name, run[2]), _folder(args, suite, run), jobs.get(run)
        if run not in jobs:
            record = done.get(key)
            states[key] = RunState("done", f"final return {record['final']['mean']:.1f}" if record else "")
        elif job is not None:
            states[key] = _job_state(job, slurm_states[job["job_id"]])
        elif holds_started_run(folder):
            states[key] = RunState("interrupted", f"{folder} holds a run to continue with --resume")
        else:
            states[key] = RunState("not started")
    return states


def _job_state(job: dict, state: slurm.JobState) -> RunState:
    name = f"Slurm job {job['job_id']}"
    if state.state in slurm.PENDING:
        return RunState("pending", name)
    if state.state in slurm.RUNNING:
        return RunState("running", name)
    how = "its state no longer known to Slurm" if state.state == "UNKNOWN" else state.state
    return RunState(
        "failed", f"{name} ended {how}{f', {state.exit}' if state.exit else ''}; log {job['log']}"
    )


def print_status(args, suite: Suite, runs: list, ledger: Path) -> int:
    states = run_states(args, suite, runs, ledger)
    counts = {}
    for state in states.values():
        counts[state.state] = counts.get(state.state, 0) + 1
    print(
        f"suite {suite.name}: {len(states)} runs: " + ", ".join(f"{n} {state}" for state, n in counts.items())
    )
    for (task, variant, seed), state in states.items():
        print(
            f"  {task} {variant} seed {seed}: {state.state}" + (f" ({state.detail})" if state.detail else "")
        )
    return 0


def skip_queued(args, suite: Suite, runs: list[tuple[str, Variant, int]]) -> list[tuple[str, Variant, int]]:
    """`runs` less those a live Slurm job already trains (submitting them again would race it)."""
    jobs = {run: slurm.read_job_file(_folder(args, suite, run)) for run in runs}
    states = slurm.job_states({job["job_id"] for job in jobs.values() if job})
    todo = []
    for run in runs:
        job = jobs[run]
        if job is not None and states[job["job_id"]].live:
            print(
                f"{run[0]} {run[1].name} seed {run[2]}: already in Slurm job {job['job_id']} "
                f"({states[job['job_id']].state})"
            )
        else:
            todo.append(run)
    return todo


def submit_runs(args, suite: Suite, commands: list[tuple], ledger: Path) -> None:
    """Record the runs that finished before their ledger line was written, and submit the others as one job
    array; each of their folders notes its job."""
    from .slurm_job import TrainerJob

    todo = []
    for task, variant, seeds, folders, cmd in runner.jobs_of(args, suite, commands):
        if cmd is None:  # finished, not recorded: as the local executor, from its folder
            records, _ = runner.job_outcome(suite, task, variant, seeds, folders, None, concurrent_runs=1)
            for record in runner.append_ledger(ledger, *records):
                runner.report_record(record)
        else:
            todo.append(TrainerJob(suite, task, variant, tuple(seeds), tuple(folders), tuple(cmd),
                                   args.sample_interval))  # fmt: skip
    if not todo:
        return
    logs = args.runs_dir / suite.name / "slurm"
    job_ids = slurm.submit(todo, logs, f"gsbpolicy-{suite.name}", args.slurm)
    for job, job_id in zip(todo, job_ids, strict=True):
        for folder in job.folders:
            slurm.write_job_file(folder, job_id, slurm.log_path(logs, job_id))
    print(
        f"submitted {len(todo)} jobs to Slurm as job {job_ids[0].split('_')[0]} (logs in {logs}); "
        "--status shows where each run is, --wait waits for them",
        flush=True,
    )


def wait_for_jobs(args, suite: Suite, runs: list, ledger: Path, aggregate) -> list[tuple]:
    """Merge each run's line as its job ends, `aggregate()` after each merge, until no job of `runs` is
    pending or running; returns the runs whose job failed, each reported on stderr with its job and log."""
    while True:
        if merge_job_records(args, suite, runs, ledger):
            aggregate()
        states = run_states(args, suite, runs, ledger)
        if not any(state.live for state in states.values()):
            break
        time.sleep(args.slurm.poll_s)
    if merge_job_records(args, suite, runs, ledger):  # a line left after the last merge, by a job now ended
        aggregate()
    failed = [(key, state) for key, state in states.items() if state.state == "failed"]
    for (task, variant, seed), state in failed:
        print(f"FAILED {task} {variant} seed {seed}: {state.detail}", file=sys.stderr, flush=True)
    return [key for key, _ in failed]
