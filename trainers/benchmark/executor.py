"""Where a suite's runs train: the one interface the runner (`runner.run_suite`) drives.

`--executor local` trains them on this machine (`local.LocalExecutor`), `--executor slurm` as one Slurm job
array (`slurm_suite.SlurmExecutor`). Both start the same trainer commands in the same run folders and record
the same ledger lines (`records`); they differ only in where the processes run and when their lines arrive.
"""

import abc

from .arguments import BenchArgs
from .plan import Run, RunPlan


class Executor(abc.ABC):
    """Trains a `RunPlan`'s jobs; made from the invocation's options."""

    interrupted: str | None = None
    """What goes on after Ctrl-C stops the runner, said on its way out (None: nothing it started)."""

    def __init__(self, args: BenchArgs):
        self.args = args

    @abc.abstractmethod
    def check(self) -> None:
        """Raise a usage `CommandError` for an option this executor refuses, before anything runs."""

    def still_to_do(self, runs: list[Run]) -> list[Run]:
        """Of `runs` (those the ledger does not hold), the ones to start: all, unless some already train."""
        return runs

    @abc.abstractmethod
    def describe(self, plan: RunPlan) -> None:
        """With --dry-run: say what `run` would hand on, beyond the commands already printed."""

    @abc.abstractmethod
    def run(self, plan: RunPlan) -> list[tuple[str, str, int]] | None:
        """Train the plan's jobs, adding each ended run to the ledger; the keys of the runs that failed, or
        None when the runs go on training after this returns (submitted, not waited for)."""
