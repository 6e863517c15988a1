"""How many seeds a pre-registered comparison needs: the power of its exact one-sided rank-sum tests.

The model is the simplest one that exploratory runs can fit: each column's per-seed metric is normal, with the
column's exploratory mean and the two columns' pooled exploratory standard deviation. Under it, the rank-sum
statistic of `n` runs against `n` has no ties, so each test rejects when its rank sum reaches the exact critical
value of the null distribution (`critical_rank_sum`); the power is the share of simulated experiments in which
every test the claim needs rejects (two for an equivalence, one otherwise). It is a planning number, not part of
a verdict: it is computed once, when a claim is registered, and written beside the seeds it chose.

The level is ALPHA divided by the claim's family size (Bonferroni), which Holm's step-down never makes stricter, so
the power computed is a lower bound on the power of the registered Holm-corrected test.

Two choices make the plan aim at a verdict that concludes rather than at one direction. The seed count targets
the power of a verdict either way (the claim's tests or the opposite one reject), so that exploratory runs which
point against a claim plan for a "disagrees" as firmly as runs that point for it plan for an "agrees". And the
standard deviation it simulates is the upper PLANNING_SD_CONFIDENCE confidence limit of the exploratory one
(`planning_sd`), not the estimate itself: from 3 runs a column the estimate is often far below the spread that
later runs show, and a plan on the estimate is then underpowered (a standard remedy for pilot-based sample sizes).
"""

import numpy as np
from scipy.stats import chi2

TARGET_POWER = 0.8
MIN_SEEDS = 5
"""Never fewer: at 5 against 5 the smallest one-sided p is 1/252, so a family of up to 12 tests can still
conclude."""
MAX_SEEDS = 10
"""Never more. A comparison that does not reach the target power by then is registered at MAX_SEEDS when a verdict
is still more likely than not there (power of at least 0.5), and at MIN_SEEDS otherwise, with the power it has:
seeds up to MAX_SEEDS would cost twice as much and still leave its verdict most likely inconclusive."""
PLANNING_SD_CONFIDENCE = 0.8
"""The one-sided confidence of the standard deviation the plan simulates: with 3 runs a column (4 degrees of
freedom) it is 1.56 times the exploratory estimate."""
SIMULATIONS = 4000
SIMULATION_SEED = 0


def critical_rank_sum(n: int, level: float) -> int:
    """The smallest rank sum (ranks 1..2n, no ties) of one column of `n` runs against another `n` whose null
    probability of being reached or exceeded is at most `level`; one above the largest possible sum, n(3n+1)/2,
    when no reachable sum is that rare."""
    counts = np.zeros((n + 1, n * (2 * n + 1) + 1))
    counts[0, 0] = 1.0
    for r in range(1, 2 * n + 1):
        counts[1:, r:] = counts[1:, r:] + counts[:-1, : counts.shape[1] - r]
    tail = np.cumsum(counts[n][::-1])[::-1] / counts[n].sum()
    reaching = np.flatnonzero(tail <= level)
    return int(reaching[0]) if reaching.size else counts.shape[1]


def _rank_sums(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per simulated experiment (rows), the rank sum of `first` among `first` and `second` pooled."""
    pooled = np.concatenate([first, second], axis=1)
    ranks = pooled.argsort(axis=1).argsort(axis=1) + 1
    return ranks[:, : first.shape[1]].sum(axis=1)


def planning_sd(sd: float, degrees_of_freedom: int) -> float:
    """The upper PLANNING_SD_CONFIDENCE confidence limit of a normal standard deviation estimated as `sd` with
    `degrees_of_freedom` (the pooled estimate of two columns of n1 and n2 runs has n1 + n2 - 2)."""
    return sd * float(
        np.sqrt(degrees_of_freedom / chi2.ppf(1.0 - PLANNING_SD_CONFIDENCE, degrees_of_freedom))
    )


def _rejections(comparisons: tuple, draws: dict[str, np.ndarray], margin: float, critical: int) -> np.ndarray:
    """Per simulated experiment, whether every one-sided test in `comparisons` rejects."""
    rejected = np.ones(SIMULATIONS, dtype=bool)
    for first, second, sign in comparisons:
        rejected &= _rank_sums(draws[first] + sign * margin, draws[second]) >= critical
    return rejected


def _draws(effect: float, sd: float, n: int) -> dict[str, np.ndarray]:
    """SIMULATIONS experiments of `n` normal runs a column, the same for every call with the same arguments."""
    rng = np.random.default_rng(SIMULATION_SEED)
    return {
        "treatment": rng.normal(effect, sd, (SIMULATIONS, n)),
        "comparator": rng.normal(0.0, sd, (SIMULATIONS, n)),
    }


def power(comparisons: tuple, effect: float, sd: float, margin: float, n: int, level: float) -> float:
    """The probability that every one-sided test in `comparisons` rejects at `level` with `n` seeds a column,
    when the treatment's mean exceeds the comparator's by `effect` and both have standard deviation `sd`.
    `comparisons` holds (first, second, sign) triples (`confirmatory.TESTS`): the test that column `first`
    ("treatment" or "comparator") shifted by sign * margin ranks above column `second`."""
    draws = _draws(effect, sd, n)
    return float(_rejections(comparisons, draws, margin, critical_rank_sum(n, level)).mean())


def verdict_power(
    test: dict, effect: float, sd: float, margin: float, n: int, level: float
) -> tuple[float, float]:
    """The probabilities that `test` (a `confirmatory.TESTS` entry) agrees and that it disagrees at `level` with
    `n` seeds a column, on the same simulated experiments (see `power`)."""
    draws, critical = _draws(effect, sd, n), critical_rank_sum(n, level)
    agrees = _rejections(test["claim"], draws, margin, critical)
    disagrees = _rejections(test["against"], draws, margin, critical) & ~agrees
    return float(agrees.mean()), float(disagrees.mean())


def seeds_needed(
    test: dict, effect: float, sd: float, margin: float, level: float
) -> tuple[int, float, float]:
    """The fewest seeds per column in [MIN_SEEDS, MAX_SEEDS] at which `test` (a `confirmatory.TESTS` entry)
    reaches a verdict either way with probability TARGET_POWER, and its powers to agree and to disagree there;
    when no count does, MAX_SEEDS if a verdict is more likely than not there and MIN_SEEDS otherwise (see
    MAX_SEEDS), with its powers. `sd` is simulated as given (the caller passes
    `planning_sd`); a zero `sd` (every exploratory run alike) is floored at 1e-9 of the largest magnitude
    involved, so that the simulation still has an order to rank."""
    sd = max(sd, 1e-9 * max(abs(effect), abs(margin), 1.0))
    planned = {}
    for n in range(MIN_SEEDS, MAX_SEEDS + 1):
        planned[n] = verdict_power(test, effect, sd, margin, n, level)
        if sum(planned[n]) >= TARGET_POWER:
            return n, *planned[n]
    fallback = MAX_SEEDS if sum(planned[MAX_SEEDS]) >= 0.5 else MIN_SEEDS
    return fallback, *planned[fallback]
