"""Crash-safe file writing and reproducible safetensors bytes, for the library and the tools built on it.

A file is written through a temporary file in its own folder and renamed into place, so a crash never
leaves half a file; saving the same tensors twice gives the same bytes (checksums, Hub deduplication).
"""

import json
import os
import secrets
from pathlib import Path

import numpy as np
import safetensors.numpy


def atomic_write(path: Path, write) -> None:
    """Write through a temporary file in the same folder and rename, so a crash never leaves half a file.

    The temporary file is created with mode 0666 filtered by the umask, as `open` does (not 0600 as
    `tempfile.mkstemp` would), so shared run folders stay readable by the group when the umask says so.
    """
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(Path(path), lambda tmp: Path(tmp).write_bytes(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text))


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
