"""A run's ledger line, read from its run folder once its trainer ended (`collect_record`, `job_outcome`):
its curve, final evaluation, cost, hardware and commit; and the summaries regenerated from the ledger
(`refresh_summaries`). The local executor and a Slurm job build the same lines from the same folders."""

import json
import sys
from pathlib import Path

from .._core.runfolder import DIVERGED_FILE
from .cost import cost_so_far, fold_interrupted_attempt, hardware
from .plan import Job, Run, ledger_command
from .suites import Suite


def collect_record(suite: Suite, run: Run, concurrent_runs: int = 1) -> dict:
    """The ledger line of a finished run, from its run folder. A run that diverged (stopped on a non-finite
    update, `DIVERGED_FILE`) is a result of its method too, so it gets a line: its final return is its last
    evaluation before it stopped, and `diverged` says where it stopped. Leaving it out would keep only the
    seeds that happened not to diverge."""
    directory = run.folder
    lines = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in lines if r["type"] == "eval"]
    trains = [r for r in lines if r["type"] == "train"]
    started = json.loads((directory / "run.json").read_text())
    diverged = None
    if (directory / DIVERGED_FILE).exists():
        diverged = json.loads((directory / DIVERGED_FILE).read_text())
        results = _last_evaluation(directory, evals, diverged)
    else:
        results = json.loads((directory / "policy" / "results.json").read_text())
    cost = cost_so_far(directory)
    # The trainer's own clock (kept in its checkpoints across resumes) is a floor for the end-to-end time:
    # an attempt whose runner was killed before `cost.ATTEMPT_FILE` existed left no end-to-end record.
    cost["trainer_wall_s"] = trains[-1].get("time/wall_s") if trains else None
    cost["wall_s"] = max(cost["wall_s"], cost["trainer_wall_s"] or 0.0)
    return {
        "suite": suite.name,
        "task": run.task,
        "variant": run.variant.name,
        "method": run.variant.method,
        "seed": run.seed,
        "command": ledger_command(suite, run),
        "final": {k: results[k] for k in ("mean", "std", "n_episodes", "deterministic", "env_steps")},
        "curve": {
            "env_steps": [r["env_steps"] for r in evals],
            "deterministic": [r["eval/return_deterministic"] for r in evals],
            "stochastic": [r.get("eval/return_stochastic") for r in evals],
        },
        "step_clip_frac": _train_curve(trains, "train/step_clip_frac"),
        "sample_clip_frac": _train_curve(trains, "train/sample_clip_frac"),
        "path_kl_init": _train_curve(trains, "train/path_kl_init"),
        "cost": cost,
        "concurrent_runs": concurrent_runs,
        "seed_group": started.get("seed_group"),
        "git": started["git"],
        "packages": started["packages"],
        "device": started["device"],
        "hardware": hardware(),
        "finished": results["date"],
        **({"diverged": diverged} if diverged else {}),
    }


def _last_evaluation(directory: Path, evals: list[dict], diverged: dict) -> dict:
    """A diverged run's results: its last evaluation before it stopped (an error if it had none)."""
    if not evals:
        raise RuntimeError(
            f"{directory} diverged in iteration {diverged['iteration']}, before its first "
            "evaluation: it has no return to record"
        )
    last = evals[-1]
    return {
        "mean": last["eval/return_deterministic"],
        "std": last["eval/return_deterministic_std"],
        "n_episodes": None,
        "deterministic": True,
        "env_steps": last["env_steps"],
        "date": diverged["date"],
    }


def _train_curve(trains: list[dict], key: str) -> dict | None:
    """A training metric at every iteration that logged it ({"env_steps", "value"}), None if none did."""
    points = [(r["env_steps"], r[key]) for r in trains if key in r]
    return {"env_steps": [p[0] for p in points], "value": [p[1] for p in points]} if points else None


def job_outcome(
    suite: Suite, job: Job, error: RuntimeError | None, concurrent_runs: int
) -> tuple[list[dict], list[tuple[int, str]]]:
    """After a trainer process ended (`error`: how it failed, None if it did not): the ledger lines of its
    runs that ended, and (seed, reason) for those that failed. A run that diverged ended: its stop is a
    result of its method too (`collect_record`)."""
    records, failed = [], []
    for run in job.runs:
        if error is not None and not (run.folder / DIVERGED_FILE).exists():
            failed.append((run.seed, str(error)))
            continue
        if error is not None:
            fold_interrupted_attempt(run.folder)
        try:
            records.append(collect_record(suite, run, concurrent_runs))
        except RuntimeError as err:
            failed.append((run.seed, str(err)))
    return records, failed


def report_record(record: dict) -> None:
    """Print one line for a run added to the ledger: its final return, where it stopped, its wall-clock."""
    stop = f" (diverged in iteration {record['diverged']['iteration']})" if "diverged" in record else ""
    print(
        f"    {record['task']} {record['variant']} seed {record['seed']}: final return "
        f"{record['final']['mean']:.1f}{stop}, {record['cost']['wall_s']:.0f} s",
        flush=True,
    )


def refresh_summaries(suite: str, results_dir: Path) -> None:
    """Regenerate the summaries. They derive from the ledger, whose line is already saved, so a failure
    here must not stop the runs still going (aggregate.py may change while a long runner is going)."""
    try:
        from .aggregate import write_suite

        write_suite(suite, results_dir)
    except Exception as err:  # noqa: BLE001 - reported, and the aggregate command redoes it
        print(
            f"summaries of {suite} not regenerated ({type(err).__name__}: {err}); the ledger is saved: "
            "run `python -m trainers.benchmark.aggregate`",
            file=sys.stderr,
            flush=True,
        )
