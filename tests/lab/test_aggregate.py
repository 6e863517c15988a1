"""The lab's regeneration (`python -m trainers.lab.aggregate`): the framework's files, then the claims page and
the README's claims; and the committed accounts that read the claims' rules."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_benchmark import _runs, tiny_suite  # noqa: F401 - a fixture, used by name
from tests.test_suites import RESULTS, _args
from trainers.benchmark import aggregate, stats
from trainers.benchmark.suites import SUITES
from trainers.lab import aggregate as lab

ROOT = Path(__file__).parents[2]


def test_the_lab_check_adds_the_claims_page_and_the_readmes_claims(tiny_suite, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(stats, "BOOTSTRAP_REPS", 50)  # this test is about files; regenerations follow
    records = _runs("gsb_mdpo", [9.0, 10.0, 11.0]) + _runs("lambda=0", [6.0, 7.0, 8.0])
    (tmp_path / "tiny.runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    readme = tmp_path / "README.md"
    readme.write_text(
        "x\n<!-- headline:start -->\nold\n<!-- headline:end -->\n<!-- claims:start -->\n<!-- claims:end -->\n"
    )
    stale = lab.stale_files(tmp_path, readme)
    assert {str(tmp_path / name) for name in ("claims.md", "tiny.json", "tiny.md", "tiny.png")} <= set(stale)
    lab.write_suites(None, tmp_path, readme)
    assert "old" in readme.read_text()  # only the committed results folder writes the real README
    assert set(lab.stale_files(tmp_path, readme)) == {str(readme)}  # its headline and its claims
    (files, blocks), text = (
        lab.claims_files(aggregate.summaries(tmp_path), tmp_path, readme),
        readme.read_text(),
    )
    for name, block in [
        ("headline", aggregate.headline(aggregate.summaries(tmp_path))),
        *[b[1:] for b in blocks],
    ]:
        text = aggregate.with_block(text, name, block)
    readme.write_text(text)
    assert lab.stale_files(tmp_path, readme) == [] and list(files) == [tmp_path / "claims.md"]
    assert "The paper's claims against these runs" in readme.read_text()


def test_committed_claims_match_the_committed_results():
    """The claims page and the README's claims (the framework's files: tests/test_benchmark.py)."""
    files, blocks = lab.claims_files(
        aggregate.summaries(aggregate.RESULTS_DIR), aggregate.RESULTS_DIR, lab.README
    )
    assert aggregate.outdated(files, blocks) == [], (
        "run `python -m trainers.lab.aggregate` and commit the result"
    )


def test_the_lab_commands_start():
    for module, flag in (
        ("trainers.lab.aggregate", "--suite"),
        ("trainers.lab.toy_registration", "--paper-value"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", module, "--help"], capture_output=True, text=True, cwd=ROOT
        )
        assert out.returncode == 0 and flag in out.stdout, out.stderr


def test_the_clip_fraction_suite_runs_the_column_the_clip_claim_reads():
    from trainers.lab import claims

    suite = SUITES["clip-fraction-cpu-gym"]
    assert claims.CLIP_COLUMN in suite.variant_names and suite.tasks == ("HalfCheetah-v5",)


def test_the_benchmark_pages_clip_fraction_account_holds_on_the_committed_runs():
    """The benchmarks page's clip-fraction paragraph: the claim's windows (`claims._window_mean`) on the
    committed curves, the verdict, and Table 2's step count that explains the gap between the two shares."""
    from trainers.lab.claims import CLIP_BAND, CLIP_COLUMN, CLIP_RISE, _window_mean

    page = " ".join((RESULTS.parents[1] / "docs" / "benchmarks" / "index.md").read_text().split())
    entries = json.loads((RESULTS / "clip-fraction-cpu-gym.json").read_text())["tasks"]["HalfCheetah-v5"]
    paper, own = entries[CLIP_COLUMN], entries["gsb_mdpo"]
    samples = _window_mean(paper["sample_clip_frac"], CLIP_RISE)
    steps = _window_mean(paper["step_clip_frac"], CLIP_RISE)
    assert not CLIP_BAND[0] <= samples <= CLIP_BAND[1] and CLIP_BAND[0] <= steps <= CLIP_BAND[1]
    assert "so the verdict **depends on the count**" in page
    assert f"{samples:.3f} of rollout samples have a clipped step" in page
    assert f"the share of clipped generation steps is {steps:.3f}" in page
    middle = (1 + CLIP_RISE) / 2
    rise = [
        _window_mean(paper["step_clip_frac"], *w)
        for w in ((0.0, CLIP_RISE), (CLIP_RISE, middle), (middle, 1.0))
    ]
    assert rise[0] < rise[1] > rise[2]  # the rise, then the fall
    assert (
        f"rises from {rise[0]:.3f} over the first 10% of training and then falls, {rise[1]:.3f} over the next 45% and {rise[2]:.3f} over the last"
        in page
    )
    halves = _window_mean(own["step_clip_frac"], 0.0, 0.5), _window_mean(own["step_clip_frac"], 0.5)
    assert (
        f"clips {halves[0]:.3f} of steps in the first half of its run and {halves[1]:.3f} in the second"
        in page
    )
    assert _args("clip-fraction-cpu-gym", CLIP_COLUMN, "HalfCheetah-v5").policy.num_steps == 16
    assert "With Table 2's 16 generation steps" in page


def test_the_toys_registration_builds_its_part_on_the_frameworks_registration(tmp_path):
    from trainers.benchmark import preregistration
    from trainers.lab.toy_registration import toy_part

    fields = {"id": "toy-x", "claim": "toy", "source": "toy", "test": "interval", "num_seeds": 2}
    args = preregistration.Args(**fields, paper_value=0.1, file=tmp_path / "p.json", results_dir=tmp_path)
    entry = preregistration.register(args, toy_part)
    assert entry["seeds"] == [100, 101] and entry["fingerprint"] == preregistration.rule_fingerprint(
        "judge_toy"
    )
    assert (
        entry["run"].endswith("--sweep-seeds 100 101")
        and entry["metric"] == "quadrant-mass L1 error of the run"
    )
    with pytest.raises(preregistration.CommandError, match="needs --paper-value and --num-seeds"):
        preregistration.register(
            preregistration.Args(**{**fields, "id": "toy-y", "num_seeds": None}, file=args.file), toy_part
        )
