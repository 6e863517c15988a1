"""Run a benchmark suite: every task x method (or ablation variant) x seed, one trainer subprocess each.

    python -m trainers.benchmark --suite cpu-gym [--methods gsb_mdpo fpo] [--seeds 0 1] [--resume]

Suites are data (`trainers.benchmark.suites`). Each run is `python -m trainers.<method> --preset <suite
preset> --env <task> --seed <s> --total-steps <budget> <suite overrides> <variant overrides>` in its own
process, so its wall-clock and memory (RSS of the process tree, sampled; device memory through nvidia-smi on
GPUs) are its own; other trainers seen running beside it (another runner's, say) are recorded, since
they slow it. As each run finishes, one line goes into `<results dir>/<suite>.runs.jsonl` (the
raw record: curve, final evaluation, cost, hardware, commit) and the summaries are regenerated from it
(`trainers.benchmark.aggregate`). By default all of it lands under runs/benchmarks/<suite>/, and the end of
the command compares the new runs with the committed results; `--publish` adds them to the committed
results in hub_cards/results instead. Finished runs are skipped; with `--resume` an interrupted run
continues from its checkpoint. Ctrl-C or a crash loses at most the run in progress, which `--resume` then
continues.

`--executor slurm` sends the runs to do to a Slurm cluster instead, as one job array (`slurm_suite`): each job
runs the same trainer command in the same run folder and leaves the run's ledger line there, which the runner
adds to the ledger whenever it runs (`--wait` as the jobs end; `--status` shows each run's state).
"""

import shlex
import sys

from gsbpolicy._cli import run_command

from .._core.cli import tyro_cli
from .._core.runlog import read_jsonl
from . import pretraining, slurm_suite
from .arguments import BenchArgs, check_options, check_outputs
from .compare import write_comparison
from .executor import Executor
from .ledger import RESULTS_DIR as COMMITTED
from .ledger import ledger_path, run_key
from .local import LocalExecutor
from .plan import Job, RunPlan, group_runs, planned_runs, single_jobs
from .records import refresh_summaries
from .slurm_suite import SlurmExecutor
from .suites import SUITES, Suite

EXECUTORS: dict[str, type[Executor]] = {"local": LocalExecutor, "slurm": SlurmExecutor}
"""The executor of each `--executor` value."""


def run_suite(args: BenchArgs) -> int:
    """Check the options, plan the suite's runs, hand them to the executor; 1 if a run failed, else 0."""
    check_options(args)
    executor = EXECUTORS[args.executor](args)
    executor.check()
    results_dir = check_outputs(args)
    suite = SUITES[args.suite]
    ledger = ledger_path(results_dir, suite.name)
    runs = planned_runs(args, suite)
    # What Slurm jobs finished since the runner last looked goes into the ledger first, whatever is asked.
    if not args.dry_run and slurm_suite.merge_job_records(runs, ledger):
        refresh_summaries(suite.name, results_dir)
    if args.status:
        return slurm_suite.print_status(suite, runs, ledger)
    done = {run_key(r) for r in read_jsonl(ledger)}
    todo = executor.still_to_do([run for run in runs if run.key not in done])
    print(f"suite {suite.name}: {len(todo)} runs to do, results in {results_dir} ({suite.budget_note})")
    singles = single_jobs(args, suite, todo, results_dir)
    plan = RunPlan(
        suite, results_dir, tuple(runs), tuple(group_runs(suite, singles) if args.group_seeds else singles)
    )
    if args.dry_run:
        for job in plan.jobs if args.group_seeds else ():
            if job.command is not None and len(job.runs) > 1:
                where = f"{job.task} {job.variant.name} seeds {list(job.seeds)}"
                print(f"grouped: {where}: {shlex.join(job.command[1:])}")
        executor.describe(plan)
        return 0
    if len(singles) < len(todo):  # runs reused from another suite's ledger were added to this one
        refresh_summaries(suite.name, results_dir)
    _prepare(suite, singles)
    failures = executor.run(plan)
    if failures is None:
        return 0
    if results_dir.resolve() != COMMITTED.resolve() and (results_dir / f"{suite.name}.json").exists():
        print(write_comparison(suite.name, results_dir))
    if failures:
        print(f"{len(failures)} runs failed: {failures}", file=sys.stderr)
    return 1 if failures else 0


def _prepare(suite: Suite, jobs: list[Job]) -> None:
    """Build the demonstrations and cloned policies the fine-tuning runs to do start from, before any of them
    runs (one after another, in plan order: the runs of a task share its demonstrations)."""
    for job in jobs:
        for run in job.runs if job.command is not None else ():
            if pretraining.uses_pretrained(run.variant.args):
                pretraining.prepare(suite, run.task, run.seed, run.folder)


def main(argv=None) -> None:
    """`python -m trainers.benchmark`."""
    args = tyro_cli(BenchArgs, args=argv, description=__doc__, prog="python -m trainers.benchmark")
    # A corrupt ledger line (ValueError from read_jsonl) is bad input too: one line, exit 2.
    # Ctrl-C stops this runner only: what the executor started elsewhere goes on.
    kept = EXECUTORS[args.executor].interrupted
    sys.exit(
        run_command(lambda: run_suite(args), usage_errors=(ValueError,), **({"kept": kept} if kept else {}))
    )


if __name__ == "__main__":
    main()
