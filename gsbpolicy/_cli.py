"""Command-line plumbing shared by the `export` and `hub_cards` commands: every error is one line.

A command's work function raises `CommandError` (or an error type it declares as known); `run_command`
prints it as one line, `error: ...`, on stderr and returns the exit code: 2 for bad input (a usage
error), 1 for a failure while working. `OneLineParser` makes argparse's own errors one line too. Only
the standard library is imported here, so any command can use it before its heavy imports.
"""

import argparse
import errno
import importlib.util
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

USAGE = 2
FAILURE = 1


class CommandError(Exception):
    """An error a command reports as one line; `code` is its exit code (USAGE or FAILURE)."""

    def __init__(self, message: str, code: int = USAGE):
        super().__init__(message)
        self.code = code


class MissingExtraError(ImportError):
    """An optional dependency group (a `pip install -c tests/constraints.txt -e ".[extra]"`) is not installed."""


def one_line(message: object) -> str:
    """`message` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(message).split())


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (and exits USAGE)."""

    def error(self, message: str):
        self.exit(USAGE, f"error: {one_line(message)} (see {self.prog} --help)\n")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked package is as good as absent
        return False


def require_extra(extra: str, modules: Sequence[str], command: str, *, exit_now: bool = False) -> None:
    """Raise `MissingExtraError` naming the install command if any of `modules` is missing.

    With `exit_now` (a module run as `python -m`, whose own imports need the extra) the error is printed
    as one line and the process exits FAILURE: an exception at import time would end in a traceback.
    """
    missing = [name for name in modules if not _installed(name)]
    if not missing:
        return
    message = f'{command} needs {", ".join(missing)}: pip install -c tests/constraints.txt -e ".[{extra}]"'
    if exit_now:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(FAILURE)
    raise MissingExtraError(message)


def check_writable_folder(folder: Path, what: str) -> None:
    """Raise a usage `CommandError`, saying `what` is at fault (e.g. "--out DIR"), unless files can be
    created in `folder` (or in its nearest existing ancestor, where the missing folders would be made).
    Probed by creating and removing a temporary file: permission bits say nothing for root or on
    read-only mounts."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise CommandError(f"{what}: {existing} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise CommandError(f"{what}: cannot write in {existing} ({err.strerror})") from err


RUN_OWNED = {
    "run.json": "run record",
    "metrics.jsonl": "training log",
    "run.lock": "writer lock",
    "diverged.json": "divergence record",
}
"""The files a trainer keeps at the top of its run folder, by what they are."""
POLICY_OWNED = {"config.json": "config", "model.safetensors": "weights", "results.json": "results"}
"""The files of a saved policy folder, by what they are (policy.onnx is left out: re-exporting it is allowed)."""
RUN_SUBFOLDERS = (
    "policy",
    "best_policy",
    "best_policy.pending",
    "checkpoint",
    "checkpoint.tmp",
    "checkpoint.old",
)


def is_run_folder(folder: Path) -> bool:
    """A training run's folder: run.json with the trainer's log or its subfolders beside it. A published Hub
    folder also holds run.json, but next to config.json; a run keeps its config in policy/."""
    return (
        (folder / "run.json").is_file()
        and not (folder / "config.json").exists()
        and ((folder / "metrics.jsonl").is_file() or any((folder / name).is_dir() for name in RUN_SUBFOLDERS))
    )


def is_policy_folder(folder: Path) -> bool:
    """A saved policy (config.json and model.safetensors) that is not a published Hub folder (those carry the
    run's run.json beside the policy, and the publisher owns them)."""
    return (
        all((folder / name).is_file() for name in ("config.json", "model.safetensors"))
        and not (folder / "run.json").is_file()
    )


def owned_by_a_run(path: Path) -> str | None:
    """What `path` holds if a tool writing there would replace a run's or a policy's own data (a file the
    trainer or `save_pretrained` wrote, a run folder, a policy folder, a checkpoint); None if nothing."""
    path = Path(path).absolute()
    if path.is_dir() and is_run_folder(path):
        return "the folder of a training run"
    if path.is_dir() and is_policy_folder(path):
        return "a saved policy's folder"
    parent = path.parent.resolve()
    # A file is guarded in a published Hub folder too (a downloaded one may be all the user has of the run):
    # only a folder given whole to the publisher is its to replace.
    if (parent / "run.json").is_file() and path.name in RUN_OWNED:
        return f"the {RUN_OWNED[path.name]} of the run in {parent}"
    if is_run_folder(parent) and path.name in RUN_SUBFOLDERS:
        return f"the {path.name}/ folder of the run in {parent}"
    if (
        all((parent / name).is_file() for name in ("config.json", "model.safetensors"))
        and path.name in POLICY_OWNED
    ):
        return f"the {POLICY_OWNED[path.name]} of the policy in {parent}"
    if parent.name.startswith("checkpoint") and is_run_folder(parent.parent):
        return f"inside the checkpoint of the run in {parent.parent}"
    return None


def refuse_owned(path: Path, option: str, error: type[Exception] = CommandError) -> None:
    """Raise `error` (one line naming `option`, the path and what it holds) if writing `path` would replace
    a run's or a saved policy's own files: the one guard every command that writes where it is told uses."""
    owned = owned_by_a_run(path)
    if owned:
        raise error(f"{option} {path} is {owned}: writing there would replace it; choose another path")


def check_output_file(path: Path, option: str) -> None:
    """Raise a usage `CommandError` naming `option` unless `path` can be written as a file of its own."""
    refuse_owned(path, option)
    if path.is_dir():
        raise CommandError(f"{option} {path} is a folder; give a file path")
    check_writable_folder(path.parent, f"{option} {path}")


def refuse_control_characters(value: str, option: str) -> None:
    """Raise a usage `CommandError` naming `option` if `value` holds a control character (a newline, a tab, an
    escape...): written into a generated script or a shell line, it would end the line or start a command."""
    bad = next((char for char in value if ord(char) < 32 or 0x7F <= ord(char) < 0xA0), None)
    if bad is not None:
        raise CommandError(f"{option} must not hold control characters, got {value!r} (it holds {bad!r})")


INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C (128 + SIGINT), as a shell reports it."""


def write_failure(err: OSError) -> str:
    """What a failed write says: the path, and the reason in the system's words (a full disk among them)."""
    # shutil's copies name the source first and the file being written second (`filename2`).
    path = getattr(err, "filename2", None) or err.filename
    what = f"cannot write {path}" if path else "a write failed"
    reason = (
        "no space left on the device"
        if err.errno in (errno.ENOSPC, errno.EDQUOT)
        else err.strerror or str(err)
    )
    return f"{what}: {reason}"


def run_command(
    work: Callable[[], int | None],
    *,
    usage_errors: tuple[type[BaseException], ...] = (),
    failures: tuple[type[BaseException], ...] = (),
    kept: str = "nothing was written",
) -> int:
    """Run `work()` and return its exit code (0 when it returns None); known errors become one line.

    `CommandError` carries its own code; a missing extra is a FAILURE; `usage_errors` (bad input, e.g.
    a missing or corrupt folder) exit USAGE and `failures` exit FAILURE. A failed write (a full disk) is a
    FAILURE and Ctrl-C exits INTERRUPTED, each saying what was `kept`. Anything else is a bug and keeps its
    traceback.
    """
    try:
        return work() or 0
    except CommandError as err:
        code, message = err.code, str(err)
    except MissingExtraError as err:
        code, message = FAILURE, str(err)
    except usage_errors as err:
        code, message = USAGE, str(err) or type(err).__name__
    except failures as err:
        code, message = FAILURE, str(err) or type(err).__name__
    except KeyboardInterrupt:
        code, message = INTERRUPTED, f"interrupted (Ctrl-C); {kept}"
    except OSError as err:
        code, message = FAILURE, f"{write_failure(err)}; {kept}"
    print(f"error: {one_line(message)}", file=sys.stderr)
    return code
