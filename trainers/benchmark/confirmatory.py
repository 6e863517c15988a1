"""Confirmatory verdicts: each pre-registered claim (`preregistration`) judged on the fresh-seed runs registered
for it, by the test registered for it.

Everything that decides a confirmatory verdict is here (with the exact tests of `exact` and the intervals of
`stats`): which runs are read (`select`), the metric (`late_mean`), the tests (`TESTS`), Holm's correction over
the claim's tasks and the verdict (`judge`, `judge_toy`). Its fingerprint (`claims.rule_fingerprint` rooted at
those two functions) is written into each registration, and a test checks that it is unchanged since.

The metric is the mean of a run's last LATE_EVALUATIONS deterministic evaluations, which is steadier than the last
one alone. A run is read from the claim's own suite ledger (`confirm-<id>`) only, and only for the registered
seeds; the first ledger line of each (task, column, seed) stands: a rerun is never read in its place.
"""

import numpy as np
from scipy.stats import t as student_t

from . import exact, stats

AGREES, DISAGREES, INCONCLUSIVE, PENDING = "agrees", "disagrees", "inconclusive", "pending"
LATE_EVALUATIONS = 3

TESTS = {
    "greater": {
        "claim": (("treatment", "comparator", 0),),
        "against": (("comparator", "treatment", 0),),
        "text": "the treatment's runs rank above the comparator's (one-sided exact rank-sum test)",
    },
    "less": {
        "claim": (("comparator", "treatment", 0),),
        "against": (("treatment", "comparator", 0),),
        "text": "the treatment's runs rank below the comparator's (one-sided exact rank-sum test)",
    },
    "non-inferior": {
        "claim": (("treatment", "comparator", 1),),
        "against": (("comparator", "treatment", -1),),
        "text": "the treatment's runs rank above the comparator's lowered by the margin (one-sided exact rank-sum "
        "test of non-inferiority); against the claim: they rank below it",
    },
    "equivalent": {
        "claim": (("treatment", "comparator", 1), ("comparator", "treatment", 1)),
        "against": (("comparator", "treatment", -1),),
        "text": "two one-sided exact rank-sum tests: the treatment's runs rank above the comparator's lowered by "
        "the margin and below it raised by the margin (the larger p counts); against the claim: they rank below "
        "the comparator's lowered by the margin (a treatment ahead by more than the margin is inconclusive, not "
        "against)",
    },
}
"""Each test: the one-sided comparisons that show the claim and the one that shows its opposite. A comparison
(first, second, sign) asks whether column `first` shifted by sign x the margin ranks above column `second`."""


TEST_NAMES = {"greater": "one-sided greater", "less": "one-sided less", "non-inferior": "one-sided non-inferiority",
              "equivalent": "equivalence (two one-sided tests)", "interval": "the paper's value in the 95% interval"}  # fmt: skip
"""Each registered test in words, for the pages."""


def late_mean(record: dict) -> float:
    """A run's metric: the mean of its last LATE_EVALUATIONS deterministic evaluations."""
    return float(np.mean(record["curve"]["deterministic"][-LATE_EVALUATIONS:]))


def select(records: list[dict], task: str, column: str, seeds: list[int]) -> dict[int, float]:
    """The metric of each registered seed's run of `column` on `task` that the ledger holds: the first line of each
    (a rerun is reported beside it by the pages, never read in its place)."""
    found: dict[int, float] = {}
    for r in records:
        if r["task"] == task and r["variant"] == column and r["seed"] in seeds and r["seed"] not in found:
            found[r["seed"]] = late_mean(r)
    return found


def one_sided_p(comparisons: tuple, values: dict[str, np.ndarray], margin: float) -> float:
    """The largest p of the one-sided exact rank-sum tests in `comparisons` (all must reject)."""
    return max(
        exact.rank_sum_p_greater(values[first] + sign * margin, values[second])
        for first, second, sign in comparisons
    )


def _size(x: np.ndarray, y: np.ndarray) -> dict:
    """Direction and size beside a verdict: means, P(X > Y) with its bootstrap interval, pairs ahead."""
    compared = stats.compare(x, y)
    return {
        "treatment_mean": round(float(x.mean()), 3),
        "comparator_mean": round(float(y.mean()), 3),
        "p_improvement": compared["p_improvement"],
        "p_improvement_ci": compared["ci"],
        "pairs_ahead": int(np.sum(x[:, None] > y[None, :])),
        "pairs": int(x.size * y.size),
    }


def judge(registration: dict, records: list[dict]) -> dict:
    """A registered claim's verdict on its runs. Per task, the registered test's p (`TESTS[test]["claim"]`) and
    its opposite's (`"against"`), each Holm-adjusted over the claim's tasks (the family). A task agrees when its
    adjusted claim p is <= alpha, disagrees when its adjusted against p is, and is inconclusive otherwise; the
    claim disagrees when any task does, agrees when every task does, and is inconclusive otherwise. Pending while
    any registered run is missing (no verdict is read from part of the registered seeds)."""
    test = TESTS[registration["test"]]
    tasks, missing = [], 0
    for entry in registration["tasks"]:
        seeds = entry["seeds"]
        x = select(records, entry["task"], registration["treatment"], seeds)
        y = select(records, entry["task"], entry["comparator"], seeds)
        missing += 2 * len(seeds) - len(x) - len(y)
        tasks.append((entry, np.array([x[s] for s in sorted(x)]), np.array([y[s] for s in sorted(y)])))
    if missing:
        done = sum(2 * len(e["seeds"]) for e, _, _ in tasks) - missing
        return {"verdict": PENDING, "runs_done": done, "runs_registered": done + missing, "tasks": []}
    claim_p, against_p = [], []
    for entry, x, y in tasks:
        values, margin = {"treatment": x, "comparator": y}, entry["margin"] or 0.0
        claim_p.append(one_sided_p(test["claim"], values, margin))
        against_p.append(one_sided_p(test["against"], values, margin))
    claim_adj, against_adj = exact.holm(claim_p), exact.holm(against_p)
    alpha = registration["alpha"]
    judged = []
    for (entry, x, y), p, adj, q, q_adj in zip(
        tasks, claim_p, claim_adj, against_p, against_adj, strict=True
    ):
        verdict = AGREES if adj <= alpha else DISAGREES if q_adj <= alpha else INCONCLUSIVE
        judged.append(
            {
                "task": entry["task"],
                "comparator": entry["comparator"],
                "verdict": verdict,
                "p": p,
                "p_holm": adj,
                "p_against": q,
                "p_against_holm": q_adj,
                "n": [int(x.size), int(y.size)],
                **_size(x, y),
            }
        )
    verdicts = [t["verdict"] for t in judged]
    verdict = DISAGREES if DISAGREES in verdicts else AGREES if set(verdicts) == {AGREES} else INCONCLUSIVE
    return {"verdict": verdict, "tasks": judged}


def judge_toy(registration: dict, records: list[dict]) -> dict:
    """The toy's registered claim: the first logged run of each registered seed at the registered settings,
    temperature and preference; agrees when the paper's value lies in the two-sided (1 - alpha) Student-t
    interval of their mean, disagrees otherwise; pending while any registered seed is missing."""
    found: dict[int, float] = {}
    for r in records:
        same = r["settings"] == registration["settings"] and r["beta"] == registration["beta"]
        if same and r["preference"] == registration["preference"] and r["seed"] in registration["seeds"]:
            found.setdefault(r["seed"], r["l1"])
    seeds = registration["seeds"]
    if len(found) < len(seeds):
        return {"verdict": PENDING, "runs_done": len(found), "runs_registered": len(seeds), "tasks": []}
    values = np.array([found[s] for s in sorted(found)])
    half = (
        student_t.ppf(1 - registration["alpha"] / 2, values.size - 1)
        * values.std(ddof=1)
        / np.sqrt(values.size)
    )
    low, high = float(values.mean() - half), float(values.mean() + half)
    inside = low <= registration["paper_value"] <= high
    return {
        "verdict": AGREES if inside else DISAGREES,
        "mean": float(values.mean()),
        "interval": [low, high],
        "n": int(values.size),
        "tasks": [],
    }
