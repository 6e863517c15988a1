"""The long commands say what they are doing, in order, before each slow step: the toy analysis (pretraining,
each mirror-descent iteration, the evaluation), `export.onnx` (tracing, the parity check) and
`hub_cards.publish` (export, replay, upload). Progress goes to stdout, so stderr stays the one error line."""

import pytest
from fake_hub import FakeHub, point_client_at
from test_bad_inputs_publish import make_run_folder

from export import onnx as export_onnx
from hub_cards import publish
from trainers.lab.toy import tilt_sweep

pytest.importorskip("onnxruntime")


def assert_in_order(text: str, *parts: str) -> None:
    positions = [text.find(part) for part in parts]
    assert -1 not in positions, f"missing {parts[positions.index(-1)]!r} in:\n{text}"
    assert positions == sorted(positions), f"out of order: {parts} in:\n{text}"


@pytest.mark.slow
def test_toy_tilt_prints_each_phase_and_iteration(capsys):
    # The smallest configuration that still runs every phase (seconds, not minutes; its numbers mean nothing).
    tilt_sweep.main(["--pretrain-steps", "20", "--width", "8", "--depth", "1", "--iterations", "2",
                   "--updates-per-iteration", "2", "--paths-per-iteration", "256", "--minibatch", "128",
                   "--eval-samples", "1000", "--out", "None", "--cache-dir", "None"])  # fmt: skip
    out = capsys.readouterr().out
    assert_in_order(out, "s] pretraining the old policy: step 20/20",
                    "s] mirror descent: 2 iterations of 2 updates on 256 paths each ...", "s] iteration 1/2: masses",
                    "s] iteration 2/2: masses", "s] evaluated on 1000 samples", "quadrant-mass L1 error")  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_spec):
    return make_run_folder(tmp_path_factory.mktemp("progress") / "run", tiny_spec)


def test_export_says_it_traces_then_checks_parity_then_writes(run, tmp_path, capsys):
    out = tmp_path / "policy.onnx"
    assert export_onnx.main([str(run / "policy"), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert_in_order(printed.out, "tracing the flow policy with jax2onnx (mode ode, loop unrolled) ...",
                    "checking parity with JAX at batch sizes 1, 7, 64 on random and real observations ...",
                    f"wrote {out}")  # fmt: skip
    assert printed.err == ""


def test_publish_says_it_exports_records_and_uploads(run, tmp_path, monkeypatch, capsys):
    with FakeHub() as hub:
        point_client_at(monkeypatch, hub.endpoint, cache_dir=tmp_path / "hf-cache")
        argv = [str(run), "--repo-id", "org/flow", "--out", str(tmp_path / "out"), "--video-steps", "5"]
        assert publish.main(argv) == 0
        uploaded = len(hub.files("org/flow"))
    out = capsys.readouterr().out
    assert_in_order(out, "policy.onnx: tracing the flow policy", "policy.onnx: checking parity with JAX",
                    "policy.onnx: exported and verified", "replay.mp4: recording one deterministic episode of "
                    "at most 5 steps ...", f"uploading {uploaded} files (", "pushed org/flow in one commit")  # fmt: skip
