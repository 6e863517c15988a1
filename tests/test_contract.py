"""The contract every registered algorithm keeps, tested over `trainers.registry`: a new algorithm (its trainer
module plus one registry entry) is covered here with no new test code.

CLI (help, one-line errors), a tiny run on InvertedPendulum-v5 that writes the shared run folder with an ONNX
export, the policy loaded by `GSBPolicy.from_pretrained` and evaluated, the ONNX file acting as the policy,
and a run killed after its second iteration resuming to the uninterrupted run's records.
"""

import importlib
import json

import numpy as np
import pytest

from gsbpolicy import GSBPolicy, evaluate
from trainers import registry
from trainers._core import lifecycle

pytest.importorskip("onnxruntime")

TINY = [
    "--env", "InvertedPendulum-v5", "--seed", "0", "--total-steps", "384", "--rollout.num-envs", "8",
    "--rollout.unroll-length", "16", "--log.checkpoint-every", "1", "--log.no-progress", "--eval.num-evals",
    "1", "--eval.episodes", "2", "--eval.final-episodes", "2",
]  # fmt: skip
"""Three iterations of 128 steps, a checkpoint after each, one evaluation."""

KINDS = {"flow": "flow", "ddpm-flow": "flow", "gaussian": "gaussian", "coupling-flow": "genpo"}
"""registry policy kind -> the folder format gsbpolicy loads it as."""


def _main(name: str):
    return importlib.import_module(registry.get_algo(name).module).main


def _records(run_dir):
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in lines]


@pytest.fixture(scope="module", params=registry.names())
def finished(request, tmp_path_factory):
    name = request.param
    out = tmp_path_factory.mktemp(name) / "run"
    _main(name)([*TINY, "--log.export-onnx", "--output-dir", str(out)])
    return name, out


def test_cli_help_and_one_line_errors(finished, capsys):
    name, out = finished
    with pytest.raises(SystemExit) as exit_:
        _main(name)(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert all(flag in text for flag in ("--env", "--seed", "--total-steps", "--output-dir", "--resume"))
    with pytest.raises(SystemExit) as exit_:
        _main(name)([*TINY, "--total-steps", "0", "--output-dir", str(out.parent / "bad")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    with pytest.raises(SystemExit) as exit_:
        _main(name)([*TINY, "--output-dir", str(out)])  # the folder already holds a finished run
    assert exit_.value.code == 2 and "already holds a finished run" in capsys.readouterr().err


def test_tiny_run_writes_the_shared_run_folder(finished):
    name, out = finished
    for path in ("run.json", "metrics.jsonl", "checkpoint", "policy/config.json", "policy/model.safetensors",
                 "policy/results.json", "policy/policy.onnx"):  # fmt: skip
        assert (out / path).exists(), path
    run = json.loads((out / "run.json").read_text())
    results = json.loads((out / "policy" / "results.json").read_text())
    assert run["algo"] == results["algo"] == name and results["env_steps"] == 384
    assert [r["type"] for r in _records(out)] == ["train", "train", "train", "eval"]


def test_policy_loads_evaluates_and_its_onnx_export_acts_the_same(finished):
    from export.runtime import OnnxPolicy

    name, out = finished
    policy = GSBPolicy.from_pretrained(out / "policy")
    assert policy.kind == KINDS[registry.get_algo(name).policy_kind]
    result = evaluate(policy, "InvertedPendulum-v5", n_episodes=2, seed=0)
    assert np.isfinite(result.returns).all() and result.n_episodes == 2
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    expected, _ = policy.predict(obs)
    actions, _ = OnnxPolicy(out / "policy" / "policy.onnx").predict(obs)
    np.testing.assert_allclose(actions, expected, atol=1e-5)


def test_a_killed_run_resumes(finished, tmp_path, monkeypatch, capsys):
    name, uninterrupted = finished
    out = tmp_path / "run"
    original, calls = lifecycle.train_record, []

    def killed_in_third_iteration(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # iterations 1 and 2 are logged and checkpointed
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(lifecycle, "train_record", killed_in_third_iteration)
    with pytest.raises(SystemExit) as stop:  # Ctrl-C: one line, exit 130
        _main(name)([*TINY, "--output-dir", str(out)])
    assert stop.value.code == 130
    assert capsys.readouterr().err == (
        f"error: interrupted (Ctrl-C) at iteration 3 of 3; the checkpoint of iteration 2 is kept in "
        f"{out / 'checkpoint'}: continue with the same command and --resume\n"
    )
    monkeypatch.setattr(lifecycle, "train_record", original)
    _main(name)([*TINY, "--output-dir", str(out), "--resume"])
    closing = capsys.readouterr().out
    assert "over 2 deterministic episodes on InvertedPendulum-v5" in closing.splitlines()[-1]
    export = f"python -m export.onnx {out / 'policy'} --out {out / 'policy' / 'policy.onnx'}\n"
    assert export in closing and f"hub_cards.publish {out} " in closing
    if registry.get_algo(name).exact_resume:
        assert _records(out) == _records(uninterrupted)
    else:
        assert [r["type"] for r in _records(out)] == [r["type"] for r in _records(uninterrupted)]
