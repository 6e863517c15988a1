"""The runner's words with Slurm: the `--slurm.*` options, one job array submitted through submitit, and the
state of submitted jobs from `squeue` (and `sacct`, where the cluster keeps accounting).

submitit is imported only when a suite is submitted, so the local runner never needs it. Job states come from
`squeue -t all`, which keeps ended jobs for the cluster's `MinJobAge` (5 minutes by default); after that only
`sacct` knows them, and a cluster without accounting forgets them: such a job is reported as ended with its
state unknown.
"""

import contextlib
import dataclasses
import io
import json
import math
import os
import re
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from gsbpolicy._cli import CommandError, one_line, refuse_control_characters, require_extra
from gsbpolicy._files import atomic_write_text, read_json

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
SLURM_NAME = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*")
"""A partition, account or QOS name as Slurm writes them (a comma-separated list where Slurm takes one); a
space, quote or `$` in one is a typo, or a shell line smuggled into the job script."""
NAMED_OPTIONS = ("account", "qos")
"""The `--slurm.extra` keys whose value is such a name."""
_KEYS_WE_SET = {"array", "output", "error", "signal", "open-mode", "job-name", "wckey", "time", "partition",
                "gpus-per-node", "cpus-per-task"}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class SlurmArgs:
    """How `--executor slurm` submits a suite: one job array, one array task per run (or per seed group)."""

    partition: str | None = None
    """Partition (queue) the jobs go to; default: the cluster's default partition."""
    gpus_per_job: int = 1
    """GPUs each job asks for (sbatch --gpus-per-node); 0 on a cluster or partition without GPUs. A trainer
    uses every GPU it is given."""
    cpus_per_job: int = 4
    """CPU cores each job asks for (sbatch --cpus-per-task). Gymnasium tasks step their envs on the CPU."""
    time: str = "04:00:00"
    """Time limit of each job, HH:MM:SS or D-HH:MM:SS (Slurm counts whole minutes). A job stopped at its
    limit is requeued and continues from its last checkpoint, so it need not fit a whole run."""
    array_parallelism: int = 256
    """Most jobs of the array running at once (sbatch --array=0-N%P)."""
    extra: tuple[str, ...] = ()
    """More sbatch options, each KEY=VALUE with the option's long name without dashes (e.g. account=lab
    qos=high mem=32G constraint=a100)."""
    signal_delay_s: int = 120
    """Seconds before the time limit at which Slurm signals a job (USR2) to stop its trainer and requeue
    itself. Slurm checks limits every 30 s, so the signal comes up to 30 s later than this: keep it above 60."""
    max_requeues: int = 10
    """Requeues at the time limit one job may take before it is reported failed (submitit's
    max_num_timeout); preemptions do not count."""
    poll_s: float = 30.0
    """Seconds between two looks at the queue while --wait waits."""

    def check(self) -> None:
        """Raise a usage `CommandError` for an option Slurm would refuse or misread."""
        for name, value, least in (
            ("gpus-per-job", self.gpus_per_job, 0),
            ("cpus-per-job", self.cpus_per_job, 1),
            ("array-parallelism", self.array_parallelism, 1),
            ("signal-delay-s", self.signal_delay_s, 0),
            ("max-requeues", self.max_requeues, 0),
        ):
            if value < least:
                raise CommandError(f"--slurm.{name} must be at least {least}, got {value}")
        if not (math.isfinite(self.poll_s) and self.poll_s > 0):
            raise CommandError(f"--slurm.poll-s must be a finite number of seconds > 0, got {self.poll_s}")
        if self.partition is not None:
            check_slurm_name(self.partition, "--slurm.partition")
        refuse_control_characters(self.time, "--slurm.time")
        limit_s = time_limit_minutes(self.time) * 60
        if self.signal_delay_s >= limit_s:
            raise CommandError(
                f"--slurm.signal-delay-s {self.signal_delay_s} must be below the time limit --slurm.time "
                f"{self.time} ({limit_s} s): the job would be signalled to stop before it starts"
            )
        sbatch_options(self.extra)


def check_slurm_name(value: str, option: str) -> None:
    """Raise a usage `CommandError` unless `value` is a partition, account or QOS name in Slurm's characters."""
    refuse_control_characters(value, option)
    if not SLURM_NAME.fullmatch(value):
        raise CommandError(
            f"{option} must be a Slurm name (letters, digits, '_', '-', '.', comma-separated), got {value!r}"
        )


def time_limit_minutes(text: str) -> int:
    """Minutes of a HH:MM:SS or D-HH:MM:SS time limit, rounded up as Slurm rounds it."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+):([0-5]\d):([0-5]\d)", text.strip())
    if match is None:
        raise CommandError(f"--slurm.time must be HH:MM:SS or D-HH:MM:SS, got {text!r}")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = math.ceil((((days * 24 + hours) * 60 + minutes) * 60 + seconds) / 60)
    if total < 1:
        raise CommandError(f"--slurm.time must be at least 00:01:00, got {text!r}")
    return total


def sbatch_options(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--slurm.extra` KEY=VALUE pairs as sbatch options; the options the runner sets itself are refused."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not re.fullmatch(r"[a-z][a-z0-9_-]*", key) or not value:
            raise CommandError(f"--slurm.extra takes KEY=VALUE pairs (e.g. account=lab), got {pair!r}")
        if key.replace("_", "-") in _KEYS_WE_SET:
            raise CommandError(f"--slurm.extra {key}: the runner sets it (use its --slurm.* option, if any)")
        refuse_control_characters(value, f"--slurm.extra {key}")
        if key in NAMED_OPTIONS:
            check_slurm_name(value, f"--slurm.extra {key}")
        options[key] = value
    return options


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
        ["squeue", "-h", "-t", "all", "-r", "-j", ",".join(sorted(arrays)), "-O", "JobArrayID:|,State:|,exit_code:"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
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
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", ",".join(sorted(job_ids)), "-o", "JobID,State,ExitCode"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    if out.returncode != 0:  # a cluster without accounting ("Slurm accounting storage is disabled")
        return {}
    states = {}
    for line in out.stdout.splitlines():
        job_id, state, code = line.split("|")
        exit_code, _, signal = code.partition(":")
        exit = f"signal {signal}" if signal not in ("", "0") else f"exit code {exit_code}"
        states[job_id] = JobState(state.split()[0], exit)  # "CANCELLED by 1000"
    return states
