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
    """An optional dependency group (a `pip install -e ".[extra]"`) is not installed."""


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
    message = f'{command} needs {", ".join(missing)}: pip install -e ".[{extra}]"'
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


def check_output_file(path: Path, option: str) -> None:
    """Raise a usage `CommandError` naming `option` unless `path` can be written as a file."""
    if path.is_dir():
        raise CommandError(f"{option} {path} is a folder; give a file path")
    check_writable_folder(path.parent, f"{option} {path}")


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
