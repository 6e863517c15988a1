"""Atomic, resumable checkpoints: pytrees as safetensors keyed by pytree path, plus a JSON record.

A checkpoint is a folder written next to its final place and swapped in with renames, so a run killed at
any moment leaves either the previous checkpoint or the new one, never a mix. Loading needs a skeleton of
the same structure (the freshly initialised training state) and checks every tensor's shape and dtype.

The record (meta.json) is written last and vouches for the rest: it holds the SHA-256 of every tensor file
(`files`) and a checksum of its own fields (`checksum`), so a flipped bit in a tensor file, an edited or
truncated record, or a counter that is negative or not an integer is refused with the reason instead of being
resumed. Records written before these fields existed (no `format`) are read with the field checks alone.

Tensors are stored whole (gathered from every device and process), never per device: a checkpoint does not
depend on how many devices wrote it, and the trainer lays it out on its own mesh when it loads it.
"""

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import safetensors.numpy

from gsbpolicy._files import canonical_sha256, loads_json, naming, sha256_bytes

from .distributed import is_main_process, to_host

META = "meta.json"
META_FIELDS = ("iteration", "env_steps", "num_records", "elapsed")
"""What every checkpoint record holds (trainers may add their own fields)."""
FORMAT = 2
"""The record's format: 2 adds `files` and `checksum` (and the run folder's `metrics_sha256`, `experiment_sha256`)."""
INTEGRITY_FIELDS = ("format", "files", "checksum", "metrics_sha256", "experiment_sha256")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class CheckpointError(ValueError):
    """A checkpoint is corrupted, truncated or was written by a different configuration."""


def _is_key(x) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _leaves(tree) -> list[tuple[str, Any]]:
    return [
        (jax.tree_util.keystr(path), leaf)
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
        if isinstance(leaf, jax.Array | np.ndarray | np.generic)
    ]


def tree_to_tensors(tree) -> dict[str, np.ndarray]:
    """Array leaves as whole {pytree path: numpy array}; PRNG keys are stored as their raw key data.

    A collective when arrays span several processes: every process must call it.
    """
    return {name: to_host(jax.random.key_data(x) if _is_key(x) else x) for name, x in _leaves(tree)}


def tensors_to_tree(tensors: dict[str, np.ndarray], like, source: str = "checkpoint"):
    """Fill the array leaves of `like` from `tensors`, checking names, shapes and dtypes."""
    expected = dict(_leaves(like))
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise CheckpointError(f"{source} lacks {missing[:5]}: it was written by a different configuration")

    def fill(path, leaf):
        name = jax.tree_util.keystr(path)
        if name not in expected:
            return leaf
        value = tensors[name]
        target = jax.random.key_data(leaf) if _is_key(leaf) else leaf
        if value.shape != target.shape or value.dtype != target.dtype:
            raise CheckpointError(
                f"{source}: {name} is {value.shape} {value.dtype}, expected {target.shape} {target.dtype}; "
                "the checkpoint was written by a different configuration"
            )
        if _is_key(leaf):
            return jax.random.wrap_key_data(jnp.asarray(value), impl=jax.random.key_impl(leaf))
        return jnp.asarray(value) if isinstance(leaf, jax.Array) else value

    return jax.tree_util.tree_map_with_path(fill, like)


def save_checkpoint(directory: Path, trees: dict[str, Any], meta: dict) -> None:
    """Write `trees` (name -> pytree) and `meta` (JSON) into `directory`, replacing it atomically.

    Every process calls it (gathering is collective); only process 0 writes.
    """
    write_checkpoint(directory, trees, meta)
    if is_main_process():
        commit_checkpoint(directory)


def _pending(directory: Path) -> Path:
    return directory.with_name(directory.name + ".tmp")


def write_checkpoint(directory: Path, trees: dict[str, Any], meta: dict) -> None:
    """Write the checkpoint next to `directory` (as `<name>.tmp`) without touching the current one; the
    record is written last, so a pending checkpoint with a record is complete. A collective, as above."""
    tensors = {name: tree_to_tensors(tree) for name, tree in trees.items()}
    if not is_main_process():
        return
    tmp = _pending(Path(directory))
    with naming(tmp):
        _remove(tmp)
        tmp.mkdir(parents=True)
    files = {}
    for name, arrays in tensors.items():
        data = safetensors.numpy.save(arrays)
        with naming(tmp / f"{name}.safetensors"):
            (tmp / f"{name}.safetensors").write_bytes(data)
        files[f"{name}.safetensors"] = sha256_bytes(data)
    record = {**meta, "format": FORMAT, "files": files}
    record["checksum"] = canonical_sha256(record)
    with naming(tmp / META):
        (tmp / META).write_text(json.dumps(record, indent=1))


def _remove(path: Path) -> None:
    """Remove a folder (or a link, or a file) left at `path`, never following a link into what it points at."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def commit_checkpoint(directory: Path) -> None:
    """Make the complete pending checkpoint the current one with two renames (process 0 only)."""
    directory = Path(directory)
    old = directory.with_name(directory.name + ".old")
    if directory.exists() or directory.is_symlink():
        _remove(old)
        directory.rename(old)
    _pending(directory).rename(directory)
    _remove(old)


def pending_iteration(directory: Path) -> int | None:
    """The iteration of the complete pending (written, not committed) checkpoint next to `directory`."""
    meta = _pending(Path(directory)) / META
    try:
        return int(json.loads(meta.read_text())["iteration"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_checkpoint(directory: Path) -> Path | None:
    """The complete checkpoint folder, if any (a crash between the two renames leaves it at `.old`)."""
    directory = Path(directory)
    for candidate in (directory, directory.with_name(directory.name + ".old")):
        if (candidate / META).is_file():
            return candidate
    return None


def read_meta(directory: Path) -> dict:
    """A checkpoint's JSON record, checked (module docstring); `CheckpointError` naming the file and the
    problem otherwise."""
    path = Path(directory) / META
    try:
        meta = loads_json(path.read_bytes(), str(path))
    except (OSError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) else str(err)
        raise CheckpointError(f"checkpoint record {path} is corrupted ({reason})") from None
    problem = _record_problem(meta)
    if problem:
        raise CheckpointError(f"checkpoint record {path} is corrupted: {problem}")
    return meta


def _counter(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _record_problem(meta) -> str | None:
    """What is wrong with a parsed checkpoint record, or None."""
    if not isinstance(meta, dict):
        return f"it holds {type(meta).__name__}, not a JSON object"
    missing = [name for name in META_FIELDS if name not in meta]
    if missing:
        return f"it lacks {missing}"
    for name in ("iteration", "env_steps", "num_records"):
        if not _counter(meta[name]):
            return f"{name} must be an integer >= 0, got {meta[name]!r}"
    elapsed = meta["elapsed"]
    if (
        isinstance(elapsed, bool)
        or not isinstance(elapsed, int | float)
        or not (math.isfinite(elapsed) and elapsed >= 0)
    ):
        return f"elapsed must be a number of seconds >= 0, got {elapsed!r}"
    if "format" not in meta:  # written before the integrity fields: they cannot be there alone
        present = [name for name in INTEGRITY_FIELDS if name in meta]
        return f"it has {present} but no format" if present else None
    if meta["format"] != FORMAT:
        return f"format {meta['format']!r}, where this gsbpolicy writes and reads {FORMAT}"
    files = meta.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(v, str) and _SHA256.fullmatch(v) for v in files.values()
    ):
        return "its files entry is not a table of SHA-256 hashes"
    if meta.get("checksum") != canonical_sha256({k: v for k, v in meta.items() if k != "checksum"}):
        return "its checksum does not match its fields (the record was edited or damaged)"
    return None


def checked_bytes(path: Path, meta: dict) -> bytes:
    """The bytes of a checkpoint's tensor file, checked against the SHA-256 its record holds (records written
    before the hashes existed hold none)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CheckpointError(f"checkpoint file {path} is missing or unreadable ({err.strerror})") from None
    recorded = meta["files"].get(path.name) if "format" in meta else sha256_bytes(data)
    if recorded != sha256_bytes(data):
        why = (
            "its record lists no such file"
            if recorded is None
            else "its sha256 is not the one its record holds"
        )
        raise CheckpointError(
            f"checkpoint file {path} is corrupted: {why} (a flipped bit, or a partial copy)"
        )
    return data


def verify_files(directory: Path, meta: dict) -> None:
    """Every tensor file the record lists is there and unchanged (`checked_bytes`): checked when a resume is
    asked for, before the run builds anything."""
    for name in meta.get("files", {}):
        checked_bytes(Path(directory) / name, meta)


def load_checkpoint(directory: Path, likes: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    """Load the trees named in `likes` (skeletons) and the JSON record from a checkpoint folder."""
    meta = read_meta(directory)
    trees = {}
    for name, like in likes.items():
        path = directory / f"{name}.safetensors"
        data = checked_bytes(path, meta)
        try:
            tensors = safetensors.numpy.load(data)
        except BaseException as err:  # safetensors' own error types; a damaged header can make it panic
            if not isinstance(err, Exception) and type(err).__name__ != "PanicException":
                raise
            raise CheckpointError(
                f"checkpoint file {path} is corrupted ({' '.join(str(err).split())})"
            ) from None
        trees[name] = tensors_to_tree(tensors, like, str(path))
    return trees, meta


class CheckpointStore:
    """The checkpoint folder `directory` of a run folder, written in two steps: `write` puts the new checkpoint
    beside the current one, which stays the one a resume loads until `commit` (a seed group writes every seed's
    new checkpoint before it commits any). `writer=False` (processes other than 0) takes part in the gathering
    and writes nothing."""

    def __init__(self, directory: Path, writer: bool = True):
        self.directory, self.writer = Path(directory), writer
        self.iteration = None  # of the last checkpoint written or loaded

    def write(self, trees: dict[str, Any], meta: dict) -> None:
        """Write `trees` with the record `meta` as the pending checkpoint (a collective: every process calls it)."""
        write_checkpoint(self.directory, trees, meta)
        self.iteration = meta["iteration"]

    def commit(self) -> None:
        """The checkpoint `write` wrote becomes the current one."""
        if self.writer:
            commit_checkpoint(self.directory)
