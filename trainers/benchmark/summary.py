"""A suite's summary (`hub_cards/results/<suite>.json`) from its ledger: per task and column, the seeds, the
final return's mean and sample std (ddof = 1) across seeds, its interquartile mean and the probability of improvement
with their bootstrap intervals (`stats`), the curves at each evaluation point, the cost and the hardware; per
suite, the aggregate IQM over tasks. The schema is described in hub_cards/results/README.md. One cell's numbers
come from `cell_summary`; here, how the cells are grouped and compared, the aggregate over tasks, a fine-tuning
column's budget and the suite's own fields.
"""

import statistics

from ..registry import PROPOSED
from . import stats, targets
from .cell_summary import cell
from .pretraining import uses_pretrained
from .suites import SUITES


def _compare(kind: str, variant: str, control: str, entries: dict) -> dict | None:
    """The column's probability-of-improvement verdict. Benchmarks read "GSB-MDPO against this column"
    (P(gsb_mdpo > column)); ablations read "this variant against its control" (P(variant > control)), so
    that "worse" says the ablated component mattered."""
    if control == variant or control not in entries:
        return None
    of, over = (variant, control) if kind == "ablation" else (control, variant)
    return {
        "of": of,
        "over": over,
        **stats.compare(entries[of]["final_per_seed"], entries[over]["final_per_seed"]),
    }


def _scale_setters(entries: dict[str, dict]) -> list[dict]:
    """The columns whose means set a task's normalising scale: the paper's (all of them if only reference
    columns ran there)."""
    return [e for e in entries.values() if not e.get("reference")] or list(entries.values())


FEW_COLUMNS = "half of the paper columns or fewer have run it with the suite's usual {seeds} seeds so far"


def _usual_seed_count(tasks: dict[str, dict], paper: set[str]) -> int:
    """The seed count of a typical task-column cell of the suite (the lower median over its paper cells): the
    count a task still being filled in has not reached yet, robust to one cell run with extra seeds."""
    return statistics.median_low(
        len(e["seeds"]) for entries in tasks.values() for v, e in entries.items() if v in paper
    )


def _aggregate_iqm(tasks: dict[str, dict], floors: dict | None = None) -> dict | None:
    """IQM over a suite's tasks of normalised final returns (each divided by the best mean of a paper column
    on its task, so 1.0 is the best paper column there), per column, with its stratified-bootstrap interval.
    A reference column is scored on the same scale, so it can exceed 1; it does not set the scale, so adding
    one leaves the paper columns' scores as they were. A task enters once more than half of the paper columns
    that ran in the suite have run it with the suite's usual seed count: a task being filled in (one just
    added) would otherwise drop every column that has not reached it yet, or cut every column to the seeds it
    has there so far, or set its scale from one column alone, while a column that skipped a task most others
    ran is the one to leave out. Tasks whose best mean is not positive cannot be normalised
    this way and are left out too (`left_out` names both kinds with the reason). A column enters with the
    seeds it has on every task (the bootstrap resamples seeds within each task) and only if it ran every task.
    None when fewer than 2 tasks are left: a single task would repeat the per-task IQM.

    With `floors` (a suite that scores doing nothing), returns are measured from doing nothing instead,
    (return - do_nothing) / (best - do_nothing) with the best of every column, as the suite's targets read
    them: 0 is doing nothing and 1 the best column, whatever the sign of the task's rewards."""
    paper = {v for entries in tasks.values() for v, e in entries.items() if not e.get("reference")}
    if not paper:
        return None
    zero = {t: floors["tasks"][t]["do-nothing"]["mean"] if floors else 0.0 for t in tasks}
    setters = (lambda entries: list(entries.values())) if floors else _scale_setters
    best = {t: max(e["final_mean"] for e in setters(entries)) - zero[t] for t, entries in tasks.items()}
    usual = _usual_seed_count(tasks, paper)
    left_out = {
        t: FEW_COLUMNS.format(seeds=usual)
        for t, entries in tasks.items()
        if 2 * sum(len(entries[v]["seeds"]) >= usual for v in paper & set(entries)) <= len(paper)
    }
    unscaled = "no mean above doing nothing" if floors else "no positive mean"
    left_out |= {t: unscaled for t in tasks if t not in left_out and best[t] <= 0}
    usable = [t for t in tasks if t not in left_out]
    if len(usable) < 2:
        return None
    per_column = {}
    for variant in columns(tasks):
        if any(variant not in tasks[t] for t in usable):
            continue
        seeds = sorted(set.intersection(*(set(tasks[t][variant]["seeds"]) for t in usable)))
        if not seeds:
            continue
        matrix = [
            [
                (
                    dict(zip(tasks[t][variant]["seeds"], tasks[t][variant]["final_per_seed"], strict=True))[s]
                    - zero[t]
                )
                / best[t]
                for t in usable
            ]
            for s in seeds
        ]
        per_column[variant] = {**stats.iqm_interval(matrix), "seeds": seeds}
    return {
        "tasks": usable,
        "left_out": left_out,
        "normalised_by": {t: best[t] for t in usable},
        **({"measured_from_doing_nothing": {t: zero[t] for t in usable}} if floors else {}),
        "columns": per_column,
    }


def _demonstrator_steps(suite, task: str) -> int:
    """The env steps the demonstrator's run took: its `demonstrator_steps` rounded up to whole iterations of
    the suite's geometry, as its trainer rounds them."""
    import importlib

    from .._core.cli import parse

    module = importlib.import_module(f"trainers.{suite.pretraining.demonstrator}")
    argv = [
        "--preset",
        suite.preset,
        "--env",
        task,
        "--total-steps",
        str(suite.pretraining.demonstrator_steps),
    ]
    args = parse(module.Args, module.PRESETS, suite.preset, "", [*argv, *suite.args])
    return args.num_iterations * args.rollout.steps_per_iteration


def budget(suite, variant, task: str, own_steps: int) -> dict:
    """A fine-tuning column's env steps with what came before its run counted: a column started from the clone
    owes the demonstrator's run and the demonstrations (at most the episodes times the task's time limit), the
    demonstrator's recipe rerun holds the demonstrator's steps in its own run, a column from scratch owes
    nothing."""
    import gymnasium

    spec = suite.pretraining
    if uses_pretrained(variant.args):
        before = _demonstrator_steps(suite, task) + spec.episodes * gymnasium.spec(task).max_episode_steps
        starts = "the clone"
    elif variant.method == spec.demonstrator:
        before, starts = (
            0,
            f"nothing: the demonstrator's recipe rerun (its {spec.demonstrator_steps:,} steps included)",
        )
    else:
        before, starts = 0, "scratch"
    return {
        "starts_from": starts,
        "own_env_steps": own_steps,
        "before_at_most": before,
        "total_at_most": own_steps + before,
    }


STATISTICS = {
    "confidence": stats.CONFIDENCE,
    "bootstrap_reps": stats.BOOTSTRAP_REPS,
    "bootstrap_seed": stats.BOOTSTRAP_SEED,
}
"""How the summaries' intervals were computed (recorded in each)."""


def summarize(
    suite_name: str, records: list[dict], probes: dict[str, dict] | None = None, floors: dict | None = None
) -> dict:
    """The `<suite>.json` summary (schema in hub_cards/results/README.md); `probes`: the exploration probe's
    entries by env (`PROBE_FILE`), kept for the tasks the suite ran; `floors`: `trainers.benchmark.floors`'."""
    if suite_name not in SUITES:
        raise ValueError(
            f"{suite_name}.runs.jsonl: trainers/benchmark/suites.py defines no suite {suite_name!r}"
        )
    suite = SUITES[suite_name]
    order = {name: i for i, name in enumerate(suite.variant_names)}
    with_statistics = suite.kind != "compute"  # one seed per method: nothing to resample
    tasks: dict[str, dict] = {}
    for task in suite.tasks:
        by_variant: dict[str, list[dict]] = {}
        for r in (r for r in records if r["task"] == task):
            by_variant.setdefault(r["variant"], []).append(r)
        if not by_variant:
            continue
        tasks[task] = {}
        for variant in sorted(by_variant, key=lambda v: order.get(v, len(order))):
            entry = cell(sorted(by_variant[variant], key=lambda r: r["seed"]))
            entry["reference"] = variant in order and suite.variant(variant).reference
            if suite.pretraining is not None and variant in order:
                entry["budget"] = budget(suite, suite.variant(variant), task, entry["env_steps"])
            if suite.kind == "ablation" and entry["curve_stochastic"]["last_per_seed"]:
                entry["ode_vs_sde"] = stats.compare(
                    entry["curve"]["last_per_seed"], entry["curve_stochastic"]["last_per_seed"]
                )
            tasks[task][variant] = entry
        for v, e in tasks[task].items():
            control = suite.variant(v).baseline if v in order else PROPOSED
            e["compared_with"] = control if control != v and control in tasks[task] else None
            e["comparison"] = _compare(suite.kind, v, control, tasks[task]) if with_statistics else None
    first = records[0] if records else {}
    return {
        "suite": suite.name,
        "kind": suite.kind,
        "description": suite.description,
        "budget_env_steps": suite.total_steps,
        "budget_note": suite.budget_note,
        "preset": suite.preset,
        "overrides": list(suite.args),
        "eval_protocol": suite.eval_protocol,
        "hardware": first.get("hardware"),
        "device": first.get("device"),
        "packages": first.get("packages"),
        "commits": sorted({r["git"]["commit"] for r in records if r["git"].get("commit")}),
        "num_runs": len(records),
        "planned_columns": [{"name": v.name, "reference": v.reference} for v in suite.variants],
        "planned_tasks": list(suite.tasks),
        "statistics": STATISTICS,
        "tasks": tasks,
        "aggregate_iqm": _aggregate_iqm(tasks, floors) if with_statistics else None,
        "exploration_probe": {task: entry for task, entry in (probes or {}).items() if task in tasks},
        **_own_budgets_and_floors(suite, tasks, floors),
    }


def _own_budgets_and_floors(suite, tasks: dict[str, dict], floors: dict | None) -> dict:
    """A suite's per-task budgets, floors and targets' verdicts, where it has them."""
    fields = {"budget_by_task": {t: suite.steps(t) for t in suite.tasks}} if suite.task_steps else {}
    return {**fields, "floors": floors, "targets": _targets(tasks, floors)} if floors else fields


def _targets(tasks: dict[str, dict], floors: dict) -> dict:
    """The targets' verdicts on each task where both judged columns ran."""
    return {
        task: targets.judge(
            {v: e["final_mean"] for v, e in entries.items()}, floors["tasks"][task]["do-nothing"]["mean"]
        )
        for task, entries in tasks.items()
        if {targets.PROPOSED, targets.SB3_DEFAULTS} <= entries.keys() and task in floors["tasks"]
    }


def columns(tasks: dict[str, dict]) -> list[str]:
    """Every variant that ran any task, in the summary's (the suite's) order."""
    return list({v: None for entries in tasks.values() for v in entries})
