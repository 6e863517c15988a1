"""Pre-registered claims: the power calculation, the confirmatory verdicts, the registration command, and that
every registration in the committed file predates every run it judges (by the git history)."""

import datetime
import functools
import json
import subprocess
from pathlib import Path

import pytest

from gsbpolicy._cli import CommandError
from trainers._core.runlog import read_jsonl
from trainers.benchmark import confirmatory, exact, plan, power, preregistration
from trainers.benchmark.aggregate import registrations_table
from trainers.benchmark.arguments import BenchArgs
from trainers.benchmark.suites import PREREGISTRATION_FILE, SUITES, confirmatory_suite

ROOT = Path(__file__).resolve().parents[1]
GREATER = confirmatory.TESTS["greater"]["claim"]


# ---------------------------------------------------------------------------------------------- power
def test_critical_rank_sum_is_the_exact_tail():
    # 5 against 5: P(W >= 36) = 0.0476 (Mann-Whitney U >= 21), P(W >= 35) = 0.075.
    assert power.critical_rank_sum(5, 0.05) == 36
    assert exact.rank_sum_p_greater([4, 6, 7, 9, 10], [1, 2, 3, 5, 8]) == pytest.approx(12 / 252)
    assert power.critical_rank_sum(3, 0.01) == 3 * 10 // 2 + 1  # 3 against 3 can never reach 0.01


def test_power_is_the_level_without_an_effect_and_one_with_a_large_one():
    assert power.power(GREATER, 0.0, 1.0, 0.0, 5, 0.05) == pytest.approx(0.0476, abs=0.01)
    assert power.power(GREATER, 10.0, 1.0, 0.0, 5, 0.05) == 1.0
    assert power.power(GREATER, 1.0, 1.0, 0.0, 10, 0.05) > power.power(GREATER, 1.0, 1.0, 0.0, 5, 0.05)


def test_seeds_needed_takes_the_fewest_reaching_the_target_and_the_minimum_when_none_does():
    test = confirmatory.TESTS["greater"]
    assert power.seeds_needed(test, 10.0, 1.0, 0.0, 0.05) == (power.MIN_SEEDS, 1.0, 0.0)
    n, agrees, _ = power.seeds_needed(test, 1.2, 1.0, 0.0, 0.05)
    assert power.MIN_SEEDS < n <= power.MAX_SEEDS and agrees >= power.TARGET_POWER
    assert power.power(GREATER, 1.2, 1.0, 0.0, n - 1, 0.05) < power.TARGET_POWER
    n, agrees, disagrees = power.seeds_needed(test, 0.1, 1.0, 0.0, 0.05)
    assert n == power.MIN_SEEDS and agrees + disagrees < 0.2
    # Short of the target at MAX_SEEDS but more likely than not to conclude there: MAX_SEEDS, not the minimum.
    n, agrees, _ = power.seeds_needed(test, 0.9, 1.0, 0.0, 0.05)
    assert n == power.MAX_SEEDS and 0.5 <= agrees < power.TARGET_POWER


def test_seeds_needed_plans_for_a_verdict_either_way():
    # Exploratory runs far behind a non-inferiority margin: agreeing is hopeless at any seed count, but the same
    # seeds decide against the claim, so the plan is the minimum with a high power to disagree, not a power of 0.
    test = confirmatory.TESTS["non-inferior"]
    n, agrees, disagrees = power.seeds_needed(test, -10.0, 1.0, 2.0, 0.05)
    assert (n, agrees) == (power.MIN_SEEDS, 0.0) and disagrees >= power.TARGET_POWER
    assert disagrees == pytest.approx(power.power(test["against"], -10.0, 1.0, 2.0, n, 0.05))
    # Behind by about the margin: neither verdict is likely, whatever the count up to MAX_SEEDS.
    n, agrees, disagrees = power.seeds_needed(test, -2.0, 1.0, 2.0, 0.05)
    assert n == power.MIN_SEEDS and agrees + disagrees < 0.2


def test_the_plan_simulates_the_upper_confidence_limit_of_the_exploratory_spread():
    # 3 runs a column pool to 4 degrees of freedom: the upper 80% limit is sqrt(4 / chi2_0.2(4)) = 1.557 times.
    assert power.planning_sd(10.0, 4) == pytest.approx(15.57, abs=0.01)
    assert 1.0 < power.planning_sd(1.0, 40) < power.planning_sd(1.0, 4)


# ---------------------------------------------------------------------------------------------- verdicts
def _record(task, variant, seed, late, early=-1e6):
    return {
        "task": task,
        "variant": variant,
        "seed": seed,
        "curve": {"deterministic": [early, early, late, late, late]},
    }


def _registration(test="greater", margin=None, tasks=("A", "B")):
    return {"test": test, "alpha": 0.05, "treatment": "t",
            "tasks": [{"task": k, "comparator": "c", "margin": margin, "seeds": [100, 101, 102, 103, 104]} for k in tasks]}  # fmt: skip


def _runs(treatment, comparator, tasks=("A", "B")):
    return [
        _record(task, column, 100 + i, v)
        for task in tasks
        for column, values in (("t", treatment), ("c", comparator))
        for i, v in enumerate(values)
    ]


def test_a_claim_agrees_when_every_task_separates_after_holm_and_reads_only_the_late_mean():
    judged = confirmatory.judge(_registration(), _runs([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]))
    assert judged["verdict"] == confirmatory.AGREES
    a = judged["tasks"][0]
    assert a["p"] == pytest.approx(1 / 252) and a["p_holm"] == pytest.approx(2 / 252)
    assert (a["pairs_ahead"], a["pairs"], a["treatment_mean"], a["p_improvement"]) == (25, 25, 8.0, 1.0)


def test_a_claim_disagrees_when_a_task_goes_the_other_way_and_is_inconclusive_on_overlap():
    assert (
        confirmatory.judge(_registration(), _runs([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]))["verdict"]
        == "disagrees"
    )
    assert (
        confirmatory.judge(_registration(), _runs([1, 3, 5, 7, 9], [2, 4, 6, 8, 10]))["verdict"]
        == "inconclusive"
    )


def test_a_claim_is_pending_until_every_registered_run_is_there_and_a_rerun_never_replaces_the_first():
    runs = _runs([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
    pending = confirmatory.judge(_registration(), runs[:-1])
    assert (pending["verdict"], pending["runs_done"], pending["runs_registered"]) == ("pending", 19, 20)
    rerun = _record("A", "t", 100, -50.0)  # a later line for seed 100 of the treatment: not read
    extra = _record("A", "t", 7, -50.0)  # a seed not registered: not read
    assert confirmatory.judge(_registration(), [*runs, rerun, extra]) == confirmatory.judge(
        _registration(), runs
    )


def test_margins_shift_the_comparator_for_non_inferiority_and_equivalence():
    behind = _runs([90, 91, 92, 93, 94], [95, 96, 97, 98, 99], tasks=("A",))
    assert confirmatory.judge(_registration("greater", tasks=("A",)), behind)["verdict"] == "disagrees"
    assert confirmatory.judge(_registration("non-inferior", 10.0, ("A",)), behind)["verdict"] == "agrees"
    assert confirmatory.judge(_registration("non-inferior", 1.0, ("A",)), behind)["verdict"] == "disagrees"
    assert confirmatory.judge(_registration("equivalent", 10.0, ("A",)), behind)["verdict"] == "agrees"
    ahead = _runs([200, 201, 202, 203, 204], [95, 96, 97, 98, 99], tasks=("A",))
    assert confirmatory.judge(_registration("equivalent", 10.0, ("A",)), ahead)["verdict"] == "inconclusive"


def test_the_toy_agrees_when_the_paper_value_lies_in_the_interval_of_the_mean():
    reg = {"settings": {"k": 1}, "beta": 1.0, "preference": [0, 1], "seeds": [100, 101, 102, 103], "alpha": 0.05,
           "paper_value": 0.1}  # fmt: skip
    runs = [{"settings": {"k": 1}, "beta": 1.0, "preference": [0, 1], "seed": 100 + i, "l1": v}
            for i, v in enumerate([0.09, 0.11, 0.10, 0.12])]  # fmt: skip
    assert confirmatory.judge_toy(reg, runs)["verdict"] == "agrees"
    assert confirmatory.judge_toy({**reg, "paper_value": 0.2}, runs)["verdict"] == "disagrees"
    assert confirmatory.judge_toy(reg, runs[:3])["verdict"] == "pending"
    other = [{**r, "settings": {"k": 2}} for r in runs]
    assert confirmatory.judge_toy(reg, other)["verdict"] == "pending"


# ---------------------------------------------------------------------------------------------- registering
def _ledger_line(task, variant, seed, late):
    return json.dumps(_record(task, variant, seed, late))


@pytest.fixture
def results(tmp_path):
    lines = [_ledger_line("FingerSpin", v, s, base + 10 * s) for v, base in (("gsb_mdpo", 600), ("fpo", 400),
             ("genpo", 450), ("gaussian_ppo", 100), ("dppo", 0)) for s in range(3)]  # fmt: skip
    (tmp_path / "cpu-playground.runs.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def _register(results, **extra):
    fields = {"id": "mine", "claim": "gains", "source": "cpu-playground", "tasks": ("FingerSpin",), **extra}
    return preregistration.register(
        preregistration.Args(**fields, file=results / "prereg.json", results_dir=results)
    )


def test_registering_picks_the_best_paper_baseline_fresh_seeds_and_the_power_and_is_never_edited(results):
    entry = _register(results)
    task = entry["tasks"][0]
    assert task["comparator"] == "genpo" and task["seeds"] == list(range(100, 100 + len(task["seeds"])))
    planned = task["exploratory"]
    assert planned["effect"] == pytest.approx(150.0) and planned["power"] >= 0.8
    assert planned["planning_sd"] == pytest.approx(power.planning_sd(planned["sd"], 4), abs=1e-3)
    assert (
        entry["fingerprint"] == preregistration.rule_fingerprint("judge") and entry["suite"] == "confirm-mine"
    )
    with pytest.raises(CommandError, match="already registers 'mine'"):
        _register(results)


def test_the_registrations_table_shows_both_planned_powers_of_a_new_registration(results):
    task = _register(results)["tasks"][0]["exploratory"]
    (results / "prereg.json").rename(results / PREREGISTRATION_FILE.name)
    row = next(line for line in registrations_table(results).splitlines() if "`mine`" in line)
    assert f"power {task['power']} to agree, {task['power_against']} to disagree" in row


def test_registering_refuses_seeds_that_already_ran_and_a_margin_test_without_a_margin(results):
    with pytest.raises(CommandError, match=r"seeds \[1, 2\] already have runs"):
        _register(results, id="x", first_seed=1)
    with pytest.raises(CommandError, match="needs a --margin-fraction"):
        _register(results, id="y", test="non-inferior")
    # The toy is the lab's: the framework registers suites, and names the lab's command for the toy.
    with pytest.raises(CommandError, match="python -m trainers.lab.toy_registration"):
        _register(results, id="z", source="toy", test="interval", paper_value=0.1, num_seeds=2)


def test_a_registration_defines_a_suite_that_runs_only_its_runs_at_its_seeds(results):
    entry = _register(results)
    entry["tasks"].append(
        {**entry["tasks"][0], "task": "BallInCup", "comparator": "fpo", "seeds": [100, 101]}
    )
    suite = confirmatory_suite(entry)
    assert suite.kind == "confirmatory" and suite.total_steps == SUITES["cpu-playground"].total_steps
    assert suite.args == SUITES["cpu-playground"].args
    args = BenchArgs(suite=suite.name)
    planned = {run.key for run in plan.planned_runs(args, suite)}
    n = len(entry["tasks"][0]["seeds"])
    assert planned == {("FingerSpin", c, s) for c in ("gsb_mdpo", "genpo") for s in range(100, 100 + n)} | {
        ("BallInCup", c, s) for c in ("gsb_mdpo", "fpo") for s in (100, 101)
    }
    assert suite.planned_runs == len(planned)


# ---------------------------------------------------------------------------------------------- before the runs
def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


@functools.cache
def _added_at() -> dict[str, tuple[str, dict]]:
    """Registration id -> (the commit that added it, the registration as that commit has it)."""
    path = PREREGISTRATION_FILE.relative_to(ROOT)
    found = {}
    for commit in _git("rev-list", "--reverse", "HEAD", "--", str(path)).split():
        for r in json.loads(_git("show", f"{commit}:{path}"))["registrations"]:
            found.setdefault(r["id"], (commit, r))
    return found


def _runs_of(registration: dict) -> list[dict]:
    if registration.get("suite"):
        ledger = PREREGISTRATION_FILE.parent / f"{registration['suite']}.runs.jsonl"
        return read_jsonl(ledger) if ledger.exists() else []
    log = PREREGISTRATION_FILE.parent / preregistration.TOY_LOG
    same = ("settings", "beta", "preference")
    return [
        r
        for r in read_jsonl(log)
        if r["seed"] in registration["seeds"] and all(r[k] == registration[k] for k in same)
    ]


@pytest.mark.parametrize("registration", preregistration.load(), ids=lambda r: r["id"])
def test_each_registration_was_committed_unchanged_before_every_run_it_judges(registration):
    if _git("rev-parse", "--is-shallow-repository").strip() == "true":
        pytest.skip("a shallow clone: the registrations' history is not here")
    assert registration["id"] in _added_at(), (
        f"{registration['id']} is not committed yet: commit it before its runs"
    )
    commit, first = _added_at()[registration["id"]]
    assert registration == first, f"{registration['id']} was edited after {commit}: register a new id instead"
    rule = "judge" if registration.get("suite") else "judge_toy"
    assert preregistration.rule_fingerprint(rule) == registration["fingerprint"], (
        f"confirmatory.{rule} changed"
    )
    when = _git("show", "-s", "--format=%cI", commit).strip()
    for run in _runs_of(registration):
        ran_at = (run.get("git") or {}).get("commit")
        assert ran_at, f"run {run['seed']} of {registration['id']} records no commit"
        ancestry = subprocess.run(["git", "merge-base", "--is-ancestor", commit, ran_at], cwd=ROOT)
        assert ancestry.returncode == 0, (
            f"run {run['seed']} of {registration['id']} ran at {ran_at}, before {commit}"
        )
        assert _started(run) >= datetime.datetime.fromisoformat(when), (
            f"run {run['seed']} started before {commit}"
        )


def _started(run: dict) -> datetime.datetime:
    """When a run started: the toy logs it; a suite's ledger logs when it finished and its wall-clock."""
    if "started" in run:
        return datetime.datetime.fromisoformat(run["started"])
    return datetime.datetime.fromisoformat(run["finished"]) - datetime.timedelta(
        seconds=run["cost"]["wall_s"]
    )


def test_the_committed_registrations_define_their_suites():
    for registration in preregistration.load():
        if registration.get("suite"):
            assert SUITES[registration["suite"]] == confirmatory_suite(registration)
