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

from gsbpolicy._cli import CommandError, refuse_control_characters
from gsbpolicy._files import read_json

from .._core.rundir import holds_started_run
from .._core.runlog import read_jsonl
from . import slurm
from .executor import Executor
from .ledger import append_ledger, run_key
from .plan import Run, RunPlan
from .records import job_outcome, refresh_summaries, report_record
from .suites import Suite


class SlurmExecutor(Executor):
    """Submits the plan's jobs as one Slurm job array (`--slurm.*`), and with --wait merges their runs' lines
    as the jobs end."""

    interrupted = "the submitted Slurm jobs go on (--status shows them, --wait waits again)"

    def check(self) -> None:
        """Refuse what Slurm would refuse or misread, and --jobs (Slurm decides how many run at once)."""
        self.args.slurm.check()
        # The jobs' log folder, under --runs-dir, is written into the job script (#SBATCH --output, srun).
        refuse_control_characters(str(self.args.runs_dir), "--runs-dir")
        if self.args.jobs != 1:
            raise CommandError(
                "--jobs is the local executor's; on Slurm, --slurm.array-parallelism jobs run at once"
            )

    def still_to_do(self, runs: list[Run]) -> list[Run]:
        """`runs` less those a live Slurm job already trains (submitting them again would race it)."""
        jobs = {run: slurm.read_job_file(run.folder) for run in runs}
        states = slurm.job_states({job["job_id"] for job in jobs.values() if job})
        todo = []
        for run in runs:
            job = jobs[run]
            if job is not None and states[job["job_id"]].live:
                print(
                    f"{run.task} {run.variant.name} seed {run.seed}: already in Slurm job {job['job_id']} "
                    f"({states[job['job_id']].state})"
                )
            else:
                todo.append(run)
        return todo

    def describe(self, plan: RunPlan) -> None:
        """How many jobs the array would hold."""
        print(f"would submit {sum(job.command is not None for job in plan.jobs)} jobs to Slurm as one array")

    def run(self, plan: RunPlan) -> list[tuple[str, str, int]] | None:
        """Submit the jobs; with --wait, wait for them and return the keys of the runs whose job failed."""
        self._submit(plan)
        if not self.args.wait:
            return None
        return wait_for_jobs(plan, self.args.slurm.poll_s)

    def _submit(self, plan: RunPlan) -> None:
        """Record the runs that finished before their ledger line was written, and submit the others as one
        job array; each of their folders notes its job."""
        from .slurm_job import TrainerJob

        todo = []
        for job in plan.jobs:
            if job.command is None:  # finished, not recorded: as the local executor, from its folder
                records, _ = job_outcome(plan.suite, job, None, concurrent_runs=1)
                for record in append_ledger(plan.ledger, *records):
                    report_record(record)
            else:
                todo.append(TrainerJob(plan.suite, job, self.args.sample_interval))
        if not todo:
            return
        logs = self.args.runs_dir / plan.suite.name / "slurm"
        job_ids = slurm.submit(todo, logs, f"gsbpolicy-{plan.suite.name}", self.args.slurm)
        for submitted, job_id in zip(todo, job_ids, strict=True):
            for folder in submitted.job.folders:
                slurm.write_job_file(folder, job_id, slurm.log_path(logs, job_id))
        print(
            f"submitted {len(todo)} jobs to Slurm as job {job_ids[0].split('_')[0]} (logs in {logs}); "
            "--status shows where each run is, --wait waits for them",
            flush=True,
        )


def merge_job_records(runs: list[Run] | tuple[Run, ...], ledger: Path) -> list[dict]:
    """Add to the ledger the lines that jobs left in the folders of `runs` (those not in it yet); returns
    them. Exactly once per run however many runners merge at the same time (`ledger.append_ledger`)."""
    held = {run_key(r) for r in read_jsonl(ledger)}
    found = []
    for run in runs:
        path = run.folder / slurm.RECORD_FILE
        if run.key not in held and path.is_file():
            found.append(read_json(path))
    added = append_ledger(ledger, *found)
    for record in added:
        report_record(record)
    return added


@dataclasses.dataclass(frozen=True)
class RunState:
    """Where a run of the suite is, as --status shows it."""

    state: str
    """done, running, pending, failed (its last Slurm job ended without a result), interrupted (started
    outside Slurm, not finished) or not started."""
    detail: str = ""
    """What more there is to say: a final return, a job and its log, the folder to resume."""

    @property
    def live(self) -> bool:
        """A job trains or will train the run."""
        return self.state in ("running", "pending")


def run_states(runs: list[Run] | tuple[Run, ...], ledger: Path) -> dict[tuple, RunState]:
    """Each run's state, keyed by (task, variant name, seed)."""
    done = {run_key(r): r for r in read_jsonl(ledger)}
    jobs = {}
    for run in runs:
        if run.key not in done and not (run.folder / slurm.RECORD_FILE).is_file():
            jobs[run] = slurm.read_job_file(run.folder)
    slurm_states = slurm.job_states({job["job_id"] for job in jobs.values() if job})
    states = {}
    for run in runs:
        job = jobs.get(run)
        if run not in jobs:
            record = done.get(run.key)
            states[run.key] = RunState(
                "done", f"final return {record['final']['mean']:.1f}" if record else ""
            )
        elif job is not None:
            states[run.key] = _job_state(job, slurm_states[job["job_id"]])
        elif holds_started_run(run.folder):
            states[run.key] = RunState("interrupted", f"{run.folder} holds a run to continue with --resume")
        else:
            states[run.key] = RunState("not started")
    return states


def _job_state(job: dict, state: slurm.JobState) -> RunState:
    """A run's state from the state of the last Slurm job that trained it."""
    name = f"Slurm job {job['job_id']}"
    if state.state in slurm.PENDING:
        return RunState("pending", name)
    if state.state in slurm.RUNNING:
        return RunState("running", name)
    how = "its state no longer known to Slurm" if state.state == "UNKNOWN" else state.state
    return RunState(
        "failed", f"{name} ended {how}{f', {state.exit}' if state.exit else ''}; log {job['log']}"
    )


def print_status(suite: Suite, runs: list[Run], ledger: Path) -> int:
    """--status: the count of runs in each state, then each run's state."""
    states = run_states(runs, ledger)
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


def wait_for_jobs(plan: RunPlan, poll_s: float) -> list[tuple]:
    """Merge each run's line as its job ends, regenerating the summaries after each merge, until no job of the
    plan's runs is pending or running; returns the runs whose job failed, each reported on stderr with its job
    and log."""
    while True:
        if merge_job_records(plan.runs, plan.ledger):
            refresh_summaries(plan.suite.name, plan.results_dir)
        states = run_states(plan.runs, plan.ledger)
        if not any(state.live for state in states.values()):
            break
        time.sleep(poll_s)
    if merge_job_records(plan.runs, plan.ledger):  # a line left after the last merge, by a job now ended
        refresh_summaries(plan.suite.name, plan.results_dir)
    failed = [(key, state) for key, state in states.items() if state.state == "failed"]
    for (task, variant, seed), state in failed:
        print(f"FAILED {task} {variant} seed {seed}: {state.detail}", file=sys.stderr, flush=True)
    return [key for key, _ in failed]
