"""What one Slurm job of a suite runs on its node (`python -m trainers.benchmark --executor slurm`): one run, or
one seed group, exactly as the local executor runs it (`runner.run_trainer`: the same trainer command in the same
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
from pathlib import Path

import psutil

from gsbpolicy._files import atomic_write_text

from .._core.rundir import holds_started_run
from . import runner
from .slurm import RECORD_FILE
from .suites import Suite, Variant

STOP_WAIT_S = 60
"""Seconds the trainer gets to end after SIGTERM before it is killed (it saves nothing then: it only unwinds)."""


@dataclasses.dataclass(frozen=True)
class TrainerJob:
    """A run (one seed) or a seed group of a suite, as the runner's local executor would train it. submitit
    requeues a job whose callable has a `checkpoint` method (its `helpers.Checkpointable` adds nothing else);
    submitit is imported only on the node, where it runs the job."""

    suite: Suite
    task: str
    variant: Variant
    seeds: tuple[int, ...]
    folders: tuple[Path, ...]
    cmd: tuple[str, ...]
    """The trainer command the runner built (`runner.command` or `runner.group_command`)."""
    sample_interval: float

    def __call__(self) -> None:
        error = None
        try:
            if not all(runner.finished(folder) for folder in self.folders):  # a requeue may find it done
                # USR2 (submitit's signal) reaches every process of the job: it is for `checkpoint` to act on.
                runner.run_trainer(
                    self.attempt_command(), list(self.folders), self.sample_interval, (signal.SIGUSR2,)
                )
        except RuntimeError as err:
            error = err
        records, failed = runner.job_outcome(self.suite, self.task, self.variant, self.seeds, self.folders,
                                             error, concurrent_runs=1)  # fmt: skip
        from submitit import JobEnvironment

        provenance = {"job_id": JobEnvironment().job_id, "node": socket.gethostname(),
                      "restarts": int(os.environ.get("SLURM_RESTART_COUNT", 0))}  # fmt: skip
        for record in records:
            folder = self.folders[self.seeds.index(record["seed"])]
            atomic_write_text(folder / RECORD_FILE, runner.record_json({**record, "slurm": provenance}))
        if failed:  # the job ends FAILED, and its log keeps the reason
            raise RuntimeError("; ".join(f"seed {seed}: {reason}" for seed, reason in failed))

    def attempt_command(self) -> list[str]:
        """The runner's command, resuming when the run folder holds a started run (`runner._commands`' rule):
        the first attempt starts what the runner saw, a requeued attempt continues its checkpoint."""
        cmd = [arg for arg in self.cmd if arg != "--resume"]
        return [*cmd, "--resume"] if any(holds_started_run(folder) for folder in self.folders) else cmd

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
