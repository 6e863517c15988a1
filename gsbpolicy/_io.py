"""Saving and loading policies as `config.json` + `model.safetensors` (no pickles).

Tensors are keyed by their pytree path (e.g. `drift_net.mlp.layers.0.weight`, `normalizer.mean`), so the
file is readable by any safetensors tool. Loading rebuilds the skeleton from the config alone and checks
every tensor's name, shape and dtype against it before anything is used.
"""

import json
import os
import tempfile
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
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
    """The policy's arrays as a flat {pytree path: numpy array} dict."""
    leaves = jax.tree_util.tree_leaves_with_path(eqx.filter(policy, eqx.is_array))
    return {_leaf_key(path): np.asarray(leaf) for path, leaf in leaves}


def atomic_write(path: Path, write) -> None:
    """Write through a temporary file in the same folder and rename, so a crash never leaves half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
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


def save_policy(policy: FlowPolicy, directory: str | os.PathLike) -> Path:
    """Write `config.json` and `model.safetensors` into `directory` (created if needed); returns it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = policy_tensors(policy)
    metadata = {
        "format": LIBRARY_NAME,
        "format_version": str(FORMAT_VERSION),
        "spec_hash": policy.spec.hash(),
    }
    atomic_write(directory / WEIGHTS_NAME, lambda p: safetensors.numpy.save_file(tensors, p, metadata))
    text = json.dumps(config_dict(policy.spec), indent=2, sort_keys=True) + "\n"
    atomic_write(directory / CONFIG_NAME, lambda p: Path(p).write_text(text))
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
    if not isinstance(config, dict) or "spec" not in config:
        raise PolicyFormatError(f"{config_path} has no 'spec' entry; it is not a gsbpolicy config")
    version = config.get("format_version")
    if version != FORMAT_VERSION:
        raise PolicyFormatError(
            f"{config_path} has format_version {version!r}; this gsbpolicy reads version {FORMAT_VERSION}"
        )
    try:
        return PolicySpec.from_dict(config["spec"])
    except (TypeError, ValueError) as err:
        raise PolicyFormatError(f"{config_path}: invalid policy spec: {err}") from err


def _read_tensors(weights_path: Path) -> dict[str, np.ndarray]:
    if not weights_path.is_file():
        raise FileNotFoundError(f"policy weights not found: {weights_path}")
    try:
        return safetensors.numpy.load_file(weights_path)
    except Exception as err:  # safetensors raises its own error types for every kind of damage
        raise PolicyFormatError(f"{weights_path} is corrupted or truncated ({err})") from err


def load_weights(spec: PolicySpec, weights_path: str | os.PathLike) -> FlowPolicy:
    """Build the skeleton for `spec` and fill it from a safetensors file, checking every key."""
    return load_into(eqx.filter_eval_shape(make_policy, spec, key=jax.random.key(0)), weights_path)


def load_into(skeleton, weights_path: str | os.PathLike):
    """Fill a module skeleton (arrays as `jax.ShapeDtypeStruct`, e.g. from `eqx.filter_eval_shape`) from a
    safetensors file, checking every tensor's name, shape and dtype."""
    weights_path = Path(weights_path)
    tensors = _read_tensors(weights_path)
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
