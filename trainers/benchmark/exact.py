"""Exact tests for a few seeds, and Holm's correction for a claim that makes several comparisons.

- `rank_sum_p`: two independent columns (runs of two methods). The exact permutation distribution of the
  rank sum with midranks: every split of the pooled runs into the two columns' sizes is equally likely under
  "no difference", ties included (scipy's exact Mann-Whitney assumes no ties and falls back on a normal
  approximation otherwise, which is far off at 3 seeds).
- `signed_rank_p`: paired values (two evaluations of the same runs, on one task's scale). The exact
  distribution of Wilcoxon's signed-rank sum with midranks of |difference|, zero differences dropped.
- `sign_test_p`: paired values on different scales (runs of several tasks pooled): the exact binomial test of
  how many differences are positive, zero differences dropped.
- `holm`: Holm's step-down adjustment of a family of p-values (family-wise error at most alpha, whatever their
  dependence).

Ranks are doubled so that midranks (halves) are integers and every distribution is counted exactly, by
dynamic programming over the achievable sums. p-values are two-sided: the probability, under the null, of a
statistic at least as far from its null mean as the one observed; `rank_sum_p_greater` is the one-sided form the
pre-registered (confirmatory) tests use, where each claim states its direction.
"""

from math import comb

import numpy as np
from scipy.stats import rankdata


def _doubled_midranks(values) -> np.ndarray:
    return np.rint(2 * rankdata(np.asarray(values, dtype=float))).astype(np.int64)


def _two_sided(counts: np.ndarray, observed: int, mean_twice: int) -> float:
    """P(|S - mean| >= |s - mean|) for the statistic S whose value s has `counts[s]` outcomes; `mean_twice` is
    twice the null mean (an integer), so that the comparison is exact."""
    sums = np.arange(counts.size)
    far = np.abs(2 * sums - mean_twice) >= abs(2 * observed - mean_twice)
    return float(counts[far].sum() / counts.sum())


def _rank_sum_null(x, y) -> tuple[np.ndarray, int, np.ndarray]:
    """The pooled runs' doubled midranks, the observed doubled rank sum of `x`, and `counts[s]`: how many ways
    of picking len(x) of the pooled runs give the doubled rank sum s (the exact null distribution)."""
    x, y = np.ravel(np.asarray(x, dtype=float)), np.ravel(np.asarray(y, dtype=float))
    ranks = _doubled_midranks(np.concatenate([x, y]))
    n = x.size
    # counts[k, s]: subsets of k of the pooled runs whose doubled ranks sum to s.
    counts = np.zeros((n + 1, int(ranks.sum()) + 1), dtype=np.float64)
    counts[0, 0] = 1.0
    for r in ranks:
        counts[1:, r:] = counts[1:, r:] + counts[:-1, : counts.shape[1] - r]
    return ranks, int(ranks[:n].sum()), counts[n]


def rank_sum_p(x, y) -> float:
    """Two-sided exact p-value of the rank-sum (Mann-Whitney) test of runs `x` against runs `y`, midranks for
    ties. 3 runs against 3 that do not overlap give 2/20 = 0.10, the smallest p such columns can reach."""
    ranks, observed, counts = _rank_sum_null(x, y)
    n = np.size(x)
    return _two_sided(counts, observed, n * int(ranks.sum()) * 2 // ranks.size)


def rank_sum_p_greater(x, y) -> float:
    """One-sided exact p-value of the rank-sum test that runs `x` rank above runs `y`: the null probability of
    a rank sum of `x` at least the one observed (midranks for ties). 5 runs all above 5 give 1/252 = 0.004."""
    _, observed, counts = _rank_sum_null(x, y)
    return float(counts[observed:].sum() / counts.sum())


def signed_rank_p(x, y) -> float:
    """Two-sided exact p-value of Wilcoxon's signed-rank test of paired values `x` and `y` (each pair: the
    same run evaluated two ways), midranks of |x - y|, zero differences dropped; 1.0 when none is left. 3 pairs
    that all differ the same way give 2/8 = 0.25."""
    d = np.ravel(np.asarray(x, dtype=float)) - np.ravel(np.asarray(y, dtype=float))
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    ranks = _doubled_midranks(np.abs(d))
    counts = np.zeros(int(ranks.sum()) + 1, dtype=np.float64)
    counts[0] = 1.0
    for r in ranks:  # each rank is added to the positive sum or not, with equal chance
        counts[r:] = counts[r:] + counts[: counts.size - r]
    return _two_sided(counts, int(ranks[d > 0].sum()), int(ranks.sum()))


def sign_test_p(x, y) -> float:
    """Two-sided exact binomial p-value of the number of pairs with x > y among those that differ (1.0 when
    none does): scale-free, so pairs from tasks with different return scales can be pooled."""
    d = np.ravel(np.asarray(x, dtype=float)) - np.ravel(np.asarray(y, dtype=float))
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    counts = np.array([float(comb(d.size, k)) for k in range(d.size + 1)])
    return _two_sided(counts, int((d > 0).sum()), d.size)


def holm(p_values: list[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given: the i-th smallest p times (m - i + 1), made monotone and
    capped at 1. A comparison is significant at family-wise level alpha when its adjusted p is <= alpha."""
    order = np.argsort(p_values, kind="stable")
    m, adjusted, running = len(p_values), [0.0] * len(p_values), 0.0
    for position, index in enumerate(order):
        running = max(running, min(1.0, (m - position) * p_values[index]))
        adjusted[index] = running
    return adjusted
