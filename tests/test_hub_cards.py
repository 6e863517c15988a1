"""Model cards and Hub publishing: a real (tiny) run pushed to a local Hub server and loaded back by repo id
(fresh cache, then offline), the card's metadata against results.json, the reproduce command against
the trainer's parser, and the committed example cards against their result files. Bad inputs to the
publisher are rows of tests/test_bad_inputs_publish.py."""

import importlib.util
import json
import re
import shutil

import numpy as np
import pytest
from fake_hub import FakeHub, point_client_at
from test_trainer import tiny_args

from gsbpolicy import GSBPolicy
from hub_cards import publish, render
from hub_cards.card import render_card
from hub_cards.command import SKIPPED, command_argv
from hub_cards.folder import CardSource, FolderError
from trainers._core.cli import parse
from trainers._core.loop import Trainer
from trainers._core.runlog import jsonable
from trainers.gsb_mdpo import PRESETS, Args, GsbMdpo
from trainers.presets import with_fields

EXAMPLE = render.EXAMPLES_DIR / "gsb_mdpo-InvertedPendulum-v5"
HUB_FILES = {"config.json", "model.safetensors", "results.json", "run.json", "metrics.jsonl", "README.md",
             "learning_curve.png"}  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished tiny GSB-MDPO run folder (two iterations of 64 env steps)."""
    args = tiny_args(tmp_path_factory.mktemp("runs"), "run", total_steps=128)
    Trainer(GsbMdpo(args.algo), args).run()
    return args.output_dir


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with FakeHub() as server:
        point_client_at(monkeypatch, server.endpoint, cache_dir=tmp_path / "hf-cache")
        yield server


def parse_mean_reward(value: str) -> tuple[float, float]:
    mean, std = re.fullmatch(r"(-?[\d.]+) \+/- ([\d.]+)", value).groups()
    return float(mean), float(std)


def test_publish_then_load_by_repo_id_in_a_fresh_cache_then_offline(run_dir, hub, monkeypatch, tmp_path):
    from huggingface_hub import ModelCard, constants

    out = tmp_path / "hub-folder"
    argv = [str(run_dir), "--repo-id", "org/flow", "--out", str(out), "--no-onnx", "--video-steps", "20"]
    assert publish.main(argv) == 0
    expected_files = HUB_FILES | ({"replay.mp4"} if importlib.util.find_spec("imageio_ffmpeg") else set())
    assert {p.name for p in out.iterdir()} == expected_files | {publish.MARKER}
    assert set(hub.files("org/flow")) == expected_files
    assert len(hub.commits("org/flow")) == 2  # create_repo's empty commit, then everything in one
    assert (
        hub.files("org/flow")["model.safetensors"] == (run_dir / "policy" / "model.safetensors").read_bytes()
    )

    local = GSBPolicy.from_pretrained(run_dir / "policy")
    obs = np.random.default_rng(0).normal(size=(9, local.spec.obs_dim)).astype(np.float32)
    expected = local.predict(obs)[0]
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "fresh-cache"))
    np.testing.assert_array_equal(GSBPolicy.from_pretrained("org/flow").predict(obs)[0], expected)

    results = json.loads((run_dir / "policy" / "results.json").read_text())
    # The commit of the code that ran (run.json's), even if HEAD moved while the run trained.
    assert results["git_commit"] == json.loads((run_dir / "run.json").read_text())["git"]["commit"]
    card = ModelCard.load("org/flow")
    (result,) = card.data.eval_results
    assert (result.task_type, result.dataset_type, result.metric_type) == (
        "reinforcement-learning",
        "InvertedPendulum-v5",
        "mean_reward",
    )
    assert parse_mean_reward(result.metric_value) == (round(results["mean"], 2), round(results["std"], 2))

    # Publishing again without the video: one more commit, which also deletes the old replay.mp4.
    assert publish.main([*argv, "--no-video"]) == 0
    assert set(hub.files("org/flow")) == HUB_FILES and len(hub.commits("org/flow")) == 3

    hub.stop()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    np.testing.assert_array_equal(GSBPolicy.from_pretrained("org/flow").predict(obs)[0], expected)


def test_dry_run_then_failed_push_keep_the_folder_and_say_why(run_dir, hub, tmp_path, capsys):
    out = tmp_path / "out"
    base = [str(run_dir), "--repo-id", "org/flow", "--out", str(out), "--no-onnx", "--no-video"]
    assert publish.main([*base, "--dry-run"]) == 0
    assert {p.name for p in out.iterdir()} == HUB_FILES | {publish.MARKER} and not hub.repos
    hub.stop()
    assert publish.main(base) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: push to org/flow: cannot reach the Hub at {hub.endpoint} (")
    assert f"{out} is intact" in err and len(err.splitlines()) == 1
    assert {p.name for p in out.iterdir()} == HUB_FILES | {publish.MARKER}
    CardSource.from_folder(out)  # still a complete, valid folder


def test_card_metadata_and_baseline_rows(tmp_path):
    from huggingface_hub import ModelCard

    source = CardSource.from_folder(EXAMPLE)
    summary = {"suite": "cpu-gym", "tasks": {"InvertedPendulum-v5": {
        "gsb_mdpo": {"method": "gsb_mdpo", "seeds": [0, 1, 2], "final_mean": 987.5, "final_std": 12.25,
                     "env_steps": 300_000},
        "lambda=0": {"method": "gsb_mdpo", "seeds": [0, 1], "final_mean": 900.0, "final_std": 3.0,
                     "env_steps": 300_000},
    }}}  # fmt: skip
    (tmp_path / "cpu-gym.json").write_text(json.dumps(summary))
    (tmp_path / "agreement.json").write_text('{"setup": {}, "runs": {}}')  # not a summary: passed over
    text = render_card(source, "org/name", results_dir=tmp_path)
    card = ModelCard(text)
    assert card.data.library_name == "gsbpolicy" and card.data.license == "apache-2.0"
    assert {"InvertedPendulum-v5", "reinforcement-learning", "flow-matching", "gsb-mdpo"} <= set(
        card.data.tags
    )
    assert "robotics" not in card.data.tags  # a pendulum is not a robot
    (result,) = card.data.eval_results
    assert parse_mean_reward(result.metric_value) == (
        round(source.results["mean"], 2),
        round(source.results["std"], 2),
    )
    assert "| GSB-MDPO | `cpu-gym` benchmark" in text and "987.50 +/- 12.25 | 3 seeds" in text
    assert "| GSB-MDPO (lambda=0) |" in text
    assert 'GSBPolicy.from_pretrained("org/name")' in text and "@article{gong2026gsbmdpo" in text
    (tmp_path / "bad.json").write_text('{"suite": "x", "tasks": {"InvertedPendulum-v5": {"m": {}}}}')
    with pytest.raises(ValueError, match="bad.json does not follow the summary schema"):
        render_card(source, "org/name", results_dir=tmp_path)


@pytest.mark.parametrize("preset", ["cpu", "gym"])
def test_reproduce_command_parses_back_to_the_run_config(preset):
    args = PRESETS[preset]("Hopper-v5")
    args = with_fields(
        args, seed=3, optim={"max_grad_norm": 0.5}, log={"tensorboard": True, "progress": False}
    )
    run = {"algo": "gsb_mdpo", "args": jsonable(args)}
    parsed = parse(Args, PRESETS, "cpu", "", command_argv(run))
    assert jsonable(parsed) == {**run["args"], "output_dir": None, "resume": False}
    example = json.loads((EXAMPLE / "run.json").read_text())
    parsed = jsonable(parse(Args, PRESETS, "cpu", "", command_argv(example)))

    # Fields added to TrainArgs or its groups after the example was trained take their defaults; the rest
    # must match.
    def recorded(tree: dict, like: dict) -> dict:
        return {k: recorded(tree[k], v) if isinstance(v, dict) else tree[k] for k, v in like.items()}

    args = {k: v for k, v in example["args"].items() if k not in SKIPPED}
    assert recorded(parsed, args) == args


def test_committed_example_cards_are_up_to_date(tmp_path, capsys):
    assert render.main(["--check"]) == 0
    copy = tmp_path / EXAMPLE.name
    shutil.copytree(EXAMPLE, copy)
    lines = (copy / "metrics.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["type"] == "eval"
    lines[-1] = json.dumps({**last, "eval/return_stochastic": last["eval/return_stochastic"] - 1})
    (copy / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    results = json.loads((copy / "results.json").read_text())
    (copy / "results.json").write_text(json.dumps({**results, "date": "2030-01-01T00:00:00+00:00"}))
    assert render.main(["--check", str(copy)]) == 1
    stale = capsys.readouterr().err
    assert str(copy / "README.md") in stale and str(copy / "learning_curve.png") in stale
    assert render.main([str(copy)]) == 0 and render.main(["--check", str(copy)]) == 0
    run = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**run, "args": {**run["args"], "env": "Hopper-v5"}}))
    with pytest.raises(FolderError, match="disagree on the environment"):
        CardSource.from_folder(copy)
