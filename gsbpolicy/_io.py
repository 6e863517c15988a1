"""Policy folders: `config.json` + `model.safetensors` (no pickles), for every kind of policy module.

Tensors are keyed by their pytree path (e.g. `drift_net.mlp.layers.0.weight`, `normalizer.mean`), so the
file is readable by any safetensors tool. Loading rebuilds the skeleton from the config alone and checks
every tensor's name, shape, dtype and finiteness against it before anything is used. This module holds
what every kind shares and the flow policy's own format; `_kinds` chooses the kind of a folder.
"""

import dataclasses
import json
import os
from pathlib import Path
from typing import Literal

import equinox as eqx
import jax
import numpy as np
import safetensors

from ._policy import FlowPolicy, make_policy
from ._spec import FORMAT_VERSION, PolicySpec
from .files import atomic_write_bytes, atomic_write_text, safetensors_bytes

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
LIBRARY_NAME = "gsbpolicy"

KeyStyle = Literal["dotted", "keystr"]
"""How a tensor's pytree path becomes its name: `dotted` (`mlp.layers.0.weight`, flow and GenPO folders)
or `keystr` (`.mlp.layers[0].weight`, jax's own `keystr`, which the Gaussian folders were written with)."""


class PolicyFormatError(ValueError):
    """A policy folder's files are corrupted, truncated, of an unknown version or inconsistent."""


def _leaf_key(path, key_style: KeyStyle = "dotted") -> str:
    if key_style == "keystr":
        return jax.tree_util.keystr(path)
    return jax.tree_util.keystr(path, simple=True, separator=".")


def _is_leaf_array(x) -> bool:
    return isinstance(x, jax.ShapeDtypeStruct) or eqx.is_array(x)


def policy_tensors(module: eqx.Module, key_style: KeyStyle = "dotted") -> dict[str, np.ndarray]:
    """A module's arrays as a flat {pytree path: numpy array} dict, for saving (`require_finite`)."""
    leaves = jax.tree_util.tree_leaves_with_path(eqx.filter(module, eqx.is_array))
    return require_finite({_leaf_key(path, key_style): np.asarray(leaf) for path, leaf in leaves})


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


def write_policy_files(
    directory: str | os.PathLike, tensors: dict[str, np.ndarray], metadata: dict[str, str], config: dict
) -> Path:
    """Write `model.safetensors` then `config.json` into `directory` (created if needed), atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(directory / WEIGHTS_NAME, safetensors_bytes(tensors, metadata))
    atomic_write_text(directory / CONFIG_NAME, json.dumps(config, indent=2, sort_keys=True) + "\n")
    return directory


def read_config(config_path: str | os.PathLike) -> dict:
    """A config.json as a dict; a missing, unreadable or non-object file is a one-line error."""
    config_path = Path(config_path)
    if not config_path.is_file():
        raise FileNotFoundError(f"policy config not found: {config_path}")
    try:
        config = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PolicyFormatError(f"{config_path} is not valid JSON ({err}); the file is corrupted") from err
    if not isinstance(config, dict):
        raise PolicyFormatError(f"{config_path} holds {type(config).__name__}, not a JSON object")
    return config


# ------------------------------------------------------------------------------------- the flow format
def config_dict(spec: PolicySpec) -> dict:
    """The content of a flow policy's config.json."""
    from . import __version__

    return {
        "library_name": LIBRARY_NAME,
        "library_version": __version__,
        "format_version": FORMAT_VERSION,
        "spec": spec.to_dict(),
    }


def save_flow(policy: FlowPolicy, directory: str | os.PathLike) -> Path:
    """Write a `FlowPolicy`'s `config.json` and `model.safetensors` into `directory`; returns it.

    The weights' metadata holds the spec and its hash, so loading can tell a config.json edited after
    saving from the one the weights were trained with. Refuses non-finite weights (nothing is written)."""
    metadata = {
        "format": LIBRARY_NAME,
        "format_version": str(FORMAT_VERSION),
        "spec": json.dumps(policy.spec.to_dict(), sort_keys=True),
        "spec_hash": policy.spec.hash(),
    }
    return write_policy_files(directory, policy_tensors(policy), metadata, config_dict(policy.spec))


def spec_from_config(config: dict, config_path: Path) -> PolicySpec:
    """Validate a flow policy's config.json (already parsed) into a `PolicySpec`."""
    if not isinstance(config.get("spec"), dict):
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
    """Build the flow skeleton for `spec` and fill it from a safetensors file written for that spec."""
    weights_path = Path(weights_path)
    tensors, metadata = _read_weights(weights_path)
    _check_saved_spec(spec, metadata, weights_path)
    skeleton = eqx.filter_eval_shape(make_policy, spec, key=jax.random.key(0))
    return _fill(skeleton, tensors, weights_path, "dotted")


def load_flow(config: dict, config_path: Path, weights_path: Path) -> FlowPolicy:
    """The `FlowPolicy` described by a flow config.json (already parsed) with the weights of `weights_path`."""
    return load_weights(spec_from_config(config, config_path), weights_path)


# ------------------------------------------------------------------------------------- any module
def load_into(skeleton, weights_path: str | os.PathLike, key_style: KeyStyle = "dotted"):
    """Fill a module skeleton (arrays as `jax.ShapeDtypeStruct`, e.g. from `eqx.filter_eval_shape`) from a
    safetensors file, checking every tensor's name, shape, dtype and finiteness."""
    weights_path = Path(weights_path)
    return _fill(skeleton, _read_weights(weights_path)[0], weights_path, key_style)


def _fill(skeleton, tensors: dict[str, np.ndarray], weights_path: Path, key_style: KeyStyle):
    leaves, treedef = jax.tree_util.tree_flatten_with_path(skeleton, is_leaf=_is_leaf_array)
    filled, used = [], set()
    for path, leaf in leaves:
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            filled.append(leaf)
            continue
        key = _leaf_key(path, key_style)
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
