"""The small-envs suite's targets (issue: "your own env learns with the defaults"), fixed before its runs.

On each task, with a column's score the fraction of the gap from doing nothing to the best trained column
that its mean final return closes, (mean - do_nothing) / (best - do_nothing):

- GSB-MDPO's default is *not worse than SB3 PPO's defaults* when its score is at least theirs minus
  `NOT_WORSE_MARGIN` (5% of the gap: three seeds cannot resolve less);
- it *closes most of the gap* when its score is at least `MOST_OF_GAP`.

Means, not intervals: with three seeds an interval test cannot call anything worse, so it would pass every
default. The suite page shows the intervals beside the verdicts.
"""

from ..registry import PROPOSED

NOT_WORSE_MARGIN = 0.05
MOST_OF_GAP = 0.75
SB3_DEFAULTS = "sb3_ppo:defaults"


def score(mean: float, do_nothing: float, best: float) -> float:
    """The fraction of the do-nothing-to-best gap a mean return closes (1: the best column; 0: doing nothing)."""
    if best == do_nothing:
        return 1.0 if mean >= best else 0.0
    return (mean - do_nothing) / (best - do_nothing)


def judge(columns: dict[str, float], do_nothing: float) -> dict:
    """One task's verdicts from its trained columns' mean final returns and the do-nothing floor's."""
    best = max(columns.values())
    scores = {name: round(score(mean, do_nothing, best), 3) for name, mean in columns.items()}
    return {
        "best": max(columns, key=columns.get),
        "scores": scores,
        "not_worse_than_sb3_defaults": scores[PROPOSED] >= scores[SB3_DEFAULTS] - NOT_WORSE_MARGIN,
        "closes_most_of_gap": scores[PROPOSED] >= MOST_OF_GAP,
    }
