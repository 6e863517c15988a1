"""Benchmark summaries generated from the committed run ledgers (`hub_cards/results/<suite>.runs.jsonl`).

    python -m trainers.benchmark.aggregate          # regenerate every suite's files and README block
    python -m trainers.benchmark.aggregate --check  # fail if a committed file differs from the ledgers' output

For each suite: `<suite>.json` (per task x method: seeds, final return mean +/- population std across seeds,
interquartile mean and probability of improvement with their bootstrap intervals (`stats`), the
curve at each evaluation point, budget, commits, hardware), `<suite>.md` (the tables README.md includes
between `<!-- suite:<name>:start -->` and `<!-- suite:<name>:end -->`) and `<suite>.png` (mean +/- one std
band per method, one panel per task, as in the paper's figures). From every summary together: `claims.md`
(the paper's claims against these results, `claims`; its table also fills the README's
`<!-- claims:start -->` block), and `algorithms.json` (each algorithm's label and policy kind from
`trainers.registry`, which the model cards print). Nothing here is typed by hand.
"""

import argparse
import io
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from gsbpolicy.files import atomic_write_bytes

from ..registry import ALGORITHMS, PROPOSED
from . import claims, stats
from .suites import SUITES

RESULTS_DIR = Path(__file__).parents[2] / "hub_cards" / "results"
README = Path(__file__).parents[2] / "README.md"
ALGORITHMS_FILE = "algorithms.json"
"""The registry as the model cards read it (hub_cards imports nothing from trainers)."""
PROBE_FILE = "exploration_probe.json"
"""`trainers.experiments.exploration_probe`'s results by env, quoted under the tables of the suites that ran them."""


def _read_ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _curve(records: list[dict], key: str) -> dict:
    """Mean and population std across seeds at the evaluation points every seed has, and each seed's value
    at the last of them (`last_per_seed`: what the ODE-vs-SDE comparison pairs up)."""
    common = sorted(set.intersection(*(set(r["curve"]["env_steps"]) for r in records)))
    per_seed = []
    for r in records:
        by_step = dict(zip(r["curve"]["env_steps"], r["curve"][key], strict=True))
        per_seed.append([by_step[s] for s in common])
    if not common or any(v is None for row in per_seed for v in row):
        return {"env_steps": [], "mean": [], "std": [], "last_per_seed": []}
    values = np.asarray(per_seed, dtype=float)
    return {"env_steps": common, "mean": _round(values.mean(0)), "std": _round(values.std(0)),
            "last_per_seed": _round(values[:, -1])}  # fmt: skip


def _round(values) -> list[float]:
    return [round(float(v), 3) for v in np.atleast_1d(values)]


def _mean(values):
    values = [v for v in values if v is not None]
    return round(float(np.mean(values)), 3) if values else None


def shared_machine(record: dict) -> bool:
    """Whether another run shared the machine: this runner's own (`--jobs`) or any other trainer seen."""
    return record.get("concurrent_runs", 1) > 1 or record["cost"].get("other_trainers_peak", 0) > 0


def hardware_label(record: dict) -> str:
    """The machine a run ran on, in words: CPU, cores, GPU."""
    hw = record.get("hardware") or {}
    return f"{hw.get('cpu', '?')}, {hw.get('cores', '?')} cores, GPU {hw.get('gpu') or 'none'}"


def _constant_return(runs: list[dict]) -> float | None:
    """The one value every evaluation of every run returned (deterministic and stochastic), if there is one:
    a sparse-reward task that no run ever scored on, say."""
    values = {
        v for r in runs for key in ("deterministic", "stochastic") for v in r["curve"][key] if v is not None
    }
    values |= {r["final"]["mean"] for r in runs}
    return values.pop() if len(values) == 1 else None


def _entry(runs: list[dict]) -> dict:
    """One (task, variant) cell of the summary: returns, curves, cost and hardware across its seeds."""
    finals = np.asarray([r["final"]["mean"] for r in runs], dtype=float)
    # A diverged run stopped early, so its wall-clock is not what a run costs; it counts for the costs only
    # when every seed diverged.
    timed = [r for r in runs if "diverged" not in r] or runs
    machines = [hardware_label(r) for r in runs]
    timed_machines = [hardware_label(r) for r in timed]
    entry = {
        "method": runs[0]["method"],
        "seeds": [r["seed"] for r in runs],
        "final_mean": round(float(finals.mean()), 3),
        "final_std": round(float(finals.std()), 3),
        "final_per_seed": _round(finals),
        **stats.iqm_interval(finals),
        "curve": _curve(runs, "deterministic"),
        "curve_stochastic": _curve(runs, "stochastic"),
        "env_steps": timed[0]["final"]["env_steps"],
        "wall_s_mean": _mean(r["cost"]["wall_s"] for r in timed),
        "wall_s_min": round(min(r["cost"]["wall_s"] for r in timed), 3),
        "wall_s_min_by_hardware": {
            label: round(
                min(r["cost"]["wall_s"] for r, m in zip(timed, timed_machines, strict=True) if m == label), 3
            )
            for label in sorted(set(timed_machines))
        },
        "peak_rss_mib_mean": _mean(r["cost"].get("peak_rss_mib") for r in runs),
        "mean_rss_mib_mean": _mean(r["cost"].get("mean_rss_mib") for r in runs),
        "peak_gpu_mib_mean": _mean(r["cost"].get("peak_gpu_mib") for r in runs),
        "mean_gpu_mib_mean": _mean(r["cost"].get("mean_gpu_mib") for r in runs),
        "hardware": sorted(set(machines)),
        "hardware_per_seed": machines,
        "runs_sharing_machine": sum(shared_machine(r) for r in runs),
        "reused_from": sorted({r["reused_from"] for r in runs if r.get("reused_from")}),
        "constant_return": _constant_return(runs),
        "diverged": [
            {
                "seed": r["seed"],
                "iteration": r["diverged"]["iteration"],
                "quantity": r["diverged"]["quantity"],
                "last_eval_env_steps": r["final"]["env_steps"],
            }
            for r in runs
            if "diverged" in r
        ],  # fmt: skip
    }
    kls = [r["path_kl_init"] for r in runs if r.get("path_kl_init")]
    if len(kls) == len(runs):  # a fine-tuning column: how far each seed's policy moved from its clone
        n = min(len(k["value"]) for k in kls)
        values = np.asarray([k["value"][:n] for k in kls])
        entry["path_kl_init"] = {
            "env_steps": kls[0]["env_steps"][:n],
            "mean": _round(values.mean(0)),
            "final_per_seed": _round(values[:, -1]),
            "final_mean": _round(values[:, -1].mean())[0],
            "final_std": _round(values[:, -1].std())[0],
        }
    clips = [r["step_clip_frac"] for r in runs if r.get("step_clip_frac")]
    if clips:
        n = min(len(c["value"]) for c in clips)
        values = np.asarray([c["value"][:n] for c in clips])
        entry["step_clip_frac"] = {
            "env_steps": clips[0]["env_steps"][:n],
            "mean": _round(values.mean(0)),
            "mean_over_training": _round(values.mean())[0],
            "peak": _round(values.mean(0).max())[0],
        }
    return entry


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


def _aggregate_iqm(tasks: dict[str, dict]) -> dict | None:
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
    None when fewer than 2 tasks are left: a single task would repeat the per-task IQM."""
    paper = {v for entries in tasks.values() for v, e in entries.items() if not e.get("reference")}
    if not paper:
        return None
    best = {t: max(e["final_mean"] for e in _scale_setters(entries)) for t, entries in tasks.items()}
    usual = _usual_seed_count(tasks, paper)
    left_out = {t: FEW_COLUMNS.format(seeds=usual) for t, entries in tasks.items()
                if 2 * sum(len(entries[v]["seeds"]) >= usual for v in paper & set(entries)) <= len(paper)}  # fmt: skip
    left_out |= {t: "no positive mean" for t in tasks if t not in left_out and best[t] <= 0}
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
        matrix = [[dict(zip(tasks[t][variant]["seeds"], tasks[t][variant]["final_per_seed"], strict=True))[s]
                   / best[t] for t in usable] for s in seeds]  # fmt: skip
        per_column[variant] = {**stats.iqm_interval(matrix), "seeds": seeds}
    return {"tasks": usable, "left_out": left_out, "normalised_by": {t: best[t] for t in usable},
            "columns": per_column}  # fmt: skip


def summarize(suite_name: str, records: list[dict], probes: dict[str, dict] | None = None) -> dict:
    """The `<suite>.json` summary (schema in hub_cards/results/README.md); `probes` are the exploration
    probe's entries by env (`PROBE_FILE`), kept for the tasks the suite ran."""
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
        for r in records:
            if r["task"] == task:
                by_variant.setdefault(r["variant"], []).append(r)
        if not by_variant:
            continue
        tasks[task] = {}
        for variant in sorted(by_variant, key=lambda v: order.get(v, len(order))):
            entry = _entry(sorted(by_variant[variant], key=lambda r: r["seed"]))
            entry["reference"] = variant in order and suite.variant(variant).reference
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
        "statistics": {
            "confidence": stats.CONFIDENCE,
            "bootstrap_reps": stats.BOOTSTRAP_REPS,
            "bootstrap_seed": stats.BOOTSTRAP_SEED,
        },
        "tasks": tasks,
        "aggregate_iqm": _aggregate_iqm(tasks) if with_statistics else None,
        "exploration_probe": {task: entry for task, entry in (probes or {}).items() if task in tasks},
    }


# ---------------------------------------------------------------------------------------------- tables
def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def columns(tasks: dict[str, dict]) -> list[str]:
    """Every variant that ran any task, in the summary's (the suite's) order."""
    return list({v: None for entries in tasks.values() for v in entries})


def _header(summary: dict, variants: list[str]) -> list[str]:
    names = [f"{v} (reference)" if any(e.get(v, {}).get("reference") for e in summary["tasks"].values())
             else v for v in variants]  # fmt: skip
    return ["| task | " + " | ".join(names) + " |", "|---|" + "---|" * len(variants)]


def _rows(summary: dict, variants: list[str], cell) -> list[str]:
    """One table row per task; `cell(entries, entry)` formats one column's entry (absent columns: "-")."""
    return [
        f"| {task} | "
        + " | ".join("-" if v not in entries else cell(entries, entries[v]) for v in variants)
        + " |"
        for task, entries in summary["tasks"].items()
    ]


def _interval_text(point: float | None, ci: list[float] | None, digits: int) -> str:
    return _fmt(point, digits) + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def _mean_std_cell(entries: dict, e: dict) -> str:
    n = len(e["seeds"])
    # One seed has no spread: "± 0.0" would read as a measured zero variance.
    text = (
        f"{e['final_mean']:.1f} ± {e['final_std']:.1f} ({n})" if n > 1 else f"{e['final_mean']:.1f} (1 seed)"
    )
    best = max(other["final_mean"] for other in entries.values())
    text = f"**{text}**" if e["final_mean"] == best and len(entries) > 1 else text
    # .get: summaries written before diverged runs were recorded have no such field.
    return text + (f" ({len(e['diverged'])} diverged)" if e.get("diverged") else "")


def _comparison_text(c: dict) -> str:
    if c["p_improvement"] is None:
        return c["verdict"]
    return (
        f"{_interval_text(c['p_improvement'], c['ci'], 2)} {c['verdict']} (rank test p = {c['rank_p']:.2f})"
    )


def _comparison_cell(entries: dict, e: dict) -> str:
    c = e["comparison"]
    if c is None:
        return "-"
    # A benchmark's comparisons all have GSB-MDPO on one side; an ablation's controls differ per column.
    return (f"vs {c['over']}: " if c["of"] != PROPOSED else "") + _comparison_text(c)


def markdown(summary: dict) -> str:
    if summary["kind"] == "compute":
        return _compute_table(summary)
    variants = columns(summary["tasks"])
    ablation = summary["kind"] == "ablation"
    lines = [
        f"**{summary['suite']}**: {summary['description']} Budget {summary['budget_env_steps']:,} env steps "
        f"({summary['budget_note']}); final deterministic return, mean ± std across seeds (seeds). "
        f"Hardware: {_hardware_text(summary)}.",
        "",
        *_header(summary, variants),
        *_rows(summary, variants, _mean_std_cell),
        "",
        "Interquartile mean (IQM) of the final return across seeds, with its 95% stratified-bootstrap interval "
        "(with fewer than 4 seeds the IQM is the mean; one seed has no interval):",
        "",
        *_header(summary, variants),
        *_rows(summary, variants, lambda entries, e: _interval_text(e["iqm"], e["ci"], 1)),
    ]
    if any(e["comparison"] for entries in summary["tasks"].values() for e in entries.values()):
        reading = ("P(column > its control), the ablated variant against the column it is judged against"
                   if ablation else f"P({PROPOSED} > column), {PROPOSED} against each column")  # fmt: skip
        lines += [
            "",
            f"Probability of improvement {reading}, with its 95% interval (both columns' seeds resampled "
            f"independently) and the verdict for {'the variant' if ablation else PROPOSED}: better or worse "
            f"only when the whole interval lies above or below 0.5, and only with >= "
            f"{stats.MIN_SEEDS_FOR_VERDICT} seeds in both columns; otherwise inconclusive. Beside it, the two-sided "
            f"p-value of the Mann-Whitney rank test of the same seeds: two columns whose seeds do not overlap get "
            f"the interval [1.00, 1.00] (or [0.00, 0.00]) at any seed count, but with 3 seeds against 3 such an "
            f"order has p = 0.10, so a 3-seed verdict is a bootstrap statement, not a significant difference:",
            "",
            *_header(summary, variants),
            *_rows(summary, variants, _comparison_cell),
        ]
    lines += _aggregate_lines(summary)
    lines += _unrun_task_lines(summary)
    lines += _constant_lines(summary)
    lines += _probe_lines(summary)
    lines += _diverged_lines(summary)
    lines += _fastest_lines(summary, variants)
    shared = [f"{v} on {task} from {', '.join(e['reused_from'])}" for task, entries in summary["tasks"].items()
              for v, e in entries.items() if e.get("reused_from")]  # fmt: skip
    if shared:
        lines += [
            "",
            f"Runs shared with another suite (the same trainer command, trained once): {'; '.join(shared)}.",
        ]
    if summary["kind"] == "finetune":
        lines += _finetune_lines(summary)
    if ablation:
        lines += ["", "| task | variant | deterministic ODE eval | stochastic SDE eval | P(ODE > SDE) | step-clip "
                  "fraction: mean over training (peak) |", "|---|---|---|---|---|---|"]  # fmt: skip
        for task, entries in summary["tasks"].items():
            for v, e in entries.items():
                det, sto = e["curve"]["mean"], e["curve_stochastic"]["mean"]
                ode = _comparison_text(e["ode_vs_sde"]) if "ode_vs_sde" in e else "-"
                lines.append(f"| {task} | {v} | {_fmt(det[-1] if det else None)} | "
                             f"{_fmt(sto[-1] if sto else None)} | {ode} | {_clip_text(e)} |")  # fmt: skip
        lines += ["", "ODE and SDE returns are the means at the last evaluation; P(ODE > SDE) compares the "
                  "two evaluations' per-seed returns there, by the same rule."]  # fmt: skip
    else:
        clips = [f"{task} {_clip_text(e)}" for task, entries in summary["tasks"].items()
                 if (e := entries.get(PROPOSED)) and "step_clip_frac" in e]  # fmt: skip
        if clips:
            lines += ["", f"{PROPOSED} step-clip fraction (share of rollout samples whose step log-ratio is "
                      f"clipped), mean over training (peak of the across-seed mean): {'; '.join(clips)}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def _aggregate_lines(summary: dict) -> list[str]:
    agg = summary.get("aggregate_iqm")
    if not agg or not agg["columns"]:
        return []
    parts = [
        f"{v} {_interval_text(c['iqm'], c['ci'], 2)} ({stats.seeds_text(len(c['seeds']), len(c['seeds']))})"
        for v, c in agg["columns"].items()
    ]
    missing = [v for v in columns(summary["tasks"]) if v not in agg["columns"]]
    references = any(e.get("reference") for entries in summary["tasks"].values() for e in entries.values())
    scale = (
        "the best paper column's mean on that task, so 1.00 is the best paper column there and a reference "
        "column can exceed it" if references else "the best column mean on that task, so 1.00 is the best column there"
    )  # fmt: skip
    return [
        "",
        f"Aggregate IQM over {', '.join(agg['tasks'])}, on normalised returns (each task's final returns "
        f"divided by {scale}), with its 95% "
        f"stratified-bootstrap interval; each column with the seeds it ran on every task: {'; '.join(parts)}"
        + (f" (not yet run on every task: {', '.join(missing)})." if missing else "."),
        *([f"Left out of the aggregate: {'; '.join(f'{t} ({why})' for t, why in agg['left_out'].items())}."]
          if agg.get("left_out") else []),
    ]  # fmt: skip


def _unrun_task_lines(summary: dict) -> list[str]:
    # A task added to a suite shows up in the tables only with its first run; until then say it is planned,
    # so that a reader does not take the tables for the whole suite.
    unrun = [t for t in summary.get("planned_tasks", []) if t not in summary["tasks"]]
    if not unrun:
        return []
    return ["", f"Tasks of this suite with no run yet (not in the tables above): {', '.join(unrun)}."]


def _constant_lines(summary: dict) -> list[str]:
    """Tasks on which every run of every column returned one value at every evaluation: no method ever left
    its starting return, so ties there say nothing about the methods."""
    flat = {task: values.pop() for task, entries in summary["tasks"].items()
            if None not in (values := {e.get("constant_return") for e in entries.values()}) and len(values) == 1}  # fmt: skip
    if not flat:
        return []
    tasks = ", ".join(f"{task} ({value:g})" for task, value in flat.items())
    return ["", f"Every evaluation of every run, deterministic and stochastic, returned the same value on: {tasks}. "
            "No method left its starting return there, so at this budget the task cannot rank the methods."]  # fmt: skip


def _probe_lines(summary: dict) -> list[str]:
    """What the exploration probe found on each probed task: is its reward reachable at all, and does
    undirected exploration find it?"""
    lines = []
    for entry in summary["exploration_probe"].values():
        rnd, swing = entry["random"], entry["swing"]
        best = swing["best"]
        lines += ["", (
            f"On {entry['env']}, the exploration probe (`python -m trainers.experiments.exploration_probe --env "
            f"{entry['env']}`, `{PROBE_FILE}`) drives the same env: {rnd['episodes']} episodes of i.i.d. uniform "
            f"random actions scored {rnd['mean']:g} on average ({rnd['rewarded_episodes']} with any reward), while "
            f"{swing['rewarded_episodes']} of {swing['episodes']} open-loop periodic swings scored, the best "
            f"{best['return']:g} at {best['frequency_hz']:g} Hz. So the reward is reachable through this env; a run "
            "that stays at 0 there has not found it, which at this budget is a failure to explore, not an "
            "unreachable reward.")]  # fmt: skip
    return lines


def _hardware_labels(summary: dict) -> list[str]:
    return sorted(
        {lb for entries in summary["tasks"].values() for e in entries.values() for lb in e["hardware"]}
    )


def _diverged_lines(summary: dict) -> list[str]:
    runs = [f"{v} on {task} seed {d['seed']} (non-finite {d['quantity']} in iteration {d['iteration']}; last "
            f"evaluation at {d['last_eval_env_steps']:,} env steps)"
            for task, entries in summary["tasks"].items() for v, e in entries.items() for d in e.get("diverged", [])]  # fmt: skip
    if not runs:
        return []
    return ["", f"Runs that diverged: training stopped on a non-finite update, and the tables count each such run "
            f"with the last return it measured before the stop: {'; '.join(runs)}. A diverged run's wall-clock is "
            f"left out of the costs unless every seed of its column diverged."]  # fmt: skip


def _fastest_lines(summary: dict, variants: list[str]) -> list[str]:
    """Runs may have shared the machine (with each other, or with other work), so the fastest run per method
    is the closest to its uncontended cost; a suite that ran on several machines gets one list per machine."""
    fastest: dict[str, list[str]] = {}
    for label in _hardware_labels(summary):
        for v in variants:
            walls = [
                w
                for entries in summary["tasks"].values()
                if (e := entries.get(v)) and (w := e["wall_s_min_by_hardware"].get(label))
            ]
            if walls:
                fastest.setdefault(label, []).append(f"{v} {min(walls) / 60:.1f}")
    if not fastest:
        return []
    if len(fastest) == 1:
        text = f"(on the hardware above): {', '.join(next(iter(fastest.values())))}"
    else:
        text = "; ".join(f"on {label}: {', '.join(runs)}" for label, runs in fastest.items())
    return ["", f"Fastest run per method, minutes end to end {text}.", *_cost_table_lines(summary, variants)]


def _cost_table_lines(summary: dict, variants: list[str]) -> list[str]:
    """A run's cost depends on the task (its simulation cost per step) as well as on the method, so a suite
    with several tasks also gets its fastest run per task and column, one table per machine."""
    if len(summary["tasks"]) < 2:
        return []
    lines = []
    for label in _hardware_labels(summary):

        def cell(entries: dict, e: dict, label=label) -> str:
            wall = e["wall_s_min_by_hardware"].get(label)
            return "-" if wall is None else f"{wall / 60:.1f}"

        lines += ["", f"Fastest run per task and column, minutes end to end on {label}:", "",
                  *_header(summary, variants), *_rows(summary, variants, cell)]  # fmt: skip
    return lines


def _finetune_lines(summary: dict) -> list[str]:
    """How far each fine-tuning column moved from the policy it started from (the lambda trade-off), and the
    verdicts a reader of a fine-tuning suite asks for first, in words."""
    lines = ["", "Path KL from the cloned policy (`train/path_kl_init`: the KL of the policy's generation paths "
             "from the clone's, on each iteration's observations) at the last iteration, mean ± std across seeds, "
             "beside the final return:", "", "| task | column | final return | path KL to the clone |",
             "|---|---|---|---|"]  # fmt: skip
    for task, entries in summary["tasks"].items():
        for v, e in entries.items():
            kl = e.get("path_kl_init")
            kl_text = f"{kl['final_mean']:.3g} ± {kl['final_std']:.2g}" if kl else "- (fresh actor)"
            lines.append(f"| {task} | {v} | {_mean_std_cell({v: e}, e)} | {kl_text} |")
    lines += ["", "In words (the `gsb_mdpo` column, GSB-MDPO fine-tuned from the clone, against each other "
              "column at the same budget; the probability of improvement and the rule above):"]  # fmt: skip
    for task, entries in summary["tasks"].items():
        against = [_verdict_words(v, e["comparison"]) for v, e in entries.items() if e.get("comparison")]
        lines.append(
            f"- {task}: fine-tuned GSB-MDPO " + ("; ".join(against) or "has no comparison yet") + "."
        )
    return lines


def _verdict_words(column: str, c: dict) -> str:
    verb = {"better": "beats", "worse": "is beaten by"}.get(c["verdict"], "is inconclusive against")
    p = f"P = {_interval_text(c['p_improvement'], c['ci'], 2)}" if c["p_improvement"] is not None else ""
    seeds = c["verdict"].removeprefix("inconclusive ").strip("()") if verb.startswith("is inc") else ""
    detail = ", ".join(x for x in (p, seeds) if x)
    return f"{verb} `{column}`" + (f" ({detail})" if detail else "")


def _clip_text(entry: dict) -> str:
    clip = entry.get("step_clip_frac")
    return f"{clip['mean_over_training']:.3f} ({clip['peak']:.3f})" if clip else "-"


def _hardware_text(summary: dict) -> str:
    """One machine for the whole table, or how many runs ran on each (the returns do not depend on it; the
    JSON's `hardware_per_seed` says which), and how many runs shared their machine with other runs (which
    slows only their wall-clock)."""
    runs_on: dict[str, int] = {}
    shared = total = 0
    for entries in summary["tasks"].values():
        for e in entries.values():
            for label in e["hardware_per_seed"]:
                runs_on[label] = runs_on.get(label, 0) + 1
            shared += e["runs_sharing_machine"]
            total += len(e["seeds"])
    if len(runs_on) <= 1:
        text = next(iter(runs_on), "none recorded")
    else:
        text = "; ".join(f"{label} ({n} run{'s' * (n != 1)})" for label, n in runs_on.items())
        text += f"; each seed's machine is listed in `{summary['suite']}.json`"
    return text + (f" ({shared} of {total} runs shared the machine with another run)" if shared else "")


def _compute_table(summary: dict) -> str:
    gpu = any(e.get("peak_gpu_mib_mean") for t in summary["tasks"].values() for e in t.values())
    memory = "GPU memory" if gpu else "RSS"
    lines = []
    for task, entries in summary["tasks"].items():
        base = entries.get("gaussian_ppo", {}).get("wall_s_mean")
        lines += [
            f"**{summary['suite']}** on {task}, {summary['budget_env_steps']:,} env steps per method "
            f"({summary['budget_note']}); hardware: {(summary['hardware'] or {}).get('cpu', '?')}, "
            f"GPU {(summary['hardware'] or {}).get('gpu') or 'none'}. Wall-clock is end-to-end (process start to exit).",
            "",
            f"| method | wall-clock | rel. time | peak {memory} | mean {memory} |",
            "|---|---|---|---|---|",
        ]
        for v, e in entries.items():
            peak = e["peak_gpu_mib_mean"] if gpu else e["peak_rss_mib_mean"]
            mean = e["mean_gpu_mib_mean"] if gpu else e["mean_rss_mib_mean"]
            rel = f"{e['wall_s_mean'] / base:.2f}×" if base else "-"
            lines.append(f"| {v} | {e['wall_s_mean'] / 60:.2f} min | {rel} | {_fmt(peak / 1024, 2)} GB | "
                         f"{_fmt(mean / 1024, 2)} GB |")  # fmt: skip
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- plots
def plot(summary: dict) -> bytes | None:
    """Learning curves, one panel per task, mean ± one std band per method (PNG bytes)."""
    if summary["kind"] == "compute" or not summary["tasks"]:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(summary["tasks"])
    ablation = summary["kind"] == "ablation"
    finetune = summary["kind"] == "finetune"
    panels = len(tasks) * (2 if finetune else 1) + (1 if ablation else 0)
    cols = min(panels, 4)
    rows = -(-panels // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False, dpi=100)
    colors = plt.get_cmap("tab10")
    variants = columns(summary["tasks"])
    for ax, task in zip(axes.flat, tasks, strict=False):
        for v, e in summary["tasks"][task].items():
            x = np.asarray(e["curve"]["env_steps"]) / 1e6
            mean, std = np.asarray(e["curve"]["mean"]), np.asarray(e["curve"]["std"])
            color = colors(variants.index(v) % 10)
            ax.plot(x, mean, label=v, color=color, lw=1.5)
            ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2, lw=0)
        ax.set_title(task)
        ax.set_xlabel("env steps (M)")
        ax.set_ylabel("return")
        ax.grid(alpha=0.3)
    if ablation:
        ax = axes.flat[len(tasks)]
        for v, e in summary["tasks"][tasks[0]].items():
            if "step_clip_frac" in e:
                x = np.asarray(e["step_clip_frac"]["env_steps"]) / 1e6
                ax.plot(x, e["step_clip_frac"]["mean"], label=v, color=colors(variants.index(v) % 10), lw=1)
        ax.set_title(f"step-clip fraction ({tasks[0]})")
        ax.set_xlabel("env steps (M)")
        ax.grid(alpha=0.3)
    if finetune:
        for ax, task in zip(list(axes.flat)[len(tasks) :], tasks, strict=False):
            for v, e in summary["tasks"][task].items():
                if "path_kl_init" in e:
                    x = np.asarray(e["path_kl_init"]["env_steps"]) / 1e6
                    ax.plot(x, e["path_kl_init"]["mean"], label=v, color=colors(variants.index(v) % 10), lw=1)
            ax.set_title(f"path KL to the clone ({task})")
            ax.set_yscale("symlog", linthresh=0.1)  # a diverged column must not flatten the others
            ax.set_xlabel("env steps (M)")
            ax.grid(alpha=0.3)
    for ax in list(axes.flat)[panels:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------- files
def ledger_suites(results_dir: Path) -> list[str]:
    return sorted(p.name.removesuffix(".runs.jsonl") for p in results_dir.glob("*.runs.jsonl"))


def read_probes(path: Path) -> dict[str, dict]:
    """The exploration probe's entries by env in `path` ({} when there is none yet).

    Raises:
        ValueError: naming the file, when it is not valid JSON or not an object.
    """
    if not path.exists():
        return {}
    try:
        entries = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path} is not valid JSON ({err}); move it away and rerun trainers.experiments.exploration_probe"
        ) from None
    if not isinstance(entries, dict):
        raise ValueError(f"{path} holds {type(entries).__name__}, not the probe's entries by env")
    return entries


def summaries(results_dir: Path, suites: list[str] | None = None) -> dict[str, dict]:
    """The summaries of `suites` (default: every ledger's), by suite name."""
    names = ledger_suites(results_dir) if suites is None else suites
    probes = read_probes(results_dir / PROBE_FILE)
    return {s: summarize(s, _read_ledger(results_dir / f"{s}.runs.jsonl"), probes) for s in names}


def suite_files(summary: dict, results_dir: Path) -> dict[Path, bytes]:
    """Every file one suite's summary determines, with its content."""
    suite = summary["suite"]
    files = {
        results_dir / f"{suite}.json": (json.dumps(summary, indent=1) + "\n").encode(),
        results_dir / f"{suite}.md": markdown(summary).encode(),
    }
    png = plot(summary)
    if png is not None:
        files[results_dir / f"{suite}.png"] = png
    return files


def algorithms_json() -> str:
    """`algorithms.json`: name -> label, policy kind and whether it is a reference column, in table order."""
    table = {
        a.name: {"label": a.label, "policy_kind": a.policy_kind, "reference": a.reference} for a in ALGORITHMS
    }
    return json.dumps({"algorithms": table}, indent=1) + "\n"


def generated(
    all_summaries: dict[str, dict], suites: list[str], results_dir: Path
) -> tuple[dict[Path, bytes], dict[str, str]]:
    """The files of `suites`, `claims.md` (which reads every summary) and `algorithms.json`, and the README
    blocks they fill: `suite:NAME` for each suite's table, `claims` for the claims table."""
    files, blocks = {}, {}
    for suite in suites:
        files |= suite_files(all_summaries[suite], results_dir)
        blocks[f"suite:{suite}"] = files[results_dir / f"{suite}.md"].decode()
    files[results_dir / "claims.md"] = claims.markdown(all_summaries).encode()
    files[results_dir / ALGORITHMS_FILE] = algorithms_json().encode()
    blocks["claims"] = claims.readme_block(all_summaries)
    return files, blocks


def readme_with_blocks(readme: str, blocks: dict[str, str]) -> str:
    """README text with each `<!-- NAME:start -->...<!-- NAME:end -->` block present in it regenerated (NAME
    is `suite:<suite>` or `claims`); blocks the README does not have are left out."""
    for name, text in blocks.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        if start in readme and end in readme:
            head, rest = readme.split(start, 1)
            _, tail = rest.split(end, 1)
            readme = f"{head}{start}\n{text}{end}{tail}"
    return readme


def write_suites(
    suites: list[str] | None = None, results_dir: Path = RESULTS_DIR, readme: Path = README
) -> None:
    """Regenerate `suites` (default: every ledger's) and the claims, and their README blocks when
    `results_dir` is the committed one. The claims read every ledger of a defined suite: one left by a
    suite since removed has no summary, and must not stop the runner's regeneration of the suite it ran."""
    all_summaries = summaries(results_dir, [s for s in ledger_suites(results_dir) if s in SUITES])
    files, blocks = generated(all_summaries, suites or list(all_summaries), results_dir)
    for path, content in files.items():
        atomic_write_bytes(path, content)
    if readme.exists() and results_dir.resolve() == RESULTS_DIR.resolve():
        atomic_write_bytes(readme, readme_with_blocks(readme.read_text(), blocks).encode())


def write_suite(suite: str, results_dir: Path = RESULTS_DIR, readme: Path = README) -> None:
    """What the benchmark runner calls after each finished run."""
    write_suites([suite], results_dir, readme)


def stale_files(results_dir: Path = RESULTS_DIR, readme: Path = README) -> list[str]:
    """Committed files that differ from what the ledgers generate (empty when up to date)."""
    all_summaries = summaries(results_dir)
    files, blocks = generated(all_summaries, list(all_summaries), results_dir)
    stale = [str(p) for p, content in files.items() if not p.exists() or p.read_bytes() != content]
    if readme.exists() and readme.read_text() != readme_with_blocks(readme.read_text(), blocks):
        stale.append(str(readme))
    return stale


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", nargs="*", help="suites to regenerate (default: every ledger)")
    parser.add_argument("--check", action="store_true", help="only report files that are out of date")
    args = parser.parse_args(argv)
    try:
        _run(parser, args)
    except ValueError as err:
        sys.exit(f"error: {err}")


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.check:
        stale = stale_files()
        if stale:
            sys.exit("out of date (run `python -m trainers.benchmark.aggregate`): " + ", ".join(stale))
        print("benchmark summaries are up to date")
        return
    known = ledger_suites(RESULTS_DIR)
    if unknown := [s for s in args.suite or () if s not in known]:
        parser.error(
            f"no ledger for {', '.join(unknown)} in {RESULTS_DIR}; suites with a ledger: {', '.join(known)}"
        )
    write_suites(args.suite)
    print(f"wrote {', '.join(args.suite or known)} and claims.md")


if __name__ == "__main__":
    main()
