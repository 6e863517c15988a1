"""The small-envs suite's targets: the rule is pinned, so that it cannot move after the runs it judges."""

import pytest

from trainers.benchmark import targets


def test_the_rule_and_its_thresholds_are_the_ones_fixed_before_the_runs():
    assert (targets.NOT_WORSE_MARGIN, targets.MOST_OF_GAP) == (0.05, 0.75)


def test_scores_are_the_share_of_the_gap_from_doing_nothing_to_the_best_column():
    verdict = judge_task(gsb=-10.0, sb3=-20.0, zero=-110.0)
    assert verdict["best"] == "gsb_mdpo"
    assert verdict["scores"] == {"gsb_mdpo": 1.0, "sb3_ppo:defaults": pytest.approx(0.9)}
    assert verdict["not_worse_than_sb3_defaults"] and verdict["closes_most_of_gap"]


@pytest.mark.parametrize(
    ("gsb", "not_worse", "most"),
    [(-14.0, True, True), (-16.0, False, True), (-40.0, False, False)],  # sb3 -10, zero -110: 5% is 5 units
)
def test_not_worse_allows_five_percent_of_the_gap_and_most_is_three_quarters(gsb, not_worse, most):
    verdict = judge_task(gsb=gsb, sb3=-10.0, zero=-110.0)
    assert (verdict["not_worse_than_sb3_defaults"], verdict["closes_most_of_gap"]) == (not_worse, most)


def test_a_column_below_doing_nothing_scores_below_zero():
    assert targets.score(-200.0, do_nothing=-100.0, best=0.0) == -1.0


def judge_task(gsb, sb3, zero):
    return targets.judge({"gsb_mdpo": gsb, "sb3_ppo:defaults": sb3}, zero)


def test_the_floors_are_zero_and_in_bound_uniform_actions_scored_per_seed(tmp_path):
    import dataclasses
    import json

    import numpy as np

    from trainers.benchmark import floors
    from trainers.benchmark.ledger import read_floors
    from trainers.benchmark.suites import SUITES

    zero = floors.Floor("do-nothing", [-2.0], [2.0], seed=0).predict(np.ones((3, 2)))[0]
    uniform = floors.Floor("random", [-2.0], [2.0], seed=0).predict(np.ones((500, 2)))[0]
    assert (zero == 0).all() and zero.shape == (3, 1) and (abs(uniform) <= 2).all() and uniform.std() > 1
    suite = dataclasses.replace(SUITES["small-envs"], tasks=(SUITES["small-envs"].tasks[0],), seeds=(0, 1))
    cells = floors.floor_cells(suite)
    reach = cells["tasks"][suite.tasks[0]]
    assert cells["episodes"] == 50 and len(reach["do-nothing"]["per_seed"]) == 2
    assert (
        -80 < reach["do-nothing"]["mean"] < -50 and reach["random"]["mean"] < reach["do-nothing"]["mean"] + 10
    )
    floors.floors_path(tmp_path, suite.name).write_text(json.dumps(cells))
    assert read_floors(tmp_path, suite) == cells


def test_with_floors_the_aggregate_measures_from_doing_nothing_whatever_the_sign_of_the_rewards():
    from trainers.benchmark.summary import _aggregate_iqm

    def cell(*finals, reference=False):
        return {"seeds": [0, 1, 2], "final_per_seed": list(finals), "final_mean": sum(finals) / 3,
                "reference": reference}  # fmt: skip

    tasks = {
        "a": {
            "gsb_mdpo": cell(-10.0, -10.0, -10.0),
            "sb3_ppo:defaults": cell(-5.0, -5.0, -5.0, reference=True),
        },
        "b": {"gsb_mdpo": cell(90.0, 90.0, 90.0), "sb3_ppo:defaults": cell(50.0, 50.0, 50.0, reference=True)},
    }
    floors = {"tasks": {"a": {"do-nothing": {"mean": -105.0}}, "b": {"do-nothing": {"mean": 10.0}}}}
    agg = _aggregate_iqm(tasks, floors)
    assert agg["tasks"] == ["a", "b"] and agg["measured_from_doing_nothing"] == {"a": -105.0, "b": 10.0}
    # a: gsb closes 95 of the 100 from doing nothing to the best (sb3); b: gsb is the best, sb3 closes 40 of 80
    assert agg["columns"]["gsb_mdpo"]["iqm"] == pytest.approx((0.95 + 1.0) / 2)
    assert agg["columns"]["sb3_ppo:defaults"]["iqm"] == pytest.approx((1.0 + 0.5) / 2)
    assert (
        _aggregate_iqm(tasks) is None
    )  # without floors, returns / best: "a" has no positive mean, one task is left
