"""Several seeds in one process (`--seeds`, trainers/_core/seed_group.py) and the compilation cache.

A grouped seed must be the run that seed gives alone. With `--seed-batching map` (the CPU default) it is,
bit for bit: metrics.jsonl, checkpoints and weights. With `vmap` (the GPU default) XLA batches the reductions
(the normaliser's variance, the gradient sums) and may add in another order, so what the test shows after 4
iterations is agreement to float32 rounding: the same episodes end at the same steps, their running returns,
the weights and the env states (fed actions that differ in the last bit) agree to about 1e-5, evaluation
returns to ~1e-7 relative and losses that are sums of terms near 0 (the mean advantage) to ~1e-7 absolute:
the same experiment, not the same bits. How close depends on the CPU's instruction set: on one 2-core AMD
EPYC machine the running returns were bit-identical, on another they were not. A grouped run resumed after an interruption is bit-identical to the
uninterrupted group (one program).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

from trainers._core import compile_cache
from trainers._core.checkpoint import CheckpointError, save_checkpoint, write_checkpoint
from trainers._core.cli import loop_trainer
from trainers._core.seed_group import SeedGroup, align_checkpoints
from trainers.gsb_mdpo import GsbMdpo, playground_preset
from trainers.presets import with_fields

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(
    total_steps=4 * 8 * 10,
    rollout={
        "num_envs": 8,
        "unroll_length": 10,
        "unrolls_per_iteration": 1,
        "num_minibatches": 2,
        "epochs": 2,
        "episode_length": 30,
    },
    policy={"num_steps": 2, "width": 8, "depth": 1},
    critic={"width": 8, "depth": 1},
    eval={"num_envs": 2, "num_evals": 2},
    log={"progress": False, "checkpoint_every": 2},
)


POINT_MASS = "tests.jax_point_mass:PointMass"
"""A pure-JAX Playground env: grouping is the same code for every Playground env, and its step compiles in
a fraction of a second where an MJX task's takes 10-40 s (three runs of CartpoleBalance took ~5 minutes)."""


def tiny(**changes):
    return with_fields(playground_preset(POINT_MASS), **TINY, **changes)


def records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/")} for line in lines]


def tensors(path: Path) -> dict:
    return safetensors.numpy.load_file(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Seeds 0 and 1 grouped (map, the CPU default), grouped with vmap, and seed 1 alone."""
    root = tmp_path_factory.mktemp("seed_group")
    args = tiny(seeds=(0, 1), output_dir=root / "group")
    folders = loop_trainer(GsbMdpo(args.algo), args).run()
    vmapped = tiny(seeds=(0, 1), seed_batching="vmap", output_dir=root / "vmap")
    loop_trainer(GsbMdpo(vmapped.algo), vmapped).run()
    alone = tiny(seed=1, output_dir=root / "alone")
    loop_trainer(GsbMdpo(alone.algo), alone).run()
    return root, folders


def test_group_writes_an_ordinary_run_folder_per_seed(runs):
    root, folders = runs
    assert folders == [root / "group" / "seed_0" / "policy", root / "group" / "seed_1" / "policy"]
    for seed, folder in enumerate(folders):
        run = json.loads((folder.parent / "run.json").read_text())
        assert run["args"]["seed"] == seed and run["args"]["seeds"] == [] and run["seed_group"] == [0, 1]
        assert json.loads((folder / "results.json").read_text())["seeds"] == [seed]
        assert [r["iteration"] for r in records(folder.parent) if r["type"] == "train"] == [1, 2, 3, 4]
    assert records(root / "group" / "seed_0") != records(root / "group" / "seed_1")  # the seeds differ


def assert_same_records(grouped: list[dict], alone: list[dict]) -> None:
    """Same records, same fields, same counts; float values equal up to summation order (see the module)."""
    assert len(grouped) == len(alone)
    for a, b in zip(grouped, alone, strict=True):
        assert a.keys() == b.keys()
        for key, value in a.items():
            if isinstance(value, float):
                assert np.isclose(value, b[key], rtol=1e-3, atol=1e-6), (a["iteration"], key, value, b[key])
            else:
                assert value == b[key], (a["iteration"], key)


def test_a_grouped_seed_is_that_seed_run_alone_bit_for_bit(runs):
    root, _ = runs
    grouped, alone = root / "group" / "seed_1", root / "alone"
    assert records(grouped) == records(alone)
    for name in ("checkpoint/state", "checkpoint/env", "checkpoint/stats", "policy/model"):
        a, b = tensors(grouped / f"{name}.safetensors"), tensors(alone / f"{name}.safetensors")
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a), name


def test_a_vmapped_seed_is_that_seed_run_alone_up_to_float_rounding(runs):
    root, _ = runs
    grouped, alone = root / "vmap" / "seed_1", root / "alone"
    assert_same_records(records(grouped), records(alone))
    a, b = tensors(grouped / "checkpoint/stats.safetensors"), tensors(alone / "checkpoint/stats.safetensors")
    # The same episodes ended at the same steps; their running returns are sums of rounded rewards.
    np.testing.assert_array_equal(a["['lengths']"], b["['lengths']"])
    np.testing.assert_allclose(a["['totals']"], b["['totals']"], rtol=1e-5, atol=1e-6)
    a, b = tensors(grouped / "checkpoint/env.safetensors"), tensors(alone / "checkpoint/env.safetensors")
    assert a.keys() == b.keys()
    for key in a:  # the physics saw actions that differ in the last float32 bit
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-5, err_msg=key)
    a, b = tensors(grouped / "policy/model.safetensors"), tensors(alone / "policy/model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-7, err_msg=key)


def test_an_interrupted_group_resumes_as_if_uninterrupted(runs, tmp_path):
    root, _ = runs
    args = tiny(seeds=(0, 1), output_dir=tmp_path / "group")
    group = SeedGroup(GsbMdpo(args.algo), args)
    iterate, calls = group.backend.iteration, []

    def stop_after_the_first_checkpoint(state):
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process dies here; the checkpoint of iteration 2 is on disk
        calls.append(1)
        return iterate(state)

    group.backend.iteration = stop_after_the_first_checkpoint
    with pytest.raises(KeyboardInterrupt):
        group.run()
    resumed = with_fields(args, resume=True)
    SeedGroup(GsbMdpo(resumed.algo), resumed).run()
    for seed in (0, 1):
        done, whole = tmp_path / "group" / f"seed_{seed}", root / "group" / f"seed_{seed}"
        assert records(done) == records(whole)
        a, b = tensors(done / "policy/model.safetensors"), tensors(whole / "policy/model.safetensors")
        assert all(np.array_equal(a[k], b[k]) for k in a)


def _checkpoint(run_dir: Path, iteration: int, pending: int | None = None) -> None:
    meta = {"iteration": iteration, "env_steps": 0, "num_records": 0, "elapsed": 0.0}
    save_checkpoint(run_dir / "checkpoint", {"state": {"x": np.full(2, iteration)}}, meta)
    if pending is not None:
        write_checkpoint(
            run_dir / "checkpoint", {"state": {"x": np.full(2, pending)}}, {**meta, "iteration": pending}
        )


def _iteration(run_dir: Path) -> int:
    return json.loads((run_dir / "checkpoint" / "meta.json").read_text())["iteration"]


def test_a_kill_between_the_two_checkpoint_phases_is_rolled_forward(tmp_path):
    ahead, behind, moving = tmp_path / "seed_0", tmp_path / "seed_1", tmp_path / "seed_2"
    _checkpoint(ahead, 4)
    _checkpoint(behind, 2, pending=4)
    _checkpoint(moving, 2, pending=4)
    (moving / "checkpoint").rename(moving / "checkpoint.old")  # killed between the commit's two renames
    align_checkpoints([ahead, behind, moving])
    assert [_iteration(d) for d in (ahead, behind, moving)] == [4, 4, 4]
    assert tensors(behind / "checkpoint/state.safetensors")["['x']"].tolist() == [4, 4]


def test_seeds_that_cannot_be_aligned_are_a_clear_error(tmp_path):
    _checkpoint(tmp_path / "seed_0", 4)
    _checkpoint(tmp_path / "seed_1", 2)
    with pytest.raises(
        CheckpointError, match=r"different iterations \(seed_0: 4, seed_1: 2\).*separate runs"
    ):
        align_checkpoints([tmp_path / "seed_0", tmp_path / "seed_1"])


def test_the_benchmark_runner_groups_a_task_and_methods_seeds(tmp_path, capsys):
    from trainers.benchmark import plan, runner
    from trainers.benchmark.arguments import BenchArgs
    from trainers.benchmark.suites import SUITES

    suite = SUITES["cpu-playground"]
    variant = suite.variant("gsb_mdpo")
    base = Path("runs/x")

    def jobs(task, seeds, *flags):
        runs = [plan.Run(task, variant, s, base / f"seed_{s}") for s in seeds]
        return [plan.Job((run,), ("python", "--seed", str(run.seed), *flags)) for run in runs]

    (job,) = plan.group_runs(suite, jobs("CartpoleSwingup", (0, 1, 2)))
    seeds, folders, cmd = job.seeds, job.folders, job.command
    assert seeds == (0, 1, 2) and folders == (base / "seed_0", base / "seed_1", base / "seed_2")
    assert cmd[cmd.index("--seeds") + 1 : cmd.index("--seeds") + 4] == ("0", "1", "2") and "--seed" not in cmd
    assert cmd[cmd.index("--output-dir") + 1] == str(base)
    resumed = jobs("CartpoleSwingup", (0, 1), "--resume") + jobs("CartpoleSwingup", (2,))
    assert sorted(job.seeds for job in plan.group_runs(suite, resumed)) == [
        (0, 1),
        (2,),
    ]  # fresh and resumed apart
    gym = jobs("Hopper-v5", (0, 1))
    assert [job.seeds for job in plan.group_runs(suite, gym)] == [
        (0,),
        (1,),
    ]  # host-side envs: one per process
    dry = BenchArgs(suite="cpu-playground", tasks=("CartpoleSwingup",), methods=("gsb_mdpo",),
                    group_seeds=True, dry_run=True, runs_dir=tmp_path / "runs")  # fmt: skip
    assert runner.run_suite(dry) == 0
    assert (
        "grouped: CartpoleSwingup gsb_mdpo seeds [0, 1, 2]: -m trainers.gsb_mdpo" in capsys.readouterr().out
    )


def _train_cli(cache: Path, run_dir: Path, seed: int, *extra: str) -> subprocess.CompletedProcess:
    argv = ["--env", "InvertedPendulum-v5", "--seed", str(seed), "--total-steps", "256", "--rollout.num-envs", "4", "--rollout.num-minibatches", "2",
            "--policy.width", "8", "--critic.width", "8", "--eval.episodes", "1", "--eval.final-episodes", "1",
            "--eval.num-evals", "1", "--log.no-progress", "--output-dir", str(run_dir), *extra]  # fmt: skip
    # The default threshold (0 s: every compile is stored) is what makes the check exact: with JAX's 1 s,
    # whether a function near it was stored would be timing.
    env = {**os.environ, "GSBPOLICY_COMPILE_CACHE": str(cache)}
    env.pop("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", None)
    proc = subprocess.run([sys.executable, "-m", "trainers.gsb_mdpo", *argv], capture_output=True, text=True,
                          env=env, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_every_compiled_function_of_a_run_is_reused_by_the_next_seed(tmp_path):
    """Nothing a run compiles depends on its seed or on fresh arrays: a second run with another seed finds
    every function in the cache and adds no entry."""
    cache = tmp_path / "cache"
    _train_cli(cache, tmp_path / "a", 0)
    entries = sorted(p.name for p in cache.iterdir())
    assert entries, "the first run stored nothing in the compilation cache"
    _train_cli(cache, tmp_path / "b", 1)
    assert sorted(p.name for p in cache.iterdir()) == entries
    assert json.loads((tmp_path / "b" / "run.json").read_text())["compile_cache"] == str(cache)


def test_where_the_cache_lives(tmp_path, monkeypatch):
    for name in (compile_cache.ENV_VAR, "JAX_COMPILATION_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert compile_cache.resolve("auto") == tmp_path / ".cache" / "gsbpolicy" / "jax"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert compile_cache.resolve("auto") == tmp_path / "jax"
    monkeypatch.setenv(compile_cache.ENV_VAR, "off")
    assert compile_cache.resolve("auto") is None
    assert compile_cache.resolve(str(tmp_path / "mine")) == tmp_path / "mine"
    assert compile_cache.resolve("off") is None


def test_a_config_field_added_after_a_run_started_does_not_block_its_resume(tmp_path):
    from trainers._core import rundir
    from trainers._core.runlog import write_run_json

    args = tiny(output_dir=tmp_path)
    write_run_json(tmp_path, "gsb_mdpo", args)
    run = json.loads((tmp_path / "run.json").read_text())
    del run["args"]["seed_batching"]  # a run.json written before the field existed
    (tmp_path / "run.json").write_text(json.dumps(run))
    rundir._check_resumable(tmp_path, "gsb_mdpo", args)  # at its default: the run as it was
    with pytest.raises(rundir.RunFolderError, match=r"--seed-batching None -> 'vmap'"):
        rundir._check_resumable(tmp_path, "gsb_mdpo", with_fields(args, seed_batching="vmap"))


def test_a_retired_config_field_blocks_a_resume_only_where_it_changed_what_the_run_did(tmp_path):
    from trainers._core import rundir
    from trainers._core.runlog import write_run_json

    args = tiny(output_dir=tmp_path)
    write_run_json(tmp_path, "gsb_mdpo", args)
    run = json.loads((tmp_path / "run.json").read_text())
    for fraction, resumes in ((1.0, True), (0.5, False)):  # a run.json written while the field existed
        run["args"]["rollout"]["noise_hold_fraction"] = fraction
        (tmp_path / "run.json").write_text(json.dumps(run))
        if resumes:
            rundir._check_resumable(tmp_path, "gsb_mdpo", args)
        else:
            with pytest.raises(rundir.RunFolderError, match=r"noise-hold-fraction 0.5 -> None"):
                rundir._check_resumable(tmp_path, "gsb_mdpo", args)
