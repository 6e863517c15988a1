"""Crash-safe file writing that never follows a link, robust JSON reading, and content hashes, for the library
and the tools built on it.

A file is written through a temporary file in its own folder and renamed into place, so a crash never leaves
half a file; saving the same tensors twice gives the same bytes (checksums, Hub deduplication). No write here
follows a symbolic link: a rename replaces a link instead of writing through it, and files opened in place (an
append, a lock) are opened with O_NOFOLLOW, so a link planted where a tool writes (`run.lock` pointing at a
user's file) makes the write fail instead of truncating or appending to what it points at.
"""

import errno
import hashlib
import json
import os
import secrets
from pathlib import Path

import numpy as np
import safetensors.numpy


class LinkError(ValueError):
    """A path a tool would write through is a symbolic link."""


def refuse_link(path: Path, what: str | None = None) -> None:
    """Raise `LinkError` if `path` is a symbolic link (whatever it points at, existing or not)."""
    path = Path(path)
    if path.is_symlink():
        raise LinkError(
            f"{what or path} is a symbolic link (to {os.readlink(path)}); refusing to write through it: "
            "remove the link or choose another path"
        )


def open_no_follow(path: Path, flags: int, mode: int = 0o666) -> int:
    """`os.open(path, flags | O_NOFOLLOW)`; a link at `path` is a `LinkError` naming it, not a write through it."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:  # what O_NOFOLLOW answers for a link
            refuse_link(path)
        raise


def naming(path: Path):
    """A context in which an OSError without a file name (a write that found the disk full) gets `path` as its
    file name, so that the error can say what could not be written."""
    return _Naming(path)


class _Naming:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, err, traceback) -> None:
        if isinstance(err, OSError) and err.filename is None:
            err.filename = str(self.path)


def append_text(path: Path, text: str) -> None:
    """Append `text` to `path` (created if missing) and flush it to disk; never through a link."""
    with naming(path):
        fd = open_no_follow(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            data = text.encode()
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, write) -> None:
    """Write through a temporary file in the same folder and rename, so a crash never leaves half a file.

    `write(tmp)` fills the temporary file. The temporary file is created with mode 0666 filtered by the
    umask, as `open` does (not 0600 as `tempfile.mkstemp` would), so shared run folders stay readable by the
    group when the umask says so; it is flushed to disk before the rename. A link at `path` is replaced by the
    file, never written through.
    """
    path = Path(path)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    with naming(path):
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666))
        try:
            write(tmp)
            fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        finally:
            if os.path.lexists(tmp):
                os.remove(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(Path(path), lambda tmp: Path(tmp).write_bytes(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text))


def read_json(path: Path, error: type[Exception] = ValueError):
    """The JSON value in `path`. A file that is unreadable, not UTF-8, not JSON or nested too deeply to parse is
    `error` with one line naming the file and the problem (a missing file stays `FileNotFoundError`)."""
    path = Path(path)
    try:
        return loads_json(path.read_bytes(), str(path), error)
    except (FileNotFoundError, error):
        raise
    except OSError as err:
        raise error(f"{path} cannot be read ({err.strerror or err})") from None


def loads_json(data: bytes | str, where: str, error: type[Exception] = ValueError):
    """`json.loads(data)` with every way it can fail as one line of `error` naming `where`."""
    try:
        text = data.decode() if isinstance(data, bytes) else data
    except UnicodeDecodeError as err:
        raise error(f"{where} is not UTF-8 text (byte {err.start}); the file is corrupted") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise error(f"{where} is not valid JSON ({err}); the file is corrupted") from None
    except RecursionError:
        raise error(
            f"{where} is nested too deeply to be a file this tool wrote; the file is corrupted"
        ) from None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value) -> str:
    """SHA-256 of a JSON value written canonically (sorted keys, no spaces): equal values hash equal however
    their file was formatted."""
    return sha256_bytes(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())


def tensors_sha256(tensors: dict[str, np.ndarray]) -> str:
    """SHA-256 of named tensors (each name, dtype, shape and bytes, in name order): independent of the file
    layout and metadata they were stored with, so a flipped bit in any tensor changes it."""
    digest = hashlib.sha256()
    for name, array in sorted(tensors.items()):
        array = np.ascontiguousarray(array)
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def safetensors_bytes(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    """`safetensors.numpy.save` with the header's metadata in sorted key order.

    safetensors writes `__metadata__` from a Rust HashMap, whose order changes from process to process;
    sorting it makes saving the same tensors give the same bytes (checksums, Hub deduplication)."""
    data = safetensors.numpy.save(tensors, metadata)
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header to a multiple of 8 bytes with spaces
    return len(text).to_bytes(8, "little") + text + data[8 + size :]
