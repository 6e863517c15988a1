"""The exact tests the claims use: each against brute-force enumeration of its null distribution (ties
included), against scipy where scipy is exact, and Holm's correction against its definition."""

import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats

from trainers.benchmark import exact


def _brute_rank_sum(x, y) -> float:
    pooled = np.concatenate([x, y]).astype(float)
    ranks = scipy_stats.rankdata(pooled)
    centre = len(x) * (len(pooled) + 1) / 2
    observed = abs(ranks[: len(x)].sum() - centre)
    splits = [abs(ranks[list(c)].sum() - centre) for c in itertools.combinations(range(len(pooled)), len(x))]
    return float(np.mean(np.asarray(splits) >= observed - 1e-9))


def _brute_signed_rank(x, y) -> float:
    d = np.asarray(x, float) - np.asarray(y, float)
    d = d[d != 0]
    ranks = scipy_stats.rankdata(np.abs(d))
    centre = ranks.sum() / 2
    observed = abs(ranks[d > 0].sum() - centre)
    sums = [abs(sum(r for r, s in zip(ranks, signs, strict=True) if s) - centre)
            for signs in itertools.product((0, 1), repeat=d.size)]  # fmt: skip
    return float(np.mean(np.asarray(sums) >= observed - 1e-9))


@pytest.mark.parametrize(
    ("x", "y"),
    [([4, 5, 6], [1, 2, 3]), ([0, 0, 0], [0, 899, 903]), ([1, 2, 2, 3], [2, 3, 3]), ([5, 5, 5], [5, 5, 5]),
     ([1.5, 2.5, 9, 9, 3], [9, 1, 1.5, 4])],
)  # fmt: skip
def test_rank_sum_is_the_exact_permutation_distribution_with_midranks(x, y):
    assert exact.rank_sum_p(x, y) == pytest.approx(_brute_rank_sum(x, y), abs=1e-12)


def test_rank_sum_agrees_with_scipy_where_scipy_is_exact_and_corrects_it_under_ties():
    rng = np.random.default_rng(0)
    for n_x, n_y in ((3, 3), (4, 5), (5, 5)):
        x, y = rng.normal(size=n_x), rng.normal(size=n_y)
        assert exact.rank_sum_p(x, y) == pytest.approx(scipy_stats.mannwhitneyu(x, y, method="exact").pvalue)
    assert exact.rank_sum_p([4, 5, 6], [1, 2, 3]) == pytest.approx(2 / 20)  # 3 against 3: the best there is
    assert exact.rank_sum_p(range(5, 10), range(5)) == pytest.approx(2 / 252)
    # cpu-playground's BallInCup: GSB-MDPO [0, 899, 903] against a column that never scored. scipy's
    # tie-corrected normal approximation says 0.20; the exact distribution says 0.40.
    assert scipy_stats.mannwhitneyu([0, 899, 903], [0, 0, 0]).pvalue == pytest.approx(0.197, abs=1e-3)
    assert exact.rank_sum_p([0, 899, 903], [0, 0, 0]) == pytest.approx(0.4)


@pytest.mark.parametrize(("x", "y"), [([2, 3, 4], [1, 1, 1]), ([1, 5, 2, 8, 3], [2, 4, 2, 1, 3.5]),
                                      ([1, 2, 3, 4], [0, 1, 2, 3]), ([1, 1], [1, 1])])  # fmt: skip
def test_signed_rank_is_exact_with_midranks_and_zero_differences_dropped(x, y):
    expected = _brute_signed_rank(x, y) if np.any(np.subtract(x, y)) else 1.0
    assert exact.signed_rank_p(x, y) == pytest.approx(expected, abs=1e-12)
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=7), rng.normal(size=7)
    assert exact.signed_rank_p(a, b) == pytest.approx(scipy_stats.wilcoxon(a, b, method="exact").pvalue)


def test_sign_test_is_the_exact_binomial_and_pools_any_scales():
    x = np.r_[np.full(25, 2.0), np.full(5, -1.0)]
    assert exact.sign_test_p(x, np.zeros(30)) == pytest.approx(scipy_stats.binomtest(25, 30).pvalue)
    assert exact.sign_test_p([2, 3, 4], [1, 1, 1]) == pytest.approx(0.25)
    assert exact.sign_test_p([1000.0, 0.2], [1.0, 0.1]) == exact.sign_test_p([2.0, 2.0], [1.0, 1.0])
    assert exact.sign_test_p([1, 2], [1, 2]) == 1.0


def test_holm_multiplies_the_ith_smallest_by_m_minus_i_and_keeps_the_order():
    assert exact.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert exact.holm([0.3, 0.3]) == pytest.approx([0.6, 0.6])
    assert exact.holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])  # capped
    assert exact.holm([0.02]) == [0.02]
