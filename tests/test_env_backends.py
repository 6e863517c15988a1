"""The env backend seam and the one run lifecycle: the env kind is chosen once (by `gsbpolicy._envid.env_kind`), the
training loop never branches on it, and both trainers (the JAX loop and SB3) leave the run folder, its
cadence and its end to the one loop (`lifecycle.run_training`) and its `RunFolder`."""

import ast
import inspect
from pathlib import Path

import jax
import pytest

from trainers._core import envs, lifecycle, loop, runfolder
from trainers._core.envs.gym_backend import GymnasiumBackend
from trainers._core.envs.playground_backend import PlaygroundBackend
from trainers._core.lifecycle import eval_iterations
from trainers._core.runfolder import RunFolder
from trainers.gsb_mdpo import GsbMdpo, cpu_preset
from trainers.presets import with_fields

ROOT = Path(__file__).resolve().parents[1]
ENV_KIND_NAMES = ("isinstance", "env_kind", "PlaygroundEnv", "GymnasiumEnv", "PlaygroundBackend",
                  "GymnasiumBackend", "mujoco_playground", "gymnasium")  # fmt: skip


def _names(module) -> set[str]:
    """Every identifier and attribute name in a module's source (comments and docstrings excluded)."""
    tree = ast.parse(inspect.getsource(module))
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    return names | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}


def _strings(module) -> list[str]:
    tree = ast.parse(inspect.getsource(module))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


@pytest.mark.parametrize("module", [loop, lifecycle, runfolder], ids=lambda m: m.__name__)
def test_training_loop_and_lifecycle_have_no_env_kind_branches(module):
    assert not set(ENV_KIND_NAMES) & _names(module)
    assert "-v" not in _strings(module)


def test_no_trainer_tells_env_kinds_apart_by_hand():
    """`gsbpolicy._envid.env_kind` is the one rule: no `"-v" in env_id` test anywhere in trainers, hub_cards or export."""
    offenders = []
    for path in [*ROOT.glob("trainers/**/*.py"), *ROOT.glob("hub_cards/*.py"), *ROOT.glob("export/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
                if isinstance(node.left, ast.Constant) and node.left.value == "-v":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders


def test_the_backend_is_chosen_by_the_env_kind(tmp_path):
    gym_args = with_fields(cpu_preset("InvertedPendulum-v5"), output_dir=tmp_path, rollout={"num_envs": 2})
    backend = envs.make_backend(GsbMdpo(gym_args.algo), gym_args)
    try:
        assert isinstance(backend, GymnasiumBackend) and backend.mesh is None
        assert (backend.env.obs_dim, backend.env.act_dim) == (4, 1)
    finally:
        backend.close()
    playground_args = with_fields(cpu_preset("CartpoleBalance"), output_dir=tmp_path, rollout={"num_envs": 2})
    backend = envs.make_backend(GsbMdpo(playground_args.algo), playground_args)
    assert isinstance(backend, PlaygroundBackend) and backend.mesh.devices.size == jax.device_count()
    assert (backend.env.num_envs, backend.env.act_dim) == (2, 1)


def test_sb3_trainer_leaves_the_run_folder_to_the_loop():
    """The run-folder contract has one implementation: SB3's trainer supplies only what differs."""
    from trainers import ppo

    owned = {"open_run_folder", "RunLogger", "write_run_json", "save_checkpoint", "load_checkpoint",
             "find_checkpoint", "write_results", "eval_iterations", "eval_record", "eval_seed"}  # fmt: skip
    assert not owned & _names(ppo)
    assert not owned & _names(loop)


def _folder(tmp_path, **changes) -> RunFolder:
    return RunFolder("gsb_mdpo", with_fields(cpu_preset("InvertedPendulum-v5"), output_dir=tmp_path / "run",
                                                **changes))  # fmt: skip


def test_non_finite_stop_says_what_is_kept(tmp_path):
    run = _folder(tmp_path)
    try:
        assert str(run.diverged("gradient", 1)) == (
            "training stopped: non-finite gradient (NaN or inf) in iteration 1; nothing of it was saved and no "
            "checkpoint had been written"
        )
        run.checkpoints.iteration = 4
        assert str(run.diverged("loss", 5)).endswith(
            f"the last good checkpoint (iteration 4) is kept in {tmp_path / 'run' / 'checkpoint'}"
        )
    finally:
        run.release()


def test_a_failed_setup_gives_the_run_folder_back(tmp_path):
    run = _folder(tmp_path)
    with pytest.raises(ValueError, match="bad setup"), run.released_on_error():
        raise ValueError("bad setup")
    _folder(tmp_path).release()  # the lock is free: a second writer gets the folder


@pytest.mark.parametrize(
    ("total_steps", "evals", "interval", "expected"),
    [(10 * 1024, 2, 0, {5, 10}), (10 * 1024, 3, 0, {3, 7, 10}), (10 * 1024, 2, 3000, {3, 6, 9, 10})],
)
def test_evaluations_are_due_at_the_asked_points_and_at_the_end(total_steps, evals, interval, expected):
    args = with_fields(cpu_preset("InvertedPendulum-v5"), total_steps=total_steps,
                       eval={"num_evals": evals, "interval_steps": interval})  # fmt: skip
    assert args.num_iterations == 10
    assert eval_iterations(args) == expected
