"""Bad inputs to the export and publishing commands, one table row each, with the exact outcome.

CLI rows run `main(argv)` in-process and assert the exit code (2: bad input, 1: a failure), ONE line on
stderr that names the problem, no traceback, and that nothing under the row's folder was written or
lost (a snapshot of every file and folder before and after). Runtime rows assert the exception type and
a one-line message. Two rows run a real `python -m` process, to prove "no traceback" end to end where an
import, not `main`, is what fails.

The run folder is made by hand from the committed example card's files and a tiny policy saved for the
same env: no training, so the whole table runs in seconds (plus one ONNX export for the runtime rows).
"""

import dataclasses
import email.message
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import onnx
import onnx.numpy_helper
import pytest
import safetensors
import safetensors.numpy

from export import latency
from export import onnx as onnx_export
from export.runtime import OnnxPolicy
from gsbpolicy import make_policy, save_policy
from hub_cards import card, publish, render

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = render.EXAMPLES_DIR / "gsb_mdpo-InvertedPendulum-v5"
COMMANDS = {"publish": publish.main, "export": onnx_export.main, "latency": latency.main}


# ----------------------------------------------------------------------------------------- fixtures
def make_run_folder(run: Path, tiny_spec) -> Path:
    """A finished run folder at `run`: the example card's run.json, metrics.jsonl and results.json, and a
    tiny policy saved for its env (InvertedPendulum-v5: 4 observations, 1 action)."""
    run.mkdir()
    for name in ("run.json", "metrics.jsonl"):
        shutil.copyfile(EXAMPLE / name, run / name)
    spec = dataclasses.replace(
        tiny_spec, act_dim=1, action_low=(-3.0,), action_high=(3.0,), env_id="InvertedPendulum-v5"
    )
    save_policy(make_policy(spec, key=jax.random.key(0)), run / "policy")
    shutil.copyfile(EXAMPLE / "results.json", run / "policy" / "results.json")
    return run


@pytest.fixture(scope="module")
def base_run(tmp_path_factory, tiny_spec) -> Path:
    return make_run_folder(tmp_path_factory.mktemp("base") / "run", tiny_spec)


@dataclasses.dataclass
class Scene:
    """A row's own folder: `root` holds a fresh copy of the run (`run`, with its `policy`)."""

    root: Path

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def policy(self) -> Path:
        return self.run / "policy"

    def edit_json(self, path: Path, **changes) -> None:
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))

    def publish(self, *extra: str, out: str = "out") -> list[str]:
        return [str(self.run), "--repo-id", "org/flow", "--out", str(self.root / out), "--dry-run",
                "--no-onnx", "--no-video", *extra]  # fmt: skip


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for folders; links by their target)."""
    snap = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            snap[key] = os.readlink(path).encode()
        else:
            snap[key] = None if path.is_dir() else path.read_bytes()
    return snap


def _poison_weights(folder: Path) -> str:
    """Write one NaN into the saved weights (the saver itself refuses to); returns the tensor's name."""
    path = folder / "model.safetensors"
    with safetensors.safe_open(path, framework="numpy") as file:
        metadata = file.metadata()
    tensors = safetensors.numpy.load_file(path)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].copy()
    tensors[name].flat[0] = np.nan
    safetensors.numpy.save_file(tensors, path, metadata)
    return name


def _interleave(at: int) -> Callable[[Scene], None]:
    """Two trainers on one folder: a second run's first record lands after line `at` of the first's."""

    def write(scene: Scene) -> None:
        path = scene.run / "metrics.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:at] + [lines[0]] + lines[at:]))

    return write


def _nan_metric(scene: Scene) -> None:
    path = scene.run / "metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[3])
    record["train/actor_loss"] = float("nan")
    path.write_text("".join(lines[:3] + [json.dumps(record) + "\n"] + lines[4:]))


def _link_weights_outside(scene: Scene) -> None:
    secret = scene.root / "secret.safetensors"
    (scene.policy / "model.safetensors").rename(secret)
    (scene.policy / "model.safetensors").symlink_to(secret)


def _foreign_out(scene: Scene) -> None:
    (scene.root / "out").mkdir()
    (scene.root / "out" / "notes.txt").write_text("mine")
    (scene.root / "out" / "README.md").write_text("my own card")


def _edit_config_sigma(scene: Scene) -> None:
    path = scene.policy / "config.json"
    config = json.loads(path.read_text())
    config["spec"]["sigma_max"] = 2.5
    path.write_text(json.dumps(config))


def _offline_without_cache(scene: Scene, monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    # Outside the row's folder: the client may make its cache folders even when it finds nothing.
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(scene.root.with_name(scene.root.name + "-hf")))


def _no_code_url(scene: Scene, monkeypatch) -> None:
    """An installed gsbpolicy without its source tree whose metadata lacks the project URLs."""
    monkeypatch.setattr(card, "PYPROJECT", scene.root / "no-pyproject.toml")
    monkeypatch.setattr(importlib.metadata, "metadata", lambda name: email.message.Message())


def _link_policy_outside(scene: Scene) -> None:
    outside = scene.root / "elsewhere"
    scene.policy.rename(outside)
    scene.policy.symlink_to(outside, target_is_directory=True)


def _seal_metrics(scene: Scene) -> None:
    """results.json as a trainer writes it now: with the hash of the metrics the run finished with."""
    digest = hashlib.sha256((scene.run / "metrics.jsonl").read_bytes()).hexdigest()
    scene.edit_json(scene.policy / "results.json", metrics_sha256=digest)


def _nan_free_edit(scene: Scene) -> None:
    """A plausible hand edit: one evaluation's return made better."""
    path = scene.run / "metrics.jsonl"
    path.write_text(
        path.read_text().replace('"eval/return_deterministic": ', '"eval/return_deterministic": 1', 1)
    )


def _metric_as_text(scene: Scene) -> None:
    path = scene.run / "metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[3])
    record["train/actor_loss"] = "oops"
    path.write_text("".join(lines[:3] + [json.dumps(record) + "\n"] + lines[4:]))


def _metrics_line(scene: Scene, index: int, data: bytes) -> None:
    path = scene.run / "metrics.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:index] + [data + b"\n"] + lines[index + 1 :]))


def _hide_module(monkeypatch, hidden: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == hidden else real(name, *a)
    )


# -------------------------------------------------------------------------------------- the CLI table
@dataclasses.dataclass(frozen=True)
class Row:
    """One bad input: `prepare(scene, monkeypatch)` makes it and returns the argv of `command`."""

    id: str
    command: str
    prepare: Callable[[Scene, pytest.MonkeyPatch], list[str]]
    code: int
    message: str
    """A substring of the one stderr line (after "error: ")."""


def _publish_rows() -> list[Row]:
    def edited(path_of, **changes):
        def prepare(s: Scene, _):
            s.edit_json(path_of(s), **changes)
            return s.publish()

        return prepare

    def run_json(s):
        return s.run / "run.json"

    def results(s):
        return s.policy / "results.json"

    def run_with(s, **changes):
        s.edit_json(run_json(s), args={**json.loads(run_json(s).read_text())["args"], **changes})
        return s.publish()

    return [
        Row("publish: run folder missing", "publish",
            lambda s, _: [str(s.root / "nope"), "--repo-id", "org/flow", "--dry-run"],
            2, "run folder not found"),
        Row("publish: a policy folder instead of the run folder", "publish",
            lambda s, _: [str(s.policy), "--repo-id", "org/flow", "--dry-run"],
            2, "pass the run folder above it"),
        Row("publish: unfinished run (no policy folder)", "publish",
            lambda s, _: (shutil.rmtree(s.policy), s.publish())[1],
            2, "did the run finish?"),
        Row("publish: results.json from another seed", "publish", edited(results, seeds=[3]),
            2, "disagree on the seed: results.json says [3], run.json says [0]"),
        Row("publish: run.json of another seed", "publish", lambda s, _: run_with(s, seed=7),
            2, "disagree on the seed: results.json says [0], run.json says [7]"),
        Row("publish: results.json from another algorithm", "publish", edited(results, algo="fpo"),
            2, "disagree on the algorithm: results.json says 'fpo', run.json says 'gsb_mdpo'"),
        Row("publish: results.json from another commit", "publish", edited(results, git_commit="0" * 40),
            2, f"disagree on the commit: results.json says '{'0' * 40}', run.json says"),
        Row("publish: run.json of another env", "publish", lambda s, _: run_with(s, env="Hopper-v5"),
            2, "disagree on the environment"),
        Row("publish: two runs' metrics interleaved (env steps go back)", "publish",
            lambda s, _: (_interleave(5)(s), s.publish())[1],
            2, "line 6: env_steps 1024 after 5120: the records of more than one run are mixed"),
        Row("publish: two runs' metrics interleaved (same pace)", "publish",
            lambda s, _: (_interleave(1)(s), s.publish())[1],
            2, "line 2: train iteration 1 where 2 was due: the records of more than one run are mixed"),
        Row("publish: metrics end before the results' env steps", "publish",
            edited(results, env_steps=999_999),
            2, "disagree on the env steps: metrics.jsonl ends at 150528, results.json says 999999"),
        Row("publish: NaN loss in metrics.jsonl", "publish", lambda s, _: (_nan_metric(s), s.publish())[1],
            2, "'train/actor_loss' is nan: the run diverged"),
        Row("publish: NaN mean in results.json", "publish", edited(results, mean=float("nan")),
            2, "mean/std (nan, 0.0) are not the mean and population std"),
        Row("publish: results.json lacks a field", "publish",
            lambda s, _: (results(s).write_text(json.dumps(
                {k: v for k, v in json.loads(results(s).read_text()).items() if k != "seeds"})), s.publish())[1],
            2, "results.json lacks the field(s) seeds"),
        Row("publish: results.json mean edited by hand", "publish", edited(results, mean=1005.0),
            2, "mean/std (1005.0, 0.0) are not the mean and population std of the listed returns (1000.0, 0.0)"),
        Row("publish: corrupt results.json", "publish",
            lambda s, _: (results(s).write_text('{"mean": 1.0,'), s.publish())[1],
            2, "results.json is not valid JSON"),
        Row("publish: weights not in safetensors format", "publish",
            lambda s, _: ((s.policy / "model.safetensors").write_bytes(b"not safetensors"), s.publish())[1],
            2, "the policy does not load: PolicyFormatError:"),
        Row("publish: NaN weights", "publish",
            lambda s, _: (_poison_weights(s.policy), s.publish())[1],
            2, "holds NaN or inf"),
        Row("publish: config.json edited after saving", "publish",
            lambda s, _: (_edit_config_sigma(s), s.publish())[1],
            2, "sigma_max: saved 1.5, config 2.5"),
        Row("publish: weights linked from outside the run", "publish",
            lambda s, _: (_link_weights_outside(s), s.publish())[1],
            2, "outside"),
        Row("publish: --out holds the user's files", "publish",
            lambda s, _: (_foreign_out(s), s.publish())[1],
            2, "holds files the publisher did not write (notes.txt)"),
        Row("publish: --out is a file", "publish",
            lambda s, _: ((s.root / "out").write_text("x"), s.publish())[1],
            2, "exists and is not a folder"),
        Row("publish: --out inside a file", "publish",
            lambda s, _: ((s.root / "file").write_text("x"), s.publish(out="file/hub"))[1],
            2, "is a file, not a folder"),
        Row("publish: --out not writable", "publish",
            lambda s, _: [*s.publish()[:4], "/proc/gsbpolicy-test/hub", *s.publish()[5:]],
            2, "cannot write in /proc"),
        Row("publish: --repo-id without an org", "publish",
            lambda s, _: [str(s.run), "--repo-id", "flow", "--dry-run"],
            2, "--repo-id must be ORG/NAME, got 'flow'"),
        Row("publish: --repo-id with a space", "publish",
            lambda s, _: [str(s.run), "--repo-id", "org/my flow", "--dry-run"],
            2, "is not a valid Hub repo id"),
        Row("publish: --video-steps 0", "publish", lambda s, _: s.publish("--video-steps", "0"),
            2, "--video-steps must be >= 1, got 0"),
        Row("publish: --code-url not a URL", "publish",
            lambda s, _: s.publish("--code-url", "gsbpolicy/gsbpolicy"),
            2, "--code-url must be an http(s) URL of gsbpolicy's git repository, got 'gsbpolicy/gsbpolicy'"),
        Row("publish: --code-url with a space", "publish",
            lambda s, _: s.publish("--code-url", "https://example.org/my repo"),
            2, "--code-url must be an http(s) URL"),
        Row("publish: no code URL known and no --code-url", "publish",
            lambda s, mp: (_no_code_url(s, mp), s.publish())[1],
            2, "gsbpolicy's metadata has no Repository URL: pass --code-url URL"),
        Row("publish: --repo-id missing", "publish", lambda s, _: [str(s.run)],
            2, "the following arguments are required: --repo-id"),
        Row("publish: --repo-id a URL", "publish",
            lambda s, _: [str(s.run), "--repo-id", "https://huggingface.co/org/flow", "--dry-run"],
            2, "--repo-id must be ORG/NAME, got the URL 'https://huggingface.co/org/flow': pass the repo id ('org/flow')"),
        Row("publish: --repo-id empty", "publish", lambda s, _: [str(s.run), "--repo-id", "", "--dry-run"],
            2, "--repo-id must be ORG/NAME, got an empty string"),
        Row("publish: RUN_DIR empty", "publish", lambda s, _: ["", "--repo-id", "org/flow", "--dry-run"],
            2, "RUN_DIR must name a finished training run folder, got an empty string"),
        Row("publish: --out empty", "publish", lambda s, _: [str(s.run), "--repo-id", "org/flow", "--out", "", "--dry-run"],
            2, "--out must name a folder for the Hub files, got '.'"),
        Row("publish: policy/ links out of the run", "publish",
            lambda s, _: (_link_policy_outside(s), s.publish())[1],
            2, "policy is a link to"),
        Row("publish: --out is the run's own policy/ folder", "publish",
            lambda s, _: [*s.publish("--overwrite")[:4], str(s.policy), *s.publish("--overwrite")[5:]],
            2, "is the run's own policy/ folder: publishing there would replace the run's files"),
        Row("publish: --out is the run folder itself", "publish",
            lambda s, _: [*s.publish("--overwrite")[:4], str(s.run), *s.publish("--overwrite")[5:]],
            2, "is the run's own folder: publishing there would replace the run's files"),
        Row("publish: --out is a symbolic link", "publish",
            lambda s, _: ((s.root / "elsewhere").mkdir(), (s.root / "out").symlink_to(s.root / "elsewhere"),
                          s.publish())[2],
            2, "is a symbolic link (to "),
        Row("publish: metrics.jsonl edited after training", "publish",
            lambda s, _: (_seal_metrics(s), _nan_free_edit(s), s.publish())[2],
            2, "records another sha256): it was edited after training"),
        Row("publish: a metric that is not a number", "publish",
            lambda s, _: (_metric_as_text(s), s.publish())[1],
            2, "line 4: 'train/actor_loss' is 'oops', not a number"),
        Row("publish: run.json nested too deeply", "publish",
            lambda s, _: ((s.run / "run.json").write_text("[" * 100_000 + "]" * 100_000), s.publish())[1],
            2, "run.json is nested too deeply to be a file this tool wrote"),
        Row("publish: results.json not UTF-8", "publish",
            lambda s, _: ((s.policy / "results.json").write_bytes(b"\xff\xfe{}"), s.publish())[1],
            2, "results.json is not UTF-8 text (byte 0)"),
        Row("publish: a metrics line not UTF-8", "publish",
            lambda s, _: (_metrics_line(s, 2, b"\xc3\x28"), s.publish())[1],
            2, "metrics.jsonl, line 3 is not UTF-8 text"),
        Row("publish: --out is another run's folder", "publish",
            lambda s, _: (shutil.copytree(s.run, s.root / "other"), s.publish("--overwrite", out="other"))[1],
            2, "other is the folder of a training run: writing there would replace it"),
        Row("publish: --out is another run's policy folder", "publish",
            lambda s, _: (shutil.copytree(s.run, s.root / "other"), s.publish("--overwrite", out="other/policy"))[1],
            2, "other/policy is a saved policy's folder: writing there would replace it"),
        Row("publish: the hub extra is not installed", "publish",
            lambda s, mp: (_hide_module(mp, "jinja2"), s.publish())[1],
            1, 'needs jinja2: pip install -c tests/constraints.txt -e ".[hub]"'),
    ]  # fmt: skip


def _export_rows() -> list[Row]:
    def export(policy: Callable[[Scene], Path | str], *extra: str, out: str | None = None):
        return lambda s, _: [str(policy(s)), "--out", out or str(s.root / "policy.onnx"), *extra]

    return [
        Row("export: policy folder missing", "export", export(lambda s: s.root / "nope" / "policy"),
            2, "policy folder not found"),
        Row("export: a run folder", "export", export(lambda s: s.run),
            2, "is a training run folder: use"),
        Row("export: a folder without config.json", "export", export(lambda s: s.root),
            2, "is not a policy folder: it has no config.json"),
        Row("export: a file as POLICY", "export", export(lambda s: s.policy / "results.json"),
            2, "is a file; POLICY is a policy folder or a Hub repo id"),
        Row("export: Hub repo not in the cache, offline", "export",
            lambda s, mp: (_offline_without_cache(s, mp), export(lambda s: "org/never-downloaded")(s, mp))[1],
            2, "Hub policy 'org/never-downloaded': config.json is not in the local cache and offline mode is on"),
        Row("export: truncated weights", "export",
            lambda s, mp: ((s.policy / "model.safetensors").write_bytes(b"\0" * 7),
                           export(lambda s: s.policy)(s, mp))[1],
            2, "corrupted or truncated"),
        Row("export: NaN weights", "export",
            lambda s, mp: (_poison_weights(s.policy), export(lambda s: s.policy)(s, mp))[1],
            2, "holds NaN or inf"),
        Row("export: --out is a folder", "export", export(lambda s: s.policy, out="."),
            2, "--out . is a folder; give a file path"),
        Row("export: --out inside a file", "export",
            lambda s, mp: export(lambda s: s.policy, out=str(s.policy / "config.json" / "p.onnx"))(s, mp),
            2, "config.json is a file, not a folder"),
        Row("export: --out not writable", "export",
            export(lambda s: s.policy, out="/proc/gsbpolicy-test/policy.onnx"),
            2, "cannot write in /proc"),
        Row("export: --out is the policy's own weights", "export",
            lambda s, mp: export(lambda s: s.policy, out=str(s.policy / "model.safetensors"))(s, mp),
            2, "policy/model.safetensors is the weights of the policy in"),
        Row("export: --out is the policy's config.json", "export",
            lambda s, mp: export(lambda s: s.policy, out=str(s.policy / "config.json"))(s, mp),
            2, "is the config of the policy in"),
        Row("export: --out is the run's metrics.jsonl", "export",
            lambda s, mp: export(lambda s: s.policy, out=str(s.run / "metrics.jsonl"))(s, mp),
            2, "is the training log of the run in"),
        Row("export: --out is a checkpoint file", "export",
            lambda s, mp: ((s.run / "checkpoint").mkdir(), (s.run / "checkpoint" / "state.safetensors").write_bytes(b"x"),
                           export(lambda s: s.policy, out=str(s.run / "checkpoint" / "state.safetensors"))(s, mp))[2],
            2, "is inside the checkpoint of the run in"),
        Row("export: --opset 5", "export", export(lambda s: s.policy, "--opset", "5"),
            2, "--opset must be between 17 and"),
        Row("export: unknown --mode", "export", export(lambda s: s.policy, "--mode", "fast"),
            2, "argument --mode: invalid choice: 'fast'"),
        Row("export: --out missing", "export", lambda s, _: [str(s.policy)],
            2, "the following arguments are required: --out"),
        Row("export: POLICY empty", "export", export(lambda s: ""),
            2, "POLICY: expected a policy folder or a Hub repo id ORG/NAME, got an empty string"),
        Row("export: POLICY a Hub URL", "export", export(lambda s: "https://huggingface.co/org/flow"),
            2, "got the URL 'https://huggingface.co/org/flow': pass the repo id ('org/flow') or a local folder"),
        Row("export: --out is a symbolic link", "export",
            lambda s, mp: ((s.root / "target.onnx").write_bytes(b"the robot's current policy"),
                           (s.root / "policy.onnx").symlink_to(s.root / "target.onnx"),
                           export(lambda s: s.policy)(s, mp))[2],
            2, "policy.onnx is a symbolic link (to "),
        Row("latency: POLICY a Hub URL", "latency", lambda s, _: ["https://huggingface.co/org/flow", "--no-pin"],
            2, "got the URL 'https://huggingface.co/org/flow'"),
        Row("latency: a run folder", "latency", lambda s, _: [str(s.run), "--no-pin"],
            2, "is a training run folder: use"),
        Row("latency: neither POLICY nor --spec-preset", "latency", lambda s, _: ["--no-pin"],
            2, "give exactly one of POLICY and --spec-preset"),
        Row("latency: --repeats 0", "latency", lambda s, _: [str(s.policy), "--repeats", "0"],
            2, "--repeats must be >= 1, got 0"),
        Row("latency: --opset 99", "latency", lambda s, _: [str(s.policy), "--opset", "23", "99"],
            2, "--opset must be between 17 and"),
        Row("latency: NaN weights", "latency",
            lambda s, _: (_poison_weights(s.policy), [str(s.policy), "--no-pin"])[1],
            2, "holds NaN or inf"),
    ]  # fmt: skip


CLI_ROWS = _publish_rows() + _export_rows()


@pytest.mark.parametrize("row", CLI_ROWS, ids=[row.id for row in CLI_ROWS])
def test_cli_bad_input(row: Row, base_run, tmp_path, monkeypatch, capsys):
    scene = Scene(tmp_path)
    shutil.copytree(base_run, scene.run)
    argv = row.prepare(scene, monkeypatch)
    before = _snapshot(tmp_path)
    capsys.readouterr()
    try:
        code = COMMANDS[row.command](argv)
    except SystemExit as stop:  # argparse's usage errors
        code = stop.code
    err = capsys.readouterr().err
    assert code == row.code, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert row.message in err, err
    assert _snapshot(tmp_path) == before, "a failed command wrote or removed files"


def test_base_run_publishes(base_run, tmp_path, capsys):
    """The rows fail for their own reason: the unmodified run folder publishes."""
    scene = Scene(tmp_path)
    shutil.copytree(base_run, scene.run)
    assert publish.main(scene.publish()) == 0, capsys.readouterr().err
    assert (tmp_path / "out" / "README.md").is_file() and (tmp_path / "out" / publish.MARKER).is_file()
    # Its own folder is replaced as a whole the next time; a file the user adds there stops that.
    assert publish.main(scene.publish()) == 0
    (tmp_path / "out" / "notes.txt").write_text("mine")
    assert publish.main(scene.publish()) == 2


def test_overwrite_replaces_only_the_publishers_files(base_run, tmp_path, capsys):
    scene = Scene(tmp_path)
    shutil.copytree(base_run, scene.run)
    _foreign_out(scene)
    (tmp_path / "out" / "replay.mp4").write_bytes(b"an old replay")
    assert publish.main(scene.publish("--overwrite")) == 0, capsys.readouterr().err
    out = tmp_path / "out"
    assert (out / "notes.txt").read_text() == "mine"  # kept
    assert (out / "README.md").read_text() != "my own card"  # replaced, as --overwrite asked
    assert not (out / "replay.mp4").exists()  # stale: it would have been pushed with the new card
    assert not (out / publish.MARKER).exists()  # still not the publisher's folder to replace whole
    assert not list(tmp_path.glob(".out.*"))  # no staging folder left behind


def test_resumed_run_at_a_new_commit_publishes(base_run, tmp_path, capsys):
    """A run resumed at another commit records it in run.json's `resumes`: not a disagreement."""
    scene = Scene(tmp_path)
    shutil.copytree(base_run, scene.run)
    scene.edit_json(scene.policy / "results.json", git_commit="1" * 40)
    scene.edit_json(scene.run / "run.json", resumes=[{"git": {"commit": "1" * 40, "dirty": False}}])
    assert publish.main(scene.publish()) == 0, capsys.readouterr().err


# ------------------------------------------------------------------- end to end, in a real process
BLOCK_JAX2ONNX = """
import importlib.abc
import sys


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "jax2onnx":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
"""


@pytest.mark.parametrize(
    ("module", "args", "code", "message"),
    [
        (
            "export.onnx",
            ["POLICY", "--out", "x.onnx"],
            1,
            'needs jax2onnx: pip install -c tests/constraints.txt -e ".[onnx]"',
        ),
        ("hub_cards.publish", ["nope", "--repo-id", "org/flow"], 2, "run folder not found: nope"),
    ],
    ids=["export.onnx without the onnx extra", "publish of a missing run folder"],
)
def test_process_bad_input_is_one_line(module, args, code, message, base_run, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_JAX2ONNX)
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{REPO}"}
    args = [str(base_run / "policy") if arg == "POLICY" else arg for arg in args]
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]  # nothing written


# -------------------------------------------------------------------------------- the runtime table
@pytest.fixture(scope="module")
def sde_onnx(tiny_policy, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("onnx") / "sde.onnx"
    onnx_export.export(tiny_policy, path, "sde")
    return path


def _noise(value: float) -> np.ndarray:
    noise = np.zeros((7, 2), np.float32)
    noise[3, 1] = value
    return noise


RUNTIME_ROWS = [
    ("NaN observation", lambda p: p.predict(np.array([0.0, np.nan, 0.0, 0.0])),
     ValueError, r"observation contains NaN or inf at index \[\[1\]\]"),
    ("inf observation in a batch", lambda p: p.predict(np.array([[0.0] * 4, [0.0, 0.0, 0.0, np.inf]])),
     ValueError, r"observation contains NaN or inf at index \[\[1, 3\]\]"),
    ("observation one too long", lambda p: p.predict(np.zeros(5, np.float32)),
     ValueError, r"observation shape \(5,\) does not match \(4,\) or \(batch, 4\)"),
    ("batch of the wrong width", lambda p: p.predict(np.zeros((2, 3), np.float32)),
     ValueError, r"observation shape \(2, 3\) does not match"),
    ("observation batch with an extra axis", lambda p: p.predict(np.zeros((2, 1, 4), np.float32)),
     ValueError, r"observation shape \(2, 1, 4\) does not match"),
    ("string observation", lambda p: p.predict(np.array(["a", "b", "c", "d"])),
     ValueError, "dtype must be a real number type, got <U1"),
    ("complex observation", lambda p: p.predict(np.zeros(4, np.complex64)),
     ValueError, "dtype must be a real number type, got complex64"),
    ("bool observation", lambda p: p.predict(np.zeros(4, bool)),
     ValueError, "dtype must be a real number type, got bool"),
    ("dict observation", lambda p: p.predict({"obs": np.zeros(4)}),
     ValueError, r"observation dict does not match obs_names: missing \['obs\[0\]', 'obs\[1\]', 'obs\[2\]', 'obs\[3\]'\], unknown \['obs'\]"),
    ("(obs, info) from env.reset()", lambda p: p.predict((np.zeros(4), {})),
     ValueError, r"you probably passed the \(obs, info\) pair"),
    ("NaN noise", lambda p: p.act(np.zeros(4, np.float32), _noise(np.nan)),
     ValueError, "noise contains NaN or inf"),
    ("inf noise", lambda p: p.act(np.zeros(4, np.float32), _noise(-np.inf)),
     ValueError, "noise contains NaN or inf"),
    ("wrong noise shape", lambda p: p.act(np.zeros(4, np.float32), np.zeros((6, 2), np.float32)),
     ValueError, r"noise shape \(6, 2\) does not match \(7, 2\)"),
    ("noise for a batch of another size", lambda p: p.act(np.zeros((3, 4), np.float32), np.zeros((3, 6, 2))),
     ValueError, r"noise shape \(3, 6, 2\) does not match \(3, 7, 2\)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "error", "match"), [row[1:] for row in RUNTIME_ROWS], ids=[row[0] for row in RUNTIME_ROWS]
)
def test_runtime_bad_input(call, error, match, sde_onnx):
    with pytest.raises(error, match=match) as raised:
        call(OnnxPolicy(sde_onnx))
    assert len(str(raised.value).splitlines()) == 1


def _without_metadata(folder: Path, exported: Path) -> Path:
    model = onnx.load(exported)
    del model.metadata_props[:]
    onnx.save(model, folder / "bare.onnx")
    return folder / "bare.onnx"


FILE_ROWS = [
    ("missing ONNX file", lambda d, _: d / "missing.onnx", FileNotFoundError, "ONNX policy not found"),
    ("corrupt ONNX file", lambda d, _: (d / "bad.onnx", (d / "bad.onnx").write_bytes(b"not onnx"))[0],
     ValueError, "is not a loadable ONNX model"),
    ("ONNX file not written by export.onnx", _without_metadata,
     ValueError, r"lacks metadata \['mode', 'obs_dim', 'act_dim', 'noise_shape'\]; export it with"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "error", "match"), [row[1:] for row in FILE_ROWS], ids=[row[0] for row in FILE_ROWS]
)
def test_runtime_bad_file(path, error, match, tmp_path, sde_onnx):
    with pytest.raises(error, match=match) as raised:
        OnnxPolicy(path(tmp_path, sde_onnx))
    assert len(str(raised.value).splitlines()) == 1


def test_a_nan_weight_in_the_onnx_file_is_named_not_blamed_on_overflow(sde_onnx, tmp_path):
    """A file damaged after export (the exporter refuses non-finite weights): one NaN in one initializer."""
    model = onnx.load(sde_onnx)
    weights = max(model.graph.initializer, key=lambda tensor: np.prod(tensor.dims))
    values = onnx.numpy_helper.to_array(weights).copy()
    values.flat[0] = np.nan
    weights.CopyFrom(onnx.numpy_helper.from_array(values, weights.name))
    onnx.save(model, tmp_path / "damaged.onnx")
    with pytest.raises(
        FloatingPointError,
        match=r"damaged\.onnx gives a NaN action even for a zero observation: it holds a NaN or inf weight",
    ):
        OnnxPolicy(tmp_path / "damaged.onnx").predict(np.ones(4, np.float32))


def test_export_refuses_non_finite_weights_and_writes_nothing(tiny_policy, tmp_path):
    mean = tiny_policy.normalizer.mean
    poisoned = eqx.tree_at(lambda p: p.normalizer.mean, tiny_policy, mean.at[0].set(np.inf))
    with pytest.raises(ValueError, match="tensor 'normalizer.mean' has 1 NaN/inf") as raised:
        onnx_export.export(poisoned, tmp_path / "p.onnx")
    assert len(str(raised.value).splitlines()) == 1 and not list(tmp_path.iterdir())


# --------------------------------------------------------------------------- the network: every command alike
NETWORK_FAULTS = {
    "hang": r"did not answer (HEAD|POST) \S+ within 0\.3 s \(set GSBPOLICY_HUB_TIMEOUT to wait longer\)",
    "error": r"answered (HEAD|POST) \S+ with 500 Internal Server Error",
    "garbage": r"answered (HEAD|POST) \S+ with 200 OK (but without the file metadata a Hugging Face Hub sends|"
    r"\(text/html\), which is not a Hub answer)",
}


def _exit_code(module: str):
    """The `main` of a command that ends with SystemExit (the trainers'), as one that returns its exit code."""

    def main(argv: list[str]) -> int:
        try:
            importlib.import_module(module).main(argv)
        except SystemExit as stop:
            return stop.code
        return 0

    return main


NETWORK_COMMANDS = {
    "export.onnx loading org/flow": lambda s: (onnx_export.main, ["org/flow", "--out", str(s.root / "p.onnx")]),
    "trainers.collect loading org/flow": lambda s: (_exit_code("trainers.collect"), ["org/flow", "--out", str(s.root / "demos")]),
    "--init-from org/flow": lambda s: (_exit_code("trainers.gsb_mdpo"), ["--init-from", "org/flow", "--output-dir", str(s.root / "ft"),
                                                   "--total-steps", "1024", "--log.no-progress"]),
    "hub_cards.publish pushing": lambda s: (publish.main, [str(s.run), "--repo-id", "org/flow", "--out",
                                                           str(s.root / "out"), "--no-onnx", "--no-video"]),
}  # fmt: skip


@pytest.mark.parametrize("fault", sorted(NETWORK_FAULTS))
@pytest.mark.parametrize("command", sorted(NETWORK_COMMANDS))
def test_a_failing_hub_is_one_line_naming_it_and_its_answer(
    command, fault, base_run, tmp_path, monkeypatch, capsys
):
    from fake_hub import FakeHub, point_client_at

    scene = Scene(tmp_path)
    shutil.copytree(base_run, scene.run)
    before = _snapshot(scene.run)
    with FakeHub() as hub:
        point_client_at(monkeypatch, hub.endpoint, cache_dir=tmp_path.with_name(tmp_path.name + "-hf"))
        monkeypatch.setenv("GSBPOLICY_HUB_TIMEOUT", "0.3")
        hub.fault = fault
        main, argv = NETWORK_COMMANDS[command](scene)
        capsys.readouterr()
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 1, err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert f"the Hub at {hub.endpoint} " in err and re.search(NETWORK_FAULTS[fault], err), err
    assert _snapshot(scene.run) == before
    leftovers = {p.name for p in tmp_path.iterdir()} - {"run", "out"}
    assert leftovers <= {"ft"} and not [p for p in (tmp_path / "ft").glob("*") if p.name != "run.lock"]


def test_export_refuses_to_write_over_a_policys_own_file(tiny_policy, base_run):
    """The library call too: `export(policy, RUN/policy/model.safetensors)` would replace the trained weights."""
    weights = base_run / "policy" / "model.safetensors"
    before = weights.read_bytes()
    with pytest.raises(ValueError, match=r"model\.safetensors is the weights of the policy in") as raised:
        onnx_export.export(tiny_policy, weights)
    assert len(str(raised.value).splitlines()) == 1 and weights.read_bytes() == before


@pytest.mark.parametrize(
    ("entry_point", "card_line"),
    [
        ("__main__:Reach", 'gym.register("custom/Reach-v0", entry_point=Reach)'),
        (
            "my_envs.reach:Reach",
            'gym.register("custom/Reach-v0", entry_point="my_envs.reach:Reach")  # the env class this policy was '
            "trained on",
        ),
    ],
)
def test_a_run_on_a_class_publishes_a_card_that_says_how_to_make_its_env(
    entry_point, card_line, base_run, tmp_path, capsys
):
    """train(Reach) names the env custom/Reach-v0, which exists only in the process that trained: the card says
    how to register it before gym.make, and the replay is skipped naming the class, not MuJoCo rendering."""
    from gsbpolicy import load_policy

    scene = Scene(tmp_path)
    shutil.copytree(base_run, scene.run)
    spec = dataclasses.replace(load_policy(scene.policy).spec, env_id="custom/Reach-v0")
    save_policy(make_policy(spec, key=jax.random.key(0)), scene.policy)
    scene.edit_json(scene.policy / "results.json", env_id="custom/Reach-v0", env_entry_point=entry_point)
    args = json.loads((scene.run / "run.json").read_text())["args"]
    scene.edit_json(scene.run / "run.json", args={**args, "env": "custom/Reach-v0"})
    argv = [arg for arg in scene.publish() if arg != "--no-video"]
    assert publish.main(argv) == 0, capsys.readouterr().err
    card = (tmp_path / "out" / "README.md").read_text()
    assert f'{card_line}\nenv = gym.make("custom/Reach-v0")' in card
    if entry_point.startswith("__main__"):
        assert (
            "replay.mp4: skipped, custom/Reach-v0 is the class Reach of the script that trained the policy "
            "(__main__:Reach), which no other process can import" in capsys.readouterr().out
        )
