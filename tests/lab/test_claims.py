"""The claims table: each rule's verdict on summaries built from synthetic ledgers (exact tests, Holm's
correction over a row), the evidence rules on synthetic measurements, each rule's thresholds pinned, when a
verdict is post hoc, and what the generated text says."""

import json

import pytest

from trainers.benchmark import fingerprint
from trainers.benchmark.suites import SUITES, Suite, Variant
from trainers.benchmark.summary import summarize
from trainers.lab import claims, claims_report


def _runs(task, variant, finals, finished="2026-12-01T00:00:00+00:00"):
    return [{"task": task, "variant": variant, "method": variant.split(":")[0], "seed": seed,
             "final": {"mean": final, "std": 0.0, "n_episodes": 2, "deterministic": True, "env_steps": 300},
             "curve": {"env_steps": [300], "deterministic": [final], "stochastic": [final]},
             "step_clip_frac": None, "cost": {"wall_s": 60.0}, "git": {"commit": "abc"}, "finished": finished,
             "hardware": {"cpu": "x", "cores": 2, "gpu": None}}
            for seed, final in enumerate(finals)]  # fmt: skip


def _suite(monkeypatch, name, tasks, variants, kind="benchmark", seeds=(0, 1, 2, 3, 4)):
    suite = Suite(name=name, description="test suite.", tasks=tasks, total_steps=300, seeds=seeds,
                  preset="cpu", variants=variants, kind=kind)  # fmt: skip
    monkeypatch.setitem(SUITES, name, suite)
    return suite


HIGH, LOW, MIDDLE = [10.0, 11.0, 12.0, 13.0, 14.0], [1.0, 2.0, 3.0, 4.0, 5.0], [5.0, 9.0, 10.5, 14.5, 20.0]


def _judge(rule, *args):
    """A task rule's outcome on one task (args: its entries, and the unrun columns if any), or an evidence
    rule's on its data."""
    task_rule = rule.__code__.co_argcount == 3
    outcome, _ = claims.run_rule(rule, *args, *([()] if task_rule and len(args) == 1 else []))
    return outcome


@pytest.fixture
def playground(monkeypatch):
    variants = (Variant("fpo", "fpo"), Variant("gaussian_ppo", "gaussian_ppo"), Variant("gsb_mdpo", "gsb_mdpo"),
                Variant("sb3_ppo:zoo", "ppo"))  # fmt: skip
    _suite(monkeypatch, "pg", ("FingerSpin", "BallInCup", "ReacherEasy"), variants)
    records = (
        # FingerSpin: GSB-MDPO above both paper baselines in every seed (the reference column does not count).
        _runs("FingerSpin", "gsb_mdpo", HIGH) + _runs("FingerSpin", "fpo", LOW)
        + _runs("FingerSpin", "gaussian_ppo", LOW) + _runs("FingerSpin", "sb3_ppo:zoo", [20.0, 21.0, 22.0])
        # BallInCup: FPO above GSB-MDPO.
        + _runs("BallInCup", "gsb_mdpo", LOW) + _runs("BallInCup", "fpo", HIGH)
        + _runs("BallInCup", "gaussian_ppo", LOW)
        # ReacherEasy: overlapping with FPO, three seeds of Gaussian PPO.
        + _runs("ReacherEasy", "gsb_mdpo", HIGH) + _runs("ReacherEasy", "fpo", MIDDLE)
        + _runs("ReacherEasy", "gaussian_ppo", LOW[:3])
    )  # fmt: skip
    return {"pg": summarize("pg", records)}


def _rows(summaries, rule, measurements=None):
    return [row for row in claims_report.rows(summaries, measurements) if row.claim.rule is rule]


def test_every_rule_and_threshold_is_pinned():
    """The rules' numbers, fixed before the data they judge: changing one is a new rule (and a new commit in
    `claims.RULES_SET_AT`), not a tweak."""
    assert claims.ALPHA == 0.05 and claims.TOLERANCE == 1.25 and claims.MIN_SEEDS_FOR_VERDICT == 3
    assert claims.CLIP_BAND == (0.1, 0.3) and claims.CLIP_RISE == 0.1
    assert claims.CLIP_COLUMN == "gsb_mdpo:paper-updates" and claims.PAPER_TOY_L1 == 0.100
    assert claims.TABLE3 == {"gaussian_ppo": (6.24, 0.60), "fpo": (6.96, 1.00), "dppo": (8.67, 2.50),
                             "genpo": (28.73, 64.98), "gsb_mdpo": (7.39, 2.59)}  # fmt: skip
    assert claims.GENERATION_STEPS == ("N=4", "N=8", "N=32") and claims.ABLATION_SUITES == ("ablation-cpu",)
    rules = {c.short: (c.rule.__name__, c.tasks, c.source, c.every_task) for c in claims.CLAIMS}
    assert rules["strong across the six Gym-MuJoCo tasks"] == ("strong", claims.GYM_TASKS, "suites", True)
    assert rules["training time on a GPU lower than DPPO"][0::2] == ("time_lower_than_dppo", "runtime")
    assert rules["toy: quadrant-mass L1 error about 0.100"][0::2] == ("toy_l1_about_0_1", "toy")
    assert len(claims.CLAIMS) == 18


def test_clear_gains_needs_a_holm_corrected_win_against_every_paper_baseline(playground):
    tasks = playground["pg"]["tasks"]
    assert _judge(claims.clear_gains, tasks["FingerSpin"]).verdict == claims.AGREES  # 5 vs 5: p = 2/252
    assert _judge(claims.clear_gains, tasks["BallInCup"]).verdict == claims.DISAGREES
    row = _rows(playground, claims.clear_gains)[0]  # the Playground claim (the Gym one has no data)
    assert row.source == "pg" and row.verdict == claims.DISAGREES and row.comparisons == 4
    assert row.evidence == (
        "pg: BallInCup, FingerSpin (2 of 4 claimed tasks); 5 seeds per column; 300 env steps; 4 tests, Holm-corrected"
    )
    assert (
        "FingerSpin: agrees (gsb_mdpo better than fpo (" in row.detail
        and "P(X > Y) 1.00 [1.00, 1.00], ahead in 25 of 25 seed pairs; two-sided p 0.008, Holm 0.032), gaussian_ppo ("
        in row.detail.split("FingerSpin: ")[1]
    )
    assert row.detail.endswith("not measured yet: FingerTurnEasy, FingerTurnHard")


def test_three_seeds_can_never_win_and_say_so():
    entries = {"gsb_mdpo": {"final_per_seed": [10.0, 11.0, 12.0]}, "fpo": {"final_per_seed": [1.0, 2.0, 3.0]}}
    outcome = _judge(claims.clear_gains, entries)
    assert outcome.verdict == claims.INCONCLUSIVE
    assert outcome.detail == (
        "gsb_mdpo inconclusive vs fpo (11.0 vs 2.00, P(X > Y) 1.00 [1.00, 1.00], ahead in 9 of 9 seed pairs; "
        "two-sided p 0.100, Holm 0.100); too few seeds to reach p <= 0.05 after Holm: fpo"
    )
    assert (
        _judge(claims.competitive, entries).verdict == claims.INCONCLUSIVE
    )  # not worse, but it could not be


def test_holm_corrects_over_every_test_of_a_row():
    """Seven separated 5-seed comparisons: each alone has p = 2/252 < 0.05, but 7 x 2/252 > 0.05."""
    entries = {"gsb_mdpo": {"final_per_seed": HIGH}}
    entries |= {f"b{i}": {"final_per_seed": LOW} for i in range(7)}
    outcome, tests = claims.run_rule(claims.clear_gains, entries, ())
    assert tests == 7 and outcome.verdict == claims.INCONCLUSIVE and "Holm 0.056" in outcome.detail
    entries = {k: v for k, v in entries.items() if k in ("gsb_mdpo", "b0", "b1", "b2")}
    assert claims.run_rule(claims.clear_gains, entries, ())[0].verdict == claims.AGREES


def test_competitive_agrees_only_where_a_deficit_could_have_been_found(playground):
    reacher = playground["pg"]["tasks"]["ReacherEasy"]
    outcome = _judge(claims.competitive, reacher)
    assert outcome.verdict == claims.INCONCLUSIVE and outcome.detail.endswith("after Holm: gaussian_ppo")
    assert _judge(claims.competitive, playground["pg"]["tasks"]["FingerSpin"]).verdict == claims.AGREES
    (hopper,) = _rows(playground, claims.competitive)[-1:]  # the Hopper claim: no Gym suite here
    assert (hopper.source, hopper.verdict, hopper.evidence) == (None, claims.NOT_MEASURED, "-")


def test_a_paper_column_the_suite_has_not_run_blocks_agreement(monkeypatch):
    variants = (Variant("dppo", "dppo"), Variant("fpo", "fpo"), Variant("gsb_mdpo", "gsb_mdpo"),
                Variant("genpo", "genpo"), Variant("sb3_ppo:zoo", "ppo"))  # fmt: skip
    _suite(monkeypatch, "pg2", ("FingerSpin", "HalfCheetah-v5"), variants)
    records = (_runs("FingerSpin", "gsb_mdpo", HIGH) + _runs("FingerSpin", "fpo", LOW)
               + _runs("FingerSpin", "genpo", LOW) + _runs("HalfCheetah-v5", "genpo", HIGH)
               + _runs("HalfCheetah-v5", "gsb_mdpo", LOW) + _runs("HalfCheetah-v5", "fpo", LOW))  # fmt: skip
    summary = summarize("pg2", records)
    assert claims_report.unrun_columns(summary, "FingerSpin") == ("dppo",)  # the reference column is not owed
    row = _rows({"pg2": summary}, claims.clear_gains)[0]
    assert row.verdict == claims.INCONCLUSIVE
    assert (
        "FingerSpin: inconclusive (gsb_mdpo better than fpo" in row.detail
        and "not run yet: dppo" in row.detail
    )
    (genpo,) = _rows({"pg2": summary}, claims.genpo_highest)
    assert genpo.verdict == claims.INCONCLUSIVE and "not run yet: dppo)" in genpo.detail
    cheetah = summary["tasks"]["HalfCheetah-v5"]
    unrun = claims_report.unrun_columns(summary, "HalfCheetah-v5")
    assert _judge(claims.competitive, cheetah, unrun).verdict == claims.DISAGREES  # a column that ran and won


def test_ablation_directions(monkeypatch):
    variants = (Variant("gsb_mdpo", "gsb_mdpo"), Variant("eta=0", "gsb_mdpo"),
                Variant("lambda=0,eta=0", "gsb_mdpo", baseline="eta=0"),
                Variant("no clip,eta=0", "gsb_mdpo", baseline="eta=0"), Variant("N=4", "gsb_mdpo"))  # fmt: skip
    _suite(monkeypatch, "abl", ("HalfCheetah-v5",), variants, kind="ablation")
    task = "HalfCheetah-v5"
    records = (_runs(task, "gsb_mdpo", HIGH) + _runs(task, "eta=0", MIDDLE) + _runs(task, "lambda=0,eta=0", LOW)
               + _runs(task, "no clip,eta=0", [30.0, 31.0, 32.0, 33.0, 34.0]) + _runs(task, "N=4", LOW))  # fmt: skip
    entries = summarize("abl", records)["tasks"][task]
    assert _judge(claims.path_kl_matters, entries).verdict == claims.AGREES  # below eta=0 in every seed
    assert (
        _judge(claims.clipping_matters, entries).verdict == claims.DISAGREES
    )  # above eta=0: the claim fails
    assert _judge(claims.reference_mixing_helps, entries).verdict == claims.INCONCLUSIVE
    assert _judge(claims.steps_similar, entries).verdict == claims.DISAGREES  # N=4 is worse than N=16


def _ode_summaries(monkeypatch, ode_minus_sde):
    variants = (Variant("gsb_mdpo", "gsb_mdpo"), Variant("fpo", "fpo"))
    _suite(monkeypatch, "ablation-cpu", ("HalfCheetah-v5",), variants, kind="ablation", seeds=(0, 1, 2))
    _suite(monkeypatch, "bench", ("Hopper-v5", "Swimmer-v5"), variants)
    records = {"ablation-cpu": _runs("HalfCheetah-v5", "gsb_mdpo", [10.0, 11.0, 12.0]),
               "bench": _runs("Hopper-v5", "gsb_mdpo", HIGH) + _runs("Swimmer-v5", "gsb_mdpo", [100.0] * 5)
               + _runs("Hopper-v5", "fpo", LOW)}  # fmt: skip
    for runs in records.values():
        for i, r in enumerate(runs):
            r["curve"] = {
                **r["curve"],
                "stochastic": [r["final"]["mean"] - ode_minus_sde[i % len(ode_minus_sde)]],
            }
    return {name: summarize(name, runs) for name, runs in records.items()}


def test_ode_against_sde_is_a_paired_test_within_the_ablation_and_over_every_gsb_mdpo_run(monkeypatch):
    summaries = _ode_summaries(monkeypatch, [1.0])  # ODE above SDE in every run (FPO's runs do not count)
    outcome, tests = claims.run_rule(claims.ode_beats_sde, summaries)
    assert tests == 2 and outcome.verdict == claims.AGREES
    assert (
        "within the ablation (3 runs, signed-rank): ODE inconclusive vs SDE (higher in 3 of 3 runs; two-sided p 0.250"
        in outcome.detail
    )
    assert (
        "every GSB-MDPO run (13 runs, 13 with ODE higher, sign test): ODE better than SDE" in outcome.detail
    )
    mixed = claims.run_rule(claims.ode_beats_sde, _ode_summaries(monkeypatch, [1.0, -1.0]))[0]
    assert mixed.verdict == claims.INCONCLUSIVE
    worse = claims.run_rule(claims.ode_beats_sde, _ode_summaries(monkeypatch, [-1.0]))[0]
    assert worse.verdict == claims.DISAGREES
    assert claims.run_rule(claims.ode_beats_sde, {})[0] is None


def test_the_clip_fraction_reads_both_counts_on_the_run_scheduled_as_the_papers():
    def series(values):
        return {"mean": values, "env_steps": list(range(len(values)))}

    rise = [0.9] + [0.2] * 9  # the first 10% is "the beginning", shown apart
    entries = {"gsb_mdpo:paper-updates": {"sample_clip_frac": series(rise), "step_clip_frac": series([0.05] * 10)},
               "gsb_mdpo": {"step_clip_frac": series([0.2] * 5 + [0.04] * 5)}}  # fmt: skip
    outcome = _judge(claims.clip_fraction_about_0_2, entries)
    assert outcome.verdict == claims.DEPENDS  # samples inside [0.1, 0.3], steps outside
    assert outcome.detail == (
        "gsb_mdpo:paper-updates: rollout samples with a clipped step 0.900 over the first 10% of training, then "
        "0.200 (0.200 then 0.200), inside [0.1, 0.3]; clipped steps 0.050 over the first 10% of training, then "
        "0.050 (0.050 then 0.050), outside it; gsb_mdpo (cosine over its own run) clipped steps 0.200 then 0.040"
    )
    entries["gsb_mdpo:paper-updates"]["step_clip_frac"] = series([0.2] * 10)
    assert _judge(claims.clip_fraction_about_0_2, entries).verdict == claims.AGREES
    entries["gsb_mdpo:paper-updates"]["sample_clip_frac"] = series([0.05] * 10)
    entries["gsb_mdpo:paper-updates"]["step_clip_frac"] = series([0.05] * 10)
    assert _judge(claims.clip_fraction_about_0_2, entries).verdict == claims.DISAGREES
    assert (
        _judge(claims.clip_fraction_about_0_2, {"gsb_mdpo": entries["gsb_mdpo"]}) is None
    )  # step shares only


def _measurement(seconds, peak_gpu=None, gpu="NVIDIA A800"):
    return {"started": "2027-01-01T00:00:00+00:00", "machine": {"cpu": "x", "cores": 2, "gpu": gpu},
            "methods": {m: {"iteration_seconds": list(s), "env_steps_per_iteration": 1000, "end_to_end_s": 100 * s[0],
                            "peak_rss_mib": 1000.0, "peak_gpu_mib": None if peak_gpu is None else peak_gpu[m]}
                        for m, s in seconds.items()}}  # fmt: skip


def test_runtime_claims_read_table3s_ratios_with_the_tolerance_on_a_gpu_only():
    table3 = {m: [minutes] * 6 for m, (minutes, _) in claims.TABLE3.items()}
    timing = _measurement(table3)  # exactly the paper's ratios
    assert _judge(claims.time_close_to_ppo_fpo_dppo, timing).verdict == claims.AGREES
    slow = _measurement({**table3, "gsb_mdpo": [7.39 * 1.3] * 6})  # 1.3x the paper's ratio: beyond 1.25
    assert _judge(claims.time_close_to_ppo_fpo_dppo, slow).verdict == claims.DISAGREES
    # Lower than DPPO: the mean of each process's iterations against Table 3's ratio, and no test on iterations.
    assert _judge(claims.time_lower_than_dppo, timing).verdict == claims.AGREES
    lower, n = claims.run_rule(claims.time_lower_than_dppo, slow)
    assert (
        lower.verdict == claims.DISAGREES
        and n == 0
        and "no test" in lower.detail
        and " p " not in lower.detail
    )
    on_cpu = _measurement(table3, gpu=None)
    for rule in (claims.time_close_to_ppo_fpo_dppo, claims.time_lower_than_dppo):
        outcome = _judge(rule, on_cpu)
        assert outcome.verdict == claims.NOT_COMPARABLE and outcome.detail.startswith("on a 2-core CPU: ")
    assert _judge(claims.memory_comparable, on_cpu) is None  # a CPU measurement has no GPU memory
    gpu = {m: 1024 * gb for m, (_, gb) in claims.TABLE3.items()}
    assert _judge(claims.memory_comparable, _measurement(table3, gpu)).verdict == claims.AGREES
    gpu["genpo"] = gpu["gsb_mdpo"] * 5  # GenPO only 5x: not "substantially lower"
    assert _judge(claims.memory_comparable, _measurement(table3, gpu)).verdict == claims.DISAGREES
    rows = claims_report.rows({}, {"runtime": {"runtime-gpu.json": timing, "runtime-cpu.json": on_cpu}})
    close = [(r.source, r.verdict) for r in rows if r.claim.rule is claims.time_close_to_ppo_fpo_dppo]
    assert close == [("runtime-gpu.json on a GPU (NVIDIA A800)", claims.AGREES),
                     ("runtime-cpu.json on a 2-core CPU", claims.NOT_COMPARABLE)]  # fmt: skip


def test_the_committed_runtime_and_clip_rows_name_their_hardware_and_both_counts():
    """The claims page and the README on the committed measurements: the CPU timing is not judged against the
    paper's GPU and shows the H200 runs beside it, with no p-value from one process's iterations; the clip
    fraction depends on the count, both counts shown."""
    from trainers.benchmark import aggregate

    results = aggregate.RESULTS_DIR
    summaries = {
        p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json")) if p.stem in SUITES
    }
    rows = claims_report.rows(summaries, aggregate.measurements(results))
    runtime = [r for r in rows if r.claim.source == "runtime" and r.source]
    assert runtime and all(r.source == "runtime-cpu.json on a 2-core CPU" for r in runtime)
    assert all(
        r.verdict == claims.NOT_COMPARABLE
        and "beside it, compute-gpu-playground on a GPU (NVIDIA H200; CartpoleSwingup" in r.detail
        for r in runtime
    )
    gpu = summaries["compute-gpu-playground"]["tasks"]["CartpoleSwingup"]
    assert (
        f"gsb_mdpo {gpu['gsb_mdpo']['wall_s_mean'] / gpu['gaussian_ppo']['wall_s_mean']:.2f}x gaussian_ppo"
        in runtime[0].detail
    )
    assert all("two-sided p" not in r.detail for r in runtime)
    (clip,) = [r for r in rows if r.claim.rule is claims.clip_fraction_about_0_2]
    entry = summaries["clip-fraction-cpu-gym"]["tasks"]["HalfCheetah-v5"][claims.CLIP_COLUMN]
    late = {
        k: claims._window_mean(entry[k], claims.CLIP_RISE) for k in ("sample_clip_frac", "step_clip_frac")
    }
    assert (
        late["sample_clip_frac"] > claims.CLIP_BAND[1]
        and claims.CLIP_BAND[0] <= late["step_clip_frac"] <= claims.CLIP_BAND[1]
    )
    assert clip.verdict == claims.DEPENDS
    readme = (results.parents[1] / "README.md").read_text()
    assert (f"**depends on the count** (clip-fraction-cpu-gym; exploratory; rollout samples with a clipped step "
            f"{late['sample_clip_frac']:.3f}, clipped steps {late['step_clip_frac']:.3f}") in readme  # fmt: skip
    assert "**not tested on comparable hardware** (runtime-cpu.json on a 2-core CPU" in readme


def test_the_toy_claim_reads_at_least_three_seeds_of_the_papers_algorithm():
    def toy(l1):
        return {"reproduction": [{"l1": v, "started": "2027-01-01T00:00:00+00:00"} for v in l1]}

    assert _judge(claims.toy_l1_about_0_1, toy([0.12, 0.12, 0.125])).verdict == claims.AGREES
    assert _judge(claims.toy_l1_about_0_1, toy([0.13, 0.12, 0.13])).verdict == claims.DISAGREES
    assert _judge(claims.toy_l1_about_0_1, toy([0.05, 0.05])) is None  # two seeds: not measured yet
    (row,) = _rows({}, claims.toy_l1_about_0_1, {"toy": None})
    assert row.verdict == claims.NOT_MEASURED


def test_a_registered_claim_gets_a_confirmatory_row_first_and_every_other_row_is_exploratory(monkeypatch):
    claim = next(c for c in claims.CLAIMS if c.rule is claims.clipping_matters)
    registration = {"id": "clip", "claim": claim.short, "suite": "confirm-clip", "source": "ablation-cpu",
                    "test": "less", "alpha": 0.05, "treatment": "no clip,eta=0", "budget_env_steps": 1_000_000,
                    "run": "python -m trainers.benchmark --suite confirm-clip --publish --resume --jobs 2",
                    "tasks": [{"task": "HalfCheetah-v5", "comparator": "eta=0", "margin": None, "seeds": [100, 101, 102, 103, 104],
                               "exploratory": {"treatment": [1.0], "comparator": [2.0]}}]}  # fmt: skip
    records = [
        {"task": "HalfCheetah-v5", "variant": v, "seed": 100 + i, "curve": {"deterministic": [base + i] * 3}}
        for v, base in (("no clip,eta=0", 1000), ("eta=0", 3000))
        for i in range(5)
    ]
    pending, *rest = claims_report.rows({}, {"confirmatory": {"clip": (registration, records[:7])}})[11:13]
    row = next(
        r
        for r in claims_report.rows({}, {"confirmatory": {"clip": (registration, records)}})
        if r.claim is claim
    )
    assert (row.label, row.source, row.verdict) == ("confirmatory", "confirm-clip", claims.AGREES)
    assert "1000 vs 3002" not in row.detail and "1002.0 vs 3002.0" in row.detail
    assert "ahead in 0 of 25 seed pairs" in row.detail and "1/40 of the paper's" in row.evidence
    assert row.brief.startswith("on HalfCheetah-v5 only: no clip,eta=0 ahead in 0 of 25 seed pairs")
    judged = claims_report._confirmatory_rows(claim, {"confirmatory": {"clip": (registration, records[:7])}})
    assert judged[0].verdict == "pending" and "7 of 10 registered runs done" in judged[0].detail
    assert {r.label for r in claims_report.rows({}, {}) if r.source} <= {"exploratory"}
    rerun = {**records[0], "curve": {"deterministic": [9999.0] * 3}}
    again = claims_report._confirmatory_rows(
        claim, {"confirmatory": {"clip": (registration, [*records, rerun])}}
    )
    assert again[0].verdict == row.verdict and again[0].detail.endswith(
        "seeds [100] were run again: the first run of each stands, the rerun is not read"
    )


def test_a_rules_fingerprint_follows_its_code_not_its_comments():
    from pathlib import Path

    root = Path(claims.__file__).resolve().parents[2]
    sources = {m: (root / path).read_text() for m, path in fingerprint.RULE_MODULES.items()}
    base = fingerprint.rule_fingerprint("clip_fraction_about_0_2", sources)
    assert base and fingerprint.rule_fingerprint("no_such_rule", sources) is None
    commented = {
        **sources,
        "claims": sources["claims"].replace("CLIP_BAND = (0.1, 0.3)", "CLIP_BAND = (0.1, 0.3)  # x"),
    }
    assert fingerprint.rule_fingerprint("clip_fraction_about_0_2", commented) == base
    moved = {
        **sources,
        "claims": sources["claims"].replace("CLIP_BAND = (0.1, 0.3)", "CLIP_BAND = (0.1, 0.35)"),
    }
    assert fingerprint.rule_fingerprint("clip_fraction_about_0_2", moved) != base
    assert fingerprint.rule_fingerprint("ode_beats_sde", moved) == fingerprint.rule_fingerprint(
        "ode_beats_sde", sources
    )
    # A threshold it reads in stats or exact is part of it too.
    holm = {**sources, "exact": sources["exact"].replace("(m - position)", "(m - position + 0)")}
    assert fingerprint.rule_fingerprint("clear_gains", holm) != fingerprint.rule_fingerprint(
        "clear_gains", sources
    )


def test_a_claims_fingerprint_covers_the_code_that_selects_its_data():
    from pathlib import Path

    root = Path(claims.__file__).resolve().parents[2]
    sources = {m: (root / path).read_text() for m, path in fingerprint.RULE_MODULES.items()}
    base = {rule: claims.claim_fingerprint(rule, sources) for rule in ("clear_gains", "toy_l1_about_0_1")}

    def changed(module: str, old: str, new: str) -> dict:
        assert old in sources[module]
        edited = {**sources, module: sources[module].replace(old, new)}
        return {rule: claims.claim_fingerprint(rule, edited) for rule in base}

    # The per-seed value a suite rule reads, how a row combines its tasks, the seeds a suite plans, the toy's
    # supersede-by-rerun: each moves the rules that read it, and only those.
    final = changed(
        "cell_summary", 'r["final"]["mean"] for r in runs]', 'r["final"]["mean"] * 1 for r in runs]'
    )
    assert (
        final["clear_gains"] != base["clear_gains"] and final["toy_l1_about_0_1"] == base["toy_l1_about_0_1"]
    )
    combined = changed("claims_report", "if DISAGREES in outcomes:", "if DISAGREES in outcomes[1:]:")
    assert combined["clear_gains"] != base["clear_gains"]
    seeds = changed("table_suites", "seeds=(0, 1, 2, 3, 4),", "seeds=(0, 1, 2, 3),")
    assert seeds["clear_gains"] != base["clear_gains"]
    latest = changed("tilt_summary", "{_cell(r): r for r in records", "{_cell(r): r for r in records[::-1]")
    assert (
        latest["toy_l1_about_0_1"] != base["toy_l1_about_0_1"]
        and latest["clear_gains"] == base["clear_gains"]
    )


def test_a_verdict_on_runs_another_suite_reused_is_given_once(monkeypatch):
    variants = (Variant("gsb_mdpo", "gsb_mdpo"), Variant("eta=0", "gsb_mdpo"))
    for name in ("abl", "why"):
        _suite(monkeypatch, name, ("HalfCheetah-v5",), variants, kind="ablation")
    own = _runs("HalfCheetah-v5", "gsb_mdpo", HIGH) + _runs("HalfCheetah-v5", "eta=0", MIDDLE)
    reused = [{**r, "reused_from": "main"} for r in own]
    once = {"abl": summarize("abl", reused), "why": summarize("why", reused)}
    assert [row.source for row in _rows(once, claims.reference_mixing_helps)] == ["abl"]
    twice = {"abl": summarize("abl", reused), "why": summarize("why", own)}
    assert [row.source for row in _rows(twice, claims.reference_mixing_helps)] == ["abl", "why"]


def test_generated_text_states_every_rule_and_when_it_was_set(playground):
    text = claims_report.page(playground)
    for claim in claims.CLAIMS:
        assert claim.where in text and f"`{claim.rule.__name__}` (" in text
    assert '"worse" than any; inconclusive otherwise.' in text  # a docstring, as the code states it
    assert (
        text.startswith("# The paper's claims, against our runs\n")
        and "| claim (quoted from the paper) |" in text
    )
    lines = claims_report.one_line_each(playground)
    assert len(lines) == len({c.short for c in claims.CLAIMS}) and all(": **" in line for line in lines)
    assert "toy: quadrant-mass L1 error about 0.100: **not measured yet**" in lines
