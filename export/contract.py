"""The robot contract written into an exported policy's ONNX `metadata_props` (see docs/robot.md, "The contract").

What an integrator needs besides the graph: which observation entry is which joint or sensor and in what unit,
which action entry drives which actuator, the bounds, the control period, what the graph expects, the sampler,
and where the policy came from. `contract(...)` builds those fields as strings (lists and objects as JSON);
`export.onnx.metadata` adds them to the shape fields it always wrote. `export.runtime.OnnxPolicy` reads and
checks them with numpy and onnxruntime only, so the two sides share no code: a test holds them together.

Names and units come from the user (`--obs-names` ... at export), else from the Gymnasium MuJoCo env (its
`observation_structure` laid over the model's joints, its actuators), else are `obs[i]` / `act[j]` with unit
`""` (unknown). Provenance comes from the policy folder's `results.json` and `run.json` (a run's `policy/`
folder finds `run.json` one level up); a field the files do not hold is `null`.
"""

import json
import os
from pathlib import Path

import numpy as np

from gsbpolicy._files import read_json, tensors_sha256
from gsbpolicy._internal import env_kind, policy_tensors

CONTRACT_VERSION = 1
"""Bumped when a field changes meaning or goes away (adding a field keeps the version)."""

OBS_INPUT = "raw"
"""The graph takes raw observations, in the env's order and units: the normaliser is inside the graph."""

# MuJoCo joint types (mjtJoint): qpos entries with their units, then qvel entries with theirs.
_JOINT_COORDS = {
    0: (  # free
        [("x", "m"), ("y", "m"), ("z", "m"), ("qw", ""), ("qx", ""), ("qy", ""), ("qz", "")],
        [("vx", "m/s"), ("vy", "m/s"), ("vz", "m/s"), ("wx", "rad/s"), ("wy", "rad/s"), ("wz", "rad/s")],
    ),
    1: (
        [("qw", ""), ("qx", ""), ("qy", ""), ("qz", "")],
        [("wx", "rad/s"), ("wy", "rad/s"), ("wz", "rad/s")],
    ),
    2: ([("", "m")], [("", "m/s")]),  # slide
    3: ([("", "rad")], [("", "rad/s")]),  # hinge
}
_FORCE_UNIT = {2: "N", 3: "N·m"}  # what a joint motor's force is measured in, by joint type


def _coordinates(model, kind: str) -> list[tuple[str, str]]:
    """(name, unit) of every qpos (`kind` "qpos") or qvel entry of a MuJoCo model, in address order."""
    index = 0 if kind == "qpos" else 1
    address = model.jnt_qposadr if kind == "qpos" else model.jnt_dofadr
    entries = []
    for joint in np.argsort(address, kind="stable"):
        name = model.joint(int(joint)).name or f"joint{joint}"
        for suffix, unit in _JOINT_COORDS[int(model.jnt_type[joint])][index]:
            entries.append((f"{kind}:{name}{'.' + suffix if suffix else ''}", unit))
    return entries


def _observation_entries(env, obs_dim: int) -> list[tuple[str, str]] | None:
    """(name, unit) per observation entry of a Gymnasium MuJoCo v5 env, from its `observation_structure`;
    None when the env does not describe its observation or the description does not add up to `obs_dim`."""
    structure = getattr(env, "observation_structure", None)
    model = getattr(env, "model", None)
    if not isinstance(structure, dict) or model is None:
        return None
    entries: list[tuple[str, str]] = []
    skipped = structure.get("skipped_qpos", 0)
    for key, size in structure.items():
        if key == "skipped_qpos" or not size:
            continue
        if key in ("qpos", "qvel"):
            coordinates = _coordinates(model, key)
            start = skipped if key == "qpos" else 0
            entries += coordinates[start : start + size]
        else:  # contact forces, inertias...: named by block and index, unit not stated by the env
            entries += [(f"{key}[{i}]", "") for i in range(size)]
    return entries if len(entries) == obs_dim else None


def _action_entries(env, act_dim: int) -> list[tuple[str, str]] | None:
    """(name, unit) per actuator: the actuator's name (its joint's when unnamed) and, for a motor on a joint,
    what one unit of control means (the force is ctrl times the gear)."""
    model = getattr(env, "model", None)
    if model is None or model.nu != act_dim:
        return None
    entries = []
    for i in range(model.nu):
        joint = int(model.actuator_trnid[i, 0]) if model.actuator_trntype[i] == 0 else None
        name = model.actuator(i).name or (model.joint(joint).name if joint is not None else "") or f"act[{i}]"
        unit = ""
        if joint is not None and int(model.jnt_type[joint]) in _FORCE_UNIT:
            unit = f"x{model.actuator_gear[i, 0]:g} {_FORCE_UNIT[int(model.jnt_type[joint])]}"
        entries.append((name, unit))
    return entries


def _bounds(values) -> list[float | None]:
    """A bound as JSON: None where it is infinite (JSON has no inf)."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, np.float64)]


def describe_env(env_id: str | None, obs_dim: int, act_dim: int) -> dict:
    """What the Gymnasium env `env_id` says of its interface: names, units, observation bounds, `dt` and version.

    Every key is None where the env does not say (no env id, a MuJoCo Playground env, an env that fails to
    make, or one whose spaces do not have the policy's sizes)."""
    found = {"obs": None, "act": None, "obs_low": None, "obs_high": None, "dt": None, "version": None}
    if not env_id or env_kind(env_id) != "gymnasium":
        return found
    import gymnasium

    try:
        env = gymnasium.make(env_id)
    except Exception:  # an unregistered id or a missing simulator: the contract says "unknown"
        return found
    try:
        if env.observation_space.shape != (obs_dim,) or env.action_space.shape != (act_dim,):
            return found
        inner = env.unwrapped
        found.update(
            obs=_observation_entries(inner, obs_dim),
            act=_action_entries(inner, act_dim),
            obs_low=_bounds(env.observation_space.low),
            obs_high=_bounds(env.observation_space.high),
            dt=float(inner.dt) if hasattr(inner, "dt") else None,
            version=env.spec.version if env.spec is not None else None,
        )
        return found
    finally:
        env.close()


def read_provenance(folder: str | os.PathLike | None) -> dict:
    """results.json and run.json of a policy folder (a run's policy/ finds run.json above it); {} where absent."""
    if folder is None:
        return {}
    folder = Path(folder)
    files = {}
    for name, places in (("results", [folder]), ("run", [folder, folder.parent])):
        for place in places:
            if (place / f"{name}.json").is_file():
                files[name] = read_json(place / f"{name}.json")
                break
    return files


def _names(
    given: list[str] | None,
    found: list[tuple[str, str]] | None,
    units: list[str] | None,
    prefix: str,
    size: int,
):
    """(names, units, source) of one side: the user's names, else the env's, else indices."""
    if given is not None:
        return list(given), list(units) if units is not None else [""] * size, "user"
    if found is not None:
        return [n for n, _ in found], list(units) if units is not None else [u for _, u in found], "env"
    return [f"{prefix}[{i}]" for i in range(size)], list(units) if units is not None else [""] * size, "index"


def _get(data, *keys):
    """data[k1][k2]... or None where a level is missing or not an object (results.json and run.json are the
    user's files: an odd one leaves a provenance field unknown, it does not stop the export)."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _sampler(spec, mode: str, steps: int | None) -> dict:
    trained = getattr(spec, "num_steps", None)  # a Gaussian policy has no generation steps
    steps = trained if steps is None else steps
    sampler = {
        "mode": mode,
        "steps": steps,
        "trained_steps": trained,
        "squash": spec.squash,
        "exact": steps == trained,
    }
    if steps != trained:
        sampler["note"] = (
            f"approximation: {steps} Euler steps of the drift trained with {trained} steps; "
            "see the steps table in docs/robot.md"
        )
    return sampler


def _provenance(policy, env_version, files: dict) -> dict:
    seeds = _get(files, "results", "seeds")
    return {
        "env_id": policy.spec.env_id,
        "env_version": env_version,
        "gymnasium_version": _get(files, "run", "packages", "gymnasium"),
        "mujoco_version": _get(files, "run", "packages", "mujoco"),
        "tensors_sha256": tensors_sha256(policy_tensors(policy)),
        "algo": _get(files, "results", "algo") or _get(files, "run", "algo"),
        "training_commit": _get(files, "results", "git_commit") or _get(files, "run", "git", "commit"),
        "seed": seeds[0]
        if isinstance(seeds, list) and len(seeds) == 1
        else _get(files, "run", "args", "seed"),
        "env_steps": _get(files, "results", "env_steps"),
        "final_return": _get(files, "results", "mean"),
        "final_return_std": _get(files, "results", "std"),
        "final_return_episodes": _get(files, "results", "n_episodes"),
    }


def contract(
    policy,
    *,
    mode: str,
    steps: int | None = None,
    folder: str | os.PathLike | None = None,
    obs_names: list[str] | None = None,
    obs_units: list[str] | None = None,
    act_names: list[str] | None = None,
    act_units: list[str] | None = None,
) -> dict[str, str]:
    """The contract fields of `policy`'s export (strings; lists and objects as JSON).

    Args:
        mode: the export's mode (`ode` or `sde`).
        steps: the generation steps the graph runs when not the trained N (`export.onnx --steps K`): the file
            then says it is an approximation of the trained policy.
        folder: the policy folder it was loaded from, for provenance.
        obs_names: the user's observation names (obs_dim of them), overriding the env's.
        obs_units: the user's observation units (obs_dim).
        act_names: the user's action names (act_dim).
        act_units: the user's action units (act_dim).
    """
    spec = policy.spec
    for label, values, size in (
        ("observation names", obs_names, spec.obs_dim),
        ("observation units", obs_units, spec.obs_dim),
        ("action names", act_names, spec.act_dim),
        ("action units", act_units, spec.act_dim),
    ):
        if values is not None and len(values) != size:
            raise ValueError(f"{len(values)} {label} given; the policy has {size}")
    env = describe_env(spec.env_id, spec.obs_dim, spec.act_dim)
    files = read_provenance(folder)
    repeat = _get(files, "run", "args", "rollout", "action_repeat") or 1
    o_names, o_units, o_source = _names(obs_names, env["obs"], obs_units, "obs", spec.obs_dim)
    a_names, a_units, a_source = _names(act_names, env["act"], act_units, "act", spec.act_dim)
    sampler, provenance = _sampler(spec, mode, steps), _provenance(policy, env["version"], files)
    return {
        "contract_version": str(CONTRACT_VERSION),
        "obs_input": OBS_INPUT,
        "obs_names": json.dumps(o_names),
        "obs_units": json.dumps(o_units),
        "obs_names_source": o_source,
        "obs_low": json.dumps(env["obs_low"]),
        "obs_high": json.dumps(env["obs_high"]),
        "act_names": json.dumps(a_names),
        "act_units": json.dumps(a_units),
        "act_names_source": a_source,
        "control_dt": json.dumps(None if env["dt"] is None else env["dt"] * repeat),
        "sampler": json.dumps(sampler),
        "provenance": json.dumps(provenance),
    }
