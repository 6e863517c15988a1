"""The runs of a suite an invocation does, planned before anything trains: which runs the options select
(`planned_runs`), each run's folder and trainer command (`command`), which of them to start, resume, reuse
from another suite's ledger or only record (`single_jobs`), and the trainer processes they become
(`group_runs`: with --group-seeds, the seeds of a task x variant in one `--seeds` process). Every step
hands on frozen values (`Run`, `Job`, `RunPlan`); the executors (`executor.Executor`) train a `RunPlan`.
"""

import dataclasses
import re
import shlex
import sys
from pathlib import Path

from gsbpolicy._cli import CommandError
from gsbpolicy._internal import env_kind

from .._core.rundir import holds_started_run
from .._core.runlog import read_jsonl
from ..registry import get_algo
from . import pretraining
from .arguments import BenchArgs
from .ledger import append_ledger, ledger_path
from .suites import Suite, Variant, available_methods


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of a suite: a task x variant (a column of its table) x seed, and the folder it trains in."""

    task: str
    """The env id."""
    variant: Variant
    """The column: a method and its arguments."""
    seed: int
    """The training seed."""
    folder: Path
    """Its run folder, <runs_dir>/<suite>/<task>/<variant>/seed_<s> (`run_dir`)."""

    @property
    def key(self) -> tuple[str, str, int]:
        """The run as its ledger line names it (`ledger.run_key`)."""
        return self.task, self.variant.name, self.seed


@dataclasses.dataclass(frozen=True)
class Job:
    """One trainer process: one run, or the seeds of one task x variant trained together (`group_runs`)."""

    runs: tuple[Run, ...]
    """Its runs, of one task and variant, in plan order."""
    command: tuple[str, ...] | None
    """The trainer command line; None for a run that finished before its ledger line was written, which is
    only recorded."""

    @property
    def task(self) -> str:
        """The env id its runs share."""
        return self.runs[0].task

    @property
    def variant(self) -> Variant:
        """The column its runs share."""
        return self.runs[0].variant

    @property
    def seeds(self) -> tuple[int, ...]:
        """Its runs' seeds."""
        return tuple(run.seed for run in self.runs)

    @property
    def folders(self) -> tuple[Path, ...]:
        """Its runs' folders (a group's process logs into their parent)."""
        return tuple(run.folder for run in self.runs)


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """What an invocation does with a suite, once its options are checked and the finished runs skipped."""

    suite: Suite
    """The suite the runs are of."""
    results_dir: Path
    """Where its ledger and summaries go (`arguments.results_folder`)."""
    runs: tuple[Run, ...]
    """Every run the options select, done or not: what --status and --wait look at."""
    jobs: tuple[Job, ...]
    """The trainer processes of the runs to do, in plan order (grouped with --group-seeds)."""

    @property
    def ledger(self) -> Path:
        """The suite's ledger in `results_dir`."""
        return ledger_path(self.results_dir, self.suite.name)


def slug(name: str) -> str:
    """A variant's name as a folder name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def run_dir(args: BenchArgs, suite: Suite, task: str, variant: Variant, seed: int) -> Path:
    """Where a run of `suite` trains."""
    return args.runs_dir / suite.name / task / slug(variant.name) / f"seed_{seed}"


def finished(directory: Path) -> bool:
    """The run's trainer finished (its policy folder's results.json is written last)."""
    return (directory / "policy" / "results.json").exists()


def planned_runs(args: BenchArgs, suite: Suite) -> list[Run]:
    """The runs the options select, seed-major so that a partial suite covers every method first."""
    present = set(available_methods())
    names = args.methods or tuple(v.name for v in suite.variants if v.method in present)
    try:
        variants = [suite.variant(name) for name in names]
    except KeyError as err:
        raise CommandError(err.args[0]) from None
    missing = sorted({v.method for v in variants} - present)
    if missing:
        raise CommandError(f"trainers not in this checkout: {missing}")
    for task in args.tasks:
        if task not in suite.tasks:
            raise CommandError(f"suite {suite.name!r} has no task {task!r}; it has {list(suite.tasks)}")
    for seed in args.seeds:
        if seed not in suite.seeds:
            raise CommandError(f"suite {suite.name!r} has no seed {seed}; it has {list(suite.seeds)}")
    return [
        Run(task, variant, seed, run_dir(args, suite, task, variant, seed))
        for seed in args.seeds or suite.seeds
        for task in args.tasks or suite.tasks
        for variant in variants
        if suite.runs(task, variant) and seed in suite.seeds_for(task)
    ]


def command(suite: Suite, run: Run, resume: bool) -> list[str]:
    """The trainer command of `run`: its algorithm's module (`trainers.registry`) with the suite's preset,
    budget, geometry and evaluation, then the variant's own arguments."""
    pretrained = str(pretraining.policy_path(run.folder, run.seed))
    variant_args = [pretrained if arg == pretraining.PRETRAINED else arg for arg in run.variant.args]
    return [
        sys.executable,
        "-m",
        get_algo(run.variant.method).module,
        "--preset",
        run.variant.preset or suite.preset,
        "--env",
        run.task,
        "--seed",
        str(run.seed),
        "--total-steps",
        str(suite.steps(run.task)),
        "--output-dir",
        str(run.folder),
        *(suite.args if run.variant.shared_geometry else ()),
        *suite.eval_args,
        *variant_args,
        *(["--resume"] if resume else []),
    ]


def ledger_command(suite: Suite, run: Run) -> str:
    """The trainer arguments a ledger line records (without --resume)."""
    return " ".join(command(suite, run, False)[1:])


def trainer_args(cmd: str) -> str:
    """A ledger command without its output folder: two runs with equal trainer args are the same run."""
    return re.sub(r"--output-dir \S+ ", "", cmd)


def group_command(suite: Suite, runs: list[Run], resume: bool) -> list[str]:
    """One process for several seeds: the trainer writes <parent folder>/seed_<s> for each (`--seeds`)."""
    first = runs[0]
    cmd = command(suite, dataclasses.replace(first, folder=first.folder.parent), resume)
    at = cmd.index("--seed")
    return [*cmd[:at], "--seeds", *(str(run.seed) for run in runs), *cmd[at + 2 :]]


def groupable(run: Run) -> bool:
    """Seeds share a process only on a Playground task, with a trainer that vmaps them (`vmapped_seeds`)."""
    return env_kind(run.task) == "playground" and get_algo(run.variant.method).vmapped_seeds


def group_runs(suite: Suite, jobs: list[Job]) -> list[Job]:
    """`single_jobs`' jobs with those of one task x variant x state (fresh, or resumed) merged into one
    `--seeds` process where `groupable`; the others as they were, first."""
    kept, groups = [], {}
    for job in jobs:
        (run,) = job.runs
        if job.command is None or not groupable(run):
            kept.append(job)
        else:
            groups.setdefault((run.task, run.variant.name, "--resume" in job.command), []).append(run)
    for (_, _, resume), runs in groups.items():
        kept.append(Job(tuple(runs), tuple(group_command(suite, runs, resume))))
    return kept


def other_ledgers(args: BenchArgs, results_dir: Path) -> list[Path]:
    """The ledgers of the other suites beside this one's: in the same folder, or (the default layout) in the
    sibling suite folders under --runs-dir."""
    pattern = "*/*.runs.jsonl" if results_dir == args.runs_dir / args.suite else "*.runs.jsonl"
    return sorted((results_dir.parent if pattern.startswith("*/") else results_dir).glob(pattern))


def finished_elsewhere(ledgers: list[Path], suite: str) -> dict[str, tuple[str, dict]]:
    """Finished runs of the other suites' ledgers, by trainer args (e.g. ablation-cpu's default variant is
    cpu-gym's GSB-MDPO on Hopper-v5, so it is not trained twice)."""
    found = {}
    for path in ledgers:
        other = path.name.removesuffix(".runs.jsonl")
        if other != suite:
            for record in read_jsonl(path):
                if "reused_from" not in record:
                    found.setdefault(trainer_args(record["command"]), (other, record))
    return found


def single_jobs(args: BenchArgs, suite: Suite, todo: list[Run], results_dir: Path) -> list[Job]:
    """One job per run to do, each printed with its command; a finished run not yet recorded gets a job
    without a command. A run another suite's ledger already holds is recorded as reused instead (unless
    --dry-run); an interrupted run needs --resume."""
    elsewhere = finished_elsewhere(other_ledgers(args, results_dir), suite.name)
    jobs = []
    for number, run in enumerate(todo, 1):
        where = f"[{number}/{len(todo)}] {run.task} {run.variant.name} seed {run.seed}"
        same = elsewhere.get(trainer_args(ledger_command(suite, run)))
        if same is not None:
            print(f"{where}: the same run is in {same[0]}")
            if not args.dry_run:
                record = {**same[1], "suite": suite.name, "variant": run.variant.name, "reused_from": same[0]}
                append_ledger(ledger_path(results_dir, suite.name), record)
            continue
        done = finished(run.folder)
        # The trainer's own test, so a run killed before its first metrics line (run.json alone) is resumed.
        started = holds_started_run(run.folder)
        if started and not done and not args.resume:
            raise CommandError(f"{run.folder} holds an interrupted run; pass --resume to continue it")
        cmd = command(suite, run, resume=started and not done)
        print(f"{where}: {shlex.join(cmd[1:])}", flush=True)
        jobs.append(Job((run,), None if done else tuple(cmd)))
    return jobs
