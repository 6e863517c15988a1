"""The paper's claims judged against the benchmark summaries and the committed measurements, as the
documentation's claims page and the README's one line per claim. The rules themselves, and the claims'
wording, are `claims`. A claim with a pre-registration (`preregistration`) gets a confirmatory row first, judged
on its registered runs by `confirmatory`; every other row is exploratory."""

import dataclasses
import inspect
from pathlib import Path

import jinja2

from ..benchmark import confirmatory, report
from ..benchmark.suites import SUITES
from . import claims as c
from .claims import (
    AGREES,
    CLAIMS,
    DEPENDS,
    DISAGREES,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_MEASURED,
    Claim,
    Family,
    Outcome,
    number,
)

EXPLORATORY, CONFIRMATORY = "exploratory", "confirmatory"
TEMPLATES = report.TEMPLATES.overlay(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")))
"""The lab's templates (trainers/lab/templates/), read with the framework's settings and filters."""


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
    label: str = EXPLORATORY
    """CONFIRMATORY for a pre-registered claim judged on its registered fresh-seed runs; EXPLORATORY otherwise (a
    reading of runs whose seeds were seen before, whatever the date of its rule)."""
    brief: str = ""
    """Direction and size in a few words, for the README."""


def combine(outcomes: list[str]) -> str:
    """A suite's verdict on a claim from its per-task verdicts: disagrees when any tested task disagrees,
    agrees when every tested task agrees, depends on the count when every tested task's two readings do,
    inconclusive otherwise."""
    if DISAGREES in outcomes:
        return DISAGREES
    return next((v for v in (AGREES, DEPENDS) if all(o == v for o in outcomes)), INCONCLUSIVE)


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
    corrected = first.corrected()
    judged = _judge_tasks(claim, name, summary, seen, corrected)
    entries = [summary["tasks"][t][col] for t, o in judged.items() for col in o.columns]
    seeds = sorted({len(e["seeds"]) for e in entries})
    seeds_text = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
    count = f" ({len(judged)} of {len(claim.tasks)} claimed tasks)" if len(claim.tasks) > 1 else ""
    evidence = (
        f"{name}: {', '.join(judged)}{count}; {seeds_text} seed{'s' * (seeds != [1])} per column; "
        f"{budget_text(summary['budget_env_steps'], summary['preset'])}; {_tests_text(len(first.asked))}"
    )
    verdict, detail = _row_verdict(claim, judged)
    brief = _brief(corrected) or "; ".join(o.brief for o in judged.values() if o.brief)
    return Row(claim, name, evidence, verdict, detail, len(first.asked), brief=brief)


def _brief(tests: Family) -> str:
    """How far the row's first-named column is ahead over all its tests, and its smallest Holm-adjusted p."""
    ahead = [tests.ahead[label] for label in tests.asked] if tests.ahead else []
    firsts = {label.split(": ", 1)[1].split(" vs ")[0] for label in tests.asked}
    if not ahead or len(firsts) != 1 or not tests.adjusted:
        return ""
    smallest = min(tests.adjusted.values())
    won, of = sum(a for a, _ in ahead), sum(n for _, n in ahead)
    return f"{firsts.pop()} ahead in {won} of {of} seed pairs, smallest Holm p {smallest:.2f}"


def budget_text(steps: int, preset: str) -> str:
    """An env-step budget with its fraction of the paper's for the same preset ("1/20 of the paper's")."""
    paper = next(
        (s.total_steps for s in SUITES.values() if s.name.startswith("paper-") and s.preset == preset), None
    )
    share = f" ({_fraction(steps / paper)} of the paper's)" if paper else ""
    return f"{steps:,} env steps{share}"


def _fraction(share: float) -> str:
    return f"1/{round(1 / share)}" if share < 1 else f"{share:.2f}x"


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
            detail, brief = outcome.detail, outcome.brief
            if claim.source == "runtime":
                name = f"{name} on {c.hardware(data['machine'])}"
            if outcome.verdict == NOT_COMPARABLE:
                gpus = _gpu_times(summaries)
                detail += "".join(f"; beside it, {gpu}" for gpu in gpus)
                brief += "".join(f"; beside it, {gpu}" for gpu in gpus)
            row = Row(claim, name, f"{name}; {_tests_text(n)}", outcome.verdict, detail, n, brief=brief)
            table.append(row)
    return table


def _gpu_times(summaries: dict[str, dict]) -> list[str]:
    """Each compute suite run on a GPU, in words: GSB-MDPO's end-to-end time against each other method's (one
    run each, compilation included, so not the steady state a verdict needs)."""
    found = []
    for name, summary in summaries.items():
        gpu = summary["hardware"].get("gpu") if summary["kind"] == "compute" else None
        for task, entries in summary["tasks"].items() if gpu else ():
            ours = entries[c.PROPOSED]["wall_s_mean"]
            others = ", ".join(
                f"{ours / e['wall_s_mean']:.2f}x {m}" for m, e in entries.items() if m != c.PROPOSED
            )
            found.append(
                f"{name} on a GPU ({gpu}; {task}, one run each, end to end with compilation, not steady state): "
                f"{c.PROPOSED} {others}"
            )
    return found


def _confirmatory_rows(claim: Claim, measurements: dict) -> list[Row]:
    """One row per pre-registration of `claim` (matched by its short form), judged on its registered runs."""
    table = []
    for registration, records in measurements.get("confirmatory", {}).values():
        if registration["claim"] != claim.short:
            continue
        toy = not registration.get("suite")
        judged = (confirmatory.judge_toy if toy else confirmatory.judge)(registration, records)
        source = "toy sweep, registered seeds" if toy else registration["suite"]
        detail, evidence = _registered_detail(registration, judged), _registered_evidence(registration)
        detail += _reruns_text(registration, records)
        tests = len(registration.get("tasks", [])) or 1
        table.append(
            Row(
                claim,
                source,
                evidence,
                judged["verdict"],
                detail,
                tests,
                CONFIRMATORY,
                _registered_brief(registration, judged),
            )
        )
    return table


def _registered_evidence(r: dict) -> str:
    if not r.get("suite"):
        return f"pre-registered `{r['id']}`: {len(r['seeds'])} fresh seeds (from {r['seeds'][0]}); {confirmatory.TEST_NAMES[r['test']]}"
    counts = sorted({len(t["seeds"]) for t in r["tasks"]})
    count = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    margins = {
        round(t["margin"] / abs(_mean(t["exploratory"]["comparator"])), 2) for t in r["tasks"] if t["margin"]
    }
    margin = f" within {', '.join(f'{m:.0%}' for m in sorted(margins))} of the comparator's exploratory mean"
    return (
        f"pre-registered `{r['id']}`: {r['suite']}, {', '.join(t['task'] for t in r['tasks'])}; "
        f"{count} fresh seeds per column; "
        f"{budget_text(r['budget_env_steps'], SUITES[r['source']].preset)}; {confirmatory.TEST_NAMES[r['test']]}"
        f"{margin if margins else ''}; Holm over {len(r['tasks'])} task{'s' * (len(r['tasks']) != 1)}"
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _reruns_text(registration: dict, records: list[dict]) -> str:
    """The registered runs logged more than once (the toy's `--rerun`), reported beside the first, which stands."""
    seeds = set(registration.get("seeds") or [s for t in registration["tasks"] for s in t["seeds"]])
    same = ("settings", "beta", "preference") if "settings" in registration else ()
    mine = [r for r in records if r["seed"] in seeds and all(r.get(k) == registration[k] for k in same)]
    keys = [(r.get("task"), r.get("variant"), r["seed"]) for r in mine]
    again = sorted({k[-1] for i, k in enumerate(keys) if k in keys[:i]})
    return (
        f"; seeds {again} were run again: the first run of each stands, the rerun is not read"
        if again
        else ""
    )


def _registered_detail(r: dict, judged: dict) -> str:
    if judged["verdict"] == confirmatory.PENDING:
        return (
            f"{judged['runs_done']} of {judged['runs_registered']} registered runs done; runs: `{r['run']}`"
        )
    if not r.get("suite"):
        low, high = judged["interval"]
        return (
            f"mean L1 {judged['mean']:.3f} over {judged['n']} seeds, 95% interval [{low:.3f}, {high:.3f}] "
            f"(paper {r['paper_value']:.3f})"
        )
    return "; ".join(
        f"{t['task']}: {t['verdict']} ({r['treatment']} vs {t['comparator']}: {number(t['treatment_mean'])} vs "
        f"{number(t['comparator_mean'])}, P(X > Y) {t['p_improvement']:.2f} [{t['p_improvement_ci'][0]:.2f}, "
        f"{t['p_improvement_ci'][1]:.2f}], ahead in {t['pairs_ahead']} of {t['pairs']} seed pairs; one-sided p "
        f"{t['p']:.3g}, Holm {t['p_holm']:.3g}; against the claim: Holm {t['p_against_holm']:.3g})"
        for t in judged["tasks"]
    )


def _registered_brief(r: dict, judged: dict) -> str:
    """The README's few words: the registered tasks are named, because a claim's wording may name tasks that
    its registration does not test, and a verdict must not read as covering those."""
    if judged["verdict"] == confirmatory.PENDING:
        return f"{judged['runs_done']} of {judged['runs_registered']} registered runs done"
    if not judged["tasks"]:
        return f"mean L1 {judged['mean']:.3f} [{judged['interval'][0]:.3f}, {judged['interval'][1]:.3f}]"
    won, of = sum(t["pairs_ahead"] for t in judged["tasks"]), sum(t["pairs"] for t in judged["tasks"])
    return (
        f"on {', '.join(t['task'] for t in judged['tasks'])} only: {r['treatment']} ahead in {won} of {of} "
        f"seed pairs, largest Holm p {max(t['p_holm'] for t in judged['tasks']):.3g}"
    )


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
        found = _confirmatory_rows(claim, measurements or {}) + found
        what = f": {', '.join(claim.tasks)}" if claim.tasks else ""
        table += found or [Row(claim, None, "-", NOT_MEASURED, f"{NOT_MEASURED}{what}")]
    return table


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(summaries: dict[str, dict], measurements: dict | None = None) -> str:
    """The claims table."""
    lines = [
        "| claim (quoted from the paper) | where in the paper | our evidence | verdict | direction and size, per task |",
        "|---|---|---|---|---|",
    ]
    for row in rows(summaries, measurements):
        label = f" ({row.label})" if row.source else ""
        lines.append(
            f'| "{_cell(row.claim.wording)}" | {row.claim.where} | {_cell(row.evidence)} | '
            f"**{row.verdict}**{label} | {_cell(row.detail)} |"
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
        not_comparable=NOT_COMPARABLE,
        depends=DEPENDS,
        table=table(summaries, measurements),
        rules=rules,
    )


def one_line_each(summaries: dict[str, dict], measurements: dict | None = None) -> list[str]:
    """Each claim in a few words with its verdict per source of evidence: the README's claims."""
    by_claim: dict[str, list[str]] = {}
    for row in rows(summaries, measurements):
        where = "; ".join(x for x in (row.source, row.label, row.brief) if x)
        verdict = f"**{row.verdict}**" + (f" ({where})" if row.source else "")
        by_claim.setdefault(row.claim.short, []).append(verdict)
    return [f"{short}: {', '.join(verdicts)}" for short, verdicts in by_claim.items()]
