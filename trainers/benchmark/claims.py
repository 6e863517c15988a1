"""The paper's claims about returns, each judged from the benchmark summaries by a rule written here.

`python -m trainers.benchmark.aggregate` writes `hub_cards/results/claims.md` and the README block between
`<!-- claims:start -->` and `<!-- claims:end -->`. Typed by hand: each claim's wording (quoted from the
paper) and where the paper makes it. Everything else (evidence, verdicts) is computed from the summaries.

A claim is judged per task, on every summary of the kind that can test it (a benchmark, ablation or
compute suite). Each judge below reads one task of one suite: the columns that ran there, and the paper columns
the suite defines that have not (yet) run there. It returns "agrees", "disagrees" or "inconclusive" with its
reasons, or None when that suite lacks the columns the rule needs; its docstring is the rule, and the
generated text quotes it. The verdicts it reads are `stats.compare`'s: "better"
or "worse" only when the 95% interval of the probability of improvement excludes 0.5, with >= 3 seeds in
both columns; "inconclusive" otherwise.
"""

import dataclasses
import inspect
from collections.abc import Callable

from ..registry import PROPOSED
from . import stats

AGREES, DISAGREES, INCONCLUSIVE, NOT_TESTED = "agrees", "disagrees", "inconclusive", "not tested here"


@dataclasses.dataclass(frozen=True)
class Outcome:
    verdict: str
    """AGREES, DISAGREES or INCONCLUSIVE."""
    detail: str
    columns: tuple[str, ...]
    """The columns the rule read (for the evidence's seed counts)."""


Judge = Callable[[dict, tuple[str, ...]], Outcome | None]
"""(one task's entries of one summary: variant -> entry; the suite's paper columns with no run on that task)
-> the outcome there, or None if untestable."""


# ---------------------------------------------------------------------------------------------- verdicts
def _paper_baselines(entries: dict) -> list[str]:
    """Every paper column but GSB-MDPO (both published forms of a baseline count; reference columns,
    e.g. tuned SB3 PPO, are context, not the paper's methods)."""
    return [v for v, e in entries.items() if v != PROPOSED and not e.get("reference")]


def verdict_of(entries: dict, x: str, y: str) -> str:
    """`stats.compare`'s verdict for column `x` against column `y`: the table's comparison of the pair when
    it has one (read in this direction), else computed the same way."""
    for c in (entries[x].get("comparison"), entries[y].get("comparison")):
        if c and (c["of"], c["over"]) == (x, y):
            return c["verdict"]
        if c and (c["of"], c["over"]) == (y, x):
            flipped = {"better": "worse", "worse": "better"}.get(c["verdict"])
            seeds = stats.seeds_text(len(entries[x]["seeds"]), len(entries[y]["seeds"]))
            return flipped or f"inconclusive ({seeds})"
    return stats.compare(entries[x]["final_per_seed"], entries[y]["final_per_seed"])["verdict"]


def _group(verdicts: dict[str, str]) -> str:
    """Verdicts in words, grouped: `better than a, b; inconclusive vs c (3 seeds)`."""
    parts: dict[str, list[str]] = {}
    for column, v in verdicts.items():
        key = v if v in ("better", "worse") else "inconclusive"
        seeds = v.removeprefix("inconclusive (").removesuffix(")")
        parts.setdefault(key, []).append(column if key != "inconclusive" else f"{column} ({seeds})")
    words = {"better": "better than", "worse": "worse than", "inconclusive": "inconclusive vs"}
    return "; ".join(f"{words[k]} {', '.join(cs)}" for k, cs in parts.items())


def _against_baselines(entries: dict, unrun: tuple[str, ...]) -> tuple[dict[str, str], bool] | None:
    """GSB-MDPO's verdict against each paper baseline column that ran, and whether the comparison is
    complete: every column the suite defines ran, each with the seeds a verdict needs (so that an
    inconclusive one is measured, not missing); None without both sides."""
    if PROPOSED not in entries or not _paper_baselines(entries):
        return None
    verdicts = {b: verdict_of(entries, PROPOSED, b) for b in _paper_baselines(entries)}
    return verdicts, not unrun and all(_enough(entries, b) for b in verdicts)


def _enough(entries: dict, column: str) -> bool:
    """Both GSB-MDPO and `column` have the seeds a verdict needs."""
    return min(len(entries[PROPOSED]["seeds"]), len(entries[column]["seeds"])) >= stats.MIN_SEEDS_FOR_VERDICT


def _not_run(unrun: tuple[str, ...]) -> str:
    return f"; not run yet: {', '.join(unrun)}" if unrun else ""


def _outcome(outcome: str, verdicts: dict[str, str], unrun: tuple[str, ...] = ()) -> Outcome:
    return Outcome(outcome, f"{PROPOSED} {_group(verdicts)}{_not_run(unrun)}", (PROPOSED, *verdicts))


# ---------------------------------------------------------------------------------------------- judges
def clear_gains(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """ "Clear gains" on a task: GSB-MDPO's verdict is "better" against every paper baseline column of the
    suite (reference columns excluded). Agrees when it is, and every such column has run there; disagrees
    when it is "worse" against any; inconclusive otherwise."""
    judged = _against_baselines(entries, unrun)
    if judged is None:
        return None
    verdicts, _ = judged
    if any(v == "worse" for v in verdicts.values()):
        return _outcome(DISAGREES, verdicts, unrun)
    every = not unrun and all(v == "better" for v in verdicts.values())
    return _outcome(AGREES if every else INCONCLUSIVE, verdicts, unrun)


def competitive(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """ "Competitive" or "among the leading methods" on a task: GSB-MDPO is "worse" against no paper baseline
    column. Disagrees when it is "worse" against any; agrees when it is not, every paper column of the suite
    has run there and every comparison had the seeds a verdict needs (>= 3 in both columns); inconclusive
    otherwise. With 3 seeds the intervals are wide, so "not worse" rules out only large gaps."""
    judged = _against_baselines(entries, unrun)
    if judged is None:
        return None
    verdicts, complete = judged
    if any(v == "worse" for v in verdicts.values()):
        return _outcome(DISAGREES, verdicts, unrun)
    return _outcome(AGREES if complete else INCONCLUSIVE, verdicts, unrun)


def strong(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """ "Strong final performance" on a task: GSB-MDPO is "worse" against no paper baseline column and
    "better" against at least half of them. Disagrees when it is "worse" against any; agrees when both
    hold and every paper column of the suite has run there; inconclusive otherwise."""
    judged = _against_baselines(entries, unrun)
    if judged is None:
        return None
    verdicts, _ = judged
    if any(v == "worse" for v in verdicts.values()):
        return _outcome(DISAGREES, verdicts, unrun)
    better = sum(v == "better" for v in verdicts.values())
    return _outcome(AGREES if not unrun and 2 * better >= len(verdicts) else INCONCLUSIVE, verdicts, unrun)


def genpo_highest(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """ "GenPO achieves the highest return" on a task: GenPO's verdict (its probability of improvement over
    the column, as for GSB-MDPO) is "better" against every other paper column, GSB-MDPO included. Agrees
    when it is, and every paper column of the suite has run there; disagrees when it is "worse" against any;
    inconclusive otherwise."""
    others = [v for v, e in entries.items() if v != "genpo" and not e.get("reference")]
    if "genpo" not in entries or not others:
        return None
    verdicts = {v: verdict_of(entries, "genpo", v) for v in others}
    outcome = DISAGREES if "worse" in verdicts.values() else AGREES
    if outcome == AGREES and (unrun or any(v != "better" for v in verdicts.values())):
        outcome = INCONCLUSIVE
    return Outcome(outcome, f"genpo {_group(verdicts)}{_not_run(unrun)}", ("genpo", *others))


def _direction(entries: dict, variant: str, control: str, expected: str) -> Outcome | None:
    """Agrees when `variant`'s verdict against `control` is `expected`, disagrees when it is the opposite,
    inconclusive otherwise; None when the suite lacks either column."""
    if variant not in entries or control not in entries:
        return None
    found = verdict_of(entries, variant, control)
    opposite = "better" if expected == "worse" else "worse"
    outcome = AGREES if found == expected else DISAGREES if found == opposite else INCONCLUSIVE
    return Outcome(outcome, f"{variant} {_group({control: found})}", (variant, control))


def path_kl_matters(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """Column `lambda=0,eta=0` (no path KL) against `eta=0`: agrees when its verdict is "worse", disagrees
    when "better", inconclusive otherwise."""
    return _direction(entries, "lambda=0,eta=0", "eta=0", "worse")


def reference_mixing_helps(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """Column `gsb_mdpo` (eta > 0) against `eta=0`: agrees when its verdict is "better", disagrees when
    "worse", inconclusive otherwise."""
    return _direction(entries, PROPOSED, "eta=0", "better")


def clipping_matters(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """Column `no clip,eta=0` against `eta=0`: agrees when its verdict is "worse", disagrees when "better",
    inconclusive otherwise."""
    return _direction(entries, "no clip,eta=0", "eta=0", "worse")


def ode_beats_sde(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """GSB-MDPO's deterministic ODE evaluation against its stochastic SDE evaluation at the last evaluation
    of the same runs (the ablation table's P(ODE > SDE)): agrees when the verdict is "better", disagrees
    when "worse", inconclusive otherwise."""
    ode = entries.get(PROPOSED, {}).get("ode_vs_sde")
    if ode is None:
        return None
    outcome = {"better": AGREES, "worse": DISAGREES}.get(ode["verdict"], INCONCLUSIVE)
    return Outcome(outcome, f"ODE {_group({'SDE': ode['verdict']})}", (PROPOSED,))


GENERATION_STEPS = ("N=4", "N=8", "N=32")
"""The generation-step variants, each against the default N=16 (`gsb_mdpo`)."""


def steps_similar(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """Columns N=4, N=8 and N=32 each against `gsb_mdpo` (N=16): agrees when none has a "better" or
    "worse" verdict and each had the seeds a verdict needs (>= 3 in both columns); disagrees when any has
    one; inconclusive otherwise. With 3 seeds "no verdict" rules out only large gaps."""
    present = [v for v in GENERATION_STEPS if v in entries]
    if PROPOSED not in entries or not present:
        return None
    verdicts = {v: verdict_of(entries, v, PROPOSED) for v in present}
    if any(v in ("better", "worse") for v in verdicts.values()):
        outcome = DISAGREES
    else:
        outcome = AGREES if all(_enough(entries, v) for v in present) else INCONCLUSIVE
    detail = "; ".join(f"{v} {_group({PROPOSED: found})}" for v, found in verdicts.items())
    return Outcome(outcome, detail, (PROPOSED, *present))


CLIP_BAND = (0.1, 0.3)


def clip_fraction_about_0_2(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """GSB-MDPO's step-clip fraction (the across-seed mean at each iteration), averaged over the second half
    of training: agrees when it lies in [0.1, 0.3] ("roughly 0.2"), disagrees otherwise. Runs copied from
    another suite are judged there, not twice."""
    entry = entries.get(PROPOSED)
    if entry is None or "step_clip_frac" not in entry or entry["reused_from"]:
        return None
    curve = entry["step_clip_frac"]["mean"]
    late = sum(curve[len(curve) // 2 :]) / len(curve[len(curve) // 2 :])
    outcome = AGREES if CLIP_BAND[0] <= late <= CLIP_BAND[1] else DISAGREES
    return Outcome(
        outcome, f"second-half mean {late:.3f}, peak {entry['step_clip_frac']['peak']:.3f}", (PROPOSED,)
    )


def time_close_to_ppo_fpo_dppo(entries: dict, unrun: tuple[str, ...] = ()) -> Outcome | None:
    """End-to-end wall-clock of one run each (as the paper's table): agrees when GSB-MDPO's is at most 1.5x
    the mean of Gaussian PPO's, FPO's and DPPO's and at most half of GenPO's; disagrees otherwise."""
    needed = ("gaussian_ppo", "fpo", "dppo", "genpo", PROPOSED)
    if any(v not in entries for v in needed):
        return None
    wall = {v: entries[v]["wall_s_mean"] for v in needed}
    cheap = (wall["gaussian_ppo"] + wall["fpo"] + wall["dppo"]) / 3
    close, far = wall[PROPOSED] <= 1.5 * cheap, wall["genpo"] >= 2 * wall[PROPOSED]
    detail = (f"{PROPOSED} {wall[PROPOSED] / cheap:.2f}x the PPO/FPO/DPPO mean; GenPO "
              f"{wall['genpo'] / wall[PROPOSED]:.2f}x {PROPOSED}")  # fmt: skip
    return Outcome(AGREES if close and far else DISAGREES, detail, needed)


# ---------------------------------------------------------------------------------------------- claims
@dataclasses.dataclass(frozen=True)
class Claim:
    wording: str
    """Quoted from the paper."""
    where: str
    """Section and figure or table of the paper."""
    tasks: tuple[str, ...]
    kinds: tuple[str, ...]
    """Summary kinds that can test it."""
    judge: Judge


PLAYGROUND = "§5.1 Main Results on Playground, Fig. 1"
GYM = "§5.2 Main Results on Gym-MuJoCo, Fig. 2 (A)-(F)"
CLAIMS = (
    Claim("GSB-MDPO obtains [...] clear gains on BallInCup, FingerSpin, FingerTurnEasy, and FingerTurnHard.",
          PLAYGROUND, ("BallInCup", "FingerSpin", "FingerTurnEasy", "FingerTurnHard"), ("benchmark",),
          clear_gains),
    Claim("GSB-MDPO obtains competitive or higher returns across the eight tasks", PLAYGROUND,
          # The seven tasks the paper names (it does not name the eighth).
          ("BallInCup", "CheetahRun", "FingerSpin", "FingerTurnEasy", "FingerTurnHard", "ReacherEasy",
           "ReacherHard"), ("benchmark",), competitive),
    Claim("On CheetahRun and the two reaching tasks, multiple methods reach comparable final returns, and "
          "GSB-MDPO remains among the leading methods.", PLAYGROUND,
          ("CheetahRun", "ReacherEasy", "ReacherHard"), ("benchmark",), competitive),
    Claim("[GSB-MDPO] is especially effective on higher-dimensional environments such as Ant-v5 and "
          "Humanoid-v5", GYM, ("Ant-v5", "Humanoid-v5"), ("benchmark",), clear_gains),
    Claim("It also obtains strong final performance on Swimmer-v5 and Walker2d-v5", GYM,
          ("Swimmer-v5", "Walker2d-v5"), ("benchmark",), strong),
    Claim("[It] remains competitive on Hopper-v5.", GYM, ("Hopper-v5",), ("benchmark",), competitive),
    Claim("On HalfCheetah-v5, GenPO achieves the highest return", GYM, ("HalfCheetah-v5",), ("benchmark",),
          genpo_highest),
    Claim("Setting this coefficient [the path-KL coefficient] to zero substantially degrades final "
          "performance", "§5.3 Further Analysis, Fig. 3A (compared with eta=0)", ("HalfCheetah-v5",),
          ("ablation",), path_kl_matters),
    Claim("A positive reference-mixing coefficient improves performance over the eta=0 variant.",
          "§5.3 Further Analysis, Fig. 3B", ("HalfCheetah-v5",), ("ablation",), reference_mixing_helps),
    Claim("[Results] support using the deterministic path at evaluation time [...] evaluation removes "
          "sampling noise by following the learned deterministic drift.", "§5.3 Further Analysis, Fig. 3C",
          ("HalfCheetah-v5",), ("ablation",), ode_beats_sde),
    Claim("Without clipping, accumulated generation-step likelihood ratios produce a less reliable update.",
          "§5.3 Further Analysis, Fig. 3D (compared with eta=0)", ("HalfCheetah-v5",), ("ablation",),
          clipping_matters),
    Claim("All four settings [4, 8, 16 and 32 flow steps] reach similar final performance by the end of "
          "training.", "§5.3 Sensitivity to Generation Steps, Fig. 4", ("HalfCheetah-v5",), ("ablation",),
          steps_similar),
    Claim("The clipping fraction rises quickly at the beginning of training and then stabilizes at roughly "
          "0.2 throughout most of optimization.", "App. C.2 Step Log-Ratio Clipping Analysis, Fig. 6",
          ("HalfCheetah-v5",), ("benchmark", "ablation"), clip_fraction_about_0_2),
    Claim("On HalfCheetah-v5, its training time is close to PPO/FPO/DPPO and substantially lower than GenPO",
          "§5.2, Fig. 2 (G); App. C.3 Computational Efficiency, Table 3", ("HalfCheetah-v5",), ("compute",),
          time_close_to_ppo_fpo_dppo),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------- table
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
    return (task, *sorted((tuple(entries[c].get("reused_from") or [suite]), c, tuple(entries[c]["seeds"]))
                          for c in outcome.columns))  # fmt: skip


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
            evidence = (f"{name}: {', '.join(judged)}{count}; "
                        f"{seeds_text} seed{'s' * (seeds != [1])} per column; "
                        f"{summary['budget_env_steps']:,} env steps")  # fmt: skip
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
        lines.append(f"| \"{_cell(row.claim.wording)}\" | {row.claim.where} | {_cell(row.evidence)} | "
                     f"**{row.verdict}** | {_cell(row.detail)} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def readme_block(summaries: dict[str, dict]) -> str:
    return table(summaries) + (
        "\nHow each verdict is reached, and each rule as the code states it: "
        "[hub_cards/results/claims.md](hub_cards/results/claims.md).\n"
    )


def markdown(summaries: dict[str, dict]) -> str:
    """`claims.md`: how verdicts are reached, the table, and each rule as written in code."""
    rules = {}
    for claim in CLAIMS:
        rules.setdefault(claim.judge.__name__, inspect.getdoc(claim.judge))
    lines = [
        "# The paper's claims about returns, against our benchmark summaries",
        "",
        "Generated by `python -m trainers.benchmark.aggregate` from the summaries in this folder; only each claim's "
        "wording and its place in the paper are typed by hand. One row per claim and suite that tests it; a "
        "verdict resting on runs an earlier suite's row already judged (runs one suite reused from another) is "
        "given once. "
        'The per-task verdicts read the summaries\' probability-of-improvement verdicts: "better" or '
        '"worse" only when the 95% stratified-bootstrap interval of P(X > Y) across seeds lies entirely '
        f"above or below 0.5, with >= {stats.MIN_SEEDS_FOR_VERDICT} seeds in both columns, otherwise "
        '"inconclusive". A suite\'s verdict on a claim combines its tasks: '
        f'{" ".join(inspect.getdoc(combine).split(": ", 1)[1].split())} A claim no suite can test is "{NOT_TESTED}".',
        "",
        table(summaries),
        "## Rules",
        "",
        *[f"- `{name}`: {' '.join(doc.split())}" for name, doc in rules.items()],
    ]
    return "\n".join(lines) + "\n"
