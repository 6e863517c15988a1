"""The robot contract in an exported policy's metadata (export.contract), read back by `OnnxPolicy` and
`export.inspect`, `export.onnx --steps K`, and the robot page's control loop, run with nothing but onnxruntime,
numpy, gymnasium and the file.
"""

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import onnx
import pytest
from import_blocker import env_without
from test_bad_inputs_publish import make_run_folder

from export import inspect as export_inspect
from export import onnx as onnx_export
from export.runtime import OnnxPolicy
from gsbpolicy import GSBPolicy, PolicySpec, make_policy
from gsbpolicy._files import read_json

REPO = Path(__file__).resolve().parents[1]
ROBOT_PAGE = REPO / "docs" / "robot.md"

# Installed as sitecustomize.py in the control loop's process: importing the project or JAX there fails.


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_spec) -> Path:
    """A finished InvertedPendulum-v5 run folder (tiny untrained policy) exported with the defaults."""
    run = make_run_folder(tmp_path_factory.mktemp("contract") / "run", tiny_spec)
    onnx_export.export_policy_folder(run / "policy")
    return run


def _props(path: Path) -> dict[str, str]:
    return {p.key: p.value for p in onnx.load(path).metadata_props}


def test_a_default_export_carries_every_contract_field(run):
    props = _props(run / "policy" / "policy.onnx")
    results, run_json = read_json(run / "policy" / "results.json"), read_json(run / "run.json")
    config = read_json(run / "policy" / "config.json")
    assert props["contract_version"] == "1" and props["obs_input"] == "raw"
    assert json.loads(props["obs_names"]) == ["qpos:slider", "qpos:hinge", "qvel:slider", "qvel:hinge"]
    assert json.loads(props["obs_units"]) == ["m", "rad", "m/s", "rad/s"]
    assert (props["obs_names_source"], props["act_names_source"]) == ("env", "env")
    assert json.loads(props["obs_low"]) == [None] * 4 and json.loads(props["obs_high"]) == [None] * 4
    assert json.loads(props["act_names"]) == ["slide"] and json.loads(props["act_units"]) == ["x100 N"]
    repeat = run_json["args"]["rollout"]["action_repeat"]
    assert json.loads(props["control_dt"]) == pytest.approx(0.04 * repeat)
    assert json.loads(props["sampler"]) == {
        "mode": "ode",
        "steps": 6,
        "trained_steps": 6,
        "squash": "tanh",
        "exact": True,
    }
    provenance = json.loads(props["provenance"])
    assert provenance == {
        "env_id": "InvertedPendulum-v5",
        "env_version": 5,
        "gymnasium_version": run_json["packages"]["gymnasium"],
        "mujoco_version": run_json["packages"]["mujoco"],
        "tensors_sha256": config["tensors_sha256"],
        "algo": results["algo"],
        "training_commit": results["git_commit"],
        "seed": results["seeds"][0],
        "env_steps": results["env_steps"],
        "final_return": results["mean"],
        "final_return_std": results["std"],
        "final_return_episodes": results["n_episodes"],
    }
    assert None not in provenance.values()


def test_runtime_exposes_and_enforces_the_contract(run):
    policy = OnnxPolicy(run / "policy" / "policy.onnx")
    assert policy.obs_names[1] == "qpos:hinge" and policy.act_units == ["x100 N"]
    assert policy.sampler["steps"] == 6 and policy.provenance["env_id"] == "InvertedPendulum-v5"
    obs = np.array([0.1, -0.2, 0.3, 0.4], np.float32)
    by_name = dict(zip(policy.obs_names, obs.tolist(), strict=True))
    np.testing.assert_array_equal(policy.predict(by_name)[0], policy.predict(obs)[0])
    batch = {name: np.array([value, value]) for name, value in by_name.items()}
    assert policy.predict(batch)[0].shape == (2, 1)
    del by_name["qvel:hinge"]
    with pytest.raises(
        ValueError, match=r"^observation dict does not match obs_names: missing \['qvel:hinge'\]"
    ):
        policy.predict(by_name | {"hinge": 0.0})


def test_observations_outside_the_env_bounds_are_refused(tmp_path):
    """Pendulum-v1 bounds its observation ([cos, sin, angular velocity <= 8]): a value outside is a sign of a
    wrong order or unit, refused in one line naming the entry."""
    spec = PolicySpec(obs_dim=3, act_dim=1, num_steps=2, width=8, depth=1, action_low=(-2.0,),
                      action_high=(2.0,), env_id="Pendulum-v1")  # fmt: skip
    path = tmp_path / "pendulum.onnx"
    onnx_export.export(make_policy(spec, key=jax.random.key(0)), path)
    policy = OnnxPolicy(path)
    assert policy.obs_high.tolist() == [1.0, 1.0, 8.0] and policy.obs_names == ["obs[0]", "obs[1]", "obs[2]"]
    assert policy.control_dt == pytest.approx(0.05)
    policy.predict(np.array([1.0, 0.0, 8.0]))
    with pytest.raises(
        ValueError, match=r"^observation obs\[2\] = \[9\.0\] is outside the env's bounds \[-8, 8\]"
    ):
        policy.predict(np.array([1.0, 0.0, 9.0]))


def test_user_names_and_units_at_export_and_wrong_counts(run, tmp_path, capsys):
    out = tmp_path / "named.onnx"
    onnx_export.main([str(run / "policy"), "--out", str(out), "--obs-names", "cart", "pole", "cart_v", "pole_v",
                      "--obs-units", "m", "rad", "m/s", "rad/s", "--act-names", "cart_force"])  # fmt: skip
    policy = OnnxPolicy(out)
    assert policy.obs_names == ["cart", "pole", "cart_v", "pole_v"] and policy.act_names == ["cart_force"]
    assert policy.contract["obs_names_source"] == "user" and policy.act_units == [""]
    capsys.readouterr()
    code = onnx_export.main([str(run / "policy"), "--out", str(tmp_path / "x.onnx"), "--act-names", "a", "b"])
    err = capsys.readouterr().err
    assert code == 2 and err == "error: 2 action names given; the policy has 1\n"
    assert not (tmp_path / "x.onnx").exists()


def test_old_files_without_the_contract_load_with_a_one_line_notice(run, tmp_path, caplog):
    model = onnx.load(run / "policy" / "policy.onnx")
    keep = [p for p in model.metadata_props if p.key not in {"contract_version", "obs_names", "provenance"}]
    del model.metadata_props[:]
    model.metadata_props.extend(keep)
    old = tmp_path / "old.onnx"
    onnx.save(model, old)
    with caplog.at_level(logging.WARNING, logger="onnx_policy"):
        policy = OnnxPolicy(old)
    assert len(caplog.records) == 1 and "\n" not in caplog.records[0].getMessage()
    assert "has no robot contract" in caplog.records[0].getMessage()
    assert policy.contract is None and policy.obs_names is None
    assert policy.predict(np.zeros(4, np.float32))[0].shape == (1,)
    assert "no robot contract" in export_inspect.contract_table(policy)


def test_inspect_prints_the_contract_as_a_table_and_as_json(run, capsys):
    path = run / "policy" / "policy.onnx"
    assert export_inspect.main([str(path)]) == 0
    table = capsys.readouterr().out
    assert re.search(r"1\s+qpos:hinge\s+rad\s+-\s+-", table) and re.search(
        r"0\s+slide\s+x100 N\s+-3\s+3", table
    )
    assert "control period: 0.04 s (25 Hz)" in table and "tensors_sha256" in table
    shown = re.search(r"prints the contract as tables.*?```text\n(.*?)```", ROBOT_PAGE.read_text(), re.S)[1]
    assert shown in table  # the robot page's example is this output
    assert export_inspect.main([str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["obs_dim"] == 4 and data["action_high"] == [3.0]
    assert data["contract"] == OnnxPolicy(path).contract
    assert export_inspect.main([str(path.parent / "config.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_steps_export_is_the_same_drift_with_fewer_euler_steps(run, tmp_path, capsys):
    folder = run / "policy"
    out = tmp_path / "k2.onnx"
    assert onnx_export.main([str(folder), "--out", str(out), "--steps", "2"]) == 0
    policy = OnnxPolicy(out)
    assert policy.num_steps == 2 and policy.sampler["exact"] is False and policy.sampler["trained_steps"] == 6
    assert "approximation" in policy.sampler["note"]
    trained = GSBPolicy.from_pretrained(folder).policy
    obs = np.random.default_rng(0).normal(0.0, 0.3, (16, 4)).astype(np.float32)
    two_steps = np.asarray(jax.vmap(onnx_export.with_steps(trained, 2).act)(obs))
    np.testing.assert_allclose(policy.predict(obs)[0], two_steps, rtol=0, atol=onnx_export.TOLERANCE)
    assert np.abs(two_steps - np.asarray(jax.vmap(trained.act)(obs))).max() > 1e-4  # a different policy
    capsys.readouterr()
    assert onnx_export.main([str(folder), "--out", str(out), "--steps", "2", "--mode", "sde"]) == 2
    assert (
        capsys.readouterr().err == "error: --steps exports the deterministic policy: use it with --mode ode\n"
    )
    assert onnx_export.main([str(folder), "--out", str(out), "--steps", "0"]) == 2
    assert capsys.readouterr().err == "error: --steps must be >= 1, got 0\n"


def _robot_loop() -> str:
    """The control loop of docs/robot.md: the first Python block after the heading "A control loop"."""
    page = ROBOT_PAGE.read_text()
    return re.search(r"## A control loop.*?```python\n(.*?)```", page, re.S)[1]


def test_the_robot_pages_control_loop_runs_with_only_onnxruntime_numpy_and_the_file(run, tmp_path):
    (tmp_path / "policy.onnx").write_bytes((run / "policy" / "policy.onnx").read_bytes())
    blocked = ("jax", "jaxlib", "equinox", "gsbpolicy", "export", "trainers", "hub_cards", "jax2onnx", "onnx")
    env = env_without(tmp_path, blocked, "the control loop must need only onnxruntime and numpy", path="")
    script = (
        _robot_loop()
        + "\nassert not [m for m in sys.modules if m.split('.')[0] in ('gsbpolicy', 'export', 'jax')]\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", "import sys\n" + script],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"return \d+\.\d in \d+ steps of 0\.04 s \(trained: -?\d+\.\d+\)\n", result.stdout)
    assert len(_robot_loop().strip().splitlines()) <= 30


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("obs_names", '["a", "b"]', "obs_names is not a list of 4 strings"),
        ("obs_names", '["a", "a", "b", "c"]', "obs_names are not unique"),
        ("obs_high", "[1, 2]", "observation bound [1, 2] is not a list of 4"),
        ("control_dt", "-0.1", "control_dt -0.1 is not a positive number of seconds"),
        ("contract_version", "2", "contract version 2 is newer than this runtime's 1"),
        ("provenance", "{not json", "Expecting property name"),
        ("sampler", "[8]", "sampler is not a JSON object"),
    ],
)
def test_an_inconsistent_contract_is_refused_in_one_line(run, tmp_path, key, value, match):
    model = onnx.load(run / "policy" / "policy.onnx")
    onnx.helper.set_model_props(model, _props(run / "policy" / "policy.onnx") | {key: value})
    onnx.save(model, tmp_path / "bad.onnx")
    with pytest.raises(ValueError, match=re.escape(match)) as raised:
        OnnxPolicy(tmp_path / "bad.onnx")
    assert "unreadable metadata" in str(raised.value) and "\n" not in str(raised.value)


def test_the_model_card_shows_the_contract(run, tmp_path):
    from hub_cards.render import README, render_folder

    folder = tmp_path / "hub"
    folder.mkdir()
    for path in [*(run / "policy").iterdir(), run / "run.json", run / "metrics.jsonl"]:
        (folder / path.name).write_bytes(path.read_bytes())
    card = render_folder(folder, "org/pendulum")[README].decode()
    provenance = OnnxPolicy(folder / "policy.onnx").provenance
    assert (
        "| actions | `slide` (x100 N) in [-3, 3] |" in card
        and "| inputs | `obs` [B, obs_dim] |" in card
        and "| control period | 0.04 s |" in card
    )
    assert "`qpos:slider` (m), `qpos:hinge` (rad), `qvel:slider` (m/s), `qvel:hinge` (rad/s)" in card
    assert f"| weights sha256 | `{provenance['tensors_sha256']}` |" in card
    assert f"commit `{provenance['training_commit']}`, seed {provenance['seed']}" in card
    (folder / "policy.onnx").unlink()
    assert "| control period |" not in render_folder(folder, "org/pendulum")[README].decode()


def test_the_steps_table_and_the_robot_page_are_the_committed_measurements():
    from export import steps_table

    assert steps_table.main(["--check"]) == 0
    data = json.loads(steps_table.RESULTS.read_text())
    for policy in data["policies"].values():
        ks = [row["steps"] for row in policy["rows"]]
        assert ks == sorted({1, 2, 4, 8, policy["trained_steps"]})
        exact = policy["rows"][-1]
        assert (
            exact["exact"] and exact["steps"] == policy["trained_steps"] and exact["max_abs_action_diff"] == 0
        )


def test_fewer_steps_are_called_safe_only_when_return_and_actions_both_stay_close():
    from export.steps_table import safe_steps

    def policy(*rows):
        return {
            "action_span": 2.0,
            "rows": [
                {"steps": k, "exact": k == 8, "return_mean": r, "max_abs_action_diff": d} for k, r, d in rows
            ],
        }

    assert (
        safe_steps(policy((1, 1000.0, 1.5), (4, 990.0, 0.1), (8, 1000.0, 0.0))) == 4
    )  # K=1 acts differently
    assert safe_steps(policy((1, 900.0, 0.01), (4, 960.0, 0.1), (8, 1000.0, 0.0))) == 4  # K=1 loses return
    assert safe_steps(policy((1, 900.0, 0.5), (4, 900.0, 0.5), (8, 1000.0, 0.0))) == 8


def test_a_contract_missing_a_field_is_refused_naming_it(run, tmp_path):
    model = onnx.load(run / "policy" / "policy.onnx")
    keep = [p for p in model.metadata_props if p.key != "control_dt"]
    del model.metadata_props[:]
    model.metadata_props.extend(keep)
    onnx.save(model, tmp_path / "bad.onnx")
    with pytest.raises(ValueError, match=re.escape("contract version 1 lacks the fields ['control_dt']")):
        OnnxPolicy(tmp_path / "bad.onnx")
