"""The runner's words with Slurm: one job array submitted through submitit (its options: `slurm_options`), and
the state of submitted jobs from `squeue` (and `sacct`, where the cluster keeps accounting).

submitit is imported only when a suite is submitted, so the local runner never needs it. Job states come from
`squeue -t all`, which keeps ended jobs for the cluster's `MinJobAge` (5 minutes by default); after that only
`sacct` knows them, and a cluster without accounting forgets them: such a job is reported as ended with its
state unknown.
"""

import contextlib
import dataclasses
import io
import json
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from gsbpolicy._cli import CommandError, one_line, require_extra
from gsbpolicy._files import atomic_write_text, read_json

from .slurm_options import SlurmArgs, sbatch_options, time_limit_minutes

JOB_FILE = "slurm_job.json"
"""Written by the runner into each run folder it submits: the Slurm job that trains the run, and its log."""
RECORD_FILE = "bench_record.json"
"""Written by a job into its run folder when the run ends: the run's ledger line, which the runner merges."""

PENDING = {
    "PENDING",
    "CONFIGURING",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESV_DEL_HOLD",
    "SPECIAL_EXIT",
}
RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "RESIZING", "STOPPED"}
"""Slurm states of a job that is not over (a requeued job passes through REQUEUED back to PENDING)."""


# ---------------------------------------------------------------------------------------------- submission
def submit(jobs: list, folder: Path, name: str, slurm: SlurmArgs) -> list[str]:
    """Submit the callables `jobs` as one Slurm job array (a plain job if there is one); their job ids.

    submitit pickles each callable into `folder`, which every node must see, with the job's logs beside it."""
    require_extra("benchmark", ["submitit"], "--executor slurm")
    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise CommandError(
            "--executor slurm needs Slurm's sbatch and srun on PATH: run it on a machine of the cluster"
        )
    submitit = _import_submitit()
    from submitit.core.utils import FailedJobError, FailedSubmissionError

    executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=slurm.max_requeues)
    executor.update_parameters(
        job_name=name,
        time=time_limit_minutes(slurm.time),
        cpus_per_task=slurm.cpus_per_job,
        gpus_per_node=slurm.gpus_per_job or None,
        partition=slurm.partition,
        array_parallelism=slurm.array_parallelism,
        signal_delay_s=slurm.signal_delay_s,
        additional_parameters=sbatch_options(slurm.extra) or None,
    )
    # submitit prints sbatch's complaint before raising it: it is said once, in the error line.
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            with executor.batch():
                submitted = [executor.submit(job) for job in jobs]
        except FailedJobError as err:
            raise CommandError(f"sbatch refused the jobs: {one_line(err)}", code=1) from None
        except FailedSubmissionError as err:  # sbatch exited 0 but its answer names no job to follow
            raise CommandError(
                f"sbatch answered without a job id ({one_line(str(err).splitlines()[0])}); the jobs may have been "
                "submitted: look with squeue before submitting again",
                code=1,
            ) from None
    return [job.job_id for job in submitted]


def _import_submitit():
    """submitit, imported without letting it configure this process's logging: on import it calls
    logging.config.dictConfig, which closes the program's own handlers and ties submitit's to the sys.stdout and
    sys.stderr of that moment. The variable is put back before anything is submitted: the jobs inherit the
    environment, and their logs should keep submitit's lines."""
    previous = os.environ.get("SUBMITIT_LOG_LEVEL")
    os.environ["SUBMITIT_LOG_LEVEL"] = "NOCONFIG"
    try:
        import submitit
    finally:
        if previous is None:
            del os.environ["SUBMITIT_LOG_LEVEL"]
        else:
            os.environ["SUBMITIT_LOG_LEVEL"] = previous
    return submitit


def log_path(folder: Path, job_id: str) -> Path:
    """The job's stderr log (submitit's name for it; its stdout log is beside it, `.out`)."""
    from submitit.core.utils import JobPaths

    return JobPaths(folder, job_id=job_id, task_id=0).stderr


def write_job_file(run_folder: Path, job_id: str, log: Path) -> None:
    run_folder.mkdir(parents=True, exist_ok=True)
    record = {"job_id": job_id, "log": str(log), "submitted": datetime.now().isoformat(timespec="seconds")}
    atomic_write_text(run_folder / JOB_FILE, json.dumps(record))


def read_job_file(run_folder: Path) -> dict | None:
    path = run_folder / JOB_FILE
    return read_json(path) if path.is_file() else None


# ---------------------------------------------------------------------------------------------- states
@dataclasses.dataclass(frozen=True)
class JobState:
    state: str
    """Slurm's word (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT...); UNKNOWN once forgotten."""
    exit: str = ""
    """How the job's batch script ended ("exit code 1", "signal 9"), where Slurm says."""

    @property
    def live(self) -> bool:
        return self.state in PENDING or self.state in RUNNING


def job_states(job_ids: set[str]) -> dict[str, JobState]:
    """The state of each job id (an array task is `<array>_<index>`): from squeue, else sacct, else UNKNOWN."""
    if not job_ids:
        return {}
    if shutil.which("squeue") is None:
        raise CommandError("Slurm's squeue is not on PATH: run this on a machine of the cluster")
    states = _squeue({job_id.split("_")[0] for job_id in job_ids})
    missing = job_ids - states.keys()
    if missing:
        states |= _sacct(missing)
    return {job_id: states.get(job_id, JobState("UNKNOWN")) for job_id in job_ids}


def _squeue(arrays: set[str]) -> dict[str, JobState]:
    out = subprocess.run(
        [
            "squeue",
            "-h",
            "-t",
            "all",
            "-r",
            "-j",
            ",".join(sorted(arrays)),
            "-O",
            "JobArrayID:|,State:|,exit_code:",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0:
        if "Invalid job id" in out.stderr:  # every one of them has left squeue's memory
            return {}
        raise CommandError(f"squeue failed: {one_line(out.stderr) or f'exit code {out.returncode}'}", code=1)
    states = {}
    for line in out.stdout.splitlines():
        job_id, state, status = (field.strip() for field in line.split("|"))
        states[job_id] = JobState(state, _wait_status(int(status)) if status.isdigit() else "")
    return states


def _wait_status(status: int) -> str:
    """squeue's exit_code is the batch script's wait status: exit code in the high byte, signal in the low."""
    return f"signal {status & 0x7F}" if status & 0x7F else f"exit code {status >> 8}"


def _sacct(job_ids: set[str]) -> dict[str, JobState]:
    if shutil.which("sacct") is None:
        return {}
    out = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", ",".join(sorted(job_ids)), "-o", "JobID,State,ExitCode"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0:  # a cluster without accounting ("Slurm accounting storage is disabled")
        return {}
    states = {}
    for line in out.stdout.splitlines():
        job_id, state, code = line.split("|")
        exit_code, _, signal = code.partition(":")
        exit = f"signal {signal}" if signal not in ("", "0") else f"exit code {exit_code}"
        states[job_id] = JobState(state.split()[0], exit)  # "CANCELLED by 1000"
    return states
