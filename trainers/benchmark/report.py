"""A suite's summary as the Markdown of its documentation page: the tables (built here, cell by cell) and the
prose around them (in `templates/`, so that the words are read and edited as words)."""

from pathlib import Path

import jinja2

from ..registry import PROPOSED
from . import stats, targets
from .ledger import PROBE_FILE
from .report_cells import (
    LEVEL,
    clip_text,
    comparison_cell,
    comparison_text,
    fmt,
    interval_text,
    mean_std_cell,
    table,
    verdict_words,
)
from .report_cost import cost_tables, fastest_text, hardware_text
from .summary import columns

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # Markdown, not HTML
)
TEMPLATES.filters["g"] = lambda value: f"{value:g}"


def markdown(summary: dict) -> str:
    """The suite's tables and their reading, as Markdown."""
    if summary["kind"] == "compute":
        return _compute_markdown(summary)
    variants = columns(summary["tasks"])
    compared = any(e["comparison"] for entries in summary["tasks"].values() for e in entries.values())
    return TEMPLATES.get_template("suite.md.jinja").render(
        s=summary,
        proposed=PROPOSED,
        min_seeds=stats.MIN_SEEDS_FOR_VERDICT,
        level=LEVEL,
        probe_file=PROBE_FILE,
        ablation=summary["kind"] == "ablation",
        hardware=hardware_text(summary),
        mean_table=table(summary, variants, mean_std_cell),
        iqm_table=table(summary, variants, lambda entries, e: interval_text(e["iqm"], e["ci"], 1)),
        comparison_table=table(summary, variants, comparison_cell) if compared else None,
        aggregate=_aggregate(summary),
        unrun=[t for t in summary.get("planned_tasks", []) if t not in summary["tasks"]],
        unrun_columns=_unrun_columns(summary, variants),
        references=_reference_verdicts(summary) if summary["kind"] == "benchmark" else [],
        constant=_constant_tasks(summary),
        probes=list(summary["exploration_probe"].values()),
        diverged=_diverged_runs(summary),
        fastest=fastest_text(summary, variants),
        cost_tables=cost_tables(summary, variants),
        shared=[
            f"{v} on {task} from {', '.join(e['reused_from'])}"
            for task, entries in summary["tasks"].items()
            for v, e in entries.items()
            if e.get("reused_from")
        ],
        finetune=_finetune(summary) if summary["kind"] == "finetune" else None,
        target_rows=_target_rows(summary),
        floor_episodes=summary.get("floors", {}).get("episodes"),
        margin=targets.NOT_WORSE_MARGIN,
        most=targets.MOST_OF_GAP,
        ablation_rows=_ablation_rows(summary),
        clips=[
            f"{task} {clip_text(e)}"
            + (f", samples {clip_text(e, 'sample_clip_frac')}" if "sample_clip_frac" in e else "")
            for task, entries in summary["tasks"].items()
            if (e := entries.get(PROPOSED)) and "step_clip_frac" in e
        ],
    )


# ------------------------------------------------------------------------------------- what the prose reads
def _aggregate(summary: dict) -> dict | None:
    agg = summary.get("aggregate_iqm")
    if not agg or not agg["columns"]:
        return None
    missing = [v for v in columns(summary["tasks"]) if v not in agg["columns"]]
    return {
        "tasks": agg["tasks"],
        "parts": [
            f"{v} {interval_text(c['iqm'], c['ci'], 2)} ({stats.seeds_text(len(c['seeds']), len(c['seeds']))})"
            for v, c in agg["columns"].items()
        ],
        "missing_text": f" (not yet run on every task: {', '.join(missing)})." if missing else ".",
        "from_floor": "measured_from_doing_nothing" in agg,
        "references": any(
            e.get("reference") for entries in summary["tasks"].values() for e in entries.values()
        ),
        "left_out": [f"{t} ({why})" for t, why in agg.get("left_out", {}).items()],
    }


def _unrun_columns(summary: dict, variants: list[str]) -> list[str]:
    """The suite's columns with no run on any task yet (a column just added), reference columns marked."""
    return [
        f"{c['name']} (reference)" if c["reference"] else c["name"]
        for c in summary.get("planned_columns", [])
        if c["name"] not in variants
    ]


def _reference_verdicts(summary: dict) -> list[tuple[str, list[str]]]:
    """Where the proposed method stands against each reference column on each task, in words: the comparison
    table's verdicts, read out for the columns that are not the paper's (so that no reader has to find them
    among the paper columns' cells)."""
    rows = []
    for task, entries in summary["tasks"].items():
        against = [
            verdict_words(v, e["comparison"], entries)
            for v, e in entries.items()
            if e.get("reference") and e.get("comparison")
        ]
        if against:
            rows.append((task, against))
    return rows


def _constant_tasks(summary: dict) -> list[str]:
    """Tasks on which every run of every column returned one value at every evaluation: no method ever left
    its starting return, so ties there say nothing about the methods."""
    flat = []
    for task, entries in summary["tasks"].items():
        values = {e.get("constant_return") for e in entries.values()}
        if None not in values and len(values) == 1:
            flat.append(f"{task} ({values.pop():g})")
    return flat


def _diverged_runs(summary: dict) -> list[str]:
    return [
        f"{v} on {task} seed {d['seed']} (non-finite {d['quantity']} in iteration {d['iteration']}; last "
        f"evaluation at {d['last_eval_env_steps']:,} env steps)"
        for task, entries in summary["tasks"].items()
        for v, e in entries.items()
        for d in e.get("diverged", [])
    ]


def _finetune(summary: dict) -> dict:
    """How far each fine-tuning column moved from the policy it started from (the lambda trade-off), and the
    verdicts a reader of a fine-tuning suite asks for first, in words."""
    rows = []
    for task, entries in summary["tasks"].items():
        for v, e in entries.items():
            kl = e.get("path_kl_init")
            kl_text = f"{kl['final_mean']:.3g} ± {kl['final_std']:.2g}" if kl else "- (fresh actor)"
            rows.append(f"| {task} | {v} | {mean_std_cell({v: e}, e)} | {kl_text} |")
    verdicts = [
        (
            task,
            [verdict_words(v, e["comparison"], entries) for v, e in entries.items() if e.get("comparison")],
        )
        for task, entries in summary["tasks"].items()
    ]
    budgets = [
        f"| {task} | {v} | {b['starts_from']} | {b['own_env_steps']:,} | {b['before_at_most']:,} | "
        f"{b['total_at_most']:,} |"
        for task, entries in summary["tasks"].items()
        for v, e in entries.items()
        if (b := e.get("budget"))
    ]
    return {"rows": rows, "verdicts": verdicts, "budgets": budgets}


def _target_rows(summary: dict) -> list[str]:
    """The floors and the targets' verdicts per task (a suite with floors)."""
    rows = []
    for task, verdict in summary.get("targets", {}).items():
        floors = summary["floors"]["tasks"][task]
        scores = verdict["scores"]
        rows.append(
            f"| {task} | {fmt(floors['do-nothing']['mean'])} | {fmt(floors['random']['mean'])} | {verdict['best']} "
            f"| {scores[targets.PROPOSED]:.2f} | {scores[targets.SB3_DEFAULTS]:.2f} "
            f"| {'yes' if verdict['not_worse_than_sb3_defaults'] else '**no**'} "
            f"| {'yes' if verdict['closes_most_of_gap'] else '**no**'} |"
        )
    return rows


def _ablation_rows(summary: dict) -> list[str]:
    if summary["kind"] != "ablation":
        return []
    rows = []
    for task, entries in summary["tasks"].items():
        for v, e in entries.items():
            det, sto = e["curve"]["mean"], e["curve_stochastic"]["mean"]
            last = e["curve"]["last_per_seed"], e["curve_stochastic"]["last_per_seed"]
            ode = comparison_text(e["ode_vs_sde"], *last) if "ode_vs_sde" in e else "-"
            rows.append(
                f"| {task} | {v} | {fmt(det[-1] if det else None)} | {fmt(sto[-1] if sto else None)} | "
                f"{ode} | {clip_text(e)} | {clip_text(e, 'sample_clip_frac')} |"
            )
    return rows


def _compute_markdown(summary: dict) -> str:
    """The paper's Table 3 for a compute suite: wall-clock and memory per method, relative to Gaussian PPO."""
    gpu = any(e.get("peak_gpu_mib_mean") for t in summary["tasks"].values() for e in t.values())
    tasks = []
    for task, entries in summary["tasks"].items():
        base = entries.get("gaussian_ppo", {}).get("wall_s_mean")
        rows = []
        for v, e in entries.items():
            peak = e["peak_gpu_mib_mean"] if gpu else e["peak_rss_mib_mean"]
            mean = e["mean_gpu_mib_mean"] if gpu else e["mean_rss_mib_mean"]
            rel = f"{e['wall_s_mean'] / base:.2f}×" if base else "-"
            rows.append(
                f"| {v} | {e['wall_s_mean'] / 60:.2f} min | {rel} | {fmt(peak / 1024, 2)} GB | "
                f"{fmt(mean / 1024, 2)} GB |"
            )
        tasks.append({"name": task, "rows": rows})
    hardware = summary["hardware"] or {}
    return TEMPLATES.get_template("compute.md.jinja").render(
        s=summary,
        tasks=tasks,
        memory="GPU memory" if gpu else "RSS",
        cpu=hardware.get("cpu", "?"),
        gpu=hardware.get("gpu") or "none",
    )
