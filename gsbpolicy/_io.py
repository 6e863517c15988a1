"""Policy folders: `config.json` + `model.safetensors` (no pickles), for every kind of policy module.

Tensors are keyed by their pytree path (e.g. `drift_net.mlp.layers.0.weight`, `normalizer.mean`), so the
file is readable by any safetensors tool. Loading rebuilds the skeleton from the config alone and checks
every tensor's name, shape, dtype and finiteness against it before anything is used. This module holds
what every kind shares and the flow policy's own format; `_kinds` chooses the kind of a folder.

The two files vouch for each other: config.json records the SHA-256 of the tensors (`tensors_sha256`), and
the weights' metadata records the SHA-256 of config.json's content (`config_sha256`, with a copy of the
config to say what changed). Loading checks both, so a flipped bit in the weights, a config.json edited
after saving, or weights whose metadata another tool stripped are each refused naming the file; folders
written before these hashes existed (neither is present) load as before.
"""

import dataclasses
import json
import os
from pathlib import Path
from typing import Literal

import equinox as eqx
import jax
import numpy as np
import safetensors.numpy

from ._files import (
    atomic_write_bytes,
    atomic_write_text,
    canonical_sha256,
    loads_json,
    read_json,
    safetensors_bytes,
    tensors_sha256,
)
from ._normalizer import RunningNorm
from ._policy import FlowPolicy, make_policy
from ._spec import FORMAT_VERSION, PolicySpec

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
LIBRARY_NAME = "gsbpolicy"
TENSORS_HASH = "tensors_sha256"
"""config.json's record of the SHA-256 of the weights' tensors (`files.tensors_sha256`)."""
CONFIG_HASH = "config_sha256"
"""The weights' metadata record of the SHA-256 of config.json's content (`files.canonical_sha256`)."""
CONFIG_COPY = "config"
"""The weights' metadata copy of config.json, from which a mismatch is explained field by field."""

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
    """A module's arrays as a flat {pytree path: numpy array} dict, for saving (`require_finite`, and
    observation statistics checked by `check_normalizers`)."""
    check_normalizers(module, "refusing to save the policy")
    leaves = jax.tree_util.tree_leaves_with_path(eqx.filter(module, eqx.is_array))
    return require_finite({_leaf_key(path, key_style): np.asarray(leaf) for path, leaf in leaves})


def check_normalizers(module, where: str) -> None:
    """Every observation normaliser of `module` must hold statistics a normaliser can have: a variance and a
    count >= 0 (finiteness is checked with the other tensors). PolicyFormatError, prefixed with `where`,
    otherwise: a negative variance would turn into NaN actions only when the policy is used."""
    is_norm = lambda x: isinstance(x, RunningNorm)  # noqa: E731
    for path, norm in jax.tree_util.tree_flatten_with_path(module, is_leaf=is_norm)[0]:
        if not is_norm(norm) or isinstance(norm.var, jax.ShapeDtypeStruct):
            continue
        name = _leaf_key(path)
        for field, values in (("var", np.atleast_1d(norm.var)), ("count", np.atleast_1d(norm.count))):
            negative = np.argwhere(values < 0)
            if negative.size:
                raise PolicyFormatError(
                    f"{where}: observation statistic {name}.{field} is negative at index "
                    f"{negative[:5].tolist()}; a variance or count cannot be (the statistics are corrupted)"
                )


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
    """Write `model.safetensors` then `config.json` into `directory` (created if needed), atomically, each
    carrying the other's hash (the module docstring)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = {**config, TENSORS_HASH: tensors_sha256(tensors)}
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    metadata = {**metadata, CONFIG_HASH: canonical_sha256(config), CONFIG_COPY: canonical}
    atomic_write_bytes(directory / WEIGHTS_NAME, safetensors_bytes(tensors, metadata))
    atomic_write_text(directory / CONFIG_NAME, json.dumps(config, indent=2, sort_keys=True) + "\n")
    return directory


def read_config(config_path: str | os.PathLike) -> dict:
    """A config.json as a dict; a missing, unreadable or non-object file is a one-line error."""
    config_path = Path(config_path)
    if not config_path.is_file():
        raise FileNotFoundError(f"policy config not found: {config_path}")
    config = read_json(config_path, PolicyFormatError)
    if not isinstance(config, dict):
        raise PolicyFormatError(f"{config_path} holds {type(config).__name__}, not a JSON object")
    return config


def _flat(value, prefix: str = "") -> dict:
    if not isinstance(value, dict):
        return {prefix.rstrip("."): value}
    flat = {}
    for name, item in value.items():
        flat.update(_flat(item, f"{prefix}{name}."))
    return flat


def _config_changes(saved_copy: str | None, config: dict) -> str:
    """ "field: saved X, config Y" for the fields of config.json that differ from the copy saved with the
    weights (empty if the copy is missing or unreadable)."""
    try:
        saved = _flat(json.loads(saved_copy))
    except (TypeError, ValueError, RecursionError):
        return ""
    now = _flat(config)
    changed = [
        f"{name}: saved {saved.get(name)!r}, config {now.get(name)!r}"
        for name in sorted(saved.keys() | now.keys())
        if saved.get(name) != now.get(name)
    ]
    return "; ".join(changed[:5]) + ("; ..." if len(changed) > 5 else "")


def check_integrity(config: dict, config_path: Path, weights: "Weights") -> None:
    """config.json and the weights must be the files that were saved together, unchanged (module docstring);
    PolicyFormatError naming the file at fault otherwise."""
    saved_hash = weights.metadata.get(CONFIG_HASH)
    if saved_hash is None and TENSORS_HASH not in config:
        return  # written before the hashes existed
    if saved_hash is None:
        raise PolicyFormatError(
            f"{weights.path} lacks the integrity metadata ({CONFIG_HASH}) that {config_path} says it was saved "
            "with: another tool stripped its metadata, or it is not this config's weights; save the policy again "
            "with save_pretrained()"
        )
    if saved_hash != canonical_sha256(config):
        changes = _config_changes(weights.metadata.get(CONFIG_COPY), config) or "its sha256 differs"
        raise PolicyFormatError(
            f"{config_path} does not match the config {weights.path} was saved with ({changes}); config.json was "
            "edited after saving. Restore the saved values, or save the policy again with save_pretrained(), "
            "which writes a matching config and weights"
        )
    if config.get(TENSORS_HASH) != tensors_sha256(weights.tensors):
        raise PolicyFormatError(
            f"{weights.path} is corrupted: its tensors do not match the sha256 recorded in {config_path} when "
            "it was saved (a flipped bit, or a partial copy); download or copy it again"
        )


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


@dataclasses.dataclass(frozen=True)
class Weights:
    """A safetensors file's tensors and header metadata, read once and checked by every loader."""

    path: Path
    tensors: dict[str, np.ndarray]
    metadata: dict[str, str]


def read_weights(weights_path: str | os.PathLike) -> Weights:
    """The tensors and the header metadata of a safetensors file; a one-line error for any damage."""
    weights_path = Path(weights_path)
    if not weights_path.is_file():
        raise FileNotFoundError(f"policy weights not found: {weights_path}")
    try:
        data = weights_path.read_bytes()
    except OSError as err:
        raise PolicyFormatError(f"{weights_path} cannot be read ({err.strerror or err})") from None
    metadata = _header_metadata(data, weights_path)
    try:
        tensors = safetensors.numpy.load(data)
    except (
        BaseException
    ) as err:  # safetensors' own error types for every kind of damage, a Rust panic among them
        if not isinstance(err, Exception) and type(err).__name__ != "PanicException":
            raise
        message = " ".join(str(err).split())
        raise PolicyFormatError(f"{weights_path} is corrupted or truncated ({message})") from None
    return Weights(weights_path, tensors, metadata)


def _header_metadata(data: bytes, weights_path: Path) -> dict[str, str]:
    """The metadata of a safetensors file's header, which must be a JSON object mapping strings to strings."""
    size = int.from_bytes(data[:8], "little")
    if len(data) < 8 or size > len(data) - 8:
        raise PolicyFormatError(f"{weights_path} is corrupted or truncated (its header is cut short)")
    try:
        header = loads_json(data[8 : 8 + size], "its header")
    except ValueError as err:
        raise PolicyFormatError(f"{weights_path} is corrupted or truncated ({err})") from None
    metadata = header.get("__metadata__", {}) if isinstance(header, dict) else None
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise PolicyFormatError(
            f"{weights_path} is corrupted or truncated (its header is not a safetensors header)"
        )
    return metadata


def _check_saved_spec(spec: PolicySpec, metadata: dict[str, str], weights_path: Path) -> None:
    """The config's spec must be the one the weights were saved with (recorded in their metadata).

    Files written before the spec was recorded have no `spec_hash` and load unchecked here, so every
    published folder keeps loading (`check_integrity` then checks the rest of the config, where recorded)."""
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


def load_flow(config: dict, config_path: Path, weights: Weights) -> FlowPolicy:
    """The `FlowPolicy` described by a flow config.json (already parsed) with `weights`."""
    spec = spec_from_config(config, config_path)
    _check_saved_spec(spec, weights.metadata, weights.path)
    skeleton = eqx.filter_eval_shape(make_policy, spec, key=jax.random.key(0))
    return load_into(skeleton, weights)


# ------------------------------------------------------------------------------------- any module
def load_into(skeleton, weights: Weights, key_style: KeyStyle = "dotted"):
    """Fill a module skeleton (arrays as `jax.ShapeDtypeStruct`, e.g. from `eqx.filter_eval_shape`) from
    `weights`, checking every tensor's name, shape, dtype and finiteness, and the observation statistics."""
    module = _fill(skeleton, weights.tensors, weights.path, key_style)
    check_normalizers(module, str(weights.path))
    return module


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
