"""The paper's claims, each judged by a rule written here before the data it judges.

`claims_report` turns them into the documentation's claims page and the README's one line per claim. Typed by
hand: each claim's wording (quoted from the paper), where the paper makes it, and its rule. Everything else
(evidence, verdicts) is computed from the benchmark summaries and the committed measurements.

Two kinds of rule:
- a task rule reads one task of one suite (the columns that ran there, and the paper columns the suite
  defines that have not run there yet) and returns an `Outcome`, or None when that suite lacks the columns it
  needs; a claim's row is one suite, its verdict combines the claim's tasks (`claims_report.combine`);
- an evidence rule reads every summary and measurement together (`Evidence`) and returns its outcome per
  source of evidence (one row each), or nothing when the data it needs do not exist yet ("not measured yet").

Returns are compared by exact tests (`exact`): two columns of runs by the rank-sum test with midranks, two
evaluations of the same runs by a paired test. Every test a rule makes on one row is one family: its p-values
are adjusted by Holm's method and a comparison is "better" or "worse" only when its adjusted p is <= ALPHA
(two-sided). A rule asks for its tests through `Family`, which runs it twice: once to learn the family, then
with the corrected verdicts. Each rule's docstring is the rule; the generated page quotes it, and
`RULES_SET_AT` records the commit at which the rule's code (its function, the helpers and thresholds it reads
here and in `stats`/`exact`, and the code that selects its data: `SELECTION`) took its present form, which a
test checks against the git history. Every verdict of these rules is exploratory: they read runs whose seeds were
seen before the rules took their form. A confirmatory verdict comes from a pre-registered claim
(`preregistration`, judged by `confirmatory`) on fresh seeds.
"""

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from ..benchmark import exact, stats
from ..benchmark.fingerprint import rule_fingerprint
from ..registry import PROPOSED

AGREES, DISAGREES, INCONCLUSIVE = "agrees", "disagrees", "inconclusive"
NOT_MEASURED = "not measured yet"
DEPENDS = "depends on the count"
"""A claim whose quantity has two readings, one inside the claimed value and one outside it."""
NOT_COMPARABLE = "not tested on comparable hardware"
"""A claim about the paper's GPU measured only on other hardware."""
ALPHA = 0.05
"""Family-wise error rate of each row's tests (two-sided, Holm)."""
TOLERANCE = 1.25
"""How far a measured ratio or error may be from the paper's own number, on the side that goes against the
claim, and still agree with it: a factor of 1.25, the same for every numeric claim (time, memory, the toy's
error). Set before time and memory were measured at steady state; the toy's error at the paper's setting had
already been measured (0.121 over 3 seeds) when it was set."""
MIN_SEEDS_FOR_VERDICT = stats.MIN_SEEDS_FOR_VERDICT


@dataclasses.dataclass(frozen=True)
class Outcome:
    verdict: str
    """AGREES, DISAGREES or INCONCLUSIVE."""
    detail: str
    columns: tuple[str, ...] = ()
    """The columns the rule read (for the evidence's seed counts)."""
    started: str | None = None
    """When the earliest run or measurement an evidence rule read started (ISO 8601; None: not recorded). A task
    rule's row takes it from its columns instead."""
    brief: str = ""
    """The size in a few words, for the README, where the row's tests do not give it."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    word: str
    """"better", "worse" or "inconclusive" for the first of the two compared."""
    p: float
    """The exact test's two-sided p-value."""
    adjusted: float
    """Holm's adjustment of `p` within the row's family."""
    decidable: bool
    """Whether the test could reach significance at all: the smallest p its sample sizes allow is at most
    ALPHA divided by the family's size (3 seeds against 3 never can: their smallest p is 0.10)."""
    size: str = ""
    """Direction and size: the two means, P(X > Y) with its bootstrap interval and the seed pairs ahead (two
    columns), or the runs higher (paired)."""

    def text(self) -> str:
        return f"{self.size}; two-sided p {_p_text(self.p)}, Holm {_p_text(self.adjusted)}"


def _p_text(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def number(value: float) -> str:
    """A return or ratio as the pages print it: one decimal from 10 up, two from 0.01, 3 significant digits below."""
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}" if abs(value) >= 0.01 else f"{value:.3g}"


def _unpaired_size(x: np.ndarray, y: np.ndarray) -> tuple[str, int]:
    """Direction and size of runs `x` against runs `y`, and the seed pairs in which x is ahead."""
    compared = stats.compare(x, y)
    ahead = int(np.sum(x[:, None] > y[None, :]))
    p = compared["p_improvement"]
    improvement = (
        "" if p is None else f", P(X > Y) {p:.2f} [{compared['ci'][0]:.2f}, {compared['ci'][1]:.2f}]"
    )
    return (
        f"{number(x.mean())} vs {number(y.mean())}{improvement}, ahead in {ahead} of {x.size * y.size} seed pairs",
        ahead,
    )


class Family:
    """The exact tests a rule makes on one row, and their verdicts after Holm's correction over all of them.
    A rule must ask for the same tests whatever their results (it is run once to learn them)."""

    def __init__(self, adjusted: dict[str, float] | None = None):
        self.asked: dict[str, tuple[float, int, float]] = {}
        self.ahead: dict[str, tuple[int, int]] = {}
        """Per test: the pairs (or paired runs) in which the first compared is ahead, and all of them."""
        self.adjusted = adjusted
        self.scope = ""
        """Prefixed to every label: the task a row's rule is judging (one family spans the row's tasks)."""

    def unpaired(self, label: str, x, y) -> Verdict:
        """Runs `x` against runs `y` (two columns): the exact rank-sum test; "better" when x ranks higher."""
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        side = np.sign(stats.probability_of_improvement(x[:, None], y[:, None]) - 0.5)
        smallest = 2 / math.comb(x.size + y.size, x.size)
        size, ahead = _unpaired_size(x, y)
        return self._verdict(
            label, exact.rank_sum_p(x, y), int(side), smallest, size, (ahead, x.size * y.size)
        )

    def paired(self, label: str, x, y, scale_free: bool = False) -> Verdict:
        """The same runs evaluated two ways: the exact signed-rank test (one task's scale), or with
        `scale_free` the exact sign test (runs of several tasks pooled); "better" when x is higher."""
        d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
        d = d[d != 0]
        side = int(np.sign(np.sum(d > 0) - np.sum(d < 0))) if scale_free else int(np.sign(_signed_ranks(d)))
        p = (exact.sign_test_p if scale_free else exact.signed_rank_p)(d, np.zeros_like(d))
        higher = int(np.sum(np.asarray(x, dtype=float) > np.asarray(y, dtype=float)))
        size = f"higher in {higher} of {np.size(x)} runs"
        return self._verdict(
            label, p, side, 2 / 2**d.size if d.size else 1.0, size, (higher, int(np.size(x)))
        )

    def _verdict(
        self, label: str, p: float, side: int, smallest: float, size: str, ahead: tuple[int, int]
    ) -> Verdict:
        label = f"{self.scope}: {label}"
        self.asked[label] = (p, side, smallest)
        self.ahead[label] = ahead
        adjusted = (self.adjusted or {}).get(label, 1.0)
        significant = self.adjusted is not None and adjusted <= ALPHA
        word = {1: "better", -1: "worse"}.get(side, "inconclusive") if significant else "inconclusive"
        return Verdict(word, p, adjusted, smallest <= ALPHA / max(len(self.adjusted or self.asked), 1), size)

    def corrected(self) -> "Family":
        """A fresh `Family` holding the Holm-adjusted p-values of the tests asked so far."""
        labels = list(self.asked)
        return Family(dict(zip(labels, exact.holm([self.asked[k][0] for k in labels]), strict=True)))


def _signed_ranks(d: np.ndarray) -> float:
    """Sum of the signed midranks of |d|: positive when the positive differences outweigh the negative."""
    from scipy.stats import rankdata

    return float(np.sum(np.sign(d) * rankdata(np.abs(d)))) if d.size else 0.0


def run_rule(rule: Callable, *args):
    """`rule(*args, tests)` judged with Holm's correction over the tests it makes; returns (its result, the
    number of tests in the family)."""
    first = Family()
    if rule(*args, first) is None:
        return None, 0
    return rule(*args, first.corrected()), len(first.asked)


# ---------------------------------------------------------------------------------------------- helpers
def _paper_baselines(entries: dict) -> list[str]:
    """Every paper column but GSB-MDPO (both published forms of a baseline count; reference columns,
    e.g. tuned SB3 PPO, are context, not the paper's methods)."""
    return [v for v, e in entries.items() if v != PROPOSED and not e.get("reference")]


def _finals(entries: dict, column: str) -> list[float]:
    return entries[column]["final_per_seed"]


def _against_baselines(entries: dict, tests: Family) -> dict[str, Verdict] | None:
    """GSB-MDPO's verdict against each paper baseline column that ran on the task; None without both."""
    if PROPOSED not in entries or not _paper_baselines(entries):
        return None
    return {
        b: tests.unpaired(f"{PROPOSED} vs {b}", _finals(entries, PROPOSED), _finals(entries, b))
        for b in _paper_baselines(entries)
    }


def _group(verdicts: dict[str, Verdict]) -> str:
    """Verdicts in words, grouped, each with its p-value: `better than a (p 0.008, Holm 0.016)`."""
    parts: dict[str, list[str]] = {}
    for column, v in verdicts.items():
        parts.setdefault(v.word, []).append(f"{column} ({v.text()})")
    words = {"better": "better than", "worse": "worse than", "inconclusive": "inconclusive vs"}
    return "; ".join(f"{words[k]} {', '.join(cs)}" for k, cs in parts.items())


def _not_run(unrun: tuple[str, ...]) -> str:
    return f"; not run yet: {', '.join(unrun)}" if unrun else ""


def _no_power(verdicts: dict[str, Verdict]) -> str:
    weak = [c for c, v in verdicts.items() if not v.decidable]
    return f"; too few seeds to reach p <= {ALPHA} after Holm: {', '.join(weak)}" if weak else ""


def _outcome(outcome: str, verdicts: dict[str, Verdict], unrun: tuple[str, ...] = ()) -> Outcome:
    detail = f"{PROPOSED} {_group(verdicts)}{_not_run(unrun)}{_no_power(verdicts)}"
    return Outcome(outcome, detail, (PROPOSED, *verdicts))


# ---------------------------------------------------------------------------------------------- task rules
def clear_gains(entries: dict, unrun: tuple[str, ...], tests: Family) -> Outcome | None:
    """ "Clear gains" on a task: GSB-MDPO is "better" (exact rank-sum test, Holm over the row) than every paper
    baseline column of the suite (reference columns excluded). Agrees when it is, and every such column has run
    there; disagrees when it is "worse" than any; inconclusive otherwise."""
    verdicts = _against_baselines(entries, tests)
    if verdicts is None:
        return None
    if any(v.word == "worse" for v in verdicts.values()):
        return _outcome(DISAGREES, verdicts, unrun)
    every = not unrun and all(v.word == "better" for v in verdicts.values())
    return _outcome(AGREES if every else INCONCLUSIVE, verdicts, unrun)


def competitive(entries: dict, unrun: tuple[str, ...], tests: Family) -> Outcome | None:
    """ "Competitive" or "among the leading methods" on a task: GSB-MDPO is "worse" than no paper baseline
    column. Disagrees when it is "worse" than any; agrees when it is not, every paper column of the suite has
    run there, and every comparison could have found it worse (its seeds allow p <= ALPHA after Holm: an
    absent difference that no test could have detected is no evidence); inconclusive otherwise."""
    verdicts = _against_baselines(entries, tests)
    if verdicts is None:
        return None
    if any(v.word == "worse" for v in verdicts.values()):
        return _outcome(DISAGREES, verdicts, unrun)
    complete = not unrun and all(v.decidable for v in verdicts.values())
    return _outcome(AGREES if complete else INCONCLUSIVE, verdicts, unrun)


def strong(entries: dict, unrun: tuple[str, ...], tests: Family) -> Outcome | None:
    """ "Strong final performance" on a task: GSB-MDPO is "worse" than no paper baseline column and "better"
    than at least half of them. Disagrees when it is "worse" than any; agrees when both hold and every paper
    column of the suite has run there; inconclusive otherwise."""
    verdicts = _against_baselines(entries, tests)
    if verdicts is None:
        return None
    if any(v.word == "worse" for v in verdicts.values()):
        return _outcome(DISAGREES, verdicts, unrun)
    better = sum(v.word == "better" for v in verdicts.values())
    return _outcome(AGREES if not unrun and 2 * better >= len(verdicts) else INCONCLUSIVE, verdicts, unrun)


def genpo_highest(entries: dict, unrun: tuple[str, ...], tests: Family) -> Outcome | None:
    """ "GenPO achieves the highest return" on a task: GenPO is "better" than every other paper column,
    GSB-MDPO included. Agrees when it is, and every paper column of the suite has run there; disagrees when it
    is "worse" than any; inconclusive otherwise."""
    others = [v for v, e in entries.items() if v != "genpo" and not e.get("reference")]
    if "genpo" not in entries or not others:
        return None
    verdicts = {
        v: tests.unpaired(f"genpo vs {v}", _finals(entries, "genpo"), _finals(entries, v)) for v in others
    }
    words = [v.word for v in verdicts.values()]
    outcome = DISAGREES if "worse" in words else AGREES
    if outcome == AGREES and (unrun or any(w != "better" for w in words)):
        outcome = INCONCLUSIVE
    return Outcome(outcome, f"genpo {_group(verdicts)}{_not_run(unrun)}", ("genpo", *others))


def _direction(entries: dict, variant: str, control: str, expected: str, tests: Family) -> Outcome | None:
    """Agrees when `variant`'s verdict against `control` is `expected`, disagrees when it is the opposite,
    inconclusive otherwise; None when the suite lacks either column."""
    if variant not in entries or control not in entries:
        return None
    found = tests.unpaired(f"{variant} vs {control}", _finals(entries, variant), _finals(entries, control))
    opposite = "better" if expected == "worse" else "worse"
    outcome = AGREES if found.word == expected else DISAGREES if found.word == opposite else INCONCLUSIVE
    return Outcome(
        outcome, f"{variant} {_group({control: found})}{_no_power({control: found})}", (variant, control)
    )


def path_kl_matters(entries: dict, unrun: tuple[str, ...], tests: Family) -> Outcome | None:
    """Column `lambda=0,eta=0` (no path KL) against `eta=0` (exact rank-sum test): agrees when it is "worse",
    disagrees when "better", inconclusive otherwise."""
    return _direction(entries, "lambda=0,eta=0", "eta=0", "worse", tests)


def reference_mixing_helps(entries: dict, unrun: tuple[str, ...], tests: Family) -> Outcome | None:
    """Column `gsb_mdpo` (eta > 0) against `eta=0` (exact rank-sum test): agrees when it is "better",
    disagrees when "worse", inconclusive otherwise."""
    return _direction(entries, PROPOSED, "eta=0", "better", tests)


def clipping_matters(entries: dict, unrun: tuple[str, ...], tests: Family) -> Outcome | None:
    """Column `no clip,eta=0` against `eta=0` (exact rank-sum test): agrees when it is "worse", disagrees when
    "better", inconclusive otherwise."""
    return _direction(entries, "no clip,eta=0", "eta=0", "worse", tests)


GENERATION_STEPS = ("N=4", "N=8", "N=32")
"""The generation-step variants, each against the default N=16 (`gsb_mdpo`)."""


def steps_similar(entries: dict, unrun: tuple[str, ...], tests: Family) -> Outcome | None:
    """Columns N=4, N=8 and N=32 each against `gsb_mdpo` (N=16), exact rank-sum tests with Holm: agrees when
    none is "better" or "worse" and every comparison could have been (its seeds allow p <= ALPHA after Holm);
    disagrees when any is; inconclusive otherwise."""
    present = [v for v in GENERATION_STEPS if v in entries]
    if PROPOSED not in entries or not present:
        return None
    verdicts = {
        v: tests.unpaired(f"{v} vs {PROPOSED}", _finals(entries, v), _finals(entries, PROPOSED))
        for v in present
    }
    if any(v.word in ("better", "worse") for v in verdicts.values()):
        outcome = DISAGREES
    else:
        outcome = AGREES if all(v.decidable for v in verdicts.values()) else INCONCLUSIVE
    detail = "; ".join(f"{v} {_group({PROPOSED: found})}" for v, found in verdicts.items())
    return Outcome(outcome, detail + _no_power(verdicts), (PROPOSED, *present))


CLIP_BAND = (0.1, 0.3)
""""Roughly 0.2"."""
CLIP_COLUMN = "gsb_mdpo:paper-updates"
"""The column whose run is scheduled as the paper's (`suites.PAPER_UPDATES_ARGS`): its cosine spans the
paper's number of gradient updates, so at each update its learning rate is the paper's run's."""
CLIP_RISE = 0.1
"""The share of training left out as "the beginning", where the paper's clipping fraction rises."""


def _window_mean(curve: dict, start: float, end: float = 1.0) -> float:
    values = np.asarray(curve["mean"], dtype=float)
    return float(values[int(start * values.size) : max(int(end * values.size), 1)].mean())


def _rise(curve: dict) -> str:
    """A clipping-fraction curve's rise and what follows: its mean over the first CLIP_RISE of training, over
    the rest, and over each half of the rest."""
    middle = (1 + CLIP_RISE) / 2
    return (
        f"{_window_mean(curve, 0.0, CLIP_RISE):.3f} over the first 10% of training, then "
        f"{_window_mean(curve, CLIP_RISE):.3f} ({_window_mean(curve, CLIP_RISE, middle):.3f} then "
        f"{_window_mean(curve, middle):.3f})"
    )


def clip_fraction_about_0_2(entries: dict, unrun: tuple[str, ...], tests: Family) -> Outcome | None:
    """App. C.2 counts "the fraction of rollout samples whose step log-ratio exceeds the clipping threshold",
    which reads two ways: `sample_clip_frac`, the share of rollout samples (transitions) with at least one
    generation step's log-ratio beyond c_step, and `step_clip_frac`, the share of clipped generation steps (sample
    by step), each at each iteration (across-seed mean). Read on the column scheduled as the paper's run
    (`gsb_mdpo:paper-updates`: at each gradient update its learning rate is the paper's run's), over its whole
    run but the first 10% (where the paper's fraction rises): agrees when both readings lie in [0.1, 0.3]
    ("roughly 0.2"), disagrees when neither does, depends on the count when one does; each reading is shown with
    its rise (the first 10%) and each half of the rest. Where the suite has it, the share of clipped steps of the
    column whose cosine spans its own 1M steps is shown beside it, in each half of its run (the schedule's
    effect)."""
    entry = entries.get(CLIP_COLUMN)
    if entry is None or "sample_clip_frac" not in entry or "step_clip_frac" not in entry:
        return None
    inside = [
        CLIP_BAND[0] <= _window_mean(entry[k], CLIP_RISE) <= CLIP_BAND[1]
        for k in ("sample_clip_frac", "step_clip_frac")
    ]
    outcome = AGREES if all(inside) else DEPENDS if any(inside) else DISAGREES
    where = {True: "inside", False: "outside"}
    detail = (
        f"{CLIP_COLUMN}: rollout samples with a clipped step {_rise(entry['sample_clip_frac'])}, "
        f"{where[inside[0]]} [{CLIP_BAND[0]}, {CLIP_BAND[1]}]; clipped steps {_rise(entry['step_clip_frac'])}, "
        f"{where[inside[1]]} it"
    )
    compressed = entries.get(PROPOSED, {}).get("step_clip_frac")
    if compressed:
        halves = _window_mean(compressed, 0.0, 0.5), _window_mean(compressed, 0.5)
        detail += f"; {PROPOSED} (cosine over its own run) clipped steps {halves[0]:.3f} then {halves[1]:.3f}"
    readings = (
        f"rollout samples with a clipped step {_window_mean(entry['sample_clip_frac'], CLIP_RISE):.3f}, clipped "
        f"steps {_window_mean(entry['step_clip_frac'], CLIP_RISE):.3f}, after the first 10% of training"
    )
    return Outcome(outcome, detail, (CLIP_COLUMN,), brief=readings)


# ---------------------------------------------------------------------------------------------- evidence rules
def _started(entries: list[dict]) -> str | None:
    """When the earliest of these columns' runs started (None if any column does not say)."""
    starts = [e.get("started_first") for e in entries]
    return None if not starts or None in starts else min(starts)


def _actor_trains(suite: str, column: str) -> bool:
    """False for a column whose actor never moves (its learning rate is 0 for the whole run: the fine-tuning
    suite's `bc`, a clone scored as it is)."""
    from ..benchmark.suites import SUITES

    if suite not in SUITES or column not in SUITES[suite].variant_names:
        return True
    args = SUITES[suite].variant(column).args
    flag = "--init.critic-warmup-steps"
    return flag not in args or int(args[args.index(flag) + 1]) < SUITES[suite].total_steps


def _gsb_mdpo_runs(summaries: dict[str, dict]) -> list[dict]:
    """Every column trained by GSB-MDPO (any variant) in the benchmark, ablation and fine-tuning suites, each
    run once (a column reused from another suite is that suite's), but a column whose actor never trains."""
    return [
        e
        for name, s in summaries.items()
        if s["kind"] in ("benchmark", "ablation", "finetune")
        for entries in s["tasks"].values()
        for column, e in entries.items()
        if e["method"] == PROPOSED
        and not e["reused_from"]
        and e["curve_stochastic"]["last_per_seed"]
        and _actor_trains(name, column)
    ]


ABLATION_SUITES = ("ablation-cpu",)
"""The suites that run the paper's Section 5.3 ablations (on HalfCheetah-v5)."""


def ode_beats_sde(summaries: dict[str, dict], tests: Family) -> Outcome | None:
    """The deterministic ODE evaluation against the stochastic SDE evaluation of the same runs, at their last
    evaluation: two paired tests, Holm over both. Within the ablation (`gsb_mdpo` on HalfCheetah-v5 in
    ABLATION_SUITES, the paper's Fig. 3C setting): the exact signed-rank test. Over every run trained by GSB-MDPO in the
    benchmark, ablation and fine-tuning suites (every task and variant, each run once; not a column whose actor
    never trains): the exact sign test, as the tasks' returns are on different scales. Agrees when either is "better" and neither "worse"; disagrees when either
    is "worse"; inconclusive otherwise."""
    runs = _gsb_mdpo_runs(summaries)
    ablation = [
        summaries[name]["tasks"]["HalfCheetah-v5"][PROPOSED]
        for name in ABLATION_SUITES
        if PROPOSED in summaries.get(name, {"tasks": {}})["tasks"].get("HalfCheetah-v5", {})
    ]
    if not runs or not ablation:
        return None
    within, pooled = ablation[0], [[], []]
    for e in runs:
        pooled[0] += e["curve"]["last_per_seed"]
        pooled[1] += e["curve_stochastic"]["last_per_seed"]
    verdicts = {
        f"within the ablation ({len(within['seeds'])} runs, signed-rank)": tests.paired(
            "ablation", within["curve"]["last_per_seed"], within["curve_stochastic"]["last_per_seed"]
        ),
        f"every GSB-MDPO run ({len(pooled[0])} runs, {sum(np.greater(*pooled))} with ODE higher, sign test)": (
            tests.paired("pooled", *pooled, scale_free=True)
        ),
    }
    words = [v.word for v in verdicts.values()]
    outcome = DISAGREES if "worse" in words else AGREES if "better" in words else INCONCLUSIVE
    detail = "; ".join(f"{k}: ODE {_group({'SDE': v})}" for k, v in verdicts.items())
    return Outcome(outcome, detail, started=_started([within, *runs]))


TABLE3 = {
    "gaussian_ppo": (6.24, 0.60),
    "fpo": (6.96, 1.00),
    "dppo": (8.67, 2.50),
    "genpo": (28.73, 64.98),
    "gsb_mdpo": (7.39, 2.59),
}
"""The paper's Table 3 (HalfCheetah-v5, 5M env steps, one A800): minutes end to end and peak GPU GB."""


def _per_step(measurement: dict, method: str) -> float:
    m = measurement["methods"][method]
    return float(np.mean(m["iteration_seconds"])) / m["env_steps_per_iteration"]


def hardware(machine: dict) -> str:
    """The hardware a measurement ran on, as its row names it ("a 2-core CPU", "a GPU (NVIDIA H200)")."""
    return f"a GPU ({machine['gpu']})" if machine.get("gpu") else f"a {machine['cores']}-core CPU"


def _on_gpu(measurement: dict, agrees: bool) -> str:
    """Table 3 timed one A800 GPU: a verdict from a measurement without a GPU would judge the claim on other
    hardware, so it reads NOT_COMPARABLE (its numbers still shown)."""
    if not measurement["machine"].get("gpu"):
        return NOT_COMPARABLE
    return AGREES if agrees else DISAGREES


def time_close_to_ppo_fpo_dppo(measurement: dict, tests: Family) -> Outcome | None:
    """Steady-state training time per env step (after compilation; `trainers.lab.perf.runtime`) at the paper's
    Gym geometry, one seed each, against Table 3's own ratios. Close: GSB-MDPO's time over the mean of Gaussian
    PPO's, FPO's and DPPO's is at most TOLERANCE (1.25) times the paper's (7.39 / mean(6.24, 6.96, 8.67) =
    1.02); substantially lower than GenPO: GenPO's time over GSB-MDPO's is at least the paper's (28.73 / 7.39
    = 3.89) divided by TOLERANCE. On a GPU (Table 3's hardware): agrees when both hold, disagrees otherwise; on
    a CPU: not tested on comparable hardware. End-to-end times are shown beside."""
    if measurement is None or any(m not in measurement["methods"] for m in TABLE3):
        return None
    t = {m: _per_step(measurement, m) for m in TABLE3}
    paper = {m: minutes for m, (minutes, _) in TABLE3.items()}
    cheap = ("gaussian_ppo", "fpo", "dppo")
    ours_close = t[PROPOSED] / np.mean([t[m] for m in cheap])
    paper_close = paper[PROPOSED] / np.mean([paper[m] for m in cheap])
    ours_far, paper_far = t["genpo"] / t[PROPOSED], paper["genpo"] / paper[PROPOSED]
    agrees = ours_close <= TOLERANCE * paper_close and ours_far >= paper_far / TOLERANCE
    end_to_end = {m: measurement["methods"][m]["end_to_end_s"] for m in TABLE3}
    detail = (
        f"on {hardware(measurement['machine'])}: {PROPOSED} {ours_close:.2f}x the PPO/FPO/DPPO mean per env step "
        f"(paper {paper_close:.2f} on an A800 GPU, limit {TOLERANCE * paper_close:.2f}); GenPO {ours_far:.2f}x "
        f"{PROPOSED} (paper {paper_far:.2f}, at least {paper_far / TOLERANCE:.2f}); end to end "
        f"{end_to_end[PROPOSED] / np.mean([end_to_end[m] for m in cheap]):.2f}x and GenPO "
        f"{end_to_end['genpo'] / end_to_end[PROPOSED]:.2f}x"
    )
    brief = f"{PROPOSED} {ours_close:.2f}x the PPO/FPO/DPPO mean per env step (paper {paper_close:.2f})"
    return Outcome(_on_gpu(measurement, agrees), detail, tuple(TABLE3), measurement["started"], brief)


def time_lower_than_dppo(measurement: dict, tests: Family) -> Outcome | None:
    """Steady-state seconds per env step after compilation (`trainers.lab.perf.runtime`), GSB-MDPO's over DPPO's,
    each the mean of one training process's iterations, against Table 3's ratio (7.39 / 8.67 = 0.85 min end to
    end). The iterations of one process are not independent replicates (they share its compilation, memory and
    machine load), so no test is made on them. On a GPU (Table 3's hardware): agrees when the ratio is at most
    TOLERANCE (1.25) times the paper's, disagrees otherwise; on a CPU: not tested on comparable hardware."""
    if measurement is None or any(m not in measurement["methods"] for m in ("dppo", PROPOSED)):
        return None
    paper = TABLE3[PROPOSED][0] / TABLE3["dppo"][0]
    ratio = _per_step(measurement, PROPOSED) / _per_step(measurement, "dppo")
    runs = {m: len(measurement["methods"][m]["iteration_seconds"]) for m in ("dppo", PROPOSED)}
    detail = (
        f"on {hardware(measurement['machine'])}: {PROPOSED} {ratio:.2f}x DPPO per env step (paper {paper:.2f} on "
        f"an A800 GPU, limit {TOLERANCE * paper:.2f}; one process each, {runs[PROPOSED]} and {runs['dppo']} "
        "iterations: no test)"
    )
    brief = f"{PROPOSED} {ratio:.2f}x DPPO per env step (paper {paper:.2f})"
    verdict = _on_gpu(measurement, ratio <= TOLERANCE * paper)
    return Outcome(verdict, detail, ("dppo", PROPOSED), measurement["started"], brief)


def memory_comparable(measurement: dict, tests: Family) -> Outcome | None:
    """Peak GPU memory of the training process tree (`trainers.lab.perf.runtime`; a CPU measurement has none: a
    process's RSS also holds the Python and XLA runtime, which is not what Table 3 measures), against Table 3's
    ratios: GSB-MDPO's peak over DPPO's within a factor TOLERANCE (1.25) of the paper's (2.59 / 2.50 = 1.04),
    either way ("comparable"), and GenPO's over GSB-MDPO's at least the paper's (64.98 / 2.59 = 25.1) divided
    by TOLERANCE. Agrees when both hold, disagrees otherwise."""
    if measurement is None:
        return None
    peak = {m: measurement["methods"].get(m, {}).get("peak_gpu_mib") for m in ("dppo", "genpo", PROPOSED)}
    if None in peak.values():
        return None
    paper_dppo, paper_genpo = (
        TABLE3[PROPOSED][1] / TABLE3["dppo"][1],
        TABLE3["genpo"][1] / TABLE3[PROPOSED][1],
    )
    ours_dppo, ours_genpo = peak[PROPOSED] / peak["dppo"], peak["genpo"] / peak[PROPOSED]
    comparable = paper_dppo / TOLERANCE <= ours_dppo <= paper_dppo * TOLERANCE
    agrees = comparable and ours_genpo >= paper_genpo / TOLERANCE
    detail = (
        f"{PROPOSED} {ours_dppo:.2f}x DPPO's peak (paper {paper_dppo:.2f}); GenPO {ours_genpo:.1f}x "
        f"{PROPOSED}'s (paper {paper_genpo:.1f})"
    )
    return Outcome(
        AGREES if agrees else DISAGREES, detail, ("dppo", "genpo", PROPOSED), measurement["started"]
    )


PAPER_TOY_L1 = 0.100


def toy_l1_about_0_1(toy: dict | None, tests: Family) -> Outcome | None:
    """The toy's quadrant-mass L1 error at the paper's setting (beta = 1, quadrant III preferred), the
    paper's update (each iteration fed the advantage A; not the target-mass feedback extension), at least 3
    seeds: agrees when their mean is at most TOLERANCE (1.25) times the paper's 0.100, disagrees otherwise."""
    runs = (toy or {}).get("reproduction") or []
    if len(runs) < MIN_SEEDS_FOR_VERDICT:
        return None
    l1 = [r["l1"] for r in runs]
    started = [r.get("started") for r in runs]
    mean = float(np.mean(l1))
    outcome = AGREES if mean <= TOLERANCE * PAPER_TOY_L1 else DISAGREES
    detail = (
        f"mean L1 {mean:.3f} ± {np.std(l1, ddof=1):.3f} over {len(l1)} seeds (paper {PAPER_TOY_L1:.3f}, "
        f"limit {TOLERANCE * PAPER_TOY_L1:.3f})"
    )
    return Outcome(outcome, detail, (), None if None in started else min(started))


# ---------------------------------------------------------------------------------------------- claims
@dataclasses.dataclass(frozen=True)
class Claim:
    wording: str
    """Quoted from the paper."""
    where: str
    """Section and figure or table of the paper."""
    short: str
    """The claim in a few words, for the README's one line per claim."""
    rule: Callable
    """A task rule (`source` "suites") or an evidence rule."""
    tasks: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ("benchmark",)
    """Summary kinds a task rule reads."""
    source: str = "suites"
    """What the rule reads: "suites" (one task of one suite at a time), "runs" (every summary), "runtime"
    (one `runtime-*.json` measurement at a time) or "toy" (the toy sweep's summary)."""
    every_task: bool = False
    """The claim is about all of `tasks` together: it agrees only when every one of them was tested."""


PLAYGROUND = "§5.1 Main Results on Playground, Fig. 1"
GYM = "§5.2 Main Results on Gym-MuJoCo, Fig. 2 (A)-(F)"
GYM_TASKS = ("Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Humanoid-v5", "Swimmer-v5", "Walker2d-v5")
TABLE3_WHERE = "§5.2, Fig. 2 (G); App. C.3 Computational Efficiency, Table 3"
CLAIMS = (
    Claim(
        "GSB-MDPO obtains [...] clear gains on BallInCup, FingerSpin, FingerTurnEasy, and FingerTurnHard.",
        PLAYGROUND,
        "clear gains on BallInCup, FingerSpin, FingerTurnEasy, FingerTurnHard",
        clear_gains,
        ("BallInCup", "FingerSpin", "FingerTurnEasy", "FingerTurnHard"),
    ),
    Claim(
        "GSB-MDPO obtains competitive or higher returns across the eight tasks",
        PLAYGROUND,
        "competitive or higher across the eight Playground tasks",
        competitive,
        # The seven tasks the paper names (it does not name the eighth).
        (
            "BallInCup",
            "CheetahRun",
            "FingerSpin",
            "FingerTurnEasy",
            "FingerTurnHard",
            "ReacherEasy",
            "ReacherHard",
        ),
    ),
    Claim(
        "On CheetahRun and the two reaching tasks, multiple methods reach comparable final returns, and "
        "GSB-MDPO remains among the leading methods.",
        PLAYGROUND,
        "among the leading methods on CheetahRun and the reaching tasks",
        competitive,
        ("CheetahRun", "ReacherEasy", "ReacherHard"),
    ),
    Claim(
        "GSB-MDPO performs strongly across the six locomotion tasks",
        GYM,
        "strong across the six Gym-MuJoCo tasks",
        strong,
        GYM_TASKS,
        every_task=True,
    ),
    Claim(
        "[GSB-MDPO] is especially effective on higher-dimensional environments such as Ant-v5 and "
        "Humanoid-v5",
        GYM,
        "especially effective on Ant and Humanoid",
        clear_gains,
        ("Ant-v5", "Humanoid-v5"),
    ),
    Claim(
        "It also obtains strong final performance on Swimmer-v5 and Walker2d-v5",
        GYM,
        "strong final performance on Swimmer and Walker2d",
        strong,
        ("Swimmer-v5", "Walker2d-v5"),
    ),
    Claim(
        "[It] remains competitive on Hopper-v5.", GYM, "competitive on Hopper", competitive, ("Hopper-v5",)
    ),
    Claim(
        "On HalfCheetah-v5, GenPO achieves the highest return",
        GYM,
        "GenPO highest on HalfCheetah",
        genpo_highest,
        ("HalfCheetah-v5",),
    ),
    Claim(
        "Setting this coefficient [the path-KL coefficient] to zero substantially degrades final performance",
        "§5.3 Further Analysis, Fig. 3A (compared with eta=0)",
        "path-KL coefficient 0 degrades performance",
        path_kl_matters,
        ("HalfCheetah-v5",),
        ("ablation",),
    ),
    Claim(
        "A positive reference-mixing coefficient improves performance over the eta=0 variant.",
        "§5.3 Further Analysis, Fig. 3B",
        "reference mixing (eta > 0) helps",
        reference_mixing_helps,
        ("HalfCheetah-v5",),
        ("ablation",),
    ),
    Claim(
        "[Results] support using the deterministic path at evaluation time [...] evaluation removes "
        "sampling noise by following the learned deterministic drift.",
        "§5.3 Further Analysis, Fig. 3C",
        "deterministic ODE evaluation better than SDE",
        ode_beats_sde,
        source="runs",
    ),
    Claim(
        "Without clipping, accumulated generation-step likelihood ratios produce a less reliable update.",
        "§5.3 Further Analysis, Fig. 3D (compared with eta=0)",
        "clipping matters",
        clipping_matters,
        ("HalfCheetah-v5",),
        ("ablation",),
    ),
    Claim(
        "All four settings [4, 8, 16 and 32 flow steps] reach similar final performance by the end of "
        "training.",
        "§5.3 Sensitivity to Generation Steps, Fig. 4",
        "4, 8, 16 and 32 generation steps reach similar returns",
        steps_similar,
        ("HalfCheetah-v5",),
        ("ablation",),
    ),
    Claim(
        "The clipping fraction rises quickly at the beginning of training and then stabilizes at roughly "
        "0.2 throughout most of optimization.",
        "App. C.2 Step Log-Ratio Clipping Analysis, Fig. 6",
        "clipping fraction stabilises at about 0.2 (in samples or in steps)",
        clip_fraction_about_0_2,
        ("HalfCheetah-v5",),
        ("benchmark", "ablation"),
    ),
    Claim(
        "On HalfCheetah-v5, its training time is close to PPO/FPO/DPPO and substantially lower than GenPO",
        TABLE3_WHERE,
        "training time on a GPU close to PPO/FPO/DPPO, well below GenPO",
        time_close_to_ppo_fpo_dppo,
        source="runtime",
    ),
    Claim(
        "its end-to-end runtime remains close to FPO and lower than DPPO in this representative setting",
        TABLE3_WHERE,
        "training time on a GPU lower than DPPO",
        time_lower_than_dppo,
        source="runtime",
    ),
    Claim(
        "Its GPU memory footprint is comparable to DPPO and substantially lower than GenPO",
        TABLE3_WHERE,
        "GPU memory comparable to DPPO, well below GenPO",
        memory_comparable,
        source="runtime",
    ),
    Claim(
        "In the learned distribution, the quadrant masses closely match the target distribution, with a "
        "quadrant-mass l1 error of 0.100.",
        "App. C.1 Toy Analysis, Fig. 5",
        "toy: quadrant-mass L1 error about 0.100",
        toy_l1_about_0_1,
        source="toy",
    ),
)

LAB_66 = ("31fbf233050dcb89799c90aa8401c560034b805a", "2026-12-03T20:57:48+00:00")
"""Where the rules last changed: issue 66 moved the claims into the lab (`trainers/lab/`) and split the suites'
definitions and the summary into modules by job (the fingerprints follow the code to its new files; the runtime
rules' docstrings name the lab's timing script)."""
TOY_66 = ("135f4fdfb2197eb5bfbf59eb4b7180b4394cff7c", "2026-12-03T20:58:13+00:00")
"""Where the toy's rule last changed: issue 66 made the toy a package (`trainers.lab.toy`), whose settings and
summary modules select its data."""
RULES_SET_AT: dict[str, tuple[str, str]] = {
    "clear_gains": LAB_66,
    "competitive": LAB_66,
    "strong": LAB_66,
    "genpo_highest": LAB_66,
    "path_kl_matters": LAB_66,
    "reference_mixing_helps": LAB_66,
    "ode_beats_sde": LAB_66,
    "clipping_matters": LAB_66,
    "steps_similar": LAB_66,
    "clip_fraction_about_0_2": LAB_66,
    "time_close_to_ppo_fpo_dppo": LAB_66,
    "time_lower_than_dppo": LAB_66,
    "memory_comparable": LAB_66,
    "toy_l1_about_0_1": TOY_66,
}
"""Rule (function name) -> (the commit at which its code took its present form, that commit's author date,
which a rebase keeps). A test checks each against the git history: the rule's code (`rule_fingerprint`) is
the same at that commit and at every later commit that touched it, and differs at the commit before. Changing
a rule means recording the commit that changes it here, after which every verdict on earlier runs is post
hoc."""


# ---------------------------------------------------------------------------------------------- rule identity
SELECTION: dict[str, tuple[tuple[str, str], ...]] = {
    # Per task and column, the runs and each one's value (`summarize`, with the suite's definition it reads), the
    # columns planned but not run, and how the row's verdict combines its tasks.
    "suites": (("summary", "summarize"), ("claims_report", "_judge_tasks"), ("claims_report", "_row_verdict")),
    "runs": (("summary", "summarize"),),
    "runtime": (("aggregate", "measurements"),),
    # The toy's paper-setting runs: the settings that define it, and the latest logged run of each cell.
    "toy": (("aggregate", "measurements"), ("tilt_settings", "Args"), ("tilt_settings", "settings"),
            ("tilt_summary", "_latest"), ("tilt_summary", "_loop_summary")),
}  # fmt: skip
"""What a claim's rule is fingerprinted with besides its own code, by the claim's `source`: the functions that
select and shape the data it reads."""


def claim_fingerprint(rule: str, sources: dict[str, str]) -> str | None:
    """The fingerprint of a claim rule (a function here) with the code that selects its data (`SELECTION`)."""
    source = next((c.source for c in CLAIMS if c.rule.__name__ == rule), "suites")
    return rule_fingerprint(rule, sources, roots=SELECTION[source])
