"""Data-parallel training on a device mesh (trainers/_core/distributed.py).

The device count is fixed when JAX starts, so the multi-device checks run in a subprocess with two forced
host devices: a run split over both and a run on one of them see the same global batch and must give the
same metrics up to float summation order, and a checkpoint written with two devices must resume on one
and continue as the uninterrupted one-device run does. The runs train on a pure-JAX Playground env
(tests/jax_point_mass.py): the mesh code is the same for every Playground env.
"""

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import jax
import numpy as np
import pytest

from trainers._core import distributed
from trainers._core.loop import Trainer
from trainers._core.runlog import write_run_json
from trainers.gsb_mdpo import GsbMdpo, playground_preset
from trainers.presets import with_fields

ROOT = Path(__file__).resolve().parents[1]
POINT_MASS = "tests.jax_point_mass:PointMass"
"""A pure-JAX Playground env: what is under test is the mesh, not the physics, and its step compiles in a
fraction of a second where an MJX task's takes 10-40 s."""

# Two iterations on two devices, checkpoint; four on one device; resume the two-device checkpoint on one
# device for iterations 3-4. Driven through the Trainer's own iteration, checkpoint and restore methods
# (not `run`) to skip the evaluation compiles, which add nothing here and cost ~10 s each on 2 cores.
SCRIPT = r"""
import json, shutil, sys
from pathlib import Path
import jax
from trainers._core.loop import Trainer
from trainers.gsb_mdpo import GsbMdpo, playground_preset
from trainers.presets import with_fields

root = Path(sys.argv[1])
base = with_fields(
    playground_preset("tests.jax_point_mass:PointMass"), total_steps=4 * 8 * 10,
    rollout={"num_envs": 8, "unroll_length": 10, "unrolls_per_iteration": 1, "num_minibatches": 2, "epochs": 2,
             "episode_length": 30},
    policy={"num_steps": 2, "width": 8, "depth": 1}, critic={"width": 8, "depth": 1},
    eval={"num_envs": 2}, log={"progress": False},
)

def trainer(name, num_devices, **changes):
    args = with_fields(base, output_dir=root / name, **changes)
    return Trainer(GsbMdpo(args.algo), args, devices=jax.devices()[:num_devices])

def arrays(t):
    return [x for x in jax.tree.leaves((t.state, t.backend.checkpoint_tree())) if isinstance(x, jax.Array)]

def iterate(t, n):
    before = [x.sharding for x in arrays(t)]
    records = [{**metrics, **episodes} for metrics, episodes in (t.collect_and_update()[0] for _ in range(n))]
    # Equivalent, not equal: on one device P("data") and P() are the same layout (and executables read back
    # from the persistent compilation cache report the latter).
    assert all(x.sharding.is_equivalent_to(s, x.ndim) for x, s in zip(arrays(t), before)), \
        "an iteration changed the layout: the next call would compile again"
    return records

def layout(t):
    return {"obs_devices": len(t.backend.obs.sharding.device_set),
            "params_replicated": all(x.sharding.is_fully_replicated
                                     for x in jax.tree.leaves(t.state.model) if isinstance(x, jax.Array))}

out = {}
two = trainer("two", 2)
two.folder.start()  # run.json and the metrics log, which the checkpoint vouches for
out["two"], out["two_layout"] = iterate(two, 2), layout(two)
two.folder.checkpoints.write(two.state_trees(), two.folder.checkpoint_record(two.iteration, two.env_steps, {}))
two.folder.checkpoints.commit()
one = trainer("one", 1)
out["one"] = iterate(one, 4)
shutil.copytree(root / "two", root / "resumed", ignore=shutil.ignore_patterns("run.lock"))
resumed = trainer("resumed", 1, resume=True)
restored = resumed.folder.restore(resumed.state_trees())
assert restored is not None
resumed.load_state(*restored)
out["resumed_iteration"], out["resumed_layout"] = int(resumed.state.iteration), layout(resumed)
out["resumed"] = iterate(resumed, 2)
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def two_device_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root / "runs")],
        capture_output=True, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def assert_same_metrics(got: list[dict], expected: list[dict]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a.keys() == b.keys()
        for name in a:
            # Only the order of float sums differs (per-device partial sums + all-reduce).
            np.testing.assert_allclose(a[name], b[name], rtol=1e-3, atol=1e-5, err_msg=name)


def test_two_devices_split_the_batch_and_match_one_device(two_device_runs):
    assert two_device_runs["two_layout"] == {"obs_devices": 2, "params_replicated": True}
    assert_same_metrics(two_device_runs["two"], two_device_runs["one"][:2])


def test_two_device_checkpoint_resumes_on_one_device(two_device_runs):
    assert two_device_runs["resumed_iteration"] == 2
    assert two_device_runs["resumed_layout"] == {"obs_devices": 1, "params_replicated": True}
    assert_same_metrics(two_device_runs["resumed"], two_device_runs["one"][2:])


def small_playground(tmp_path, **changes):
    return with_fields(playground_preset(POINT_MASS), output_dir=tmp_path / "run", **changes)


def test_sizes_not_divisible_by_the_device_count_are_rejected(tmp_path, monkeypatch):
    mesh = types.SimpleNamespace(devices=np.empty(2, object))  # as if two devices (this process has one)
    with pytest.raises(ValueError, match="rollout.num_envs = 3 is not divisible by the 2 devices"):
        distributed.check_divisible("rollout.num_envs", 3, mesh)
    args = small_playground(
        tmp_path, rollout={"num_envs": 4, "num_minibatches": 4, "unrolls_per_iteration": 1}
    )
    monkeypatch.setattr(distributed, "make_mesh", lambda devices=None: mesh)
    with pytest.raises(ValueError, match="sequences per minibatch .* = 1 is not divisible"):
        Trainer(GsbMdpo(args.algo), args)


def test_run_json_records_devices_processes_and_precision(tmp_path):
    args = small_playground(tmp_path, matmul_precision="highest")
    run = write_run_json(tmp_path, "gsb_mdpo", args, distributed.make_mesh())
    device = run["device"]
    assert (
        device["process_count"] == 1
        and device["mesh_devices"] == jax.device_count() == device["device_count"]
    )
    assert device["device_kind"] and run["args"]["matmul_precision"] == "highest"
    assert json.loads((tmp_path / "run.json").read_text())["args"]["distributed"] is False


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, False),
        ({"SLURM_STEP_NUM_TASKS": "1", "SLURM_JOB_ID": "7"}, False),  # plain python inside sbatch
        ({"SLURM_STEP_NUM_TASKS": "4"}, True),  # srun with 4 tasks
        ({"OMPI_COMM_WORLD_SIZE": "2"}, True),
        ({"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"}, True),
    ],
)
def test_cluster_launch_detection(monkeypatch, variables, expected):
    for name in ("JAX_COORDINATOR_ADDRESS", "SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert distributed.cluster_detected() is expected


def test_distributed_after_a_computation_is_refused():
    """Joining a multi-process run needs a fresh process; JAX itself says so (no private check needed)."""
    jax.numpy.zeros(1).block_until_ready()  # the backend has started
    with pytest.raises(RuntimeError, match="must be called before any JAX calls"):
        distributed.initialize(requested=True)


def test_put_lays_out_host_values_and_to_host_gathers_them():
    mesh = distributed.make_mesh()
    tree = {"x": np.arange(4.0 * jax.device_count()).reshape(-1, 1), "key": jax.random.key(3), "f": len}
    placed = distributed.put(tree, distributed.batch_sharding(mesh))
    assert placed["f"] is len and placed["x"].sharding == distributed.batch_sharding(mesh)
    np.testing.assert_array_equal(distributed.to_host(placed["x"]), tree["x"])
    assert jax.random.key_data(placed["key"]).tolist() == jax.random.key_data(tree["key"]).tolist()
