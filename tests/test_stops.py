"""Every way a run stops early, end to end: kill -9 before and during the first checkpoint (a JAX trainer, SB3 PPO
and a seed group), Ctrl-C and SIGTERM, a full disk (a real one, on a tiny tmpfs, and one written at a chosen
write), and XLA running out of memory. Each stop is one line on stderr with its exit status; whatever was saved
before stays byte for byte; the stopped run resumes to exactly the uninterrupted run's records, and publishes.
"""

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import pytest

from hub_cards import publish
from tests.slow_env import SLEEP_VAR
from trainers import gsb_mdpo, ppo
from trainers._core.checkpoint import read_meta, verify_files
from trainers._core.loop import Trainer

ROOT = Path(__file__).resolve().parents[1]

GYM = [
    "--env", "InvertedPendulum-v5", "--total-steps", "256", "--rollout.num-envs", "4", "--rollout.unroll-length",
    "16", "--rollout.num-minibatches", "2", "--rollout.epochs", "2", "--policy.num-steps", "4", "--policy.width",
    "16", "--policy.depth", "1", "--critic.width", "16", "--critic.depth", "1", "--eval.num-evals", "1",
    "--eval.episodes", "2", "--eval.final-episodes", "2", "--log.checkpoint-every", "2", "--log.no-progress",
]  # fmt: skip
"""Four iterations of 64 env steps on InvertedPendulum-v5, a checkpoint after iterations 2 and 4."""
SB3 = [
    "--env", "InvertedPendulum-v5", "--total-steps", "256", "--rollout.num-envs", "2", "--rollout.unroll-length",
    "32", "--rollout.num-minibatches", "2", "--rollout.epochs", "2", "--eval.num-evals", "1", "--eval.episodes",
    "2", "--eval.final-episodes", "2", "--log.checkpoint-every", "2", "--log.no-progress",
]  # fmt: skip
GROUP = [
    "--preset", "playground", "--env", "tests.jax_point_mass:PointMass", "--seeds", "0", "1", "--total-steps",
    "5120", "--rollout.num-envs", "32", "--rollout.unroll-length", "20", "--rollout.unrolls-per-iteration", "2",
    "--rollout.num-minibatches", "4", "--rollout.epochs", "1", "--rollout.episode-length", "50",
    "--policy.width", "8", "--policy.depth", "1", "--critic.width", "16", "--critic.depth", "1",
    "--eval.num-evals", "1", "--eval.num-envs", "4", "--log.checkpoint-every", "2", "--log.no-progress",
]  # fmt: skip
"""Two seeds of a pure-JAX Playground env trained together, four iterations, a checkpoint after 2 and 4."""
TRAINERS = {
    "gsb_mdpo": ("trainers.gsb_mdpo", GYM),
    "ppo": ("trainers.ppo", SB3),
    "seed group": ("trainers.gsb_mdpo", GROUP),
}
MAINS = {"trainers.gsb_mdpo": gsb_mdpo.main, "trainers.ppo": ppo.main}

KILL_AT = {
    # The first checkpoint is due: the kill comes before anything of it is written.
    "before the first checkpoint": ("trainers._core.checkpoint", "CheckpointStore", "write"),
    # Its tensor files are written, its record (written last) is not.
    "during the first checkpoint": ("trainers._core.checkpoint", None, "canonical_sha256"),
}
KILL = """
import importlib, os, signal
module = importlib.import_module({module!r})
owner = getattr(module, {owner!r}) if {owner!r} else module
setattr(owner, {name!r}, lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL))
"""


def run_module(module: str, args: list[str], prelude: str = "", **options) -> subprocess.Popen:
    """`python -m module args` (after running `prelude`) in a new process, this checkout importable."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    script = f"{prelude}\nimport runpy, sys\nsys.argv[0] = {module!r}\nrunpy.run_module({module!r}, run_name='__main__')"
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options)  # fmt: skip


def records(run_dir: Path) -> list[dict]:
    """metrics.jsonl without wall-clock fields."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/")} for line in lines]


def run_dirs(trainer: str, out: Path) -> list[Path]:
    return [out / "seed_0", out / "seed_1"] if trainer == "seed group" else [out]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Each trainer's run, uninterrupted (in this process; the killed runs load its compiled functions)."""
    done = {}
    for trainer, (module, argv) in TRAINERS.items():
        out = tmp_path_factory.mktemp("uninterrupted") / "run"
        MAINS[module]([*argv, "--output-dir", str(out)])
        done[trainer] = {run: records(run) for run in run_dirs(trainer, out)}
    return done


@pytest.mark.slow
@pytest.mark.parametrize("moment", sorted(KILL_AT))
@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_kill_9_around_the_first_checkpoint_resumes_clean_and_publishes(trainer, moment, uninterrupted, tmp_path,
                                                                        capsys):  # fmt: skip
    module, argv = TRAINERS[trainer]
    out = tmp_path / "run"
    where, owner, name = KILL_AT[moment]
    killed = run_module(
        module, [*argv, "--output-dir", str(out)], KILL.format(module=where, owner=owner, name=name)
    )
    killed.communicate(timeout=600)
    assert killed.returncode == -signal.SIGKILL
    for run in run_dirs(trainer, out):
        assert (run / "metrics.jsonl").read_text() and not (run / "checkpoint" / "meta.json").exists()
    MAINS[module]([*argv, "--output-dir", str(out), "--resume"])
    said = capsys.readouterr().out
    reference = list(uninterrupted[trainer].values())
    for run, expected in zip(run_dirs(trainer, out), reference, strict=True):
        assert (
            f"--resume: {run} holds no checkpoint yet (the run stopped before its first one): training "
            in said
        )
        assert records(run) == expected  # the interrupted attempt's records are gone, not appended to
        assert (
            publish.main([str(run), "--repo-id", "org/resumed", "--dry-run", "--no-onnx", "--no-video"]) == 0
        )


def _wait_for(path: Path, process: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code", "said"), [(signal.SIGINT, 130, r"interrupted \(Ctrl-C\)"),
                                                      (signal.SIGTERM, 143, r"terminated \(SIGTERM\)")],
                         ids=["Ctrl-C", "SIGTERM"])  # fmt: skip
def test_a_signal_is_one_line_and_the_run_resumes_exactly(signum, code, said, tmp_path, capsys):
    # On a loaded machine the 400 iterations could all pass before the signal lands: the signalled process's env
    # sleeps 2 ms a step (about 50 s for the whole run), which changes nothing it computes; the runs after it
    # (in this process, without the sleep) are fast.
    long = [*GYM, "--env", "tests.slow_env:SlowPointMass-v0", "--total-steps", str(400 * 64)]
    out = tmp_path / "run"
    # A shell that starts a job in the background (`cmd &`) ignores SIGINT for it, and the trainer inherits that:
    # the prelude gives it the default a terminal gives (Python's KeyboardInterrupt), whatever ran the tests.
    slow = f"import os, signal; os.environ[{SLEEP_VAR!r}] = '0.002'; signal.signal(signal.SIGINT, signal.default_int_handler)"
    process = run_module("trainers.gsb_mdpo", [*long, "--output-dir", str(out)], prelude=slow)
    _wait_for(out / "checkpoint" / "meta.json", process)
    process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    assert process.returncode == code, err
    assert re.fullmatch(
        rf"error: {said} at iteration (\d+) of 400; the checkpoint of iteration (\d+) is kept in "
        rf"{re.escape(str(out / 'checkpoint'))}: continue with the same command and --resume\n",
        err,
    ), err
    stopped = json.loads((out / "checkpoint" / "meta.json").read_text())["iteration"]
    assert f"the checkpoint of iteration {stopped} is kept" in err and stopped < 400
    gsb_mdpo.main([*long, "--output-dir", str(out), "--resume"])
    reference = tmp_path / "reference"
    gsb_mdpo.main([*long, "--output-dir", str(reference)])
    capsys.readouterr()
    assert records(out) == records(reference)


# ------------------------------------------------------------------------------------------------- a full disk
def _can_mount_tmpfs() -> str | None:
    if shutil.which("unshare") is None:
        return "no unshare command (util-linux) to give the test a tmpfs of its own"
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"], capture_output=True
    )
    if probe.returncode:
        return f"cannot mount a tmpfs in a user namespace here ({probe.stderr.decode().strip()})"
    return None


def on_tiny_disk(folder: Path, kilobytes: int, module: str, args: list[str]) -> subprocess.CompletedProcess:
    """`python -m module args` in a mount namespace of its own, where `folder` is a tmpfs of `kilobytes`."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = f'mount -t tmpfs -o size={kilobytes}k tmpfs "$0" && exec "$@"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, str(folder), sys.executable, "-m", module, *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip


@pytest.mark.slow
def test_a_real_full_disk_stops_training_with_one_line(tmp_path):
    if (reason := _can_mount_tmpfs()) is not None:
        pytest.skip(reason)
    disk = tmp_path / "disk"
    done = on_tiny_disk(disk, 16, "trainers.gsb_mdpo", [*GYM, "--output-dir", str(disk / "run")])
    assert done.returncode == 1, done.stderr
    assert re.fullmatch(rf"error: cannot write {re.escape(str(disk))}/run/\S+: no space left on the device; stopped at "
                        r"iteration \d of 4; .*: continue with the same command and --resume\n", done.stderr), done.stderr  # fmt: skip


@pytest.mark.slow
def test_a_real_full_disk_stops_an_export_and_a_publish_with_one_line(tmp_path, tiny_spec):
    if (reason := _can_mount_tmpfs()) is not None:
        pytest.skip(reason)
    from test_bad_inputs_publish import make_run_folder

    run = make_run_folder(tmp_path / "run", tiny_spec)
    disk = tmp_path / "disk"
    exported = on_tiny_disk(disk, 4, "export.onnx", [str(run / "policy"), "--out", str(disk / "policy.onnx")])
    assert exported.returncode == 1, exported.stderr
    assert exported.stderr == (f"error: cannot write {disk / 'policy.onnx'}: no space left on the device; no ONNX "
                               "file was written\n")  # fmt: skip
    published = on_tiny_disk(disk, 4, "hub_cards.publish", [str(run), "--repo-id", "org/flow", "--out",
                                                             str(disk / "hub"), "--dry-run", "--no-onnx", "--no-video"])  # fmt: skip
    assert published.returncode == 1, published.stderr
    assert re.fullmatch(rf"error: cannot write {re.escape(str(disk))}/\S+: no space left on the device; nothing "
                        r"was pushed, and an earlier --out folder is as it was\n", published.stderr), published.stderr  # fmt: skip


def fill_disk_at(monkeypatch, name: str, call: int) -> None:
    """The `call`-th write (through Path.write_bytes or write_text) of a file called `name` finds the disk full."""
    calls = {"n": 0}
    for method in ("write_bytes", "write_text"):
        real = getattr(Path, method)

        def full(self, data, *args, real=real, **kwargs):
            if self.name == name or (self.name.startswith(f".{name}.") and self.name.endswith(".tmp")):
                calls["n"] += 1
                if calls["n"] == call:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a write error names no file
            return real(self, data, *args, **kwargs)

        monkeypatch.setattr(Path, method, full)


@pytest.mark.parametrize(
    ("name", "call", "said"),
    [("state.safetensors", 2, r"checkpoint\.tmp/state\.safetensors: no space left on the device; stopped at iteration "
      r"4 of 6; the checkpoint of iteration 2 is kept in {run}/checkpoint"),
     ("model.safetensors", 1, r"policy/model\.safetensors: no space left on the device; stopped after its last "
      r"iteration \(6 of 6\), while writing its policy folder; the checkpoint of iteration 6 is kept in "
      r"{run}/checkpoint")],
    ids=["the second checkpoint", "the policy at the end"],
)  # fmt: skip
def test_a_full_disk_keeps_what_was_saved_and_the_run_resumes(
    name, call, said, tmp_path, monkeypatch, capsys
):
    argv = [*GYM, "--total-steps", str(6 * 64)]
    run = tmp_path / "run"
    fill_disk_at(monkeypatch, name, call)
    with pytest.raises(SystemExit) as stop:
        gsb_mdpo.main([*argv, "--output-dir", str(run)])
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert re.fullmatch(rf"error: cannot write {re.escape(str(run))}/" + said.format(run=re.escape(str(run))) +
                        r": continue with the same command and --resume\n", err), err  # fmt: skip
    # The checkpoint the line names is whole: its record's hashes still match every file it lists.
    kept = read_meta(run / "checkpoint")
    verify_files(run / "checkpoint", kept)
    assert f"the checkpoint of iteration {kept['iteration']} is kept" in err
    assert not (run / "policy" / "config.json").exists()
    monkeypatch.undo()
    gsb_mdpo.main([*argv, "--output-dir", str(run), "--resume"])
    reference = tmp_path / "reference"
    gsb_mdpo.main([*argv, "--output-dir", str(reference)])
    assert records(run) == records(reference) and (run / "policy" / "config.json").is_file()


def test_running_out_of_memory_names_the_size_and_the_flags(tmp_path, monkeypatch, capsys):
    """A real XLA allocation failure in iteration 3: 2**40 float32s is 4 TiB."""
    original, calls = Trainer.collect_and_update, []

    def greedy_third_iteration(self):
        calls.append(1)
        if len(calls) == 3:
            jnp.ones((2**40,), jnp.float32).block_until_ready()
        return original(self)

    monkeypatch.setattr(Trainer, "collect_and_update", greedy_third_iteration)
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        gsb_mdpo.main([*GYM, "--output-dir", str(run)])
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert err == (
        "error: out of memory: the run asked for 4,096.00 GiB; an iteration collects --rollout.num-envs 4 x "
        "--rollout.unroll-length 16 x --rollout.unrolls-per-iteration 1 env steps and updates on "
        "1/--rollout.num-minibatches (2) of them at a time, and an evaluation runs --eval.num-envs 128 envs: lower "
        "--rollout.num-envs or --eval.num-envs, or raise --rollout.num-minibatches; stopped at iteration 3 of 4; the "
        f"checkpoint of iteration 2 is kept in {run / 'checkpoint'}: continue with the same command and --resume\n"
    )
