"""Atomic, resumable checkpoints: pytrees as safetensors keyed by pytree path, plus a JSON record.

A checkpoint is a folder written next to its final place and swapped in with renames, so a run killed at
any moment leaves either the previous checkpoint or the new one, never a mix. Loading needs a skeleton of
the same structure (the freshly initialised training state) and checks every tensor's shape and dtype.

Tensors are stored whole (gathered from every device and process), never per device: a checkpoint does not
depend on how many devices wrote it, and the trainer lays it out on its own mesh when it loads it.
"""

import json
import shutil
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import safetensors.numpy

from .distributed import is_main_process, to_host

META = "meta.json"
META_FIELDS = ("iteration", "env_steps", "num_records", "elapsed")
"""What every checkpoint record holds (trainers may add their own fields)."""


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
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, arrays in tensors.items():
        safetensors.numpy.save_file(arrays, tmp / f"{name}.safetensors")
    (tmp / META).write_text(json.dumps(meta, indent=1))


def commit_checkpoint(directory: Path) -> None:
    """Make the complete pending checkpoint the current one with two renames (process 0 only)."""
    directory = Path(directory)
    old = directory.with_name(directory.name + ".old")
    if directory.exists():
        shutil.rmtree(old, ignore_errors=True)
        directory.rename(old)
    _pending(directory).rename(directory)
    shutil.rmtree(old, ignore_errors=True)


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
    """A checkpoint's JSON record; `CheckpointError` naming the file if it does not parse or lacks a field."""
    path = Path(directory) / META
    try:
        meta = json.loads(path.read_text())
        missing = [name for name in META_FIELDS if name not in meta]
    except (OSError, ValueError, TypeError) as err:
        raise CheckpointError(f"checkpoint record {path} is corrupted ({type(err).__name__}: {err})") from err
    if missing:
        raise CheckpointError(f"checkpoint record {path} is corrupted: it lacks {missing}")
    return meta


def load_checkpoint(directory: Path, likes: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    """Load the trees named in `likes` (skeletons) and the JSON record from a checkpoint folder."""
    meta = read_meta(directory)
    trees = {}
    for name, like in likes.items():
        path = directory / f"{name}.safetensors"
        try:
            tensors = safetensors.numpy.load_file(path)
        except Exception as err:
            raise CheckpointError(f"checkpoint file {path} is missing or corrupted ({err})") from err
        trees[name] = tensors_to_tree(tensors, like, str(path))
    return trees, meta
