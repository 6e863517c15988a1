"""ONNX export, verification and the JAX-free runtime (`export/`).

The tiny policy is exported once per mode for the whole module: the first jax2onnx trace in a process
takes seconds.
"""

import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import onnx
import pytest
from import_blocker import env_without

from export import latency
from export import onnx as onnx_export
from export.onnx import BATCH_SIZES, MODES, TOLERANCE, ExportVerificationError
from export.runtime import OnnxPolicy
from gsbpolicy import GSBPolicy, PolicySpec, make_policy, save_policy

pytestmark = pytest.mark.strict_promotion

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def exported(tiny_policy, tmp_path_factory):
    """{mode: (path, verification report)} of the tiny policy's exports."""
    folder = tmp_path_factory.mktemp("onnx")
    return {
        mode: (folder / f"{mode}.onnx", onnx_export.export(tiny_policy, folder / f"{mode}.onnx", mode))
        for mode in MODES
    }


def _observations(spec: PolicySpec, batch: int, seed: int = 0) -> np.ndarray:
    # Spread like the fixture's normalizer statistics (mean 2, std 3), tails included.
    return np.random.default_rng(seed).normal(2.0, 4.0, (batch, spec.obs_dim)).astype(np.float32)


def _noise(spec: PolicySpec, batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, spec.num_steps + 1, spec.act_dim), np.float32)


def _jax_free_env(tmp_path: Path) -> dict[str, str]:
    """Importing JAX (or the exporter's stack) fails in a subprocess with this environment."""
    blocked = ("jax", "jaxlib", "equinox", "gsbpolicy", "jax2onnx", "onnx")
    return env_without(tmp_path, blocked, "the ONNX runtime must not need it")


# -------------------------------------------------------------------------------------- verification
@pytest.mark.parametrize("mode", MODES)
def test_export_is_verified_at_every_batch_size(exported, mode):
    _, report = exported[mode]
    assert {(c.source, c.batch) for c in report.checks} == {
        (s, b) for s in ("random", "real") for b in BATCH_SIZES
    }
    assert report.passed and report.max_abs_diff <= TOLERANCE
    # "Tiny-v0" is not a Gymnasium env, so the real observations come from the normalizer statistics.
    assert report.real_source.startswith("normalizer mean +- 3 std") and "Tiny-v0" in report.real_source


def test_failed_verification_writes_nothing(tiny_policy, tmp_path, monkeypatch, capsys):
    folder = save_policy(tiny_policy, tmp_path / "policy")
    other = make_policy(tiny_policy.spec, key=jax.random.key(7))
    real_trace = onnx_export.trace
    monkeypatch.setattr(onnx_export, "trace", lambda policy, *args, **kw: real_trace(other, *args, **kw))
    with pytest.raises(ExportVerificationError, match=r"differs from JAX by [\d.]+, more than 1e-05") as err:
        onnx_export.export_policy_folder(folder)
    assert "max |onnx - jax|" in err.value.report.table() and "random" in err.value.report.table()
    capsys.readouterr()
    assert onnx_export.main([str(folder), "--out", str(folder / "cli.onnx")]) == 1
    captured = capsys.readouterr()
    assert (
        captured.err.startswith("error: export failed, nothing written")
        and len(captured.err.splitlines()) == 1
    )
    assert "max |onnx - jax|" in captured.out  # the table of differences, for the curious
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]


def test_invalid_model_fails_verification(tiny_policy):
    model = onnx_export.trace(tiny_policy)
    model.graph.node[-1].input[0] = "no_such_tensor"
    with pytest.raises(ExportVerificationError, match="exported model is invalid"):
        onnx_export.verify(model, tiny_policy, "ode")


# -------------------------------------------------------------------------------------------- parity
@pytest.mark.parametrize("batch", BATCH_SIZES)
def test_ode_parity(exported, tiny_policy, batch):
    obs = _observations(tiny_policy.spec, batch)
    action, state = OnnxPolicy(exported["ode"][0]).predict(obs)
    expected = np.asarray(jax.vmap(tiny_policy.act)(obs))
    assert state is None and action.shape == (batch, tiny_policy.spec.act_dim) and action.dtype == np.float32
    np.testing.assert_allclose(action, expected, rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("batch", BATCH_SIZES)
def test_sde_parity_with_identical_noise(exported, tiny_policy, batch):
    obs, noise = _observations(tiny_policy.spec, batch), _noise(tiny_policy.spec, batch)
    action = OnnxPolicy(exported["sde"][0]).act(obs, noise)
    expected = np.asarray(jax.vmap(tiny_policy.act_stochastic)(obs, noise))
    np.testing.assert_allclose(action, expected, rtol=0, atol=TOLERANCE)


def test_single_observation_and_sde_predict_match_gsbpolicy(exported, tiny_policy):
    obs = _observations(tiny_policy.spec, 5)
    ode, sde = OnnxPolicy(exported["ode"][0]), OnnxPolicy(exported["sde"][0], seed=3)
    reference = GSBPolicy(tiny_policy, seed=3)
    np.testing.assert_allclose(ode.predict(obs[0])[0], reference.predict(obs[0])[0], rtol=0, atol=TOLERANCE)
    # Zero noise in the sde graph is exactly the deterministic policy.
    np.testing.assert_allclose(sde.predict(obs)[0], ode.predict(obs)[0], rtol=0, atol=TOLERANCE)
    # Same seed, same draws: both runtimes sample the same stochastic actions.
    for observation in (obs, obs[0], obs):
        ours = sde.predict(observation, deterministic=False)[0]
        theirs = reference.predict(observation, deterministic=False)[0]
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=TOLERANCE)


def test_metadata_and_graph_signature(exported, tiny_spec):
    for mode in MODES:
        model = onnx.load(exported[mode][0])
        props = {p.key: p.value for p in model.metadata_props}
        assert props["mode"] == mode and props["spec_hash"] == tiny_spec.hash()
        assert (props["obs_dim"], props["act_dim"], props["num_steps"]) == ("4", "2", "6")
        assert (props["action_low"], props["action_high"]) == ("[-1.0, -2.0]", "[1.0, 3.0]")
        assert props["gsbpolicy_version"] and PolicySpec.from_dict(json.loads(props["spec"])) == tiny_spec
        dims = {
            v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in model.graph.input
        }
        expected = {"obs": ["B", 4]} | ({"noise": ["B", 7, 2]} if mode == "sde" else {})
        assert dims == expected
        assert [
            [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.output
        ] == [["B", 2]]


def test_exported_actions_stay_inside_the_bounds_on_extreme_inputs(exported, tiny_policy):
    """The graph is the policy's own `to_env`: squash, rescale and the final clip to the bounds, so
    extreme but finite observations and noise give finite actions inside the bounds, as in JAX."""
    spec = tiny_policy.spec
    low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)
    obs = np.array([[1e30] * 4, [-1e30] * 4, [3e38, -3e38, 0.0, 1.0]], np.float32)
    noise = (
        np.full((3, spec.num_steps + 1, spec.act_dim), 1e6, np.float32) * np.array([1, -1, 1])[:, None, None]
    )
    reference = GSBPolicy(tiny_policy)
    for mode in MODES:
        runtime = OnnxPolicy(exported[mode][0])
        step_noise = noise if mode == "sde" else None
        actions = runtime.act(obs, step_noise)
        assert np.isfinite(actions).all() and (actions >= low).all() and (actions <= high).all(), mode
        np.testing.assert_allclose(actions, reference.act(obs, step_noise), rtol=0, atol=TOLERANCE)


def test_graph_clean_ups_remove_bookkeeping(tiny_policy, exported):
    raw = onnx_export.trace(tiny_policy, simplify=False)
    clean = onnx.load(exported["ode"][0])
    identity_transposes = [
        n for n in clean.graph.node if n.op_type == "Transpose" and list(n.attribute[0].ints) == [0, 1]
    ]
    assert not identity_transposes and len(clean.graph.node) < 0.85 * len(raw.graph.node)
    # The default export is unrolled: `jax.disable_jit` turned the sampler's lax.scan into N steps.
    assert not any(n.op_type == "Loop" for n in clean.graph.node)


# ------------------------------------------------------------------------------------------- runtime
def test_runtime_runs_without_jax(exported, tiny_policy, tmp_path):
    obs = _observations(tiny_policy.spec, 7)
    np.save(tmp_path / "obs.npy", obs)
    script = f"""
import sys
import numpy as np
try:
    import jax
except ImportError:
    pass
else:
    sys.exit("the import blocker is not active")
from export.runtime import OnnxPolicy
policy = OnnxPolicy({str(exported["ode"][0])!r})
np.save({str(tmp_path / "actions.npy")!r}, policy.predict(np.load({str(tmp_path / "obs.npy")!r}))[0])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "equinox", "gsbpolicy", "onnx"))
assert not loaded, loaded
"""
    subprocess.run(
        [sys.executable, "-c", script], env=_jax_free_env(tmp_path), cwd=tmp_path, check=True, timeout=120
    )
    expected = np.asarray(jax.vmap(tiny_policy.act)(obs))
    np.testing.assert_allclose(np.load(tmp_path / "actions.npy"), expected, rtol=0, atol=TOLERANCE)


def test_runtime_mode_errors(exported, tiny_policy):
    """Mode mismatches (the other bad inputs are in tests/test_bad_inputs_publish.py)."""
    ode = OnnxPolicy(exported["ode"][0])
    obs = _observations(tiny_policy.spec, 3)
    with pytest.raises(ValueError, match="deterministic=False needs an 'sde' export"):
        ode.predict(obs, deterministic=False)
    with pytest.raises(ValueError, match="was exported in 'ode' mode"):
        ode.act(obs, _noise(tiny_policy.spec, 3))
    assert ode.predict(obs.astype(np.float64))[0].dtype == np.float32  # other real dtypes are converted


# -------------------------------------------------------------------------------- folders and CLIs
def test_export_policy_folder_and_cli(tiny_policy, tmp_path, capsys):
    folder = save_policy(tiny_policy, tmp_path / "policy")
    path = onnx_export.export_policy_folder(folder)
    assert path == folder / "policy.onnx" and OnnxPolicy(path).mode == "ode"
    out = tmp_path / "cli" / "scan_sde.onnx"
    onnx_export.main([str(folder), "--out", str(out), "--mode", "sde", "--loop", "scan", "--opset", "21"])
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "max |onnx - jax|" in printed and "mode sde" in printed
    assert any(n.op_type == "Loop" for n in onnx.load(out).graph.node)


def test_latency_cli_prints_the_table(tiny_policy, tmp_path, capsys):
    folder = save_policy(tiny_policy, tmp_path / "policy")
    latency.main([str(folder), "--repeats", "5", "--no-pin"])
    printed = capsys.readouterr().out
    for row in (
        "export: unrolled + clean-ups",
        "OnnxPolicy.predict",
        "lax.scan -> Loop",
        "jax GSBPolicy.act",
        "floor:",
    ):
        assert row in printed
    assert latency.network_flops(latency.GYM_PRESET) == 2 * 16 * (39 * 256 + 2 * 256 * 256 + 256 * 6)


def test_gym_rollout_observations_and_control_loop_example(tmp_path):
    """A Pendulum-v1 policy is verified on observations of its own rollout; the example runs without JAX."""
    spec = PolicySpec(
        obs_dim=3,
        act_dim=1,
        num_steps=4,
        width=16,
        depth=1,
        action_low=(-2.0,),
        action_high=(2.0,),
        env_id="Pendulum-v1",
    )
    path = tmp_path / "pendulum.onnx"
    report = onnx_export.export(make_policy(spec, key=jax.random.key(0)), path)
    assert report.real_source == "gymnasium Pendulum-v1 rollout"
    command = [
        sys.executable,
        "-m",
        "export.examples.onnx_control_loop",
        "--onnx",
        str(path),
        "--env",
        "Pendulum-v1",
        "--episodes",
        "1",
    ]
    result = subprocess.run(
        command, env=_jax_free_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert (
        "episode 0: return" in result.stdout
        and "200 steps" in result.stdout
        and "predict latency: median" in result.stdout
    )
