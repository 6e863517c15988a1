"""The fine-tuning suite: its clone's policy is GSB-MDPO's Table 2 column, every fine-tuning run starts from its
seed's clone, the pretraining steps are built once and resumed, and the summary reports the path KL to the
clone and the verdicts in words."""

import json
import sys

import pytest

from trainers import bc, fpo, gsb_mdpo
from trainers._core.cli import parse
from trainers.benchmark import plan, plots, pretraining, report
from trainers.benchmark.suites import SUITES
from trainers.benchmark.summary import summarize

SUITE = SUITES["finetune-cpu-gym"]


def test_the_clone_has_the_spec_every_fine_tuning_column_trains():
    clone = parse(bc.Args, bc.PRESETS, "cpu", "", ["--dataset", "d", *SUITE.pretraining.bc_args])
    assert clone.policy == gsb_mdpo.gym_preset("Hopper-v5").policy
    # FPO's column, with its variant's flags, builds that spec (so `--init-from` accepts the clone).
    argv = plan.command(
        SUITE, plan.Run("Hopper-v5", SUITE.variant("fpo"), 0, SUITE_DIR / "fpo" / "seed_0"), False
    )
    args = parse(fpo.Args, fpo.PRESETS, "cpu", "", argv[3:])
    assert args.policy == clone.policy and not args.algo.clip_iterates and not args.algo.time_reversed


SUITE_DIR = pretraining.Path("runs/benchmarks/finetune-cpu-gym/Hopper-v5")


def test_each_fine_tuning_run_starts_from_its_seeds_clone_and_scratch_from_nothing():
    for variant in SUITE.variants:
        argv = plan.command(
            SUITE, plan.Run("Hopper-v5", variant, 2, SUITE_DIR / variant.name / "seed_2"), False
        )
        clone = str(SUITE_DIR / "pretraining" / "bc" / "seed_2" / "policy")
        from_nothing = ("gsb_mdpo:scratch", "gaussian_ppo:demonstrator-continued")
        assert (clone in argv) == (variant.name not in from_nothing), variant.name
        assert pretraining.PRETRAINED not in argv
    bc_only = plan.command(
        SUITE, plan.Run("Hopper-v5", SUITE.variant("bc"), 0, SUITE_DIR / "bc" / "seed_0"), False
    )
    assert bc_only[bc_only.index("--init.critic-warmup-steps") + 1] == str(SUITE.total_steps)


def _fake_steps(monkeypatch, calls):
    """Each step's subprocess replaced by writing what the real command leaves behind when it finishes."""

    def call(cmd, stdout, stderr):
        calls.append(cmd)
        if "--output-dir" in cmd:
            run = pretraining.Path(cmd[cmd.index("--output-dir") + 1])
            (run / "policy").mkdir(parents=True, exist_ok=True)
            (run / "run.json").write_text("{}")
            (run / "policy" / "results.json").write_text("{}")
        else:
            out = pretraining.Path(cmd[cmd.index("--out") + 1])
            (out / "data").mkdir(parents=True)
            (out / "data" / "metadata.json").write_text("{}")
        return 0

    monkeypatch.setattr(pretraining.subprocess, "call", call)


def test_pretraining_is_built_once_per_task_and_an_interrupted_step_resumes(tmp_path, monkeypatch):
    calls = []
    _fake_steps(monkeypatch, calls)
    run = tmp_path / "finetune-cpu-gym" / "Hopper-v5" / "gsb_mdpo" / "seed_0"
    policy = pretraining.prepare(SUITE, "Hopper-v5", 0, run)
    root = tmp_path / "finetune-cpu-gym" / "Hopper-v5" / "pretraining"
    assert policy == root / "bc" / "seed_0" / "policy"
    modules = [cmd[2] for cmd in calls]
    assert modules == ["trainers.gaussian_ppo", "trainers.collect", "trainers.bc"]
    assert calls[0][calls[0].index("--total-steps") + 1] == "200000" and calls[0][0] == sys.executable
    calls.clear()
    pretraining.prepare(SUITE, "Hopper-v5", 0, run)
    assert calls == [], "nothing is rebuilt"
    # Seed 1's clone is new; an interrupted one (run.json, no results) continues with --resume.
    (root / "bc" / "seed_1").mkdir(parents=True)
    (root / "bc" / "seed_1" / "run.json").write_text("{}")
    pretraining.prepare(SUITE, "Hopper-v5", 1, run.parent / "seed_1")
    assert [cmd[2] for cmd in calls] == ["trainers.bc"] and calls[0][-1] == "--resume"


def test_a_failed_pretraining_step_is_one_line_naming_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr(pretraining.subprocess, "call", lambda cmd, stdout, stderr: 3)
    run = tmp_path / "finetune-cpu-gym" / "Hopper-v5" / "gsb_mdpo" / "seed_0"
    with pytest.raises(
        pretraining.CommandError, match=r"pretraining step demonstrator failed \(exit code 3\)"
    ):
        pretraining.prepare(SUITE, "Hopper-v5", 0, run)


def _record(variant, seed, final, kl):
    return {"task": "Hopper-v5", "variant": variant, "method": "gsb_mdpo", "seed": seed,
            "final": {"mean": final, "std": 0.0, "n_episodes": 10, "deterministic": True, "env_steps": 100},
            "curve": {"env_steps": [50, 100], "deterministic": [final, final], "stochastic": [final, final]},
            "step_clip_frac": None, "cost": {"wall_s": 60.0},
            "path_kl_init": None if kl is None else {"env_steps": [50, 100], "value": [kl / 2, kl]},
            "git": {"commit": "abc"}, "hardware": {"cpu": "x", "cores": 2, "gpu": None}}  # fmt: skip


def test_the_summary_reports_the_path_kl_to_the_clone_and_the_verdicts_in_words():
    records = [
        *(_record("bc", s, 100.0 + s, 0.0) for s in range(3)),
        *(_record("gsb_mdpo", s, 200.0 + s, 1.0 + s) for s in range(3)),
        *(_record("gsb_mdpo:scratch", s, 300.0 + s, None) for s in range(3)),
        *(_record("fpo", s, [199.0, 201.5, 203.0][s], 5.0) for s in range(3)),
    ]
    summary = summarize("finetune-cpu-gym", records)
    hopper = summary["tasks"]["Hopper-v5"]
    assert hopper["gsb_mdpo"]["path_kl_init"]["final_per_seed"] == [1.0, 2.0, 3.0]
    assert hopper["gsb_mdpo"]["path_kl_init"]["mean"] == [1.0, 2.0]
    assert "path_kl_init" not in hopper["gsb_mdpo:scratch"]
    table = report.markdown(summary)
    assert "| Hopper-v5 | gsb_mdpo | 201.0 ± 1.0 (3) | 2 ± 1 |" in table  # sample std (ddof = 1)
    assert "| Hopper-v5 | gsb_mdpo:scratch | 301.0 ± 1.0 (3) | - (fresh actor) |" in table
    assert (
        "- Hopper-v5: fine-tuned GSB-MDPO is ahead of `bc` in 9 of 9 pairs (P = 1.00 [1.00, 1.00], rank test p = "
        "0.10); is ahead of `fpo` in 4 of 9 pairs (P = 0.44 [0.00, 1.00], rank test p = 1.00); is ahead of "
        "`gsb_mdpo:scratch` in 0 of 9 pairs (P = 0.00 [0.00, 0.00], rank test p = 0.10)." in table
    )
    assert plots.plot(summary)[:4] == b"\x89PNG"
    json.dumps(summary)  # the committed summary is JSON


def test_model_cards_do_not_take_fine_tuning_runs_as_baselines():
    """A card compares its policy with runs trained from scratch; the fine-tuning suite's started from
    demonstrations (its own README section reports them)."""
    from hub_cards.baselines import baseline_rows

    suites = {row.suite for row in baseline_rows("Hopper-v5")}
    assert "cpu-gym" in suites and "finetune-cpu-gym" not in suites


def test_the_budget_table_counts_the_demonstrators_steps():
    continued = {**_record("gaussian_ppo:demonstrator-continued", 0, 250.0, None), "method": "gaussian_ppo"}
    continued["final"] = {**continued["final"], "env_steps": 301_056}
    records = [_record("gsb_mdpo", 0, 200.0, 1.0), _record("gsb_mdpo:scratch", 0, 300.0, None), continued]
    hopper = summarize("finetune-cpu-gym", records)["tasks"]["Hopper-v5"]
    # The demonstrator: 200k steps rounded up to 98 iterations of 2,048; 30 demonstration episodes of at most
    # Hopper's 1,000 steps.
    assert hopper["gsb_mdpo"]["budget"] == {"starts_from": "the clone", "own_env_steps": 100,
                                            "before_at_most": 98 * 2048 + 30 * 1000,
                                            "total_at_most": 100 + 98 * 2048 + 30_000}  # fmt: skip
    assert hopper["gsb_mdpo:scratch"]["budget"]["total_at_most"] == 100
    assert hopper["gaussian_ppo:demonstrator-continued"]["budget"]["total_at_most"] == 301_056
    table = report.markdown(summarize("finetune-cpu-gym", records))
    assert "| Hopper-v5 | gsb_mdpo | the clone | 100 | 230,704 | 230,804 |" in table
    assert (
        "| Hopper-v5 | gaussian_ppo:demonstrator-continued | nothing: the demonstrator's recipe rerun"
        in table
    )


ROOT = pretraining.Path(__file__).parents[1]


def _ledger(suite: str) -> list[dict]:
    return [json.loads(line) for line in (ROOT / "hub_cards" / "results" / f"{suite}.runs.jsonl").open()]


def test_the_fine_tuning_page_says_only_what_the_committed_runs_show():
    """docs/fine-tuning.md: the demonstrator column is its recipe rerun (seed 0 follows another curve than
    cpu-gym's Gaussian PPO seed 0, the same recipe), weaker than the clone on HalfCheetah, and FPO ends closer to
    the clone in path KL than GSB-MDPO."""
    page = " ".join((ROOT / "docs" / "fine-tuning.md").read_text().split())
    tasks = json.loads((ROOT / "hub_cards" / "results" / "finetune-cpu-gym.json").read_text())["tasks"]
    rerun = "gaussian_ppo:demonstrator-continued"
    cheetah = tasks["HalfCheetah-v5"]
    assert max(cheetah[rerun]["final_per_seed"]) < min(cheetah["bc"]["final_per_seed"])
    assert "on HalfCheetah every seed of the rerun ends below every seed of the clone" in page
    assert all(
        t["fpo"]["path_kl_init"]["final_mean"] < t["gsb_mdpo"]["path_kl_init"]["final_mean"]
        for t in tasks.values()
    )
    assert "on both tasks FPO ends closer to the clone in path KL than GSB-MDPO" in page
    (seed_0,) = [
        r["curve"]
        for r in _ledger("finetune-cpu-gym")
        if r["variant"] == rerun and r["seed"] == 0 and r["task"] == "HalfCheetah-v5"
    ]
    (recipe,) = [
        r["curve"]
        for r in _ledger("cpu-gym")
        if r["variant"] == "gaussian_ppo" and r["seed"] == 0 and r["task"] == "HalfCheetah-v5"
    ]
    # At 200k env steps (the demonstrator's budget) the recipe in cpu-gym is above both of seed 0's evaluations around it.
    at_200k = recipe["deterministic"][recipe["env_steps"].index(200_704)]
    around = [
        v
        for s, v in zip(seed_0["env_steps"], seed_0["deterministic"], strict=True)
        if 180_000 <= s <= 211_000
    ]
    assert len(around) == 2 and at_200k > max(around)
    assert "demonstrator's recipe rerun" in page and "It is not the demonstrator's own run resumed" in page
    for unsupported in ("carried on", "trust region is what keeps", "ends above the demonstrator"):
        assert unsupported not in page
