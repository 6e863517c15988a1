"""What a fine-tuning suite's runs start from: a demonstrator, its demonstrations and one behaviour-cloned
policy per seed, built once per task before the suite's runs and reused by all of them.

A variant whose arguments hold `PRETRAINED` fine-tunes: the runner puts the path of the seed's cloned policy
there (`--init-from {pretrained}`). For a task, under <runs_dir>/<suite>/<task>/pretraining/:

1. `demonstrator/`: `python -m trainers.<demonstrator> --preset <suite preset> --env TASK --seed 0
   --total-steps <demonstrator_steps> <suite geometry>`, a run stopped early on purpose (a medium policy,
   as the demonstrations a robot's operators record are neither random nor expert);
2. `demos/`: `python -m trainers.collect demonstrator/policy --episodes E --action-noise X`, a Minari dataset;
3. `bc/seed_<s>/`: `python -m trainers.bc --dataset demos --seed s <bc_args>`, the flow policy each seed's
   fine-tuning runs start from (the seed changes the fit, not the demonstrations).

Each step is skipped when its output is complete and resumed (`--resume`) when it was interrupted, so a
killed suite picks up where it stopped, like its runs. Each step logs to a `<step>.log` beside its folder.
"""

import dataclasses
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from gsbpolicy._cli import CommandError

from .._core.rundir import holds_run

PRETRAINED = "{pretrained}"
"""Placeholder in a variant's arguments for the path of its seed's behaviour-cloned policy folder."""


@dataclasses.dataclass(frozen=True)
class Pretraining:
    """The demonstrations and behaviour cloning of a fine-tuning suite."""

    demonstrator: str
    """Algorithm of the demonstrator run (a trainer of `trainers.registry`)."""
    demonstrator_steps: int
    """Env steps the demonstrator trains for (stopped early: a medium policy)."""
    episodes: int
    """Demonstration episodes recorded."""
    action_noise: float
    """Std of the Gaussian noise on the demonstrator's actions, in half action ranges (`trainers.collect`)."""
    bc_args: tuple[str, ...] = ()
    """Arguments of `trainers.bc` (the policy spec the fine-tuning runs share, the fit's length)."""


def uses_pretrained(args: tuple[str, ...]) -> bool:
    return PRETRAINED in args


def folder(run_directory: Path) -> Path:
    """The task's pretraining folder, from one of its runs' folders (<runs>/<suite>/<task>/<variant>/seed_s)."""
    return run_directory.parents[1] / "pretraining"


def policy_path(run_directory: Path, seed: int) -> Path:
    """The cloned policy a run of `seed` starts from."""
    return folder(run_directory) / "bc" / f"seed_{seed}" / "policy"


def _finished(run: Path) -> bool:
    return (run / "policy" / "results.json").exists()


def _step(name: str, cmd: list[str], log: Path) -> None:
    print(f"    pretraining: {name}: {shlex.join(cmd[1:])}", flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        code = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
    if code != 0:
        raise CommandError(f"pretraining step {name} failed (exit code {code}); see {log}")


def _train(name: str, cmd: list[str], run: Path) -> None:
    if not _finished(run):
        _step(
            name,
            [*cmd, "--output-dir", str(run), *(["--resume"] if holds_run(run) else [])],
            run.parent / f"{run.name}.log",
        )


def prepare(suite, task: str, seed: int, run_directory: Path) -> Path:
    """Build whatever of `task`'s pretraining `seed` needs and is not there yet; the cloned policy's folder."""
    spec: Pretraining = suite.pretraining
    root = folder(run_directory)
    python = sys.executable
    demonstrator = root / "demonstrator"
    _train(
        "demonstrator",
        [
            python,
            "-m",
            f"trainers.{spec.demonstrator}",
            "--preset",
            suite.preset,
            "--env",
            task,
            "--seed",
            "0",
            "--total-steps",
            str(spec.demonstrator_steps),
            *suite.args,
            "--log.no-progress",
        ],
        demonstrator,
    )
    demos = root / "demos"
    if not (demos / "data" / "metadata.json").exists():
        if demos.exists():  # collect writes beside --out and moves the dataset in whole: this is not one
            shutil.rmtree(demos)
        _step(
            "demonstrations",
            [
                python,
                "-m",
                "trainers.collect",
                str(demonstrator / "policy"),
                "--out",
                str(demos),
                "--episodes",
                str(spec.episodes),
                "--action-noise",
                str(spec.action_noise),
            ],
            root / "demos.log",
        )
    bc = root / "bc" / f"seed_{seed}"
    _train(
        "behaviour cloning",
        [python, "-m", "trainers.bc", "--dataset", str(demos), "--seed", str(seed), *spec.bc_args],
        bc,
    )
    return bc / "policy"
