"""The paper's toy analysis: GSB-MDPO moves a four-mode flow policy toward its exponential tilt, for any
preferred quadrant; the sweep resumes, summarises what it measured and refuses bad input."""

import dataclasses
import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from trainers._core.runlog import read_jsonl
from trainers.lab.toy import tilt_model, tilt_settings, tilt_summary, tilt_sweep
from trainers.lab.toy.tilt_model import run
from trainers.lab.toy.tilt_settings import PAPER_PREFERENCE, Args, rotate_preference, settings

ROOT = Path(__file__).resolve().parents[2]

TINY = Args(
    pretrain_steps=600,
    width=32,
    depth=2,
    iterations=2,
    updates_per_iteration=40,
    paths_per_iteration=2048,
    minibatch=512,
    eval_samples=20_000,
    out=None,
    cache_dir=None,
)
"""Small enough to run in about a minute on a CPU; the old policy is only roughly four-mode."""


def test_rotate_preference_puts_the_largest_entry_on_the_asked_quadrant():
    assert rotate_preference(PAPER_PREFERENCE, 3) == PAPER_PREFERENCE
    assert rotate_preference(PAPER_PREFERENCE, 1) == (1.5, 0.5, 0.0, 0.5)
    assert rotate_preference(PAPER_PREFERENCE, 2) == (0.5, 1.5, 0.5, 0.0)
    assert rotate_preference(PAPER_PREFERENCE, 4) == (0.5, 0.0, 0.5, 1.5)


@pytest.mark.slow
def test_a_sharp_tilt_toward_a_non_default_quadrant_moves_mass_toward_its_target():
    args = dataclasses.replace(TINY, beta=0.5, preference=rotate_preference(PAPER_PREFERENCE, 1))
    result = run(args)
    old, target, learned = result["old"], result["target"], result["learned"]
    assert learned[0] > old[0] + 0.1, "quadrant I (now the preferred one) gains mass"
    assert learned[2] < old[2], "quadrant III (now the least preferred) loses mass"
    assert result["l1"] < 0.6 * np.abs(old - target).sum(), "the learned masses close most of the gap"
    assert len(result["iterations"]) == args.iterations


def test_the_tilt_path_advantage_is_the_preference_on_track_and_corrects_a_shortfall():
    preference, lam = np.array(PAPER_PREFERENCE), 4.0
    old = np.array([0.3, 0.2, 0.25, 0.25])

    def on_path(k):
        masses = old * np.exp(k * preference / lam)
        return masses / masses.sum()

    advantage = tilt_model.tilt_path_advantage(preference, lam, old, on_path(2), iteration=2)
    np.testing.assert_allclose(advantage - advantage.mean(), preference - preference.mean(), atol=1e-12)
    # Where the earlier iterations fell short (half way to step 2), the aim is still step 3 of the path:
    # the tilt by exp(advantage / lam) lands on it exactly.
    behind = on_path(1)
    advantage = tilt_model.tilt_path_advantage(preference, lam, old, behind, iteration=2)
    landed = behind * np.exp(advantage / lam)
    np.testing.assert_allclose(landed / landed.sum(), on_path(3), atol=1e-12)
    assert advantage[2] - advantage[0] > preference[2] - preference[0], "the lagging preferred quadrant gains"


def test_the_default_is_the_papers_update_and_the_extension_is_opt_in_and_says_what_it_uses():
    assert Args().target_mass_feedback is False
    source = inspect.getsource(tilt_settings.Args)  # the field's docstring is its --help
    assert "Extension, not the paper's algorithm" in source and "target information" in source
    assert "track_tilt_path" not in source


@pytest.mark.slow
def test_the_target_mass_feedback_extension_lands_closer_to_the_target_than_the_papers_update():
    args = dataclasses.replace(TINY, beta=0.5, preference=rotate_preference(PAPER_PREFERENCE, 1))
    paper = run(args)
    extension = run(dataclasses.replace(args, target_mass_feedback=True))
    assert extension["l1"] < paper["l1"], (extension["l1"], paper["l1"])


def _fake_run(calls):
    """Stands in for `run` (the sweep's bookkeeping needs no training): L1 = beta / 10 + seed / 100."""

    def fake(args, clock=None):
        calls.append((args.beta, args.preference, args.seed))
        masses = np.full(4, 0.25)
        return {
            "old": masses,
            "target": masses,
            "learned": masses,
            "iterations": [],
            "l1": args.beta / 10 + args.seed / 100,
            "prior_floor_l1": 0.0,
            "pretrain_seconds": 0.0,
        }

    return fake


def test_sweep_runs_every_cell_once_and_resumes(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(tilt_sweep, "run", _fake_run(calls))
    args = Args(sweep=True, sweep_betas=(0.5, 1.0), sweep_seeds=(0, 1), results_dir=tmp_path)
    summary = tilt_sweep.sweep(args)
    assert len(calls) == 2 * 4 * 2
    assert {preference for _, preference, _ in calls} == {
        rotate_preference(PAPER_PREFERENCE, q) for q in (1, 2, 3, 4)
    }
    cell = next(c for c in summary["grid"] if c["paper_setting"])
    assert (cell["beta"], cell["preferred_quadrant"]) == (1.0, "III")
    assert cell["l1_mean"] == pytest.approx(0.105) and cell["l1_std"] == pytest.approx(
        np.std([0.1, 0.11], ddof=1)
    )
    assert summary["l1_mean"] == pytest.approx(np.mean([0.055, 0.105]))
    record = json.loads((tmp_path / "raw" / "toy_tilt_sweep.jsonl").read_text().splitlines()[0])
    assert {"started", "finished", "git"} <= set(record)  # when and at which commit each run ran

    calls.clear()
    tilt_sweep.sweep(dataclasses.replace(args, sweep_seeds=(0, 1, 2)))  # resumes: only seed 2 is new
    assert sorted({seed for *_, seed in calls}) == [2] and len(calls) == 2 * 4

    calls.clear()
    changed = dataclasses.replace(args, iterations=Args().iterations + 1, sweep_quadrants=(3,))
    summary = tilt_sweep.sweep(changed)  # other settings: new runs, and the old ones are reported beside them
    assert len(calls) == 2 * 2
    (other,) = summary["other_settings"]
    assert other["changed"] == {"iterations": Args().iterations} and other["runs"] == 2 * 4 * 3
    markdown = (tmp_path / "toy_tilt_sweep.md").read_text()
    assert "**0.105 ± 0.007 (n=2)**" in markdown and f"`iterations={Args().iterations}`" in markdown
    assert json.loads((tmp_path / "toy_tilt_sweep.json").read_text())["runs"] == 2 * 2


def test_the_reproduction_row_is_the_papers_algorithm_and_the_extension_its_own_row(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(tilt_sweep, "run", _fake_run(calls))
    args = Args(sweep=True, sweep_betas=(1.0,), sweep_quadrants=(3,), results_dir=tmp_path)
    tilt_sweep.sweep(dataclasses.replace(args, target_mass_feedback=True))
    summary = tilt_sweep.sweep(args)
    assert [r["l1"] for r in summary["reproduction"]] == pytest.approx([0.1, 0.11, 0.12])
    assert summary["loops"]["target_mass_feedback"]["runs"] == 3 and not summary["other_settings"]
    page = (tmp_path / "toy_tilt_sweep.md").read_text()
    assert "| **reproduction**: GSB-MDPO as the paper states it | the advantage A | **0.110 ± 0.010" in page
    assert "| the paper (App. C.1) | the advantage A | 0.100 (one run reported) | - |" in page
    assert "| extension, **not the paper's algorithm** (`--target-mass-feedback`) |" in page
    assert summary["command"] == "python -m trainers.lab.toy --sweep"
    # A rerun supersedes a cell's record; a log written under the setting's old name reads under the new.
    calls.clear()
    tilt_sweep.sweep(dataclasses.replace(args, rerun=True, sweep_seeds=(0,)))
    assert len(calls) == 1
    log = tmp_path / "raw" / "toy_tilt_sweep.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for r in lines:
        r["settings"]["track_tilt_path"] = r["settings"].pop("target_mass_feedback")
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    again = tilt_sweep.sweep(args)
    assert again["runs"] == 3 and again["loops"]["target_mass_feedback"]["runs"] == 3
    (rerun,) = again["reruns"]
    assert (rerun["seed"], rerun["l1"]) == (0, [0.1, 0.1])
    assert "β = 1, III preferred, seed 0: 0.100 then 0.100" in (tmp_path / "toy_tilt_sweep.md").read_text()


def test_a_corrupt_run_log_fails_with_one_line_naming_it(tmp_path, capsys):
    log = tmp_path / "raw" / "toy_tilt_sweep.jsonl"
    log.parent.mkdir()
    log.write_text('{"settings": {}}\n{"trunc')
    with pytest.raises(SystemExit) as exit_info:
        tilt_sweep.main(["--sweep", "--results-dir", str(tmp_path)])
    assert exit_info.value.code == 1
    error = capsys.readouterr().err
    assert "toy_tilt_sweep.jsonl line 2 is not valid JSON" in error and len(error.strip().splitlines()) == 1
    assert log.read_text().startswith('{"settings": {}}'), "the log is left as it was"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--beta", "0"], "--beta must be positive"),
        (["--iterations", "0"], "--iterations must be at least 1"),
        (["--minibatch", "5000", "--paths-per-iteration", "4096"], "--minibatch (5000) exceeds"),
        (["--sweep", "--sweep-quadrants", "0", "5"], "--sweep-quadrants takes 1..4"),
        (["--sweep", "--sweep-betas", "-1"], "--sweep-betas must be positive"),
    ],
)
def test_bad_settings_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tilt_sweep.main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and len(error.strip().splitlines()) == 1


def test_coverage_is_the_share_of_each_tilt_an_iteration_realised():
    preference, lam = np.array(PAPER_PREFERENCE), 2.0

    def tilt(masses, share):
        tilted = np.asarray(masses) * np.exp(share * preference / lam)
        return (tilted / tilted.sum()).tolist()

    start = [0.25, 0.25, 0.25, 0.25]
    half_way = tilt(start, 0.5)
    record = {
        "iterations": [
            {"old": start, "target": tilt(start, 1.0)},
            {"old": half_way, "target": tilt(half_way, 1.0)},
        ],
        "learned": tilt(half_way, 0.5),
        "old": start,
        "preference": list(preference),
        "beta": lam / 2,
        "target": tilt(start, 2.0),
    }
    assert tilt_summary.coverage(record) == pytest.approx(0.5)
    # Realising the whole tilt leaves no error; realising half of it leaves what half a tilt misses.
    assert tilt_summary.tilted_l1(record, 1.0) == pytest.approx(0.0, abs=1e-12)
    assert tilt_summary.tilted_l1(record, 0.5) == pytest.approx(
        np.abs(np.array(record["learned"]) - record["target"]).sum()
    )
    assert tilt_summary.coverage({"iterations": []}) is None


def _same_up_to_rounding(derived, committed, path="summary"):
    """Equal structure, strings and integers; floats equal to 1e-12 relative (numpy's sums round differently on
    CPUs with different vector widths, so a summary derived on another machine may differ in its last digit)."""
    if isinstance(committed, float):
        assert derived == pytest.approx(committed, rel=1e-12, abs=1e-15), path
    elif isinstance(committed, dict):
        assert isinstance(derived, dict) and derived.keys() == committed.keys(), path
        for key in committed:
            _same_up_to_rounding(derived[key], committed[key], f"{path}.{key}")
    elif isinstance(committed, list):
        assert isinstance(derived, list) and len(derived) == len(committed), path
        for i, (d, c) in enumerate(zip(derived, committed, strict=True)):
            _same_up_to_rounding(d, c, f"{path}[{i}]")
    else:
        assert derived == committed, path


def test_the_committed_summary_and_page_are_what_the_committed_logs_give(monkeypatch):
    """`--sweep` writes the summary and the page from the run log: both re-derived from the committed logs, under
    the command name they were generated with, are the committed files (the page byte for byte, the summary's
    floats up to their last digit, which depends on the CPU)."""
    results = ROOT / "hub_cards" / "results"
    committed = (results / "toy_tilt_sweep.json").read_text()
    monkeypatch.setattr(tilt_summary, "COMMAND", json.loads(committed)["command"].split(" --sweep")[0])
    args = Args(results_dir=results)
    records = tilt_summary.read_log(tilt_summary.sweep_log_path(args))
    reachable = read_jsonl(tilt_summary.reachable_log_path(results), tilt_summary.SweepLogError)
    summary = tilt_summary.summarize(records, settings(args), args.preference, reachable)
    _same_up_to_rounding(json.loads(json.dumps(summary)), json.loads(committed))
    assert (
        tilt_summary.render_page(summary) == (ROOT / "docs" / "benchmarks" / "toy_tilt_sweep.md").read_text()
    )
