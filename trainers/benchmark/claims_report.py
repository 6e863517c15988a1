"""The paper's claims judged against the benchmark summaries, as the documentation's claims page and the
README's one line per claim. The rules themselves, and the claims' wording, are `claims`."""

import dataclasses
import inspect

from . import stats
from .claims import AGREES, CLAIMS, DISAGREES, INCONCLUSIVE, NOT_TESTED, Claim, Outcome
from .report import TEMPLATES


@dataclasses.dataclass(frozen=True)
class Row:
    claim: Claim
    suite: str | None
    evidence: str
    verdict: str
    detail: str


def combine(outcomes: list[str]) -> str:
    """A suite's verdict on a claim from its per-task verdicts: disagrees when any tested task disagrees,
    agrees when every tested task agrees, inconclusive otherwise."""
    if DISAGREES in outcomes:
        return DISAGREES
    return AGREES if all(o == AGREES for o in outcomes) else INCONCLUSIVE


def unrun_columns(summary: dict, task: str) -> tuple[str, ...]:
    """The paper columns (not reference columns) `summary`'s suite defines with no run on `task`."""
    ran = summary["tasks"].get(task, {})
    return tuple(
        c["name"] for c in summary.get("planned_columns", []) if not c["reference"] and c["name"] not in ran
    )


def _evidence(summary: dict, suite: str, task: str, outcome: Outcome) -> tuple:
    """What a verdict rests on: each column it read, with its seeds and the suite that trained them (a run
    reused from another suite is that suite's run)."""
    entries = summary["tasks"][task]
    return (
        task,
        *sorted(
            (tuple(entries[c].get("reused_from") or [suite]), c, tuple(entries[c]["seeds"]))
            for c in outcome.columns
        ),
    )


def rows(summaries: dict[str, dict]) -> list[Row]:
    """One row per claim and suite that tests it; one "not tested here" row for a claim no suite tests. A
    verdict that rests on the same runs as one an earlier suite already gave (runs reused from another suite)
    is not counted twice: that task is left out of the later suite's row."""
    table = []
    for claim in CLAIMS:
        found, seen = False, set()
        for name, summary in summaries.items():
            if summary["kind"] not in claim.kinds:
                continue
            judged = {}
            for t in claim.tasks:
                if t in summary["tasks"] and (
                    o := claim.judge(summary["tasks"][t], unrun_columns(summary, t))
                ):
                    if (evidence := _evidence(summary, name, t, o)) not in seen:
                        seen.add(evidence)
                        judged[t] = o
            if not judged:
                continue
            found = True
            seeds = sorted(
                {len(summary["tasks"][t][c]["seeds"]) for t, o in judged.items() for c in o.columns}
            )
            seeds_text = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
            untested = [t for t in claim.tasks if t not in judged]
            count = f" ({len(judged)} of {len(claim.tasks)} claimed tasks)" if len(claim.tasks) > 1 else ""
            evidence = (
                f"{name}: {', '.join(judged)}{count}; "
                f"{seeds_text} seed{'s' * (seeds != [1])} per column; "
                f"{summary['budget_env_steps']:,} env steps"
            )
            detail = "; ".join(f"{t}: {o.verdict} ({o.detail})" for t, o in judged.items())
            if untested:
                detail += f"; {NOT_TESTED}: {', '.join(untested)}"
            table.append(Row(claim, name, evidence, combine([o.verdict for o in judged.values()]), detail))
        if not found:
            table.append(Row(claim, None, "-", NOT_TESTED, f"{NOT_TESTED}: {', '.join(claim.tasks)}"))
    return table


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(summaries: dict[str, dict]) -> str:
    """The claims table (the README block's content)."""
    lines = [
        "| claim (quoted from the paper) | where in the paper | our evidence | verdict | per task |",
        "|---|---|---|---|---|",
    ]
    for row in rows(summaries):
        lines.append(
            f'| "{_cell(row.claim.wording)}" | {row.claim.where} | {_cell(row.evidence)} | '
            f"**{row.verdict}** | {_cell(row.detail)} |"
        )
    return "\n".join(lines) + "\n"


def page(summaries: dict[str, dict]) -> str:
    """The claims page: how verdicts are reached, the table, and each rule as written in code."""
    rules = {}
    for claim in CLAIMS:
        rules.setdefault(claim.judge.__name__, " ".join(inspect.getdoc(claim.judge).split()))
    return TEMPLATES.get_template("claims.md.jinja").render(
        min_seeds=stats.MIN_SEEDS_FOR_VERDICT,
        combine_rule=" ".join(inspect.getdoc(combine).split(": ", 1)[1].split()),
        not_tested=NOT_TESTED,
        table=table(summaries),
        rules=rules,
    )


def one_line_each(summaries: dict[str, dict]) -> list[str]:
    """Each claim in a few words with its verdict per suite that tests it: the README's headline."""
    by_claim: dict[str, list[str]] = {}
    for row in rows(summaries):
        verdict = f"**{row.verdict}**" + (f" ({row.suite})" if row.suite else "")
        by_claim.setdefault(row.claim.short, []).append(verdict)
    return [f"{short}: {', '.join(verdicts)}" for short, verdicts in by_claim.items()]
