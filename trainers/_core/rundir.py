"""The run folder's guard: one writer at a time, a fresh run never lands on an old one, and `--resume`
continues exactly the experiment the folder holds.

The writer holds an exclusive `fcntl.flock` on `run.lock` inside the folder from before it writes anything
until its run ends; the kernel drops the lock when the process dies, even by kill -9, so a crashed run never
needs cleaning up. The lock file holds the writer's PID, for the message a second writer gets.
"""

import fcntl
import hashlib
import os
from pathlib import Path

from gsbpolicy._files import LinkError, open_no_follow, read_json, refuse_link

from .checkpoint import CheckpointError, find_checkpoint, read_meta, verify_files
from .config import flag
from .runlog import RUN_JSON, args_record, config_changes, experiment_sha256, flatten

LOCK_NAME = "run.lock"
METRICS = "metrics.jsonl"
WRITTEN = (
    LOCK_NAME,
    RUN_JSON,
    METRICS,
    "checkpoint",
    "checkpoint.tmp",
    "checkpoint.old",
    "policy",
    "best_policy",
    "best_policy.pending",
    "diverged.json",
    "tensorboard",
    "wandb",
)
"""Everything a trainer writes inside its run folder: none of them may be a symbolic link (a link planted at a
predictable path would make the trainer write to, truncate or delete what it points at)."""

RESULT_NEUTRAL = (
    "output_dir",
    "resume",
    "preset",
    "distributed",
    "seeds",
    "compile_cache",
    "log.",
    "eval.num_evals",
    "eval.interval_steps",
)
"""Fields (or group prefixes) a `--resume` may change: where the run lives, how it is launched, what is
logged and when it is evaluated. None of them touches the training state, so the resumed run computes what
the uninterrupted one would have (evaluations read the policy with their own seeds). Everything else
(seed, env, budget, rollout geometry, optimiser, networks, algorithm coefficients, evaluation episodes,
matmul precision) would make the result a mix of two experiments, and is refused."""


class RunFolderError(ValueError):
    """The run folder cannot be used as asked (busy, nothing to resume, a different experiment...)."""


class RunLock:
    """An exclusive lock on a run folder, held until `release` (or until the process ends)."""

    def __init__(self, run_dir: Path):
        path = run_dir / LOCK_NAME
        try:
            # Opened without truncating, so the current holder's PID stays readable until this process owns
            # the lock; never through a link (O_NOFOLLOW).
            fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)
        except LinkError as err:
            raise RunFolderError(str(err)) from None
        except OSError as err:
            raise RunFolderError(f"cannot write in the run folder {run_dir} ({err.strerror})") from err
        self._file = os.fdopen(fd, "r+")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "unknown"
            self._file.close()
            raise RunFolderError(
                f"{run_dir} is in use by another trainer (PID {holder}); wait for it to end or choose "
                "another --output-dir"
            ) from None
        self._file.truncate(0)
        self._file.write(f"{os.getpid()}\n")
        self._file.flush()

    def release(self) -> None:
        if not self._file.closed:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()


def holds_run(run_dir: Path) -> bool:
    """The folder holds a run `--resume` can continue (its run.json, or a checkpoint), finished or not."""
    return (run_dir / RUN_JSON).is_file() or find_checkpoint(run_dir / "checkpoint") is not None


def holds_started_run(run_dir: Path) -> bool:
    """Something a fresh run must not overwrite: a run `--resume` can continue, or a metrics log alone."""
    return holds_run(run_dir) or (run_dir / METRICS).exists()


def refuse_links(run_dir: Path) -> None:
    """RunFolderError if anything a trainer writes in `run_dir` is a symbolic link (`WRITTEN`)."""
    for name in WRITTEN:
        try:
            refuse_link(run_dir / name)
        except LinkError as err:
            raise RunFolderError(f"{err} (a run folder's files must be its own)") from None


def open_run_folder(run_dir: Path, algo: str, args, writer: bool = True) -> RunLock | None:
    """Check that `run_dir` can take this run and, for the writer, create it and lock it.

    Raises `RunFolderError` with a one-line reason, before anything is written where possible: a busy
    folder, `--output-dir` naming a file or an unwritable place, a fresh run over an existing one, a
    `--resume` with nothing to resume, a `--resume` that changes the experiment, or a corrupt run.json or
    checkpoint record. Processes other than 0 of a multi-process run (`writer=False`) only check.
    """
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"--output-dir {run_dir} is a file, not a folder")
    if args.resume and not holds_run(run_dir):
        what = "holds no run.json and no checkpoint" if run_dir.is_dir() else "does not exist"
        raise RunFolderError(f"--resume: {run_dir} {what}; there is nothing to resume")
    lock = None
    if writer:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunFolderError(f"cannot create the run folder {run_dir} ({err.strerror})") from err
        refuse_links(run_dir)
        lock = RunLock(run_dir)
    try:
        if args.resume:
            _check_resumable(run_dir, algo, args)
        elif holds_started_run(run_dir):
            if (run_dir / "policy").is_dir():
                raise RunFolderError(f"{run_dir} already holds a finished run; choose another --output-dir")
            raise RunFolderError(
                f"{run_dir} already holds an interrupted run; pass --resume to continue it or choose "
                "another --output-dir"
            )
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    return lock


def _added_at_default(name: str, recorded: dict, args) -> bool:
    """A field the run's record lacks (added to the config after the run started) that has its default value
    now: the default is what the run did before the field existed, so resuming with it changes nothing."""
    if name in flatten(recorded):
        return False
    return flatten(args_record(type(args)())).get(name) == flatten(args_record(args)).get(name)


# Fields removed from the config, each with the recorded value that behaves as the code now does without it (a
# run recorded with that value resumes; with another it is refused, naming the field).
RETIRED = {"rollout.noise_hold_fraction": 1.0}  # the hold for the whole run: `rollout.noise_hold_steps` 0 now


def _retired_at_neutral(name: str, recorded: dict, args) -> bool:
    return (
        name in RETIRED
        and name not in flatten(args_record(args))
        and flatten(recorded).get(name) == RETIRED[name]
    )


def _check_resumable(run_dir: Path, algo: str, args) -> None:
    """The folder's recorded experiment equals this one up to result-neutral fields, and what the resume would
    continue from is whole: run.json, the checkpoint record and tensors, and the metrics it was written after."""
    directory = find_checkpoint(run_dir / "checkpoint")
    record = _read_run_json(run_dir, required=directory is not None)
    if record is not None:
        _check_same_experiment(run_dir, algo, args, record)
    if directory is None:
        return  # nothing to continue from: the run starts again from iteration 1 (RunFolder.start says so)
    try:
        meta = read_meta(directory)
        verify_files(directory, meta)
    except CheckpointError as err:
        raise RunFolderError(f"{err}; cannot resume") from err
    where = f"the checkpoint of iteration {meta['iteration']} in {directory}"
    if "experiment_sha256" in meta and meta["experiment_sha256"] != experiment_sha256(record):
        raise RunFolderError(
            f"{run_dir / RUN_JSON} does not describe the experiment {where} was written by (it was "
            "edited or replaced after the run started); cannot resume"
        )
    _check_metrics(run_dir / METRICS, meta, where)


def _read_run_json(run_dir: Path, required: bool) -> dict | None:
    path = run_dir / RUN_JSON
    if not path.is_file():
        if required:
            raise RunFolderError(
                f"{path} is missing: --resume cannot check that it continues the experiment the "
                "checkpoint was written by; restore run.json, or start a new run with another "
                "--output-dir"
            )
        return None
    try:
        record = read_json(path, RunFolderError)
    except RunFolderError as err:
        raise RunFolderError(f"{err}; cannot resume") from None
    if not isinstance(record, dict) or not isinstance(record.get("algo"), str):
        raise RunFolderError(f"{path} is corrupted (it names no algorithm); cannot resume")
    if not isinstance(record.get("args"), dict):
        raise RunFolderError(f"{path} is corrupted (it holds no args object); cannot resume")
    return record


def _check_same_experiment(run_dir: Path, algo: str, args, record: dict) -> None:
    recorded_algo, recorded = record["algo"], dict(record["args"])
    if recorded_algo != algo:
        raise RunFolderError(
            f"--resume: {run_dir} holds a {recorded_algo} run, not {algo}; resume it with "
            f"trainers.{recorded_algo}"
        )
    changes = config_changes(recorded, args_record(args))
    refused = {
        name: change
        for name, change in changes.items()
        if not name.startswith(RESULT_NEUTRAL)
        and not _added_at_default(name, recorded, args)
        and not _retired_at_neutral(name, recorded, args)
    }
    if refused:
        listed = ", ".join(f"{flag(name)} {old!r} -> {new!r}" for name, (old, new) in refused.items())
        raise RunFolderError(
            f"--resume cannot change the experiment in {run_dir}: {listed}; start a new run with another "
            "--output-dir instead"
        )


def _check_metrics(path: Path, meta: dict, where: str) -> None:
    """metrics.jsonl must still hold, unchanged, the records `where` was written after (lines after them are
    the interrupted attempt's, which the resume drops)."""
    lines = path.read_bytes().splitlines(keepends=True) if path.is_file() else []
    seen = meta["num_records"]
    if len(lines) < seen:
        raise RunFolderError(
            f"{path} holds {len(lines)} records, but {where} was written after {seen}: records "
            "were deleted; cannot resume"
        )
    if (
        "metrics_sha256" in meta
        and hashlib.sha256(b"".join(lines[:seen])).hexdigest() != meta["metrics_sha256"]
    ):
        raise RunFolderError(
            f"the first {seen} records of {path} are not those {where} was written after (the "
            "file was edited); cannot resume"
        )
