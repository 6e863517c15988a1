"""A suite's summary as the Markdown of its documentation page: the tables (built here, cell by cell) and the
prose around them (in `templates/`, so that the words are read and edited as words)."""

from pathlib import Path

import jinja2

from ..registry import PROPOSED
from . import stats, targets
from .ledger import PROBE_FILE
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
        hardware=_hardware_text(summary),
        mean_table=_table(summary, variants, _mean_std_cell),
        iqm_table=_table(summary, variants, lambda entries, e: interval_text(e["iqm"], e["ci"], 1)),
        comparison_table=_table(summary, variants, _comparison_cell) if compared else None,
        aggregate=_aggregate(summary),
        unrun=[t for t in summary.get("planned_tasks", []) if t not in summary["tasks"]],
        unrun_columns=_unrun_columns(summary, variants),
        references=_reference_verdicts(summary) if summary["kind"] == "benchmark" else [],
        constant=_constant_tasks(summary),
        probes=list(summary["exploration_probe"].values()),
        diverged=_diverged_runs(summary),
        fastest=_fastest_text(summary, variants),
        cost_tables=_cost_tables(summary, variants),
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
            f"{task} {_clip_text(e)}"
            + (f", samples {_clip_text(e, 'sample_clip_frac')}" if "sample_clip_frac" in e else "")
            for task, entries in summary["tasks"].items()
            if (e := entries.get(PROPOSED)) and "step_clip_frac" in e
        ],
    )


# ------------------------------------------------------------------------------------------------ cells
def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def interval_text(point: float | None, ci: list[float] | None, digits: int) -> str:
    """ "0.83 [0.50, 1.00]": a point estimate with its interval, when it has one."""
    return _fmt(point, digits) + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def _table(summary: dict, variants: list[str], cell) -> str:
    """One row per task, one column per variant; `cell(entries, entry)` formats a cell ("-" where a column did
    not run the task). A reference column's header says so."""
    names = [
        f"{v} (reference)" if any(e.get(v, {}).get("reference") for e in summary["tasks"].values()) else v
        for v in variants
    ]
    lines = ["| task | " + " | ".join(names) + " |", "|---|" + "---|" * len(variants)]
    lines += [
        f"| {task} | "
        + " | ".join("-" if v not in entries else cell(entries, entries[v]) for v in variants)
        + " |"
        for task, entries in summary["tasks"].items()
    ]
    return "\n".join(lines)


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


LEVEL = 0.05
"""A suite page says "better" or "worse" only where the exact rank-sum test of that one comparison has a
two-sided p at most this (no correction over the page's comparisons: the claims page makes those); otherwise
it says in how many seed pairs the first column is ahead, beside the exact p."""


def _word(c: dict, x: list[float], y: list[float]) -> str:
    """ "better" or "worse" where the rank test supports it at LEVEL, else "ahead in k of n pairs"."""
    if c["rank_p"] is not None and c["rank_p"] <= LEVEL:
        return "better" if c["p_improvement"] > 0.5 else "worse"
    ahead = sum(a > b for a in x for b in y)
    return f"ahead in {ahead} of {len(x) * len(y)} pairs"


def comparison_text(c: dict, x: list[float], y: list[float]) -> str:
    """A comparison of runs `x` against runs `y`: the probability of improvement with its interval, the word
    (`_word`) and the exact rank-test p."""
    if c["p_improvement"] is None:
        return f"{_word(c, x, y)} ({_seeds(c)}: too few for a test)"
    return (
        f"{interval_text(c['p_improvement'], c['ci'], 2)} {_word(c, x, y)} (rank test p = {c['rank_p']:.2f})"
    )


def _seeds(c: dict) -> str:
    """The seed counts an untested comparison's verdict names ("3 vs 1 seeds")."""
    return c["verdict"].removeprefix("inconclusive (").removesuffix(")")


def _finals(entries: dict, c: dict) -> tuple[list[float], list[float]]:
    return entries[c["of"]]["final_per_seed"], entries[c["over"]]["final_per_seed"]


def _comparison_cell(entries: dict, e: dict) -> str:
    c = e["comparison"]
    if c is None:
        return "-"
    # A benchmark's comparisons all have GSB-MDPO on one side; an ablation's controls differ per column.
    return (f"vs {c['over']}: " if c["of"] != PROPOSED else "") + comparison_text(c, *_finals(entries, c))


def _clip_text(entry: dict, key: str = "step_clip_frac") -> str:
    clip = entry.get(key)
    return f"{clip['mean_over_training']:.3f} ({clip['peak']:.3f})" if clip else "-"


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
            _verdict_words(v, e["comparison"], entries)
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


def _hardware_labels(summary: dict) -> list[str]:
    return sorted(
        {lb for entries in summary["tasks"].values() for e in entries.values() for lb in e["hardware"]}
    )


def _fastest_text(summary: dict, variants: list[str]) -> str | None:
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
        return None
    if len(fastest) == 1:
        return f"(on the hardware above): {', '.join(next(iter(fastest.values())))}"
    return "; ".join(f"on {label}: {', '.join(runs)}" for label, runs in fastest.items())


def _cost_tables(summary: dict, variants: list[str]) -> list[tuple[str, str]]:
    """A run's cost depends on the task (its simulation cost per step) as well as on the method, so a suite
    with several tasks also gets its fastest run per task and column, one table per machine."""
    if len(summary["tasks"]) < 2:
        return []

    def cell_on(label: str):
        def cell(entries: dict, e: dict) -> str:
            wall = e["wall_s_min_by_hardware"].get(label)
            return "-" if wall is None else f"{wall / 60:.1f}"

        return cell

    return [(label, _table(summary, variants, cell_on(label))) for label in _hardware_labels(summary)]


def _finetune(summary: dict) -> dict:
    """How far each fine-tuning column moved from the policy it started from (the lambda trade-off), and the
    verdicts a reader of a fine-tuning suite asks for first, in words."""
    rows = []
    for task, entries in summary["tasks"].items():
        for v, e in entries.items():
            kl = e.get("path_kl_init")
            kl_text = f"{kl['final_mean']:.3g} ± {kl['final_std']:.2g}" if kl else "- (fresh actor)"
            rows.append(f"| {task} | {v} | {_mean_std_cell({v: e}, e)} | {kl_text} |")
    verdicts = [
        (
            task,
            [_verdict_words(v, e["comparison"], entries) for v, e in entries.items() if e.get("comparison")],
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


def _verdict_words(column: str, c: dict, entries: dict) -> str:
    word = _word(c, *_finals(entries, c))
    verb = {"better": f"beats `{column}`", "worse": f"is beaten by `{column}`"}.get(
        word, f"is {word.replace('ahead in', f'ahead of `{column}` in', 1)}"
    )
    p = f"P = {interval_text(c['p_improvement'], c['ci'], 2)}" if c["p_improvement"] is not None else ""
    test = (
        f"rank test p = {c['rank_p']:.2f}" if c["rank_p"] is not None else f"{_seeds(c)}: too few for a test"
    )
    return f"{verb} ({', '.join(x for x in (p, test) if x)})"


def _target_rows(summary: dict) -> list[str]:
    """The floors and the targets' verdicts per task (a suite with floors)."""
    rows = []
    for task, verdict in summary.get("targets", {}).items():
        floors = summary["floors"]["tasks"][task]
        scores = verdict["scores"]
        rows.append(
            f"| {task} | {_fmt(floors['do-nothing']['mean'])} | {_fmt(floors['random']['mean'])} | {verdict['best']} "
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
                f"| {task} | {v} | {_fmt(det[-1] if det else None)} | {_fmt(sto[-1] if sto else None)} | "
                f"{ode} | {_clip_text(e)} | {_clip_text(e, 'sample_clip_frac')} |"
            )
    return rows


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
                f"| {v} | {e['wall_s_mean'] / 60:.2f} min | {rel} | {_fmt(peak / 1024, 2)} GB | "
                f"{_fmt(mean / 1024, 2)} GB |"
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
