"""`--executor local`: the runs train on this machine, `--jobs` trainer processes at a time, each run's
ledger line added as its process ends."""

import concurrent.futures
import sys

from gsbpolicy._cli import CommandError

from .cost import run_trainer
from .executor import Executor
from .ledger import append_ledger
from .plan import Job, RunPlan
from .records import job_outcome, refresh_summaries, report_record
from .slurm_options import SlurmArgs


class LocalExecutor(Executor):
    """Trains the plan's jobs in subprocesses of this runner, in plan order."""

    def check(self) -> None:
        """The Slurm options mean nothing here: refused rather than ignored."""
        if self.args.slurm != SlurmArgs() or self.args.wait:
            option = "wait" if self.args.wait else "slurm.*"
            raise CommandError(f"--{option} needs --executor slurm (a local suite runs to its end)")

    def describe(self, plan: RunPlan) -> None:
        """Nothing more: the commands printed are the processes it would start."""

    def run(self, plan: RunPlan) -> list[tuple[str, str, int]]:
        """Run the jobs `--jobs` at a time; returns the keys of the runs that failed.

        Only this thread writes the ledger and the summaries, in the order runs finish, so concurrent runs
        never race on a file."""
        failures = []
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.args.jobs)
        try:
            futures = {
                pool.submit(run_trainer, job.command, list(job.folders), self.args.sample_interval): job
                for job in plan.jobs
            }
            for future in concurrent.futures.as_completed(futures):
                failures += self._ended(plan, futures[future], future)
        finally:
            # Ctrl-C must not start the queued runs (the running ones get the same SIGINT).
            pool.shutdown(wait=True, cancel_futures=True)
        return failures

    def _ended(
        self, plan: RunPlan, job: Job, future: concurrent.futures.Future
    ) -> list[tuple[str, str, int]]:
        """Record the runs of a job whose process ended, report its failures; the failed runs' keys."""
        error = None
        try:
            future.result()
        except RuntimeError as err:
            error = err
        records, failed = job_outcome(plan.suite, job, error, self.args.jobs)
        if error is not None:
            print(f"{'DIVERGED (recorded)' if records else 'FAILED'} {error}", file=sys.stderr, flush=True)
        for _, reason in failed:
            # Said above unless it is not the trainer's failure (a run that stopped before any evaluation).
            if reason != str(error):
                print(f"FAILED {reason}", file=sys.stderr, flush=True)
        for record in records:
            append_ledger(plan.ledger, record)
            report_record(record)
        if records:
            refresh_summaries(plan.suite.name, plan.results_dir)
        return [(job.task, job.variant.name, seed) for seed, _ in failed]
