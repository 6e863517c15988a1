"""How many seeds a pre-registered comparison needs: the power of its exact one-sided rank-sum tests.

The model is the simplest one that exploratory runs can fit: each column's per-seed metric is normal, with the
column's exploratory mean and the two columns' pooled exploratory standard deviation. Under it, the rank-sum
statistic of `n` runs against `n` has no ties, so each test rejects when its rank sum reaches the exact critical
value of the null distribution (`critical_rank_sum`); the power is the share of simulated experiments in which
every test the claim needs rejects (two for an equivalence, one otherwise). It is a planning number, not part of
a verdict: it is computed once, when a claim is registered, and written beside the seeds it chose.

The level is ALPHA divided by the claim's family size (Bonferroni), which Holm's step-down never makes stricter, so
the power computed is a lower bound on the power of the registered Holm-corrected test.
"""

import numpy as np

TARGET_POWER = 0.8
MIN_SEEDS = 5
"""Never fewer: at 5 against 5 the smallest one-sided p is 1/252, so a family of up to 12 tests can still
conclude."""
MAX_SEEDS = 10
"""Never more. A comparison whose exploratory effect is too small or too noisy to reach the target power by then
is registered at MIN_SEEDS instead, with the power it has there: seeds up to MAX_SEEDS would cost twice as much
and still leave its verdict most likely inconclusive."""
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


def power(comparisons: tuple, effect: float, sd: float, margin: float, n: int, level: float) -> float:
    """The probability that every one-sided test in `comparisons` rejects at `level` with `n` seeds a column,
    when the treatment's mean exceeds the comparator's by `effect` and both have standard deviation `sd`.
    `comparisons` holds (first, second, sign) triples (`confirmatory.TESTS`): the test that column `first`
    ("treatment" or "comparator") shifted by sign * margin ranks above column `second`."""
    rng = np.random.default_rng(SIMULATION_SEED)
    draws = {
        "treatment": rng.normal(effect, sd, (SIMULATIONS, n)),
        "comparator": rng.normal(0.0, sd, (SIMULATIONS, n)),
    }
    critical = critical_rank_sum(n, level)
    rejected = np.ones(SIMULATIONS, dtype=bool)
    for first, second, sign in comparisons:
        rejected &= _rank_sums(draws[first] + sign * margin, draws[second]) >= critical
    return float(rejected.mean())


def seeds_needed(
    comparisons: tuple, effect: float, sd: float, margin: float, level: float
) -> tuple[int, float]:
    """The fewest seeds per column in [MIN_SEEDS, MAX_SEEDS] whose power reaches TARGET_POWER, and that power;
    MIN_SEEDS and its power when none does (see MAX_SEEDS). A zero `sd` (every exploratory run alike) is floored at 1e-9 of the
    largest magnitude involved, so that the simulation still has an order to rank."""
    sd = max(sd, 1e-9 * max(abs(effect), abs(margin), 1.0))
    for n in range(MIN_SEEDS, MAX_SEEDS + 1):
        reached = power(comparisons, effect, sd, margin, n, level)
        if reached >= TARGET_POWER:
            return n, reached
    return MIN_SEEDS, power(comparisons, effect, sd, margin, MIN_SEEDS, level)
