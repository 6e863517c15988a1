"""What one Slurm job of a suite runs on its node (`python -m trainers.benchmark --executor slurm`): one run, or
one seed group, exactly as the local executor runs it (`cost.run_trainer`: the same trainer command in the same
run folder, with the same train.log and cost files), then the ledger line of each run that ended, written into
the run's own folder (`RECORD_FILE`). Jobs never write the ledger itself: many end at once on different nodes,
and the runner merges their lines (`slurm_suite.merge_job_records`).

Slurm signals a job (USR2) `--slurm.signal-delay-s` seconds before its time limit, and on preemption where
the cluster says so; submitit then calls `checkpoint`, which stops the trainer with SIGTERM (it ends keeping
its last checkpoint) and hands the same job back to be requeued. Every attempt decides `--resume` from the run
folder, as the runner does, so a requeued attempt continues from that checkpoint.
"""

import dataclasses
import os
import signal
import socket

import psutil

from gsbpolicy._files import atomic_write_text

from .._core.rundir import holds_started_run
from .cost import run_trainer
from .ledger import record_json
from .plan import Job, finished
from .records import job_outcome
from .slurm import RECORD_FILE
from .suites import Suite

STOP_WAIT_S = 60
"""Seconds the trainer gets to end after SIGTERM before it is killed (it saves nothing then: it only unwinds)."""


@dataclasses.dataclass(frozen=True)
class TrainerJob:
    """A run (one seed) or a seed group of a suite, as the runner's local executor would train it. submitit
    requeues a job whose callable has a `checkpoint` method (its `helpers.Checkpointable` adds nothing else);
    submitit is imported only on the node, where it runs the job."""

    suite: Suite
    """The suite the job's runs are of."""
    job: Job
    """Its runs and the trainer command the runner built (`plan.command` or `plan.group_command`)."""
    sample_interval: float
    """Seconds between memory samples (`--sample-interval`)."""

    def __call__(self) -> None:
        """Train the job's runs (unless a requeued attempt finds them done), then leave each ended run's line."""
        error = None
        try:
            if not all(finished(folder) for folder in self.job.folders):  # a requeue may find it done
                # USR2 (submitit's signal) reaches every process of the job: it is for `checkpoint` to act on.
                run_trainer(
                    self.attempt_command(), list(self.job.folders), self.sample_interval, (signal.SIGUSR2,)
                )
        except RuntimeError as err:
            error = err
        records, failed = job_outcome(self.suite, self.job, error, concurrent_runs=1)
        from submitit import JobEnvironment

        provenance = {
            "job_id": JobEnvironment().job_id,
            "node": socket.gethostname(),
            "restarts": int(os.environ.get("SLURM_RESTART_COUNT", 0)),
        }
        for record in records:
            folder = self.job.folders[self.job.seeds.index(record["seed"])]
            atomic_write_text(folder / RECORD_FILE, record_json({**record, "slurm": provenance}))
        if failed:  # the job ends FAILED, and its log keeps the reason
            raise RuntimeError("; ".join(f"seed {seed}: {reason}" for seed, reason in failed))

    def attempt_command(self) -> list[str]:
        """The runner's command, resuming when the run folder holds a started run (`plan.single_jobs`' rule):
        the first attempt starts what the runner saw, a requeued attempt continues its checkpoint."""
        cmd = [arg for arg in self.job.command if arg != "--resume"]
        return [*cmd, "--resume"] if any(holds_started_run(folder) for folder in self.job.folders) else cmd

    def checkpoint(self):
        """Called by submitit on the time-limit (or preemption) signal: stop the trainer, then requeue this job."""
        from submitit.helpers import DelayedSubmission

        trainers = psutil.Process().children()
        for process in trainers:
            process.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(trainers, timeout=STOP_WAIT_S)
        for process in alive:
            process.kill()
        return DelayedSubmission(self)
