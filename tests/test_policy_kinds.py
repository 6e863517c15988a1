"""Every policy kind through the one loader: save -> `GSBPolicy.from_pretrained` -> predict (deterministic and
with explicit noise) against the module's own JAX methods, folders written before the move, the kind errors,
and the ONNX export and runtime of each kind (the flow kind's export is covered in depth by test_export.py).
"""

import dataclasses
import json
import re
import shutil
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
import safetensors

from gsbpolicy import (
    GaussianActor,
    GSBPolicy,
    PolicyFormatError,
    PolicySpec,
    load_policy,
    make_policy,
    save_policy,
)
from gsbpolicy._coupling import make_genpo
from gsbpolicy._gaussian import GaussianSpec
from gsbpolicy._kinds import policy_kind

OLD_FOLDERS = Path(__file__).with_name("data") / "old_policy_folders"
"""Folders written by the Gaussian and GenPO writers as they were in trainers/ before the move (commit
be7e87b), with the actions that code computed (`expected.json`)."""
KINDS = ("flow", "gaussian", "genpo")
STATS = np.random.default_rng(0).normal(2.0, 3.0, (64, 4)).astype(np.float32)


def _gaussian() -> GaussianActor:
    spec = GaussianSpec(obs_dim=4, act_dim=2, action_low=(-1.0, -2.0), action_high=(1.0, 3.0), width=16,
                        depth=2, std="state", squash="tanh", env_id="Tiny-v0")  # fmt: skip
    actor = GaussianActor(spec, key=jax.random.key(1))
    return actor.with_normalizer(actor.normalizer.update(STATS))


def _genpo(tiny_spec: PolicySpec):
    spec = PolicySpec(
        **{**tiny_spec.to_dict(), "num_steps": 3, "time_embedding": "fourier", "output_scale": 1.0}
    )
    actor = make_genpo(spec, 0.8, key=jax.random.key(2))
    return eqx.tree_at(lambda a: a.normalizer, actor, actor.normalizer.update(STATS))


@pytest.fixture(scope="module")
def modules(tiny_policy, tiny_spec) -> dict:
    """One tiny module of each kind, all with obs_dim 4, act_dim 2 and non-trivial observation statistics."""
    return {"flow": tiny_policy, "gaussian": _gaussian(), "genpo": _genpo(tiny_spec)}


@pytest.fixture(scope="module")
def loaded(modules, tmp_path_factory) -> dict:
    """Each module saved and loaded back through `GSBPolicy.from_pretrained`."""
    root = tmp_path_factory.mktemp("kinds")
    return {
        kind: GSBPolicy.from_pretrained(save_policy(module, root / kind)) for kind, module in modules.items()
    }


def _obs(batch: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).normal(2.0, 4.0, (batch, 4)).astype(np.float32)


@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_policy_of_every_kind_loads_with_the_same_tensors(kind, modules, loaded):
    policy = loaded[kind]
    assert policy.kind == policy_kind(modules[kind]) == kind and policy.spec == modules[kind].spec
    for a, b in zip(
        jax.tree.leaves(eqx.filter(modules[kind], eqx.is_array)),
        jax.tree.leaves(eqx.filter(policy.policy, eqx.is_array)),
        strict=True,
    ):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert kind in repr(policy)


@pytest.mark.parametrize("kind", KINDS)
def test_predict_is_the_modules_own_action(kind, modules, loaded):
    module, policy = modules[kind], loaded[kind]
    obs = _obs(5)
    deterministic = np.asarray(jax.vmap(module.act)(obs))
    np.testing.assert_allclose(policy.predict(obs)[0], deterministic, rtol=0, atol=1e-6)
    np.testing.assert_allclose(policy.predict(obs[0])[0], deterministic[0], rtol=0, atol=1e-6)
    # Stochastic: explicit noise of the kind's shape, and predict's own draws from the seeded generator.
    noise = np.random.default_rng(4).standard_normal((5, *policy.noise_shape), np.float32)
    stochastic = np.asarray(jax.vmap(module.act_stochastic)(obs, noise))
    np.testing.assert_allclose(policy.act(obs, noise), stochastic, rtol=0, atol=1e-6)
    policy.set_seed(7)
    drawn = np.random.default_rng(7).standard_normal((5, *policy.noise_shape), dtype=np.float32)
    np.testing.assert_allclose(policy.predict(obs, deterministic=False)[0], policy.act(obs, drawn), atol=1e-6)
    assert not np.allclose(stochastic, deterministic)
    # Zero noise is the deterministic policy for every kind.
    np.testing.assert_allclose(policy.act(obs, np.zeros_like(noise)), deterministic, rtol=0, atol=1e-6)
    space = policy.action_space
    assert all(space.contains(a) for a in policy.act(obs * 1e3, noise * 1e3))


def test_noise_shapes_and_the_samplers_they_stand_for(modules, loaded):
    assert loaded["flow"].noise_shape == (7, 2)  # [N+1, act_dim]
    assert loaded["gaussian"].noise_shape == (2,)  # [act_dim]
    assert loaded["genpo"].noise_shape == (4,)  # the prior sample x_0, [2 act_dim]
    # The explicit-noise actions are the trainers' samplers with that noise.
    gaussian, genpo, key = modules["gaussian"], modules["genpo"], jax.random.key(5)
    obs = _obs(1)[0]
    eps = jax.random.normal(key, (2,))
    np.testing.assert_array_equal(
        gaussian.act_stochastic(obs, eps), gaussian.to_env(gaussian.sample(obs, key))
    )
    x0 = jax.random.normal(key, (4,))
    np.testing.assert_array_equal(genpo.act_stochastic(obs, x0), genpo.to_env(genpo.forward(obs, x0)))


@pytest.mark.parametrize("kind", KINDS)
def test_bad_noise_and_observations_are_one_line_errors(kind, loaded):
    policy, obs = loaded[kind], _obs(3)
    expected = re.escape(f"noise shape (3, 9) does not match {(3, *policy.noise_shape)}")
    with pytest.raises(ValueError, match=expected):
        policy.act(obs, np.zeros((3, 9), np.float32))
    with pytest.raises(ValueError, match="noise contains NaN"):
        policy.act(obs, np.full((3, *policy.noise_shape), np.nan, np.float32))
    with pytest.raises(ValueError, match="observation contains NaN"):
        policy.predict(np.full(4, np.nan, np.float32))
    with pytest.raises(ValueError, match=r"observation shape \(5,\)"):
        policy.predict(np.zeros(5, np.float32))


def test_path_methods_are_for_flow_policies_only(loaded):
    with pytest.raises(TypeError, match="belong to flow policies; this is a gaussian policy"):
        loaded["gaussian"].sample(_obs(2), np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("name", ["gaussian_state_tanh", "gaussian_param_clip", "genpo"])
def test_folders_written_before_the_move_load_and_act_as_they_did(name, tmp_path):
    folder = OLD_FOLDERS / name
    expected = json.loads((folder / "expected.json").read_text())
    policy = GSBPolicy.from_pretrained(folder)
    assert policy.kind == name.split("_")[0]
    obs = np.asarray(expected["obs"], np.float32)
    np.testing.assert_allclose(policy.predict(obs)[0], expected["deterministic"], rtol=0, atol=1e-6)
    noise = np.asarray(expected["noise"], np.float32)
    np.testing.assert_allclose(policy.act(obs, noise), expected["stochastic"], rtol=0, atol=1e-6)
    # Saving again writes the same config and tensors, with the two integrity hashes added: the format is
    # otherwise unchanged.
    again = policy.save_pretrained(tmp_path / name)
    config = json.loads((again / "config.json").read_text())
    assert config.pop("tensors_sha256") and config == json.loads((folder / "config.json").read_text())
    new, old = (safetensors.safe_open(f / "model.safetensors", "numpy") for f in (again, folder))
    assert sorted(new.keys()) == sorted(old.keys())
    assert all(np.array_equal(new.get_tensor(k), old.get_tensor(k)) for k in new.keys())
    metadata = new.metadata()
    assert {metadata.pop("config_sha256"), metadata.pop("config")} and metadata == old.metadata()


def _write_config(folder: Path, config: dict) -> None:
    (folder / "config.json").write_text(json.dumps(config))


def test_the_kind_comes_from_config_json_and_bad_kinds_are_named(tmp_path, modules):
    folder = save_policy(modules["gaussian"], tmp_path / "gaussian")
    config = json.loads((folder / "config.json").read_text())
    _write_config(folder, {**config, "format": "gaussian_mlp_v2"})
    with pytest.raises(PolicyFormatError, match="policy format 'gaussian_mlp_v2'; this gsbpolicy reads"):
        load_policy(folder)
    _write_config(folder, {**config, "format_version": 2})
    with pytest.raises(PolicyFormatError, match="gaussian_mlp policy of format_version 2"):
        load_policy(folder)
    _write_config(folder, {**config, "spec": {**config["spec"], "width": "wide"}})
    with pytest.raises(PolicyFormatError, match="invalid Gaussian policy spec"):
        load_policy(folder)
    _write_config(folder, {k: v for k, v in config.items() if k != "format"})  # read as a flow config
    with pytest.raises(PolicyFormatError, match="invalid policy spec"):
        load_policy(folder)
    _write_config(folder, [1, 2])
    with pytest.raises(PolicyFormatError, match="holds list, not a JSON object"):
        load_policy(folder)
    genpo = save_policy(modules["genpo"], tmp_path / "genpo")
    config = json.loads((genpo / "config.json").read_text())
    _write_config(genpo, {k: v for k, v in config.items() if k != "mix"})
    with pytest.raises(PolicyFormatError, match="lacks 'mix' required by a GenPO policy"):
        load_policy(genpo)
    _write_config(genpo, {**config, "mix": 1.5})
    with pytest.raises(PolicyFormatError, match=r"p must be in \(0, 1\]"):
        load_policy(genpo)
    with pytest.raises(TypeError, match="not a policy module: got dict"):
        save_policy({"weights": 1}, tmp_path / "dict")
    with pytest.raises(TypeError, match="not a policy module"):
        GSBPolicy(modules["flow"].spec)


def test_gaussian_and_genpo_weights_are_checked_like_flow_weights(tmp_path, modules):
    """Tensor names, shapes and finiteness: the same checks as flow folders (they share the loader)."""
    import safetensors.numpy

    folder = save_policy(modules["gaussian"], tmp_path / "gaussian")
    tensors = safetensors.numpy.load_file(folder / "model.safetensors")
    tensors[".mlp.layers[0].bias"] = np.full_like(tensors[".mlp.layers[0].bias"], np.inf)
    safetensors.numpy.save_file(tensors, folder / "model.safetensors")
    with pytest.raises(PolicyFormatError, match=r"tensor '.mlp.layers\[0\].bias' holds NaN or inf"):
        load_policy(folder)
    del tensors[".mlp.layers[0].bias"]
    safetensors.numpy.save_file(tensors, folder / "model.safetensors")
    with pytest.raises(PolicyFormatError, match=r"lacks tensor '.mlp.layers\[0\].bias'"):
        load_policy(folder)
    diverged = eqx.tree_at(
        lambda a: a.normalizer.mean, modules["genpo"], modules["genpo"].normalizer.mean * np.nan
    )
    with pytest.raises(ValueError, match="refusing to save non-finite weights: tensor 'normalizer.mean'"):
        save_policy(diverged, tmp_path / "diverged")
    assert not (tmp_path / "diverged" / "model.safetensors").exists()


# ---------------------------------------------------------------------------------------------- ONNX
@pytest.fixture(scope="module")
def exported(modules, tmp_path_factory) -> dict:
    """{(kind, mode): (path, report)}: every kind exported in both modes by `python -m export.onnx`'s
    code path (a saved policy folder), so the parity checks of the exporter have run on each."""
    from export import onnx as onnx_export

    root = tmp_path_factory.mktemp("onnx_kinds")
    result = {}
    for kind, module in modules.items():
        folder = save_policy(module, root / kind)
        for mode in onnx_export.MODES:
            out = root / f"{kind}_{mode}.onnx"
            assert onnx_export.main([str(folder), "--out", str(out), "--mode", mode]) == 0
            result[kind, mode] = out
    return result


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_exports_to_onnx_and_runs_without_jax_alike(kind, exported, loaded):
    from export.onnx import TOLERANCE
    from export.runtime import OnnxPolicy

    policy, obs = loaded[kind], _obs(7)
    ode, sde = OnnxPolicy(exported[kind, "ode"]), OnnxPolicy(exported[kind, "sde"])
    assert ode.kind == sde.kind == kind and ode.noise_shape == sde.noise_shape == policy.noise_shape
    assert (ode.num_steps is None) == (kind == "gaussian")
    np.testing.assert_allclose(ode.predict(obs)[0], policy.predict(obs)[0], rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(ode.predict(obs[0])[0], policy.predict(obs[0])[0], rtol=0, atol=TOLERANCE)
    noise = np.random.default_rng(8).standard_normal((7, *policy.noise_shape), np.float32)
    np.testing.assert_allclose(sde.act(obs, noise), policy.act(obs, noise), rtol=0, atol=TOLERANCE)
    sde.set_seed(3), policy.set_seed(3)  # the same draws in both runtimes
    np.testing.assert_allclose(
        sde.predict(obs, deterministic=False)[0], policy.predict(obs, deterministic=False)[0], atol=TOLERANCE
    )
    with pytest.raises(ValueError, match="noise shape"):
        sde.act(obs, np.zeros((7, 9), np.float32))
    assert kind in repr(sde)


# ------------------------------------------------------------------------------------------ publishing
@pytest.mark.parametrize(
    ("kind", "algo"), [("flow", "gsb_mdpo"), ("gaussian", "gaussian_ppo"), ("genpo", "genpo")]
)
def test_every_kind_publishes_a_dry_run_folder(kind, algo, modules, tmp_path, capsys):
    """A run folder of each kind (the committed example run's records, relabelled with the kind's algorithm,
    and a tiny policy for its env) publishes; the card describes the kind and the folder loads as it."""
    from hub_cards import publish, render

    example = render.EXAMPLES_DIR / "gsb_mdpo-InvertedPendulum-v5"
    run = tmp_path / "run"
    (run / "policy").mkdir(parents=True)
    for name, folder in (("run.json", run), ("metrics.jsonl", run), ("results.json", run / "policy")):
        shutil.copyfile(example / name, folder / name)
    for path in (run / "run.json", run / "policy" / "results.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "algo": algo}))
    bounds = {"act_dim": 1, "action_low": (-3.0,), "action_high": (3.0,), "env_id": "InvertedPendulum-v5"}
    module = modules[kind]
    if kind == "genpo":
        module = make_genpo(dataclasses.replace(module.spec, **bounds), module.mix, key=jax.random.key(0))
    elif kind == "gaussian":
        module = GaussianActor(dataclasses.replace(module.spec, **bounds), key=jax.random.key(0))
    else:
        module = make_policy(dataclasses.replace(module.spec, **bounds), key=jax.random.key(0))
    save_policy(module, run / "policy")
    out = tmp_path / "hub"
    argv = [str(run), "--repo-id", f"org/{algo}", "--out", str(out), "--dry-run", "--no-onnx", "--no-video"]
    assert publish.main(argv) == 0, capsys.readouterr().err
    card = (out / "README.md").read_text()
    title = {"flow": "flow policy", "gaussian": "Gaussian policy", "genpo": "coupled-flow policy"}[kind]
    assert f"{title} for InvertedPendulum-v5" in card
    assert ("flow-matching" in card) == (kind != "gaussian")
    assert ("(ODE)" in card) == (kind == "flow")
    assert GSBPolicy.from_pretrained(out).kind == kind


def test_flow_exports_written_before_the_kind_was_recorded_still_run(exported, loaded, tmp_path):
    import onnx

    from export.runtime import OnnxPolicy

    model = onnx.load(exported["flow", "sde"])
    kept = [p for p in model.metadata_props if p.key not in ("kind", "noise_shape")]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    onnx.save(model, tmp_path / "old.onnx")
    old, noise = OnnxPolicy(tmp_path / "old.onnx"), np.zeros((3, 7, 2), np.float32)
    assert (old.kind, old.noise_shape, old.num_steps) == ("flow", (7, 2), 6)
    np.testing.assert_allclose(old.act(_obs(3), noise), loaded["flow"].act(_obs(3), noise), atol=1e-5)


def test_latency_names_the_kind_it_cannot_measure(modules, tmp_path, capsys):
    from export import latency

    folder = save_policy(modules["gaussian"], tmp_path / "gaussian")
    assert latency.main([str(folder)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: export.latency measures flow policies; {folder} is a gaussian policy"
    )
