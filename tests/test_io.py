"""Saving and loading: exact round trip, and a clear error for every kind of damaged or mismatched folder."""

import json
import os
import stat
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
import safetensors.numpy

from gsbpolicy import PolicyFormatError, PolicySpec, load_policy, make_policy, save_policy
from gsbpolicy._files import atomic_write_text
from gsbpolicy._kinds import config_kind_and_spec
from gsbpolicy._spec import FORMAT_VERSION

pytestmark = pytest.mark.strict_promotion


@pytest.fixture
def saved(tmp_path, tiny_policy):
    return save_policy(tiny_policy, tmp_path / "policy")


def test_round_trip_is_exact(saved, tiny_policy):
    loaded = load_policy(saved)
    assert loaded.spec == tiny_policy.spec
    assert eqx.tree_equal(eqx.filter(loaded, eqx.is_array), eqx.filter(tiny_policy, eqx.is_array))
    obs = np.linspace(-1, 1, tiny_policy.spec.obs_dim, dtype=np.float32)
    np.testing.assert_array_equal(loaded.act(obs), tiny_policy.act(obs))


def test_files_are_named_safetensors_and_json(saved, tiny_policy):
    tensors = safetensors.numpy.load_file(saved / "model.safetensors")
    assert {"normalizer.mean", "normalizer.var", "drift_net.mlp.layers.0.weight"} <= set(tensors)
    np.testing.assert_array_equal(tensors["normalizer.mean"], tiny_policy.normalizer.mean)
    config = json.loads((saved / "config.json").read_text())
    assert config["format_version"] == FORMAT_VERSION
    assert PolicySpec.from_dict(config["spec"]) == tiny_policy.spec
    assert not list(saved.glob("*.tmp")), "atomic writes leave no temporary files"


def test_spec_rejects_bad_values():
    with pytest.raises(ValueError, match="squash"):
        PolicySpec(obs_dim=2, act_dim=1, squash="sigmoid")
    with pytest.raises(ValueError, match="action_low and action_high"):
        PolicySpec(obs_dim=2, act_dim=1)
    with pytest.raises(ValueError, match="act_dim=2"):
        PolicySpec(obs_dim=2, act_dim=2, action_low=(-1,), action_high=(1,))
    with pytest.raises(ValueError, match="unknown PolicySpec keys"):
        PolicySpec.from_dict({"obs_dim": 2, "act_dim": 1, "squash": "none", "widht": 3})


def _edit_spec(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config["spec"].update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _rewrite_metadata(folder, metadata):
    weights = folder / "model.safetensors"
    safetensors.numpy.save_file(safetensors.numpy.load_file(weights), weights, metadata)


def test_weights_with_only_a_spec_hash_still_catch_an_edit(saved):
    _rewrite_metadata(saved, {"format": "gsbpolicy", "spec_hash": "0123456789abcdef"})
    with pytest.raises(PolicyFormatError, match="spec hash: saved 0123456789abcdef, config "):
        load_policy(saved)


def _drop_tensors_hash(folder):
    config = json.loads((folder / "config.json").read_text())
    del config["tensors_sha256"]
    (folder / "config.json").write_text(json.dumps(config))


def test_weights_saved_before_the_spec_was_recorded_load_unchecked(saved, tiny_policy, tiny_spec):
    _rewrite_metadata(saved, {"format": "gsbpolicy", "format_version": "1"})
    _drop_tensors_hash(saved)  # and before config.json recorded the tensors' hash
    loaded = load_policy(saved)
    assert eqx.tree_equal(eqx.filter(loaded, eqx.is_array), eqx.filter(tiny_policy, eqx.is_array))
    _edit_spec(saved, width=tiny_spec.width * 2)  # shapes are still checked tensor by tensor
    with pytest.raises(PolicyFormatError, match="config and weights do not match"):
        load_policy(saved)


def test_weights_whose_metadata_was_stripped_are_refused(saved):
    """A current-format folder (config.json records the tensors' hash) whose weights lost their metadata."""
    _rewrite_metadata(saved, {})
    with pytest.raises(
        PolicyFormatError, match=r"model\.safetensors lacks the integrity metadata \(config_sha256\)"
    ):
        load_policy(saved)


def test_a_flipped_bit_in_the_weights_is_refused_naming_the_file(saved):
    weights = saved / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x01  # the lowest mantissa bit of the last weight: a value still finite, one ulp away
    weights.write_bytes(bytes(data))
    with pytest.raises(PolicyFormatError, match=r"model\.safetensors is corrupted: its tensors do not match the "
                       r"sha256 recorded in .*config\.json when it was saved"):  # fmt: skip
        load_policy(saved)


def test_an_edit_outside_the_spec_is_refused_field_by_field(saved):
    config = json.loads((saved / "config.json").read_text())
    config["library_name"] = "other"
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        PolicyFormatError, match=r"\(library_name: saved 'gsbpolicy', config 'other'\); config"
    ):
        load_policy(saved)


@pytest.mark.parametrize("field", ["var", "count"])
def test_negative_observation_statistics_are_refused_on_load_and_save(saved, tiny_policy, field):
    weights = saved / "model.safetensors"
    with safetensors.safe_open(weights, "numpy") as file:
        metadata = file.metadata()
    tensors = safetensors.numpy.load_file(weights)
    value = tensors[f"normalizer.{field}"]
    tensors[f"normalizer.{field}"] = np.asarray(-np.abs(value) - 1.0, value.dtype)
    safetensors.numpy.save_file(tensors, weights, metadata)
    with pytest.raises(
        PolicyFormatError, match=rf"observation statistic normalizer\.{field} is negative at index"
    ):
        load_policy(saved)
    bad = eqx.tree_at(
        lambda p: getattr(p.normalizer, field), tiny_policy, -getattr(tiny_policy.normalizer, field) - 1
    )
    with pytest.raises(
        PolicyFormatError, match=rf"refusing to save the policy: .*normalizer\.{field} is negative"
    ):
        save_policy(bad, saved.parent / "again")
    assert not (saved.parent / "again").exists()


def test_committed_example_config_still_parses():
    root = Path(__file__).resolve().parents[1]
    for config in sorted(root.glob("hub_cards/examples/*/config.json")):
        kind, spec = config_kind_and_spec(json.loads(config.read_text()), config)
        assert kind == "flow" and PolicySpec.from_dict(spec).obs_dim > 0


def test_saving_twice_gives_identical_bytes(tmp_path, tiny_policy):
    # safetensors writes its metadata in a per-map random order; without sorting, these differ.
    folders = [save_policy(tiny_policy, tmp_path / str(i)) for i in range(4)]
    for name in ("model.safetensors", "config.json"):
        assert len({(folder / name).read_bytes() for folder in folders}) == 1
    data = (folders[0] / "model.safetensors").read_bytes()
    metadata = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])["__metadata__"]
    assert list(metadata) == sorted(metadata) and metadata["spec_hash"] == tiny_policy.spec.hash()


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_follow_the_umask(tmp_path, tiny_policy, umask, mode):
    old = os.umask(umask)
    try:
        folder = save_policy(tiny_policy, tmp_path / "policy")
        atomic_write_text(tmp_path / "note.txt", "x")
    finally:
        os.umask(old)
    for path in (folder / "model.safetensors", folder / "config.json", tmp_path / "note.txt"):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


def test_missing_and_extra_tensors(saved):
    weights = saved / "model.safetensors"
    tensors = safetensors.numpy.load_file(weights)
    safetensors.numpy.save_file({**tensors, "stray": np.zeros(3, np.float32)}, weights)
    with pytest.raises(PolicyFormatError, match="stray"):
        load_policy(saved)
    del tensors["normalizer.var"]
    safetensors.numpy.save_file(tensors, weights)
    with pytest.raises(PolicyFormatError, match="lacks tensor 'normalizer.var'"):
        load_policy(saved)


def test_fourier_embedding_round_trip(tmp_path, tiny_spec):
    spec = PolicySpec(**{**tiny_spec.to_dict(), "time_embedding": "fourier", "activation": "elu"})
    policy = make_policy(spec, key=jax.random.key(3))
    loaded = load_policy(save_policy(policy, tmp_path))
    assert eqx.tree_equal(eqx.filter(loaded, eqx.is_array), eqx.filter(policy, eqx.is_array))


def test_later_spec_fields_keep_earlier_configs_and_hashes(tmp_path, tiny_spec):
    # A spec at the defaults of the fields added after format 1 writes none of them: earlier configs load
    # unchanged and hash as before (the value below is what gsbpolicy computed before they existed).
    assert not {"time_reversed", "clip_iterates", "parameterization"} & set(tiny_spec.to_dict())
    default = PolicySpec(obs_dim=4, act_dim=2, action_low=(-1.0, -2.0), action_high=(1.0, 3.0))
    assert default.hash() == "a09366d6a4799db3"
    fpo = {"time_reversed": True, "clip_iterates": True, "sigma_schedule": "constant", "sigma_max": 0.0}
    for name, changes in (("fpo", fpo), ("ddpm", {"parameterization": "ddpm", "sigma_min": 0.1})):
        spec = PolicySpec(**{**tiny_spec.to_dict(), **changes})
        policy = make_policy(spec, key=jax.random.key(3))
        loaded = load_policy(save_policy(policy, tmp_path / name))
        assert loaded.spec == spec and spec.hash() != tiny_spec.hash()
        assert eqx.tree_equal(eqx.filter(loaded, eqx.is_array), eqx.filter(policy, eqx.is_array))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"clip_iterates": True}, "clip_iterates needs the noise-free sampler"),
        ({"sigma_schedule": "linear", "sigma_max": 0.0}, "sigma_max must be > 0"),
        ({"parameterization": "ddim"}, "parameterization"),
        ({"time_reversed": "yes"}, "true or false"),
        ({"parameterization": "ddpm", "sigma_min": 0.0}, "sigma_min must be > 0"),
    ],
)
def test_spec_rejects_bad_sampler_options(tiny_spec, changes, message):
    with pytest.raises(ValueError, match=message):
        PolicySpec(**{**tiny_spec.to_dict(), **changes})
