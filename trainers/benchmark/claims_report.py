"""The paper's claims judged against the benchmark summaries and the committed measurements, as the
documentation's claims page and the README's one line per claim. The rules themselves, and the claims'
wording, are `claims`."""

import dataclasses
import datetime
import inspect

from . import claims as c
from .claims import AGREES, CLAIMS, DISAGREES, INCONCLUSIVE, NOT_MEASURED, Claim, Family, Outcome
from .report import TEMPLATES


@dataclasses.dataclass(frozen=True)
class Row:
    claim: Claim
    source: str | None
    """The suite, measurement file or sweep the verdict rests on (None: nothing measured yet)."""
    evidence: str
    verdict: str
    detail: str
    comparisons: int = 0
    """The tests in the row's family (Holm's correction runs over all of them)."""
    post_hoc: str = ""
    """Why the verdict is post hoc (the rule was set after its data existed), or "" when the rule predates it."""


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
        col["name"]
        for col in summary.get("planned_columns", [])
        if not col["reference"] and col["name"] not in ran
    )


def _evidence(summary: dict, suite: str, task: str, outcome: Outcome) -> tuple:
    """What a verdict rests on: each column it read, with its seeds and the suite that trained them (a run
    reused from another suite is that suite's run)."""
    entries = summary["tasks"][task]
    return (
        task,
        *sorted(
            (tuple(entries[col].get("reused_from") or [suite]), col, tuple(entries[col]["seeds"]))
            for col in outcome.columns
        ),
    )


def _judge_tasks(claim: Claim, name: str, summary: dict, seen: set, tests: Family) -> dict[str, Outcome]:
    """The claim's rule on each of its tasks `summary` can test, skipping a verdict that rests on the same runs
    as one an earlier suite's row gave (`seen` is updated)."""
    judged = {}
    for t in claim.tasks:
        tests.scope = t
        if t in summary["tasks"] and (o := claim.rule(summary["tasks"][t], unrun_columns(summary, t), tests)):
            if (evidence := _evidence(summary, name, t, o)) not in seen:
                seen.add(evidence)
                judged[t] = o
    return judged


def _suite_row(claim: Claim, name: str, summary: dict, seen: set) -> Row | None:
    first = Family()
    if not _judge_tasks(claim, name, summary, set(seen), first):
        return None
    judged = _judge_tasks(claim, name, summary, seen, first.corrected())
    entries = [summary["tasks"][t][col] for t, o in judged.items() for col in o.columns]
    seeds = sorted({len(e["seeds"]) for e in entries})
    seeds_text = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
    count = f" ({len(judged)} of {len(claim.tasks)} claimed tasks)" if len(claim.tasks) > 1 else ""
    evidence = (
        f"{name}: {', '.join(judged)}{count}; {seeds_text} seed{'s' * (seeds != [1])} per column; "
        f"{summary['budget_env_steps']:,} env steps; {_tests_text(len(first.asked))}"
    )
    verdict, detail = _row_verdict(claim, judged)
    started = c._started(entries)
    return Row(claim, name, evidence, verdict, detail, len(first.asked), post_hoc(claim, started))


def _row_verdict(claim: Claim, judged: dict[str, Outcome]) -> tuple[str, str]:
    """A suite row's verdict and per-task detail from its tasks' outcomes (`combine`); a claim about every one
    of its tasks (`Claim.every_task`) that some task has not tested cannot agree."""
    detail = "; ".join(f"{t}: {o.verdict} ({o.detail})" for t, o in judged.items())
    verdict = combine([o.verdict for o in judged.values()])
    untested = [t for t in claim.tasks if t not in judged]
    if untested:
        detail += f"; {NOT_MEASURED}: {', '.join(untested)}"
        verdict = INCONCLUSIVE if claim.every_task and verdict == AGREES else verdict
    return verdict, detail


def _tests_text(n: int) -> str:
    return f"{n} test{'s' * (n != 1)}, Holm-corrected" if n else "no test"


def _evidence_rows(claim: Claim, summaries: dict[str, dict], measurements: dict) -> list[Row]:
    """One row per source of evidence an evidence rule judged."""
    if claim.source == "runs":
        sources = {"every suite's GSB-MDPO runs": summaries}
    elif claim.source == "runtime":
        sources = measurements.get("runtime", {})
    else:
        sources = {"toy sweep": measurements.get("toy")}
    table = []
    for name, data in sources.items():
        outcome, n = c.run_rule(claim.rule, data)
        if outcome is not None:
            evidence = f"{name}; {_tests_text(n)}"
            table.append(
                Row(
                    claim,
                    name,
                    evidence,
                    outcome.verdict,
                    outcome.detail,
                    n,
                    post_hoc(claim, outcome.started),
                )
            )
    return table


def post_hoc(claim: Claim, started: str | None) -> str:
    """Why a verdict of `claim` is post hoc, or "" when its rule was set (`claims.RULES_SET_AT`) before the
    earliest run it reads started."""
    recorded = c.RULES_SET_AT.get(claim.rule.__name__)
    if recorded is None:
        return "post hoc: the rule's commit is not recorded yet"
    if started is None:
        return "post hoc: when its data were made is not recorded"
    if _time(started) < _time(recorded[1]):
        return "post hoc: the rule was set after its data"
    return ""


def _time(text: str) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def rows(summaries: dict[str, dict], measurements: dict | None = None) -> list[Row]:
    """One row per claim and source of evidence; one "not measured yet" row for a claim nothing measures yet.
    A verdict that rests on the same runs as one an earlier suite already gave (runs reused from another
    suite) is not counted twice: that task is left out of the later suite's row."""
    table = []
    for claim in CLAIMS:
        if claim.source == "suites":
            seen: set = set()
            found = [
                row
                for name, summary in summaries.items()
                if summary["kind"] in claim.kinds and (row := _suite_row(claim, name, summary, seen))
            ]
        else:
            found = _evidence_rows(claim, summaries, measurements or {})
        what = f": {', '.join(claim.tasks)}" if claim.tasks else ""
        table += found or [Row(claim, None, "-", NOT_MEASURED, f"{NOT_MEASURED}{what}")]
    return table


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _verdict_text(row: Row) -> str:
    return f"**{row.verdict}**" + (" (post hoc)" if row.post_hoc and row.verdict != NOT_MEASURED else "")


def table(summaries: dict[str, dict], measurements: dict | None = None) -> str:
    """The claims table."""
    lines = [
        "| claim (quoted from the paper) | where in the paper | our evidence | verdict | per task |",
        "|---|---|---|---|---|",
    ]
    for row in rows(summaries, measurements):
        note = f"; {row.post_hoc}" if row.post_hoc and row.verdict != NOT_MEASURED else ""
        lines.append(
            f'| "{_cell(row.claim.wording)}" | {row.claim.where} | {_cell(row.evidence)} | '
            f"{_verdict_text(row)} | {_cell(row.detail + note)} |"
        )
    return "\n".join(lines) + "\n"


def page(summaries: dict[str, dict], measurements: dict | None = None) -> str:
    """The claims page: how verdicts are reached, the table, and each rule as written in code with the commit
    that set it."""
    rules = {}
    for claim in CLAIMS:
        name = claim.rule.__name__
        commit, date = c.RULES_SET_AT.get(name, ("not recorded yet", ""))
        when = f"set at `{commit[:10]}` ({date})" if date else "set at: not recorded yet"
        rules.setdefault(name, (" ".join(inspect.getdoc(claim.rule).split()), when))
    return TEMPLATES.get_template("claims.md.jinja").render(
        alpha=c.ALPHA,
        tolerance=c.TOLERANCE,
        combine_rule=" ".join(inspect.getdoc(combine).split(": ", 1)[1].split()),
        not_measured=NOT_MEASURED,
        table=table(summaries, measurements),
        rules=rules,
    )


def one_line_each(summaries: dict[str, dict], measurements: dict | None = None) -> list[str]:
    """Each claim in a few words with its verdict per source of evidence: the README's headline."""
    by_claim: dict[str, list[str]] = {}
    for row in rows(summaries, measurements):
        where = "; ".join(x for x in (row.source, "post hoc" if row.post_hoc else "") if x)
        verdict = f"**{row.verdict}**" + (f" ({where})" if row.source else "")
        by_claim.setdefault(row.claim.short, []).append(verdict)
    return [f"{short}: {', '.join(verdicts)}" for short, verdicts in by_claim.items()]
