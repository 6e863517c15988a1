"""The cells of a suite page's tables, and the words a page reads a comparison with: numbers, intervals,
mean ± std, "better"/"worse" where the rank test supports it, clip fractions (`report` lays them out)."""

from ..registry import PROPOSED


def fmt(x: float | None, digits: int = 1) -> str:
    """`x` with `digits` decimals, "-" where there is no value."""
    return "-" if x is None else f"{x:.{digits}f}"


def interval_text(point: float | None, ci: list[float] | None, digits: int) -> str:
    """ "0.83 [0.50, 1.00]": a point estimate with its interval, when it has one."""
    return fmt(point, digits) + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def table(summary: dict, variants: list[str], cell) -> str:
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


def mean_std_cell(entries: dict, e: dict) -> str:
    """A cell of the returns table: mean ± std (seeds), the task's best in bold, diverged runs counted."""
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


def comparison_cell(entries: dict, e: dict) -> str:
    """A cell of the comparisons table: the column's verdict against the column it is compared with."""
    c = e["comparison"]
    if c is None:
        return "-"
    # A benchmark's comparisons all have GSB-MDPO on one side; an ablation's controls differ per column.
    return (f"vs {c['over']}: " if c["of"] != PROPOSED else "") + comparison_text(c, *_finals(entries, c))


def clip_text(entry: dict, key: str = "step_clip_frac") -> str:
    """A clip fraction's mean over training with its peak in brackets, "-" where it was not logged."""
    clip = entry.get(key)
    return f"{clip['mean_over_training']:.3f} ({clip['peak']:.3f})" if clip else "-"


def verdict_words(column: str, c: dict, entries: dict) -> str:
    """A comparison with `column` read out in a sentence: who beats whom, or in how many seed pairs."""
    word = _word(c, *_finals(entries, c))
    verb = {"better": f"beats `{column}`", "worse": f"is beaten by `{column}`"}.get(
        word, f"is {word.replace('ahead in', f'ahead of `{column}` in', 1)}"
    )
    p = f"P = {interval_text(c['p_improvement'], c['ci'], 2)}" if c["p_improvement"] is not None else ""
    test = (
        f"rank test p = {c['rank_p']:.2f}" if c["rank_p"] is not None else f"{_seeds(c)}: too few for a test"
    )
    return f"{verb} ({', '.join(x for x in (p, test) if x)})"
