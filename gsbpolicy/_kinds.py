"""The kinds of deployable policy module and the one saver and loader for all of them.

Every kind acts on one observation with `act(obs)` (deterministic) and `act_stochastic(obs, noise)` with
explicit standard normal noise of shape `noise_shape()`, and has a `spec` with `obs_dim`, `act_dim`,
`action_low`, `action_high` and `env_id`; `GSBPolicy` and the ONNX exporter need nothing else.

A folder's kind is its config.json's `format` entry. Flow policies, the first format, never wrote one:
a config without `format` is a flow policy (its `spec` entry is checked by the flow loader).
"""

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from ._coupling import FORMAT as GENPO_FORMAT
from ._coupling import GenPOFlow, load_genpo, save_genpo
from ._gaussian import FORMAT as GAUSSIAN_FORMAT
from ._gaussian import GaussianActor, load_gaussian, save_gaussian
from ._io import (
    CONFIG_NAME,
    WEIGHTS_NAME,
    PolicyFormatError,
    Weights,
    check_integrity,
    load_flow,
    read_config,
    read_weights,
    save_flow,
)
from ._policy import FlowPolicy


@dataclasses.dataclass(frozen=True)
class PolicyKind:
    """One kind of policy module: its class, its config.json `format`, the config entry that holds its
    spec, and how a folder of it is written and read (`load(config, config_path, weights)`, the config
    parsed and the weights read and checked against it)."""

    name: str
    module_type: type
    config_format: str | None
    spec_entry: str
    save: Callable[[object, Path], Path]
    load: Callable[[dict, Path, Weights], object]


KINDS = (
    PolicyKind("flow", FlowPolicy, None, "spec", save_flow, load_flow),
    PolicyKind("gaussian", GaussianActor, GAUSSIAN_FORMAT, "spec", save_gaussian, load_gaussian),
    PolicyKind("genpo", GenPOFlow, GENPO_FORMAT, "genpo_spec", save_genpo, load_genpo),
)
POLICY_TYPES = tuple(kind.module_type for kind in KINDS)


def kind_of(module) -> PolicyKind:
    """The kind of a policy module; TypeError for anything else."""
    for kind in KINDS:
        if isinstance(module, kind.module_type):
            return kind
    names = ", ".join(t.__name__ for t in POLICY_TYPES)
    raise TypeError(f"not a policy module: got {type(module).__name__}, expected one of {names}")


def policy_kind(module) -> str:
    """`flow`, `gaussian` or `genpo`: the kind of a policy module (TypeError for anything else)."""
    return kind_of(module).name


def config_kind(config: dict, config_path: Path) -> PolicyKind:
    """The kind a parsed config.json declares (a flow policy when it has no `format` entry)."""
    config_format = config.get("format")
    for kind in KINDS:
        if kind.config_format == config_format:
            return kind
    known = ", ".join(repr(kind.config_format) for kind in KINDS if kind.config_format)
    raise PolicyFormatError(
        f"{config_path} has policy format {config_format!r}; this gsbpolicy reads {known} and flow policies "
        "(no format entry)"
    )


def config_kind_and_spec(config: dict, config_path: str | os.PathLike) -> tuple[str, dict]:
    """(kind name, spec object) of a parsed config.json, for tools that read a policy folder's files
    without loading the weights (the model cards); PolicyFormatError if the config has neither."""
    kind = config_kind(config, Path(config_path))
    spec = config.get(kind.spec_entry)
    if not isinstance(spec, dict):
        raise PolicyFormatError(
            f"{config_path} has no {kind.spec_entry!r} object: not a gsbpolicy policy config"
        )
    return kind.name, spec


def save_policy(module, directory: str | os.PathLike) -> Path:
    """Write any policy module's `config.json` and `model.safetensors` into `directory` (created if
    needed); returns it. Refuses non-finite weights (nothing is written)."""
    return kind_of(module).save(module, Path(directory))


def load_files(config_path: str | os.PathLike, weights_path: str | os.PathLike):
    """The policy module of a config.json and its model.safetensors, whatever its kind. The kind's loader
    checks the config's values and every tensor against them first (its errors say which value or tensor is
    wrong); then the two files are checked against each other (`check_integrity`), which finds what those
    checks cannot: a valid value edited after saving, a flipped bit in a weight."""
    config_path = Path(config_path)
    config = read_config(config_path)
    weights = read_weights(weights_path)
    module = config_kind(config, config_path).load(config, config_path, weights)
    check_integrity(config, config_path, weights)
    return module


def load_policy(directory: str | os.PathLike):
    """Load a policy folder written by `save_policy`, whatever its kind."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"policy folder not found: {directory}")
    if not (directory / CONFIG_NAME).exists() and (directory / "policy" / CONFIG_NAME).is_file():
        # A training run's folder: the mistake every command makes easy, so say where its policy is.
        raise FileNotFoundError(
            f"{directory} is a training run folder, not a policy folder: use {directory / 'policy'}"
        )
    return load_files(directory / CONFIG_NAME, directory / WEIGHTS_NAME)
