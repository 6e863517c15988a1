"""Pre-register a claim: fix its runs, metric, test and verdict rule in a committed file before any of its runs.

    python -m trainers.benchmark.preregistration --id clear-gains --claim "clear gains on ..." \\
        --source cpu-playground --tasks FingerSpin BallInCup FingerTurnEasy --test greater

appends one registration to `hub_cards/results/preregistration.json` (`--file` for another), which defines the
suite `confirm-<id>` (`suites.confirmatory_suite`): `python -m trainers.benchmark --suite confirm-<id>` runs it,
and `confirmatory.judge` gives the verdict. Commit the file before the first run: a test checks every run of a
registered suite against the commit that added its registration. A registration is never edited: register a
new id instead. The format, field by field, and a worked example are in docs/benchmarks/preregistration.md.

How a registration is made from the source suite's exploratory runs (its committed ledger):
- the metric is `confirmatory.late_mean` (the mean of a run's last 3 deterministic evaluations);
- the comparator on each task, unless `--comparator` names one, is the paper baseline (a column of the source
  suite of one of the paper's methods but the treatment's; reference columns excluded) with the highest mean
  metric in the exploratory runs on that task; on a task with no exploratory runs, the one with the highest
  aggregate IQM in the source suite's summary;
- the seed count of each task is the fewest in [MIN_SEEDS, MAX_SEEDS] at which a verdict either way (agrees or
  disagrees) has probability TARGET_POWER (`power.seeds_needed`) at level alpha / (number of tasks), from the
  exploratory means and the upper confidence limit of their pooled standard deviation (`power.planning_sd`);
  where none does, MAX_SEEDS if a verdict is more likely than not there and MIN_SEEDS otherwise; MAX_SEEDS on
  a task without exploratory runs of both columns (no effect to plan on);
- the seeds are `--first-seed` onwards, refused if any ledger or toy log already holds a run with one of them.
"""

import dataclasses
import datetime
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np

from gsbpolicy._cli import CommandError, run_command
from gsbpolicy._files import atomic_write_text

from .._core.cli import tyro_cli
from .._core.runlog import read_jsonl
from . import confirmatory, power
from .fingerprint import RULE_MODULES
from .fingerprint import rule_fingerprint as fingerprint
from .ledger import RESULTS_DIR
from .suites import PAPER_METHODS, PREREGISTRATION_FILE, SUITES

FORMAT_VERSION = 1
TOY_LOG = Path("raw") / "toy_tilt_sweep.jsonl"
"""The toy's run log, under the results folder."""


@dataclasses.dataclass(frozen=True)
class Args:
    """Pre-register one claim (appended to the registration file; an id already there is refused)."""

    id: str
    """The registration's id (letters, digits and '-'); its runs form the suite `confirm-<id>`."""
    claim: str
    """What is claimed, in words (for this repository's paper claims: the claim's short form in
    `trainers.lab.claims.CLAIMS`, which the claims page matches)."""
    source: str
    """The suite whose exploratory runs fix the comparators and seed counts, and whose settings and budget the
    confirmatory runs repeat; "toy" for the toy's interval test (`python -m trainers.lab.toy_registration`)."""
    tasks: tuple[str, ...] = ()
    """The claim's tasks (the family over which Holm's correction runs)."""
    test: Literal["greater", "less", "non-inferior", "equivalent", "interval"] = "greater"
    """The registered test (`confirmatory.TESTS`; "interval" for the toy: the paper's value inside the
    interval of the mean)."""
    treatment: str = "gsb_mdpo"
    """The column the claim is about."""
    comparator: str | None = None
    """The comparator on every task (default: the primary-comparator rule above)."""
    margin_fraction: float = 0.0
    """For non-inferior and equivalent: the margin as a fraction of the comparator's exploratory mean metric."""
    first_seed: int = 100
    """The first fresh seed."""
    num_seeds: int | None = None
    """A fixed seed count instead of the power calculation (the toy's test has no comparator to power against)."""
    alpha: float = 0.05
    """Family-wise error rate of the claim's tests (Holm over its tasks)."""
    paper_value: float | None = None
    """For the interval test: the paper's number."""
    file: Path = PREREGISTRATION_FILE
    """The registration file."""
    results_dir: Path = RESULTS_DIR
    """Where the source suite's ledger and summary are."""


def load(path: Path = PREREGISTRATION_FILE) -> list[dict]:
    """The registrations in `path` (none when it does not exist)."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise CommandError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if data.get("format_version") != FORMAT_VERSION:
        raise CommandError(
            f"{path}: format_version {data.get('format_version')!r}, expected {FORMAT_VERSION}"
        )
    return data["registrations"]


def rule_fingerprint(rule: str) -> str:
    """The fingerprint of `confirmatory.<rule>` and everything it reads, as the repository holds it now."""
    root = Path(__file__).resolve().parents[2]
    sources = {m: (root / path).read_text() for m, path in RULE_MODULES.items()}
    return fingerprint(rule, sources, module="confirmatory")


def exploratory(results_dir: Path, suite: str) -> dict[str, dict[str, list[float]]]:
    """Task -> column -> the exploratory runs' metric (`confirmatory.late_mean`), in ledger order."""
    found: dict[str, dict[str, list[float]]] = {}
    for r in read_jsonl(results_dir / f"{suite}.runs.jsonl"):
        found.setdefault(r["task"], {}).setdefault(r["variant"], []).append(confirmatory.late_mean(r))
    return found


def paper_baselines(source: str, treatment: str) -> list[str]:
    """The source suite's columns of the paper's methods but the treatment's (reference columns excluded)."""
    suite = SUITES[source]
    treated = suite.variant(treatment).method
    return [v.name for v in suite.variants if v.method in PAPER_METHODS and v.method != treated]


def primary_comparator(args: Args, task: str, runs: dict[str, list[float]]) -> tuple[str, str]:
    """The comparator on `task` and the reason it was chosen."""
    if args.comparator is not None:
        return args.comparator, "named at registration"
    candidates = paper_baselines(args.source, args.treatment)
    ran = {c: float(np.mean(runs[c])) for c in candidates if runs.get(c)}
    if ran:
        best = max(ran, key=ran.get)
        return best, f"highest exploratory mean metric on the task ({ran[best]:.1f})"
    summary = json.loads((args.results_dir / f"{args.source}.json").read_text())
    columns = summary["aggregate_iqm"]["columns"]
    iqm = {name: c["iqm"] for name, c in columns.items() if name in candidates}
    best = max(iqm, key=iqm.get)
    return best, f"no exploratory run on the task: highest aggregate IQM in {args.source} ({iqm[best]:.2f})"


def seed_plan(args: Args, treatment: list[float], comparator: list[float]) -> dict:
    """The seed count of one task (`seeds`) from its exploratory runs, with the numbers it was computed from:
    the exploratory effect (treatment's mean metric less the comparator's), the pooled standard deviation, the
    one the plan simulated (`power.planning_sd`), the margin in return units, and the planned powers to agree
    and to disagree at that seed count."""
    if len(treatment) < 2 or len(comparator) < 2:
        return {"seeds": power.MAX_SEEDS, "effect": None, "sd": None, "margin": 0.0, "power": None}
    effect = float(np.mean(treatment) - np.mean(comparator))
    sd = float(np.sqrt((np.var(treatment, ddof=1) + np.var(comparator, ddof=1)) / 2))
    planned_sd = power.planning_sd(sd, len(treatment) + len(comparator) - 2)
    margin = args.margin_fraction * abs(float(np.mean(comparator)))
    level = args.alpha / len(args.tasks)
    n, agrees, disagrees = power.seeds_needed(
        confirmatory.TESTS[args.test], effect, planned_sd, margin, level
    )
    return {
        "seeds": n,
        "effect": round(effect, 3),
        "sd": round(sd, 3),
        "planning_sd": round(planned_sd, 3),
        "margin": round(margin, 3),
        "power": round(agrees, 3),
        "power_against": round(disagrees, 3),
    }


def used_seeds(results_dir: Path) -> set[int]:
    """Every seed any committed ledger or the toy's log holds a run of."""
    seeds = {r["seed"] for path in results_dir.glob("*.runs.jsonl") for r in read_jsonl(path)}
    log = results_dir / TOY_LOG
    return seeds | ({r["seed"] for r in read_jsonl(log)} if log.exists() else set())


def fresh_seeds(args: Args, count: int) -> list[int]:
    """`count` seeds from `--first-seed` on, refused if any committed ledger or the toy's log has run one."""
    seeds = list(range(args.first_seed, args.first_seed + count))
    clash = sorted(set(seeds) & used_seeds(args.results_dir))
    if clash:
        raise CommandError(
            f"seeds {clash} already have runs in {args.results_dir}: pick a --first-seed past them"
        )
    return seeds


def _suite_registration(args: Args) -> dict:
    if args.source not in SUITES:
        raise CommandError(f"unknown source suite {args.source!r}; suites: {sorted(SUITES)}")
    if not args.tasks:
        raise CommandError("--tasks: name the claim's tasks")
    if args.test in ("non-inferior", "equivalent") and not args.margin_fraction > 0:
        raise CommandError(f"--test {args.test} needs a --margin-fraction above 0")
    runs = exploratory(args.results_dir, args.source)
    tasks = []
    for task in args.tasks:
        got = runs.get(task, {})
        comparator, why = primary_comparator(args, task, got)
        plan = seed_plan(args, got.get(args.treatment, []), got.get(comparator, []))
        count = plan.pop("seeds")
        tasks.append(
            {
                "task": task,
                "comparator": comparator,
                "comparator_chosen": why,
                "margin": plan.pop("margin") or None,
                "seeds": fresh_seeds(args, args.num_seeds or count),
                "exploratory": {
                    "treatment": got.get(args.treatment, []),
                    "comparator": got.get(comparator, []),
                    **plan,
                },
            }
        )
    source = SUITES[args.source]
    paper = next(
        (s for s in SUITES.values() if s.name.startswith("paper-") and s.preset == source.preset), None
    )
    steps = source.steps(args.tasks[0])
    return {
        "source": args.source,
        "suite": f"confirm-{args.id}",
        "treatment": args.treatment,
        "tasks": tasks,
        "budget_env_steps": steps,
        "paper_budget_env_steps": paper.total_steps if paper else None,
        "run": f"python -m trainers.benchmark --suite confirm-{args.id} --publish --resume --jobs 2",
        "fingerprint": rule_fingerprint("judge"),
    }


def register(args: Args, source_part: Callable[[Args], dict] | None = None) -> dict:
    """Build `args`' registration and append it to the registration file; `source_part` builds the part that
    depends on its source (default: a suite's; the toy's is the lab's, `trainers.lab.toy_registration`)."""
    if args.source == "toy" and source_part is None:
        raise CommandError("the toy is the lab's: register it with python -m trainers.lab.toy_registration")
    registered = load(args.file)
    if any(r["id"] == args.id for r in registered):
        raise CommandError(f"{args.file} already registers {args.id!r}: registrations are never edited")
    if not args.id.replace("-", "").isalnum():
        raise CommandError(f"--id {args.id!r}: use letters, digits and '-' only")
    if args.test == "interval" and args.source != "toy":
        raise CommandError("--test interval is the toy's (--source toy)")
    body = (source_part or _suite_registration)(args)
    entry = {
        "id": args.id,
        "claim": args.claim,
        "test": args.test,
        "alpha": args.alpha,
        "metric": f"mean of the last {confirmatory.LATE_EVALUATIONS} deterministic evaluations"
        if args.source != "toy"
        else "quadrant-mass L1 error of the run",
        "registered_on": datetime.date.today().isoformat(),
        **body,
    }
    text = json.dumps({"format_version": FORMAT_VERSION, "registrations": [*registered, entry]}, indent=1)
    atomic_write_text(args.file, text + "\n")
    return entry


def _report(entry: dict, path: Path) -> None:
    for task in entry.get("tasks", []):
        e = task["exploratory"]
        print(
            f"{task['task']}: vs {task['comparator']} ({task['comparator_chosen']}); {len(task['seeds'])} seeds "
            f"(planned power {e['power']} to agree, {e.get('power_against')} to disagree; exploratory effect "
            f"{e['effect']}, sd {e['sd']}, planned with sd {e.get('planning_sd')})"
        )
    print(f"registered {entry['id']} in {path}; commit it, then run: {entry['run']}")


def main(
    argv=None,
    source_part: Callable[[Args], dict] | None = None,
    module: str = "trainers.benchmark.preregistration",
) -> None:
    """The command line of `python -m <module>`, registering with `source_part` (see `register`)."""
    args = tyro_cli(Args, args=argv, description=__doc__, prog=f"python -m {module}")
    sys.exit(run_command(lambda: _report(register(args, source_part), args.file), usage_errors=(ValueError,)))


if __name__ == "__main__":
    main()
