"""The benchmark runner's command line (`python -m trainers.benchmark`): its options (`BenchArgs`), the checks
that refuse a bad one before anything runs, and where an invocation's ledger and summaries go."""

import dataclasses
import math
from pathlib import Path
from typing import Literal

from gsbpolicy._cli import CommandError, check_writable_folder

from .ledger import RESULTS_DIR as COMMITTED
from .slurm_options import SlurmArgs
from .suites import SUITES


@dataclasses.dataclass(frozen=True)
class BenchArgs:
    """Run (part of) a benchmark suite; finished runs are skipped."""

    suite: str
    """Suite name, a key of `trainers.benchmark.suites.SUITES` (an unknown name is answered with the list)."""
    methods: tuple[str, ...] = ()
    """Methods or ablation variants to run (default: all of the suite's whose trainer exists here)."""
    tasks: tuple[str, ...] = ()
    """Subset of the suite's tasks (default: all)."""
    seeds: tuple[int, ...] = ()
    """Subset of the suite's seeds (default: all)."""
    resume: bool = False
    """Continue interrupted runs from their checkpoints (without it an interrupted run is an error)."""
    runs_dir: Path = Path("runs/benchmarks")
    """Where run folders go: <runs_dir>/<suite>/<task>/<variant>/seed_<s>."""
    results_dir: Path | None = None
    """Where the run ledger and the generated summaries go. Default: <runs_dir>/<suite>, outside the source
    tree, with `<suite>.comparison.md` setting the new runs beside the committed results. The committed
    results (hub_cards/results, and the README blocks made from them) are written only with --publish."""
    publish: bool = False
    """Add the runs to the committed results in hub_cards/results and regenerate the README's blocks (what a
    maintainer does to publish new evidence; runs already in the committed ledger are skipped)."""
    dry_run: bool = False
    """Print the commands without running them."""
    jobs: int = 1
    """Runs at a time. Keep 1 where wall-clock is compared (the compute suites, a 2-core CPU); on a many-core
    machine give each run two or three cores (Gym runs step their envs on the CPU: one core each slows them several times)."""
    sample_interval: float = 0.25
    """Seconds between memory samples of a run. Each GPU sample calls nvidia-smi, so raise it with --jobs."""
    group_seeds: bool = False
    """Train the seeds of each Playground task x method in one process (the trainers' `--seeds`: the iteration
    vmapped over seeds, compiled once). Each seed still gets its own run folder and ledger line; the group's
    wall-clock is shared equally among its seeds (`cost.group_wall_s` keeps the whole). Gymnasium tasks and
    SB3 PPO run one seed per process as before."""
    executor: Literal["local", "slurm"] = "local"
    """Where the runs train: "local", on this machine (--jobs at a time), or "slurm", as one Slurm job array
    submitted through submitit (--slurm.*), each job the same trainer command in the same run folder."""
    slurm: SlurmArgs = SlurmArgs()
    """Options of --executor slurm."""
    wait: bool = False
    """With --executor slurm: after submitting, wait until the suite's jobs have ended, adding each run to
    the ledger as its job ends, then compare and report as a local run does (exit 1 if a job failed)."""
    status: bool = False
    """Show where each run of the suite is (done, running, pending, failed, interrupted, not started) from
    the ledger, the run folders and Slurm, after adding the runs that Slurm jobs finished; submits nothing."""


def results_folder(args: BenchArgs) -> Path:
    """Where this invocation's ledger and summaries go (see `BenchArgs.results_dir`)."""
    if not args.publish:
        return args.results_dir if args.results_dir is not None else args.runs_dir / args.suite
    if args.results_dir is not None and args.results_dir.resolve() != COMMITTED.resolve():
        raise CommandError(
            f"--publish writes into {COMMITTED}; drop --results-dir {args.results_dir} or --publish"
        )
    return COMMITTED


def check_options(args: BenchArgs) -> None:
    """Refuse a bad option that is not an executor's own before anything runs (those: `Executor.check`)."""
    if args.suite not in SUITES:
        raise CommandError(f"unknown suite {args.suite!r}; suites: {sorted(SUITES)}")
    if args.jobs < 1:
        raise CommandError(f"--jobs must be at least 1, got {args.jobs}")
    if not (math.isfinite(args.sample_interval) and args.sample_interval > 0):
        raise CommandError(
            f"--sample-interval must be a finite number of seconds > 0, got {args.sample_interval}"
        )


def check_outputs(args: BenchArgs) -> Path:
    """Refuse --status with an option that acts, and folders that cannot be written; the results folder."""
    if args.status and (args.wait or args.dry_run):
        raise CommandError(f"--status only looks; drop --{'wait' if args.wait else 'dry-run'}")
    results_dir = results_folder(args)
    check_writable_folder(args.runs_dir, f"--runs-dir {args.runs_dir}")
    check_writable_folder(results_dir, f"--results-dir {results_dir}")
    return results_dir
