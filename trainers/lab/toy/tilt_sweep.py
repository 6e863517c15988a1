"""The toy analysis as a command: one run (the old, target and learned quadrant masses and their L1 error; the
paper reports 0.100), or the sweep over beta x preferred quadrant x seed, which resumes from its run log
hub_cards/results/raw/toy_tilt_sweep.jsonl and writes from it hub_cards/results/toy_tilt_sweep.json and the
page docs/benchmarks/toy_tilt_sweep.md. What the runs found is in docs/benchmarks/toy_tilt.md.

    python -m trainers.lab.toy [--beta 0.5] [--preference 1.5 0.5 0 0.5] [--out runs/toy_tilt.png]
    python -m trainers.lab.toy --sweep   # beta x preferred quadrant x seed; resumable

Each progress line of an iteration shows the masses it starts from and the masses it aims at, so the next line
shows how far it got.
"""

import dataclasses
import datetime
import json
import time

from gsbpolicy import PolicyFormatError
from gsbpolicy._cli import FAILURE, USAGE
from gsbpolicy._files import atomic_write_text
from trainers._core.cli import fail, tyro_cli
from trainers._core.runlog import git_commit, read_jsonl
from trainers.benchmark.aggregate import pages_dir

from .tilt_model import Clock, run
from .tilt_settings import COMMAND, Args, preferred_quadrant, rotate_preference, settings, validate
from .tilt_summary import (
    SweepLogError,
    _cell,
    reachable_log_path,
    read_log,
    render_page,
    summarize,
    sweep_log_path,
)


def _now() -> str:
    """The time now, UTC, to the second (when a run started and finished)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _run_cell(args: Args, cell: tuple, clock: Clock) -> dict:
    """One sweep run and its log record: the result, its seconds (pretraining apart), when it started and
    finished, and the commit it ran at."""
    beta, preference, seed = cell
    started, start = _now(), time.perf_counter()
    result = run(dataclasses.replace(args, beta=beta, preference=preference, seed=seed, out=None), clock)
    return {
        "settings": settings(args),
        "beta": beta,
        "preference": list(preference),
        "seed": seed,
        "l1": result["l1"],
        "prior_floor_l1": result["prior_floor_l1"],
        "old": result["old"].tolist(),
        "target": result["target"].tolist(),
        "learned": result["learned"].tolist(),
        "iterations": result["iterations"],
        "seconds": round(time.perf_counter() - start - result["pretrain_seconds"], 1),
        "pretrain_seconds": result["pretrain_seconds"],
        "started": started,
        "finished": _now(),
        "git": git_commit(),
    }


def sweep(args: Args) -> dict:
    """Every (beta, preferred quadrant, seed) of the sweep not yet in the run log under these settings (with
    `rerun`, every one); each finished run is saved before the next starts. Returns the summary (also written
    as .json/.md)."""
    clock = Clock()
    log_path = sweep_log_path(args)
    records = read_log(log_path)
    current = settings(args)
    done = set() if args.rerun else {_cell(r) for r in records if r["settings"] == current}
    # Seed by seed, so that an interrupted sweep has already covered the whole grid with fewer seeds.
    grid = [
        (beta, rotate_preference(args.preference, q), seed)
        for seed in args.sweep_seeds
        for beta in args.sweep_betas
        for q in args.sweep_quadrants
    ]
    todo = [cell for cell in grid if cell not in done]
    print(f"{clock()} sweep of {len(grid)} runs: {len(grid) - len(todo)} already in {log_path}", flush=True)
    for number, cell in enumerate(todo, 1):
        print(
            f"{clock()} run {number}/{len(todo)}: beta {cell[0]}, quadrant {preferred_quadrant(cell[1])} "
            f"preferred, seed {cell[2]}",
            flush=True,
        )
        records.append(_run_cell(args, cell, clock))
        log_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(log_path, "".join(json.dumps(r) + "\n" for r in records))
    reachable = read_jsonl(reachable_log_path(args.results_dir), SweepLogError)
    summary = summarize(records, current, args.preference, reachable)
    summary_path = args.results_dir / "toy_tilt_sweep.json"
    page = pages_dir(args.results_dir) / "toy_tilt_sweep.md"
    atomic_write_text(summary_path, json.dumps(summary, indent=2) + "\n")
    atomic_write_text(page, render_page(summary))
    print(f"{clock()} wrote {summary_path} and {page}", flush=True)
    return summary


def main(argv=None) -> None:
    """The command: one run or, with --sweep, the sweep; a setting that cannot work is a one-line usage error."""
    args = tyro_cli(Args, args=argv, description=__doc__, prog=COMMAND)
    try:
        validate(args)
    except ValueError as err:
        fail(str(err), USAGE)
    try:
        if args.sweep:
            sweep(args)
            return
        result = run(args, Clock())
    except (SweepLogError, PolicyFormatError) as err:
        fail(str(err), FAILURE)
    print(f"{'':8s}" + "".join(f"{n:>8s}" for n in ("QI", "QII", "QIII", "QIV")))
    for row in ("old", "target", "learned"):
        print(f"{row:8s}" + "".join(f"{v:8.3f}" for v in result[row]))
    if args.target_mass_feedback:
        print(
            f"quadrant-mass L1 error: {result['l1']:.3f} (extension with target-mass feedback, not the "
            "paper's algorithm; the paper reports 0.100 for its own update)"
        )
    else:
        print(f"quadrant-mass L1 error: {result['l1']:.3f} (the paper's algorithm; the paper reports 0.100)")
    if args.out is not None:
        print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
