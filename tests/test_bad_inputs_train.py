"""Bad input to the trainer commands, one table row each: the exit status (2 usage, 1 failure), one line on
stderr naming the problem, no traceback, and nothing written or lost. Rows call a trainer's `main(argv)`
in-process (all but the last rows fail before any JAX compile); two subprocess rows show the same end to
end, and one tiny real run goes non-finite on purpose.

Snapshots compare a folder's files byte for byte before and after; `run.lock` is left out of them: taking
the lock is the first thing a trainer does, so a refused command may leave that (empty of data) file behind.
"""

import dataclasses
import fcntl
import hashlib
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.numpy

import gsbpolicy._cli
from trainers._core.checkpoint import save_checkpoint
from trainers._core.cli import parse
from trainers._core.loop import Trainer
from trainers._core.rundir import LOCK_NAME
from trainers._core.runfolder import DIVERGED_FILE
from trainers._core.runlog import experiment_sha256, write_run_json

ROOT = Path(__file__).resolve().parents[1]

TINY = [
    "--total-steps", "256", "--rollout.num-envs", "4", "--rollout.unroll-length", "16",
    "--rollout.num-minibatches", "2", "--rollout.epochs", "2", "--policy.num-steps", "4", "--policy.width", "16",
    "--policy.depth", "1", "--critic.width", "16", "--critic.depth", "1", "--eval.num-evals", "1",
    "--eval.episodes", "2", "--eval.final-episodes", "2", "--log.checkpoint-every", "2", "--log.no-progress",
]  # fmt: skip
"""Four iterations of 64 env steps on InvertedPendulum-v5, a checkpoint every two."""


def started_run(run: Path, algo: str = "gsb_mdpo", argv=(), finished: bool = False) -> None:
    """A run folder as the trainer leaves it after its iteration-2 checkpoint (run.json for `argv`, two metrics
    records, a checkpoint whose record vouches for them, for run.json and for its tensor file; the policy folder
    if `finished`), written without training."""
    module = importlib.import_module(f"trainers.{algo}")
    args = parse(module.Args, module.PRESETS, "cpu", "", [*TINY, *argv, "--output-dir", str(run)])
    run.mkdir(parents=True)
    record = write_run_json(run, algo, args)
    lines = "".join(json.dumps({"type": "train", "iteration": i, "env_steps": 64 * i}) + "\n" for i in (1, 2))
    (run / "metrics.jsonl").write_text(lines)
    meta = {"iteration": 2, "env_steps": 128, "num_records": 2, "elapsed": 1.0,
            "metrics_sha256": hashlib.sha256(lines.encode()).hexdigest(), "experiment_sha256": experiment_sha256(record)}  # fmt: skip
    save_checkpoint(run / "checkpoint", {"state": {"x": np.arange(3.0, dtype=np.float32)}}, meta)
    if finished:
        (run / "policy").mkdir()
        (run / "policy" / "results.json").write_text("{}")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME
    }


@dataclasses.dataclass
class Row:
    name: str
    argv: list[str]
    code: int
    message: str
    """A regular expression the one-line message must contain."""
    trainer: str = "gsb_mdpo"
    setup: Callable[[Path], None] | None = None
    """Prepares the run folder `run` (given its path) before the command."""


def corrupt(name: str, text: str | bytes):
    def setup(run: Path) -> None:
        started_run(run)
        (run / name).write_bytes(text if isinstance(text, bytes) else text.encode())

    return setup


def edited(name: str, change: Callable[[bytes], bytes]):
    """A started run whose file `name` was then changed by `change`."""

    def setup(run: Path) -> None:
        started_run(run)
        (run / name).write_bytes(change((run / name).read_bytes()))

    return setup


def edited_meta(**fields):
    """A started run whose checkpoint record was edited (its other fields, checksum included, kept)."""
    return edited("checkpoint/meta.json", lambda data: json.dumps({**json.loads(data), **fields}).encode())


def flip_bit(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0x01])


def link_to_user_file(name: str, resume: bool = False):
    """The run folder's `name` is a link to a user's file outside it (planted where a trainer writes)."""

    def setup(run: Path) -> None:
        if resume:
            started_run(run)
        else:
            run.mkdir()
        user_file = run.parent / "precious.txt"
        user_file.write_text("a user's file\n")
        if (run / name).is_dir():
            shutil.rmtree(run / name)
        (run / name).unlink(missing_ok=True)
        (run / name).symlink_to(user_file)

    return setup


def link_to_user_folder(name: str):
    def setup(run: Path) -> None:
        started_run(run)
        folder = run.parent / "elsewhere"
        shutil.copytree(run / name, folder) if (run / name).is_dir() else folder.mkdir()
        shutil.rmtree(run / name, ignore_errors=True)
        (run / name).symlink_to(folder, target_is_directory=True)

    return setup


ROWS = [
    # Parse-time validation: every value named as its flag, before any work.
    Row("nan learning rate", ["--optim.actor-lr", "nan"], 2, r"--optim\.actor-lr must be finite, got nan"),
    Row("inf coefficient", ["--algo.kl-coef", "inf"], 2, r"--algo\.kl-coef must be finite, got inf"),
    Row("negative learning rate", ["--optim.critic-lr", "-1e-3"], 2, r"--optim\.critic-lr must be > 0"),
    Row("zero gradient clip", ["--optim.max-grad-norm", "0"], 2, r"--optim\.max-grad-norm must be > 0"),
    Row(
        "checkpoint every 0",
        ["--log.checkpoint-every", "0"],
        2,
        r"--log\.checkpoint-every must be >= 1, got 0",
    ),
    Row(
        "negative checkpoint interval", ["--log.checkpoint-every", "-5"], 2, r"--log\.checkpoint-every .* -5"
    ),
    Row("no final episodes", ["--eval.final-episodes", "0"], 2, r"--eval\.final-episodes must be between 1 and"),
    Row("negative seed", ["--seed", "-1"], 2, r"--seed must be in \[0, 2\*\*32\), got -1"),
    Row("zero policy width", ["--policy.width", "0"], 2, r"--policy\.width must be >= 1, got 0"),
    Row("zero critic width", ["--critic.width", "0"], 2, r"--critic\.width must be >= 1, got 0"),
    Row("negative depth", ["--critic.depth", "-1"], 2, r"--critic\.depth must be >= 0"),
    Row("zero Gaussian actor width", ["--algo.width", "0"], 2, r"--algo\.width must be >= 1", "gaussian_ppo"),
    Row("zero envs", ["--rollout.num-envs", "0"], 2, r"--rollout\.num-envs must be >= 1, got 0"),
    Row("zero budget", ["--total-steps", "0"], 2, r"--total-steps must be >= 1, got 0"),
    Row("gamma above 1", ["--rollout.gamma", "1.5"], 2, r"--rollout\.gamma must be in \(0, 1\]"),
    Row(
        "indivisible minibatches", ["--rollout.num-minibatches", "3"], 2, r"not divisible by num_minibatches"
    ),
    Row("unknown Playground task", ["--env", "NoSuchTask"], 2, r"unknown env 'NoSuchTask'"),
    Row(
        "own JAX env whose module is missing",
        ["--env", "no_such_package.envs:Reach"],
        2,
        r"env 'no_such_package\.envs:Reach': cannot import 'no_such_package\.envs'",
    ),
    Row(
        "own JAX env the module does not register",
        ["--env", "tests.jax_point_mass:Reach"],
        2,
        r"'tests\.jax_point_mass' did not register 'Reach' with dm_control_suite\.register_environment",
    ),
    Row(
        "seed group on a Gymnasium env",
        ["--seeds", "0", "1"],
        2,
        r"--seeds must be used with a Playground env",
    ),
    Row(
        "seed group repeats a seed",
        ["--env", "CartpoleBalance", "--seeds", "1", "1"],
        2,
        r"--seeds must be distinct",
    ),
    Row(
        "seed group with a negative seed",
        ["--env", "CartpoleBalance", "--seeds", "0", "-2"],
        2,
        r"--seeds must be in",
    ),
    Row(
        "seed group for SB3 PPO",
        ["--env", "CartpoleBalance", "--seeds", "0", "1"],
        2,
        r"SB3 PPO trains one seed",
        "ppo",
    ),
    Row(
        "compile cache is a file",
        ["--compile-cache", "README.md"],
        2,
        r"--compile-cache .* cannot be used as a folder",
    ),
    Row("unknown Gymnasium id", ["--env", "NoSuch-v9"], 2, r"unknown Gymnasium env id 'NoSuch-v9'"),
    Row("unknown preset", ["--preset", "huge"], 2, r"invalid choice: 'huge'"),
    Row("nan in a DPPO clamp", ["--algo.log-prob-clamp", "-5", "nan"], 2, r"--algo\.log-prob-clamp", "dppo"),
    Row("FPO with no eval episodes", ["--eval.episodes", "0"], 2, r"--eval\.episodes must be between 1 and", "fpo"),
    Row("GenPO zero eval envs", ["--eval.num-envs", "0"], 2, r"--eval\.num-envs must be between 1 and", "genpo"),
    Row("SB3 activations differ", ["--critic.activation", "elu"], 2, r"SB3 uses one activation", "ppo"),
    Row("SB3 nan clip", ["--algo.clip", "nan"], 2, r"--algo\.clip must be finite", "ppo"),
    # The run folder: checked before anything is written.
    Row(
        "output dir is a file",
        [],
        2,
        r"--output-dir .*run is a file, not a folder",
        setup=lambda run: run.write_text("not a folder"),
    ),  # fmt: skip
    Row(
        "output dir inside a file",
        ["--output-dir", "{run}/inner"],
        2,
        r"cannot create the run folder .*inner \(Not a directory\)",
        setup=lambda run: run.write_text("not a folder"),
    ),  # fmt: skip
    Row(
        "resume a missing folder",
        ["--resume"],
        2,
        r"--resume: .*run does not exist; there is nothing to resume",
    ),
    Row(
        "resume an empty folder",
        ["--resume"],
        2,
        r"holds no run.json and no checkpoint; there is nothing",
        setup=lambda run: run.mkdir(),
    ),  # fmt: skip
    Row(
        "finished run without --resume",
        [],
        2,
        r"already holds a finished run; choose another --output-dir",
        setup=lambda run: started_run(run, finished=True),
    ),  # fmt: skip
    Row(
        "interrupted run without --resume",
        [],
        2,
        r"already holds an interrupted run; pass --resume",
        setup=started_run,
    ),  # fmt: skip
    Row(
        "resume with another seed",
        ["--resume", "--seed", "1"],
        2,
        r"--resume cannot change the experiment in .*: --seed 0 -> 1; start a new run",
        setup=started_run,
    ),  # fmt: skip
    Row(
        "resume with another budget and lr",
        ["--resume", "--total-steps", "512", "--optim.actor-lr", "3e-4"],
        2,
        r"--optim\.actor-lr 0\.001 -> 0\.0003, --total-steps 256 -> 512",
        setup=started_run,
    ),  # fmt: skip
    Row(
        "resume with another algorithm",
        ["--resume"],
        2,
        r"--resume: .*run holds a gsb_mdpo run, not fpo; resume it with trainers\.gsb_mdpo",
        "fpo",
        started_run,
    ),
    Row(
        "resume with another network",
        ["--resume", "--policy.depth", "2"],
        2,
        r"--policy\.depth 1 -> 2",
        setup=started_run,
    ),  # fmt: skip
    Row(
        "resume with a corrupt run.json",
        ["--resume"],
        2,
        r"run\.json is not valid JSON .*; the file is corrupted; cannot resume",
        setup=corrupt("run.json", '{"algo": "gsb_mdpo", "args": {'),
    ),  # fmt: skip
    Row(
        "resume with a corrupt meta.json",
        ["--resume"],
        2,
        r"checkpoint record .*checkpoint/meta\.json is corrupted .*cannot resume",
        setup=corrupt("checkpoint/meta.json", '{"iteration": 2, '),
    ),  # fmt: skip
    Row(
        "resume with a meta.json lacking fields",
        ["--resume"],
        2,
        r"meta\.json is corrupted: it lacks",
        setup=corrupt("checkpoint/meta.json", "{}"),
    ),  # fmt: skip
    # Strict resume, whatever is missing or changed: what a resume continues from must be whole and the same.
    Row("resume with run.json deleted", ["--resume", "--seed", "7", "--optim.actor-lr", "0.01"], 2,
        r"run\.json is missing: --resume cannot check that it continues the experiment the checkpoint was "
        r"written by; restore run\.json",
        setup=lambda run: (started_run(run), (run / "run.json").unlink())),
    Row("resume with run.json edited to the new seed", ["--resume", "--seed", "7"], 2,
        r"run\.json does not describe the experiment the checkpoint of iteration 2 in .*checkpoint was written by "
        r"\(it was edited or replaced after the run started\)",
        setup=edited("run.json", lambda data: data.replace(b'"seed": 0', b'"seed": 7'))),
    Row("resume after a metrics record was deleted", ["--resume"], 2,
        r"metrics\.jsonl holds 1 records, but the checkpoint of iteration 2 in .* was written after 2: records "
        r"were deleted; cannot resume",
        setup=edited("metrics.jsonl", lambda data: data.splitlines(keepends=True)[0])),
    Row("resume after a metrics record was edited", ["--resume"], 2,
        r"the first 2 records of .*metrics\.jsonl are not those the checkpoint of iteration 2 .* was written after "
        r"\(the file was edited\)",
        setup=edited("metrics.jsonl", lambda data: data.replace(b'"env_steps": 64}', b'"env_steps": 65}'))),
    Row("resume with a negative num_records", ["--resume"], 2,
        r"checkpoint record .*meta\.json is corrupted: num_records must be an integer >= 0, got -1",
        setup=edited_meta(num_records=-1)),
    Row("resume with a fractional num_records", ["--resume"], 2,
        r"num_records must be an integer >= 0, got 2\.5", setup=edited_meta(num_records=2.5)),
    Row("resume with the record's iteration edited", ["--resume"], 2,
        r"meta\.json is corrupted: its checksum does not match its fields \(the record was edited or damaged\)",
        setup=edited_meta(iteration=3)),
    Row("resume with a record of a newer format", ["--resume"], 2,
        r"meta\.json is corrupted: format 3, where this gsbpolicy writes and reads 2", setup=edited_meta(format=3)),
    Row("resume with a bit flipped in state.safetensors", ["--resume"], 2,
        r"checkpoint file .*state\.safetensors is corrupted: its sha256 is not the one its record holds \(a "
        r"flipped bit, or a partial copy\); cannot resume",
        setup=edited("checkpoint/state.safetensors", flip_bit)),
    Row("resume with state.safetensors deleted", ["--resume"], 2,
        r"checkpoint file .*state\.safetensors is missing or unreadable",
        setup=lambda run: (started_run(run), (run / "checkpoint" / "state.safetensors").unlink())),
    Row("resume with a deeply nested meta.json", ["--resume"], 2,
        r"meta\.json is nested too deeply to be a file this tool wrote",
        setup=corrupt("checkpoint/meta.json", "[" * 100_000 + "]" * 100_000)),
    Row("resume with a run.json that is not UTF-8", ["--resume"], 2,
        r"run\.json is not UTF-8 text \(byte 0\); the file is corrupted; cannot resume",
        setup=corrupt("run.json", b"\xff\xfe{}")),
    # No write follows a link: a link planted where a trainer writes is refused before anything is written.
    Row("run.lock is a link to a user's file", [], 2,
        r"run\.lock is a symbolic link \(to .*precious\.txt\); refusing to write through it: remove the link",
        setup=link_to_user_file("run.lock")),
    Row("metrics.jsonl is a link to a user's file", ["--resume"], 2,
        r"metrics\.jsonl is a symbolic link \(to .*precious\.txt\); refusing to write through it",
        setup=link_to_user_file("metrics.jsonl", resume=True)),
    Row("run.json is a link to a user's file", ["--resume"], 2,
        r"run\.json is a symbolic link", setup=link_to_user_file("run.json", resume=True)),
    Row("the checkpoint folder is a link", ["--resume"], 2,
        r"checkpoint is a symbolic link \(to .*elsewhere\)", setup=link_to_user_folder("checkpoint")),
    Row("the policy folder is a link", ["--resume"], 2,
        r"policy is a symbolic link \(to .*elsewhere\)", setup=link_to_user_folder("policy")),
    # Wrong arguments, refused up front.
    Row("empty --output-dir", ["--output-dir", ""], 2,
        r"--output-dir must be a folder for the run \(not empty: that would write the run into the current folder\)"),
    Row("empty --env", ["--env", ""], 2, r"^error: --env must name an env \(a Gymnasium id or a Playground task "
        r"name\), got ''$"),
    Row("negative KL coefficient", ["--algo.kl-coef", "-0.1"], 2, r"--algo\.kl-coef must be >= 0, got -0\.1"),
    Row("reference mix above 1", ["--algo.ref-mix", "1.5"], 2, r"--algo\.ref-mix must be in \[0, 1\], got 1\.5"),
    Row("zero step clip", ["--algo.step-clip", "0"], 2, r"--algo\.step-clip must be > 0, got 0\.0"),
    Row("negative PPO clip", ["--algo.clip", "-0.2"], 2, r"--algo\.clip must be > 0 ", "gaussian_ppo"),
    Row("DPPO clamp with its bounds swapped", ["--algo.log-prob-clamp", "2", "-5"], 2,
        r"--algo\.log-prob-clamp must be LOW HIGH with LOW < HIGH, got \(2\.0, -5\.0\)", "dppo"),
    Row("FPO with no Monte Carlo samples", ["--algo.num-samples", "0"], 2, r"--algo\.num-samples must be >= 1",
        "fpo"),
    Row("GenPO negative compression", ["--algo.compress-coef", "-1"], 2, r"--algo\.compress-coef must be >= 0",
        "genpo"),
    Row("SB3 negative entropy bonus", ["--algo.entropy-coef", "-0.01"], 2,
        r"--algo\.entropy-coef must be >= 0 \(a bonus\)", "ppo"),
    Row("budget below one iteration", ["--total-steps", "10"], 2,
        r"--total-steps must be at least one iteration \(64 env steps: --rollout\.num-envs x "
        r"--rollout\.unroll-length x --rollout\.unrolls-per-iteration\), got 10"),
    Row("budget past the step counters' range", ["--total-steps", str(2**31)], 2,
        r"--total-steps must be below 2\*\*31 = 2,147,483,648 env steps"),
    Row("--seeds with no seed", ["--env", "CartpoleBalance", "--seeds"], 2,
        r"^error: --seeds needs at least one value \(or leave it out\)$"),
    Row("absurd number of evaluation episodes", ["--eval.episodes", "1000000000"], 2,
        r"--eval\.episodes must be between 1 and 10,000, got 1000000000"),
    Row("absurd number of evaluation envs", ["--eval.num-envs", "10000000"], 2,
        r"--eval\.num-envs must be between 1 and 65,536"),
    Row("--init-from a URL", ["--init-from", "https://huggingface.co/org/policy"], 2,
        r"--init-from: expected a policy folder or a Hub repo id ORG/NAME, got the URL "
        r"'https://huggingface\.co/org/policy': pass the repo id \('org/policy'\)"),
    Row("an env whose action bounds have low > high", ["--env", "tests.faulty_env:FaultySwappedBounds-v0"], 2,
        r"^error: the env tests\.faulty_env:FaultySwappedBounds-v0's action_space has low > high at index \[0\] "
        r"\(low 1\.0, high -1\.0\)", setup=Path.mkdir),  # found on making the env, once the run folder is locked
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input_ends_in_one_line(row: Row, tmp_path, capsys):
    run = tmp_path / "run"
    if row.setup is not None:
        row.setup(run)
    before = snapshot(tmp_path)
    argv = [*TINY, "--output-dir", str(run), *(arg.format(run=run) for arg in row.argv)]
    main = importlib.import_module(f"trainers.{row.trainer}").main
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == row.code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "Traceback" not in err
    assert_matches(row.message, err)
    assert snapshot(tmp_path) == before  # nothing written, nothing lost
    if row.setup is None:
        assert not run.exists()


def assert_matches(pattern: str, text: str) -> None:
    assert re.search(pattern, text), f"{pattern!r} not in {text!r}"


def test_missing_extra_names_its_install_command(tmp_path, capsys, monkeypatch):
    real = gsbpolicy._cli._installed
    monkeypatch.setattr(gsbpolicy._cli, "_installed", lambda module: module != "tensorboard" and real(module))
    from trainers.gsb_mdpo import main

    with pytest.raises(SystemExit) as exit_info:
        main([*TINY, "--log.tensorboard", "--output-dir", str(tmp_path / "run")])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert (
        err
        == 'error: --log.tensorboard needs tensorboard: pip install -c tests/constraints.txt -e ".[train]"\n'
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seed", "abc"], "error: Error parsing --seed: invalid literal for int() with base 10: 'abc'"),
        (["--bogus", "1"], "error: Unrecognized options: --bogus, 1"),
        (
            ["--rollout.vectorization", "threads"],
            "error: invalid choice 'threads' for argument '--rollout.vectorization'",
        ),
    ],
)
def test_tyros_parse_errors_are_one_line(capsys, argv, message):
    from trainers.gsb_mdpo import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1 and "│" not in err


def test_help_names_the_module_to_run(capsys):
    from trainers.gsb_mdpo import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m trainers.gsb_mdpo ")


# ---------------------------------------------------------------------------------------- a live run's lock
HOLD_LOCK = r"""
import fcntl, os, sys, time
f = open(sys.argv[1], "a+")
fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
f.truncate(0); f.write(f"{os.getpid()}\n"); f.flush()
print("locked", flush=True)
time.sleep(120)
"""


@pytest.fixture
def live_run(tmp_path):
    """A run folder whose lock another process holds, as a running trainer does."""
    run = tmp_path / "run"
    started_run(run)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(run / LOCK_NAME)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    assert holder.stdout.readline().strip() == "locked"
    yield run, holder.pid
    holder.kill()
    holder.wait()


@pytest.mark.parametrize("extra", [[], ["--resume"]], ids=["second trainer", "resume while live"])
def test_a_live_run_has_one_writer(live_run, extra, capsys):
    from trainers.gsb_mdpo import main

    run, pid = live_run
    before = snapshot(run)
    with pytest.raises(SystemExit) as exit_info:
        main([*TINY, "--output-dir", str(run), *extra])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {run} is in use by another trainer (PID {pid}); wait for it to end or choose another "
        "--output-dir\n"
    )
    assert snapshot(run) == before and (run / LOCK_NAME).read_text() == f"{pid}\n"


def test_sb3_trainer_has_one_writer_too(live_run, capsys):
    from trainers.ppo import main

    run, pid = live_run
    with pytest.raises(SystemExit) as exit_info:
        main([*TINY[:6], "--output-dir", str(run), "--resume"])
    assert exit_info.value.code == 2 and f"(PID {pid})" in capsys.readouterr().err


def test_lock_is_free_once_the_holder_dies(live_run):
    """kill -9 leaves no stale lock: the kernel drops it with the process."""
    run, _ = live_run
    with open(run / LOCK_NAME, "a+") as f:
        with pytest.raises(BlockingIOError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.kill(int((run / LOCK_NAME).read_text()), 9)
        deadline = time.monotonic() + 10
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline
                time.sleep(0.05)


# ---------------------------------------------------------------------------------------- end to end
def run_module(module: str, args: list[str], prelude: str = "") -> subprocess.CompletedProcess:
    """`python -m module args`, after running `prelude` first if given."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    script = f"{prelude}\nimport runpy, sys\nsys.argv[0] = {module!r}\nrunpy.run_module({module!r}, run_name='__main__')"
    command = [sys.executable, "-c", script, *args] if prelude else [sys.executable, "-m", module, *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


def test_end_to_end_nan_learning_rate_is_one_line_and_writes_nothing(tmp_path):
    run = tmp_path / "run"
    proc = run_module("trainers.gsb_mdpo", ["--optim.actor-lr", "nan", "--output-dir", str(run)])
    assert proc.returncode == 2
    assert proc.stderr == "error: invalid configuration: --optim.actor-lr must be finite, got nan\n"
    assert not run.exists()


def test_end_to_end_missing_sb3_names_the_extra(tmp_path):
    block = "import sys\nsys.modules['stable_baselines3'] = None  # as if the sb3 extra were not installed"
    proc = run_module("trainers.ppo", ["--output-dir", str(tmp_path / "run")], prelude=block)
    assert proc.returncode == 1
    assert (
        proc.stderr
        == 'error: trainers.ppo needs stable_baselines3: pip install -c tests/constraints.txt -e ".[sb3]"\n'
    )
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------- finite or stop
def test_run_that_goes_non_finite_stops_and_keeps_the_last_good_checkpoint(tmp_path, capsys, monkeypatch):
    """A NaN enters the parameters during iteration 3 (as a diverging update would leave them): the run
    stops with exit 1 before logging or saving anything of it; iteration 2's checkpoint stays, no policy."""
    from trainers.gsb_mdpo import main

    original = Trainer.collect_and_update

    def poison_third_iteration(self):
        if int(self.state.iteration) == 2:
            nan_critic = jax.tree.map(
                lambda x: x * jnp.nan if eqx.is_inexact_array(x) else x, self.state.model.critic
            )
            self.state = eqx.tree_at(lambda state: state.model.critic, self.state, nan_critic)
        return original(self)

    monkeypatch.setattr(Trainer, "collect_and_update", poison_third_iteration)
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main([*TINY, "--output-dir", str(run)])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err == (
        "error: training stopped: non-finite loss (NaN or inf) in iteration 3; nothing of it was saved and the "
        f"last good checkpoint (iteration 2) is kept in {run / 'checkpoint'}\n"
    )
    assert json.loads((run / "checkpoint" / "meta.json").read_text())["iteration"] == 2
    for path in (run / "checkpoint").glob("*.safetensors"):
        for name, value in safetensors.numpy.load_file(path).items():
            if np.issubdtype(value.dtype, np.floating):
                assert np.isfinite(value).all(), (path.name, name)
    assert not (run / "policy").exists()
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [1, 2]
    with open(run / LOCK_NAME, "a+") as f:  # the lock went with the run
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    # The folder says the run diverged (what the benchmark runner records it by), until a new attempt starts.
    stop = json.loads((run / DIVERGED_FILE).read_text())
    assert (stop["iteration"], stop["quantity"], stop["checkpoint_iteration"]) == (3, "loss", 2)
    monkeypatch.undo()
    main([*TINY, "--output-dir", str(run), "--resume"])
    assert not (run / DIVERGED_FILE).exists() and (run / "policy" / "results.json").exists()


def test_the_printed_follow_up_commands_survive_a_hostile_folder_name(tmp_path):
    """A run folder named with a space, a quote and a `$(...)`: each printed command, pasted into a shell, still
    names that one folder (and runs nothing), and the Python line loads it."""
    import ast
    import shlex

    from trainers._core.cli import closing_lines

    policy = tmp_path / "my runs" / "it's $(touch owned)" / "policy"
    policy.mkdir(parents=True)
    (policy / "results.json").write_text(
        json.dumps({"env_id": "X-v0", "mean": 1.0, "std": 0.0, "n_episodes": 1})
    )
    lines = dict(line.strip().split(":", 1) for line in closing_lines(policy).splitlines() if " it:" in line)
    export = ["python", "-m", "export.onnx", str(policy), "--out", str(policy / "policy.onnx")]
    assert shlex.split(lines["export it"]) == export
    assert shlex.split(lines["publish it"])[3] == str(policy.parent)
    assert ast.literal_eval(lines["load it"].split("from_pretrained(", 1)[1][:-1]) == str(policy)


def test_a_nan_observation_from_the_env_stops_the_run_naming_the_env_not_training(tmp_path, capsys):
    """The env's sub-envs return a NaN observation at their 40th step (iteration 3 of 16 steps each): the run
    stops there, naming the env, the observation index, the value and the step, and diverged.json says the
    same, where before it reported a non-finite loss."""
    from trainers.gsb_mdpo import main

    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main([*TINY, "--env", "tests.faulty_env:FaultyNanObs-v0", "--output-dir", str(run)])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err == (
        "error: training stopped in iteration 3: the env tests.faulty_env:FaultyNanObs-v0 returned observation[2] = "
        "nan at env step 40: not finite; the policy cannot act on or learn from it, so fix (or clip) what the env "
        f"returns; nothing of it was saved and the last good checkpoint (iteration 2) is kept in {run / 'checkpoint'}\n"
    )
    stop = json.loads((run / DIVERGED_FILE).read_text())
    expected = {"iteration": 3, "env": "tests.faulty_env:FaultyNanObs-v0", "quantity": "observation[2]"}
    assert {key: stop[key] for key in expected} == expected and (stop["value"], stop["env_step"]) == (
        "nan",
        40,
    )
    assert not (run / "policy").exists()


def test_an_infinite_reward_stops_the_sb3_trainer_naming_the_env(tmp_path, capsys):
    """The same check in the Stable-Baselines3 trainer's envs: 2 envs x 32 steps an iteration, so the 40th step
    of each env is in iteration 2, before any checkpoint."""
    from trainers.ppo import main

    run = tmp_path / "run"
    argv = ["--env", "tests.faulty_env:FaultyInfReward-v0", "--total-steps", "256", "--rollout.num-envs", "2",
            "--rollout.unroll-length", "32", "--rollout.num-minibatches", "2", "--rollout.epochs", "2",
            "--eval.num-evals", "1", "--eval.episodes", "2", "--eval.final-episodes", "2", "--log.no-progress",
            "--output-dir", str(run)]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and err.count("\n") == 1, err
    assert err.startswith(
        "error: training stopped in iteration 2: the env tests.faulty_env:FaultyInfReward-v0 returned reward = inf "
        "at env step 40: not finite;"
    ), err
    assert json.loads((run / DIVERGED_FILE).read_text())["quantity"] == "reward"
