"""The claims table: each rule's verdict on summaries built from synthetic ledgers, how a suite's tasks
combine, and what the generated text says."""

import pytest

from trainers.benchmark import claims, claims_report
from trainers.benchmark.suites import SUITES, Suite, Variant
from trainers.benchmark.summary import summarize


def _runs(task, variant, finals):
    return [{"task": task, "variant": variant, "method": variant.split(":")[0], "seed": seed,
             "final": {"mean": final, "std": 0.0, "n_episodes": 2, "deterministic": True, "env_steps": 300},
             "curve": {"env_steps": [300], "deterministic": [final], "stochastic": [final]},
             "step_clip_frac": None, "cost": {"wall_s": 60.0}, "git": {"commit": "abc"},
             "hardware": {"cpu": "x", "cores": 2, "gpu": None}}
            for seed, final in enumerate(finals)]  # fmt: skip


def _suite(monkeypatch, name, tasks, variants, kind="benchmark"):
    suite = Suite(name=name, description="test suite.", tasks=tasks, total_steps=300, seeds=(0, 1, 2),
                  preset="cpu", variants=variants, kind=kind)  # fmt: skip
    monkeypatch.setitem(SUITES, name, suite)
    return suite


HIGH, LOW, MIDDLE = [10.0, 11.0, 12.0], [1.0, 2.0, 3.0], [5.0, 10.5, 20.0]


@pytest.fixture
def playground(monkeypatch):
    variants = (Variant("fpo", "fpo"), Variant("gaussian_ppo", "gaussian_ppo"), Variant("gsb_mdpo", "gsb_mdpo"),
                Variant("sb3_ppo:zoo", "ppo"))  # fmt: skip
    _suite(monkeypatch, "pg", ("FingerSpin", "BallInCup", "ReacherEasy"), variants)
    records = (
        # FingerSpin: GSB-MDPO above both paper baselines (the reference column above it does not count).
        _runs("FingerSpin", "gsb_mdpo", HIGH) + _runs("FingerSpin", "fpo", LOW)
        + _runs("FingerSpin", "gaussian_ppo", LOW) + _runs("FingerSpin", "sb3_ppo:zoo", [20.0, 21.0, 22.0])
        # BallInCup: FPO above GSB-MDPO.
        + _runs("BallInCup", "gsb_mdpo", LOW) + _runs("BallInCup", "fpo", HIGH)
        + _runs("BallInCup", "gaussian_ppo", LOW)
        # ReacherEasy: overlapping with FPO, two seeds of Gaussian PPO.
        + _runs("ReacherEasy", "gsb_mdpo", HIGH) + _runs("ReacherEasy", "fpo", MIDDLE)
        + _runs("ReacherEasy", "gaussian_ppo", LOW[:2])
    )  # fmt: skip
    return {"pg": summarize("pg", records)}


def _rows(summaries, judge):
    return [row for row in claims_report.rows(summaries) if row.claim.judge is judge]


def test_clear_gains_needs_better_against_every_paper_baseline(playground):
    tasks = playground["pg"]["tasks"]
    assert claims.clear_gains(tasks["FingerSpin"]).verdict == claims.AGREES
    assert claims.clear_gains(tasks["BallInCup"]).verdict == claims.DISAGREES
    row = _rows(playground, claims.clear_gains)[0]  # the Playground claim (the Gym one is untested)
    # One task disagrees: the suite disagrees with the claim; untested tasks are named.
    assert row.suite == "pg" and row.verdict == claims.DISAGREES
    assert (
        row.evidence == "pg: BallInCup, FingerSpin (2 of 4 claimed tasks); 3 seeds per column; 300 env steps"
    )
    assert "FingerSpin: agrees (gsb_mdpo better than fpo, gaussian_ppo)" in row.detail
    assert row.detail.endswith("not tested here: FingerTurnEasy, FingerTurnHard")


def test_competitive_is_inconclusive_when_a_comparison_lacks_seeds(playground):
    reacher = playground["pg"]["tasks"]["ReacherEasy"]
    outcome = claims.competitive(reacher)
    assert outcome.verdict == claims.INCONCLUSIVE
    assert outcome.detail == "gsb_mdpo inconclusive vs fpo (3 seeds), gaussian_ppo (3 vs 2 seeds)"
    assert claims.competitive(playground["pg"]["tasks"]["FingerSpin"]).verdict == claims.AGREES
    # No Gym suite here: the Gym claims are not tested, and say so.
    (hopper,) = [row for row in claims_report.rows(playground) if "Hopper-v5" in row.claim.tasks]
    assert (hopper.suite, hopper.verdict, hopper.evidence) == (None, claims.NOT_TESTED, "-")


def test_a_paper_column_the_suite_has_not_run_blocks_agreement(monkeypatch):
    """GSB-MDPO above every column that ran is not "clear gains" while a column the suite defines (here DPPO)
    has no run on the task: the claim is about all of the paper's baselines."""
    variants = (Variant("dppo", "dppo"), Variant("fpo", "fpo"), Variant("gsb_mdpo", "gsb_mdpo"),
                Variant("genpo", "genpo"), Variant("sb3_ppo:zoo", "ppo"))  # fmt: skip
    _suite(monkeypatch, "pg2", ("FingerSpin", "HalfCheetah-v5"), variants)
    records = (_runs("FingerSpin", "gsb_mdpo", HIGH) + _runs("FingerSpin", "fpo", LOW)
               + _runs("FingerSpin", "genpo", LOW) + _runs("HalfCheetah-v5", "genpo", HIGH)
               + _runs("HalfCheetah-v5", "gsb_mdpo", LOW) + _runs("HalfCheetah-v5", "fpo", LOW))  # fmt: skip
    summary = summarize("pg2", records)
    assert claims_report.unrun_columns(summary, "FingerSpin") == ("dppo",)  # the reference column is not owed
    row = _rows({"pg2": summary}, claims.clear_gains)[0]  # the Playground claim
    assert row.verdict == claims.INCONCLUSIVE
    assert "FingerSpin: inconclusive (gsb_mdpo better than fpo, genpo; not run yet: dppo)" in row.detail
    (genpo,) = [r for r in _rows({"pg2": summary}, claims.genpo_highest)]
    assert genpo.verdict == claims.INCONCLUSIVE and genpo.detail.endswith("not run yet: dppo)")
    # A column that ran and won still decides "disagrees" without the missing one.
    cheetah = summary["tasks"]["HalfCheetah-v5"]
    assert (
        claims.competitive(cheetah, claims_report.unrun_columns(summary, "HalfCheetah-v5")).verdict
        == claims.DISAGREES
    )


def test_ablation_directions(monkeypatch):
    variants = (Variant("gsb_mdpo", "gsb_mdpo"), Variant("eta=0", "gsb_mdpo"),
                Variant("lambda=0,eta=0", "gsb_mdpo", baseline="eta=0"),
                Variant("no clip,eta=0", "gsb_mdpo", baseline="eta=0"), Variant("N=4", "gsb_mdpo"))  # fmt: skip
    _suite(monkeypatch, "abl", ("HalfCheetah-v5",), variants, kind="ablation")
    task = "HalfCheetah-v5"
    records = (_runs(task, "gsb_mdpo", HIGH) + _runs(task, "eta=0", MIDDLE) + _runs(task, "lambda=0,eta=0", LOW)
               + _runs(task, "no clip,eta=0", [30.0, 31.0, 32.0]) + _runs(task, "N=4", LOW))  # fmt: skip
    entries = summarize("abl", records)["tasks"][task]
    assert claims.path_kl_matters(entries).verdict == claims.AGREES  # below eta=0 in every seed
    assert claims.clipping_matters(entries).verdict == claims.DISAGREES  # above eta=0: the claim fails
    assert claims.reference_mixing_helps(entries).verdict == claims.INCONCLUSIVE
    # The stored comparison is eta=0 against gsb_mdpo; the rule reads it the other way round.
    assert claims.verdict_of(entries, "gsb_mdpo", "eta=0") == "inconclusive (3 seeds)"
    assert claims.verdict_of(entries, "gsb_mdpo", "N=4") == "better"
    assert claims.steps_similar(entries).verdict == claims.DISAGREES  # N=4 is worse than N=16
    # Same returns in both evaluations of every seed: no difference either way.
    assert claims.ode_beats_sde(entries).verdict == claims.INCONCLUSIVE


def test_a_verdict_on_runs_another_suite_reused_is_given_once(monkeypatch):
    variants = (Variant("gsb_mdpo", "gsb_mdpo"), Variant("eta=0", "gsb_mdpo"))
    for name in ("abl", "why"):
        _suite(monkeypatch, name, ("HalfCheetah-v5",), variants, kind="ablation")
    own = _runs("HalfCheetah-v5", "gsb_mdpo", HIGH) + _runs("HalfCheetah-v5", "eta=0", MIDDLE)
    reused = [{**r, "reused_from": "main"} for r in own]
    once = {"abl": summarize("abl", reused), "why": summarize("why", reused)}
    assert [row.suite for row in _rows(once, claims.ode_beats_sde)] == ["abl"]  # the same runs: one row
    twice = {"abl": summarize("abl", reused), "why": summarize("why", own)}
    assert [row.suite for row in _rows(twice, claims.ode_beats_sde)] == ["abl", "why"]  # other runs: two


def test_clip_fraction_and_compute_rules():
    def clip(curve, reused=()):
        return {
            "gsb_mdpo": {"step_clip_frac": {"mean": curve, "peak": max(curve)}, "reused_from": list(reused)}
        }

    assert claims.clip_fraction_about_0_2(clip([0.0, 0.5, 0.2, 0.25])).verdict == claims.AGREES
    assert claims.clip_fraction_about_0_2(clip([0.2, 0.2, 0.05, 0.05])).verdict == claims.DISAGREES
    assert claims.clip_fraction_about_0_2(clip([0.2, 0.2], reused=["cpu-gym"])) is None  # judged in cpu-gym
    wall = {"gaussian_ppo": 60.0, "fpo": 70.0, "dppo": 80.0, "genpo": 400.0, "gsb_mdpo": 90.0}
    entries = {v: {"wall_s_mean": w} for v, w in wall.items()}
    assert claims.time_close_to_ppo_fpo_dppo(entries).verdict == claims.AGREES
    entries["genpo"]["wall_s_mean"] = 120.0  # not even twice GSB-MDPO's
    assert claims.time_close_to_ppo_fpo_dppo(entries).verdict == claims.DISAGREES
    del entries["genpo"]
    assert claims.time_close_to_ppo_fpo_dppo(entries) is None


def test_generated_text_states_every_rule(playground):
    text = claims_report.page(playground)
    for claim in claims.CLAIMS:
        assert claim.where in text and f"`{claim.judge.__name__}`:" in text
    assert '"worse" against any; inconclusive otherwise.' in text  # a docstring, as the code states it
    assert (
        text.startswith("# The paper's claims, against our runs\n")
        and "| claim (quoted from the paper) |" in text
    )
    lines = claims_report.one_line_each(playground)
    assert len(lines) == len({c.short for c in claims.CLAIMS}) and all(": **" in line for line in lines)
