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
