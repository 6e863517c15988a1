"""Saving and loading policies as `config.json` + `model.safetensors` (no pickles).

Tensors are keyed by their pytree path (e.g. `drift_net.mlp.layers.0.weight`, `normalizer.mean`), so the
file is readable by any safetensors tool. Loading rebuilds the skeleton from the config alone and checks
every tensor's name, shape and dtype against it before anything is used.
"""

import dataclasses
import json
import os
import secrets
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import safetensors
import safetensors.numpy

from ._policy import FlowPolicy, make_policy
from ._spec import FORMAT_VERSION, PolicySpec

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
LIBRARY_NAME = "gsbpolicy"


class PolicyFormatError(ValueError):
    """A policy folder's files are corrupted, truncated, of an unknown version or inconsistent."""


def _leaf_key(path) -> str:
    return jax.tree_util.keystr(path, simple=True, separator=".")


def _is_leaf_array(x) -> bool:
    return isinstance(x, jax.ShapeDtypeStruct) or eqx.is_array(x)


def policy_tensors(policy: FlowPolicy) -> dict[str, np.ndarray]:
    """The policy's arrays as a flat {pytree path: numpy array} dict, for saving (`require_finite`)."""
    leaves = jax.tree_util.tree_leaves_with_path(eqx.filter(policy, eqx.is_array))
    return require_finite({_leaf_key(path): np.asarray(leaf) for path, leaf in leaves})


def require_finite(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`tensors`, or ValueError naming the first tensor with a NaN or inf: such a policy (a diverged run)
    must never be saved, loaded or published as if it were trained."""
    for key, value in tensors.items():
        bad = np.size(value) - np.count_nonzero(np.isfinite(value))
        if bad:
            raise ValueError(
                f"refusing to save non-finite weights: tensor {key!r} has {bad} NaN/inf of "
                f"{np.size(value)} values (did training diverge?)"
            )
    return tensors


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


def config_dict(spec: PolicySpec) -> dict:
    """The content of config.json."""
    from . import __version__

    return {
        "library_name": LIBRARY_NAME,
        "library_version": __version__,
        "format_version": FORMAT_VERSION,
        "spec": spec.to_dict(),
    }


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


def save_policy(policy: FlowPolicy, directory: str | os.PathLike) -> Path:
    """Write `config.json` and `model.safetensors` into `directory` (created if needed); returns it.

    The weights' metadata holds the spec and its hash, so loading can tell a config.json edited after
    saving from the one the weights were trained with. Refuses non-finite weights (nothing is written)."""
    directory = Path(directory)
    tensors = policy_tensors(policy)
    metadata = {
        "format": LIBRARY_NAME,
        "format_version": str(FORMAT_VERSION),
        "spec": json.dumps(policy.spec.to_dict(), sort_keys=True),
        "spec_hash": policy.spec.hash(),
    }
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(directory / WEIGHTS_NAME, safetensors_bytes(tensors, metadata))
    atomic_write_text(
        directory / CONFIG_NAME, json.dumps(config_dict(policy.spec), indent=2, sort_keys=True) + "\n"
    )
    return directory


def read_spec(config_path: str | os.PathLike) -> PolicySpec:
    """Parse and validate a config.json into a `PolicySpec`."""
    config_path = Path(config_path)
    if not config_path.is_file():
        raise FileNotFoundError(f"policy config not found: {config_path}")
    try:
        config = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PolicyFormatError(f"{config_path} is not valid JSON ({err}); the file is corrupted") from err
    if not isinstance(config, dict) or not isinstance(config.get("spec"), dict):
        raise PolicyFormatError(f"{config_path} has no 'spec' entry; it is not a gsbpolicy config")
    version = config.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise PolicyFormatError(f"{config_path}: format_version must be an int, got {version!r}")
    if version != FORMAT_VERSION:
        raise PolicyFormatError(
            f"{config_path} has format_version {version}; this gsbpolicy reads version {FORMAT_VERSION}"
            + (" (upgrade gsbpolicy to load it)" if version > FORMAT_VERSION else "")
        )
    for key in ("library_name", "library_version"):
        if not isinstance(config.get(key, ""), str):
            raise PolicyFormatError(f"{config_path}: {key} must be a string, got {config[key]!r}")
    try:
        return PolicySpec.from_dict(config["spec"])
    except (TypeError, ValueError) as err:
        raise PolicyFormatError(f"{config_path}: invalid policy spec: {err}") from err


def _read_weights(weights_path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The tensors and the header metadata of a safetensors file."""
    if not weights_path.is_file():
        raise FileNotFoundError(f"policy weights not found: {weights_path}")
    try:
        with safetensors.safe_open(weights_path, framework="numpy") as file:
            return {key: file.get_tensor(key) for key in file.keys()}, file.metadata() or {}
    except Exception as err:  # safetensors raises its own error types for every kind of damage
        raise PolicyFormatError(f"{weights_path} is corrupted or truncated ({err})") from err


def _check_saved_spec(spec: PolicySpec, metadata: dict[str, str], weights_path: Path) -> None:
    """The config's spec must be the one the weights were saved with (recorded in their metadata).

    Files written before the spec was recorded have no `spec_hash` and load unchecked, so every
    published folder keeps loading."""
    saved_hash = metadata.get("spec_hash")
    if saved_hash is None or saved_hash == spec.hash():
        return
    try:
        saved = dataclasses.asdict(PolicySpec.from_dict(json.loads(metadata["spec"])))
        now = dataclasses.asdict(spec)
        changes = "; ".join(
            f"{name}: saved {saved[name]!r}, config {now[name]!r}"
            for name in saved
            if saved[name] != now[name]
        )
    except (KeyError, TypeError, ValueError):  # no readable spec in the metadata: only the hash
        changes = ""
    raise PolicyFormatError(
        f"the config does not match the spec {weights_path} was saved with "
        f"({changes or f'spec hash: saved {saved_hash}, config {spec.hash()}'}); config.json was edited "
        "after saving. Restore the saved values, or save the policy again with save_pretrained(), which "
        "writes a matching config and weights"
    )


def load_weights(spec: PolicySpec, weights_path: str | os.PathLike) -> FlowPolicy:
    """Build the skeleton for `spec` and fill it from a safetensors file written for that spec."""
    weights_path = Path(weights_path)
    tensors, metadata = _read_weights(weights_path)
    _check_saved_spec(spec, metadata, weights_path)
    skeleton = eqx.filter_eval_shape(make_policy, spec, key=jax.random.key(0))
    return _fill(skeleton, tensors, weights_path)


def load_into(skeleton, weights_path: str | os.PathLike):
    """Fill a module skeleton (arrays as `jax.ShapeDtypeStruct`, e.g. from `eqx.filter_eval_shape`) from a
    safetensors file, checking every tensor's name, shape, dtype and finiteness."""
    weights_path = Path(weights_path)
    return _fill(skeleton, _read_weights(weights_path)[0], weights_path)


def _fill(skeleton, tensors: dict[str, np.ndarray], weights_path: Path):
    leaves, treedef = jax.tree_util.tree_flatten_with_path(skeleton, is_leaf=_is_leaf_array)
    filled, used = [], set()
    for path, leaf in leaves:
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            filled.append(leaf)
            continue
        key = _leaf_key(path)
        if key not in tensors:
            raise PolicyFormatError(f"{weights_path} lacks tensor {key!r} required by the config")
        value = tensors[key]
        if value.shape != leaf.shape or value.dtype != leaf.dtype:
            raise PolicyFormatError(
                f"{weights_path}: tensor {key!r} has shape {value.shape} {value.dtype}, but the config "
                f"needs {leaf.shape} {leaf.dtype}; config and weights do not match"
            )
        if not np.isfinite(value).all():
            raise PolicyFormatError(
                f"{weights_path}: tensor {key!r} holds NaN or inf; the weights are unusable"
            )
        filled.append(jax.numpy.asarray(value))
        used.add(key)
    extra = sorted(set(tensors) - used)
    if extra:
        raise PolicyFormatError(f"{weights_path} has tensors the config does not describe: {extra}")
    return jax.tree_util.tree_unflatten(treedef, filled)


def load_policy(directory: str | os.PathLike) -> FlowPolicy:
    """Load a policy folder written by `save_policy`."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"policy folder not found: {directory}")
    return load_weights(read_spec(directory / CONFIG_NAME), directory / WEIGHTS_NAME)
