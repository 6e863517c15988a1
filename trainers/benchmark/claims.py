"""The paper's claims about returns, each judged from the benchmark summaries by a rule written here.

`claims_report` turns them into the documentation's claims page and the README's one line per claim. Typed by
hand: each claim's wording (quoted from the paper) and where the paper makes it. Everything else (evidence,
verdicts) is computed from the summaries.

A claim is judged per task, on every summary of the kind that can test it (a benchmark, ablation or
compute suite). Each judge below reads one task of one suite: the columns that ran there, and the paper columns
the suite defines that have not (yet) run there. It returns "agrees", "disagrees" or "inconclusive" with its
reasons, or None when that suite lacks the columns the rule needs; its docstring is the rule, and the
generated text quotes it. The verdicts it reads are `stats.compare`'s: "better"
or "worse" only when the 95% interval of the probability of improvement excludes 0.5, with >= 3 seeds in
both columns; "inconclusive" otherwise.
"""

import dataclasses
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
    detail = (
        f"{PROPOSED} {wall[PROPOSED] / cheap:.2f}x the PPO/FPO/DPPO mean; GenPO "
        f"{wall['genpo'] / wall[PROPOSED]:.2f}x {PROPOSED}"
    )
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
    short: str
    """The claim in a few words, for the README's one line per claim."""


PLAYGROUND = "§5.1 Main Results on Playground, Fig. 1"
GYM = "§5.2 Main Results on Gym-MuJoCo, Fig. 2 (A)-(F)"
CLAIMS = (
    Claim("GSB-MDPO obtains [...] clear gains on BallInCup, FingerSpin, FingerTurnEasy, and FingerTurnHard.",
          PLAYGROUND, ("BallInCup", "FingerSpin", "FingerTurnEasy", "FingerTurnHard"), ("benchmark",),
          clear_gains, "clear gains on BallInCup, FingerSpin, FingerTurnEasy, FingerTurnHard"),
    Claim("GSB-MDPO obtains competitive or higher returns across the eight tasks", PLAYGROUND,
          # The seven tasks the paper names (it does not name the eighth).
          ("BallInCup", "CheetahRun", "FingerSpin", "FingerTurnEasy", "FingerTurnHard", "ReacherEasy",
           "ReacherHard"), ("benchmark",), competitive, "competitive or higher across the eight Playground tasks"),
    Claim("On CheetahRun and the two reaching tasks, multiple methods reach comparable final returns, and "
          "GSB-MDPO remains among the leading methods.", PLAYGROUND,
          ("CheetahRun", "ReacherEasy", "ReacherHard"), ("benchmark",), competitive,
          "among the leading methods on CheetahRun and the reaching tasks"),
    Claim("[GSB-MDPO] is especially effective on higher-dimensional environments such as Ant-v5 and "
          "Humanoid-v5", GYM, ("Ant-v5", "Humanoid-v5"), ("benchmark",), clear_gains,
          "especially effective on Ant and Humanoid"),
    Claim("It also obtains strong final performance on Swimmer-v5 and Walker2d-v5", GYM,
          ("Swimmer-v5", "Walker2d-v5"), ("benchmark",), strong,
          "strong final performance on Swimmer and Walker2d"),
    Claim("[It] remains competitive on Hopper-v5.", GYM, ("Hopper-v5",), ("benchmark",), competitive, "competitive on Hopper"),
    Claim("On HalfCheetah-v5, GenPO achieves the highest return", GYM, ("HalfCheetah-v5",), ("benchmark",),
          genpo_highest, "GenPO highest on HalfCheetah"),
    Claim("Setting this coefficient [the path-KL coefficient] to zero substantially degrades final "
          "performance", "§5.3 Further Analysis, Fig. 3A (compared with eta=0)", ("HalfCheetah-v5",),
          ("ablation",), path_kl_matters, "path-KL coefficient 0 degrades performance"),
    Claim("A positive reference-mixing coefficient improves performance over the eta=0 variant.",
          "§5.3 Further Analysis, Fig. 3B", ("HalfCheetah-v5",), ("ablation",), reference_mixing_helps,
          "reference mixing (eta > 0) helps"),
    Claim("[Results] support using the deterministic path at evaluation time [...] evaluation removes "
          "sampling noise by following the learned deterministic drift.", "§5.3 Further Analysis, Fig. 3C",
          ("HalfCheetah-v5",), ("ablation",), ode_beats_sde,
          "deterministic ODE evaluation better than SDE"),
    Claim("Without clipping, accumulated generation-step likelihood ratios produce a less reliable update.",
          "§5.3 Further Analysis, Fig. 3D (compared with eta=0)", ("HalfCheetah-v5",), ("ablation",),
          clipping_matters, "clipping matters"),
    Claim("All four settings [4, 8, 16 and 32 flow steps] reach similar final performance by the end of "
          "training.", "§5.3 Sensitivity to Generation Steps, Fig. 4", ("HalfCheetah-v5",), ("ablation",),
          steps_similar, "4, 8, 16 and 32 generation steps reach similar returns"),
    Claim("The clipping fraction rises quickly at the beginning of training and then stabilizes at roughly "
          "0.2 throughout most of optimization.", "App. C.2 Step Log-Ratio Clipping Analysis, Fig. 6",
          ("HalfCheetah-v5",), ("benchmark", "ablation"), clip_fraction_about_0_2,
          "step-clip fraction stabilises at about 0.2"),
    Claim("On HalfCheetah-v5, its training time is close to PPO/FPO/DPPO and substantially lower than GenPO",
          "§5.2, Fig. 2 (G); App. C.3 Computational Efficiency, Table 3", ("HalfCheetah-v5",), ("compute",),
          time_close_to_ppo_fpo_dppo, "training time close to PPO/FPO/DPPO, well below GenPO"),
)  # fmt: skip
