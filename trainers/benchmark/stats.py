"""Across-seed statistics for the benchmark tables: interquartile mean (IQM), stratified-bootstrap confidence
intervals and the probability of improvement, with rliable (Agarwal et al., 2021, "Deep RL at the edge of
the statistical precipice").

The bootstrap is rliable's (`rliable.library.get_interval_estimates`: resample seeds within each task,
percentile intervals). The two statistics are rliable's definitions written in plain numpy, because
scipy's per-call overhead (`metrics.aggregate_iqm` calls `scipy.stats.trim_mean`,
`metrics.probability_of_improvement` calls `scipy.stats.mannwhitneyu`) is 10-30x the cost of the
statistic on 3-5 seeds, and the bootstrap calls it once per resample; tests check that both agree with
rliable's. Results are deterministic (fixed seed), so regenerating a summary from the same ledger gives the
same bytes.
"""

import contextlib

import numpy as np

from . import exact

CONFIDENCE = 0.95
BOOTSTRAP_REPS = 1000
"""Resamples per interval. 3-5 seeds have at most 126 distinct resamples per column, so more repetitions
refine nothing but the interval's last digit; this keeps regenerating every suite to a few seconds."""
BOOTSTRAP_SEED = 0
MIN_SEEDS_FOR_INTERVAL = 2
"""One seed has no spread to resample: no interval."""
MIN_SEEDS_FOR_VERDICT = 3
"""With two seeds per column, every resample of two runs that do not overlap gives the same probability
of improvement, so the interval is [1, 1] however close the runs are: a verdict needs three in each."""


def iqm(scores) -> float:
    """Interquartile mean over all entries: the mean of the middle half after dropping `int(n / 4)` values
    at each end (rliable's `metrics.aggregate_iqm`). With fewer than 4 values it is the mean."""
    flat = np.sort(np.ravel(np.asarray(scores, dtype=float)))
    cut = int(0.25 * flat.size)
    return float(flat[cut : flat.size - cut].mean())


def probability_of_improvement(x, y) -> float:
    """P(X > Y) averaged over tasks (rliable's `metrics.probability_of_improvement`): per task, the share of
    (run of X, run of Y) pairs where X's score is higher, ties counting one half. `x` and `y` are
    (runs x tasks); their run counts may differ."""
    x, y = np.asarray(x, dtype=float)[:, None, :], np.asarray(y, dtype=float)[None, :, :]
    wins = np.count_nonzero(x > y) + 0.5 * np.count_nonzero(x == y)  # summed over tasks: equal pairs per task
    return float(wins / (x.shape[0] * y.shape[1] * x.shape[2]))


@contextlib.contextmanager
def _seeded_global_numpy():
    """rliable's bootstraps draw their resampling indices from numpy's global generator (`np.random.choice`
    in `update_indices`; the `random_state` argument does not reach it), so seed that one for
    reproducible intervals, and give the caller its state back."""
    state = np.random.get_state()
    np.random.seed(BOOTSTRAP_SEED)
    try:
        yield
    finally:
        np.random.set_state(state)


def _interval(data, statistic) -> tuple[float, float, float]:
    """Point estimate and percentile interval of `statistic` over the stratified bootstrap of `data` (one
    (runs x tasks) array, or a list of them resampled independently)."""
    from rliable import library

    with _seeded_global_numpy():
        point, interval = library.get_interval_estimates(
            {"x": data},
            lambda *scores: np.array([statistic(*scores)]),
            reps=BOOTSTRAP_REPS,
            confidence_interval_size=CONFIDENCE,
        )
    return float(point["x"][0]), float(interval["x"][0, 0]), float(interval["x"][1, 0])


def _round(value: float, digits: int = 3) -> float:
    return round(value, digits) + 0.0  # + 0.0: no "-0.0" in the JSON


def iqm_interval(matrix) -> dict:
    """IQM of a (seeds x tasks) score matrix (one column for one task) and its 95% interval from resampling
    seeds within each task; `ci` is None with fewer than `MIN_SEEDS_FOR_INTERVAL` seeds."""
    matrix = np.asarray(matrix, dtype=float).reshape(len(matrix), -1)
    if len(matrix) < MIN_SEEDS_FOR_INTERVAL:
        return {"iqm": _round(iqm(matrix)), "ci": None}
    point, low, high = _interval(matrix, iqm)
    return {"iqm": _round(point), "ci": [_round(low), _round(high)]}


def seeds_text(n_x: int, n_y: int) -> str:
    return f"{n_x} seed{'s' * (n_x != 1)}" if n_x == n_y else f"{n_x} vs {n_y} seeds"


def rank_test_p(x, y) -> float:
    """Two-sided p-value of the rank-sum (Mann-Whitney) test of runs `x` against runs `y`, from the exact
    permutation distribution with midranks (`exact.rank_sum_p`: exact under ties too). Shown beside a verdict
    because the bootstrap interval of two columns whose seeds do not overlap is [1, 1] (or [0, 0]) at any seed
    count, while the rank test says how unlikely that order is by chance: for 3 seeds against 3 it is 2/20 =
    0.10 at best, 0.057 for 4 against 3, 0.008 for 5 against 5."""
    return exact.rank_sum_p(x, y)


def compare(x, y) -> dict:
    """How runs `x` fare against runs `y` on one task (final returns, one per seed): the probability of
    improvement P(X > Y), its 95% interval (independent stratified bootstrap of both), a verdict:
    "better" when the whole interval lies above 0.5, "worse" when it lies below, otherwise
    "inconclusive (n seeds)" (always so with fewer than `MIN_SEEDS_FOR_VERDICT` seeds on either side), and
    the rank test's p-value (`rank_test_p`). `p_improvement`, `ci` and `rank_p` are None when either side
    has fewer than `MIN_SEEDS_FOR_INTERVAL` seeds."""
    x, y = np.asarray(x, dtype=float).reshape(-1, 1), np.asarray(y, dtype=float).reshape(-1, 1)
    inconclusive = f"inconclusive ({seeds_text(len(x), len(y))})"
    if min(len(x), len(y)) < MIN_SEEDS_FOR_INTERVAL:
        return {"p_improvement": None, "ci": None, "verdict": inconclusive, "rank_p": None}
    point, low, high = _interval([x, y], probability_of_improvement)
    verdict = inconclusive
    if min(len(x), len(y)) >= MIN_SEEDS_FOR_VERDICT:
        verdict = "better" if low > 0.5 else "worse" if high < 0.5 else inconclusive
    return {
        "p_improvement": _round(point),
        "ci": [_round(low), _round(high)],
        "verdict": verdict,
        "rank_p": _round(rank_test_p(x, y)),
    }
