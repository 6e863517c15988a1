"""Run records: run.json (resolved config and provenance), metrics.jsonl, progress bar, TensorBoard."""

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path

import jax

from gsbpolicy.files import atomic_write_text

RUN_JSON = "run.json"
PACKAGES = ("gsbpolicy", "jax", "jaxlib", "equinox", "optax", "numpy", "gymnasium", "mujoco", "mujoco-mjx",
            "playground", "tyro", "stable-baselines3", "torch")  # fmt: skip


def read_jsonl(path: Path, error: type[Exception] = ValueError) -> list[dict]:
    """The records of a JSON-lines file (none if it does not exist); a line that is not JSON raises `error`
    naming the file and the line."""
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise error(f"{path} line {number} is not valid JSON ({err}); fix or remove that line") from err
    return records


def git_commit() -> dict:
    """The source tree's commit and whether it had uncommitted changes (None outside a git checkout)."""
    root = Path(__file__).resolve().parents[2]

    def git(*args):
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    return {
        "commit": commit,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")) if commit else None,
    }


def package_versions() -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def device_info(mesh=None) -> dict:
    """The hardware a run used: `mesh_devices` is how many devices its batch was split over."""
    device = jax.devices()[0]
    return {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(),
        "local_device_count": jax.local_device_count(),
        "process_count": jax.process_count(),
        "mesh_devices": 1 if mesh is None else int(mesh.devices.size),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "matmul_precision": str(jax.config.jax_default_matmul_precision),
    }


def jsonable(value):
    """Dataclasses, paths and tuples as plain JSON values."""
    if dataclasses.is_dataclass(value):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    return value


def args_record(args) -> dict:
    """The resolved config as run.json stores it (plain JSON values)."""
    return json.loads(json.dumps(jsonable(args)))


def _flatten(tree: dict, prefix: str = "") -> dict:
    flat = {}
    for name, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def config_changes(old: dict, new: dict) -> dict[str, tuple]:
    """{dotted field: (old value, new value)} for every field that differs (None where one lacks it)."""
    old, new = _flatten(old), _flatten(new)
    return {name: (old.get(name), new.get(name)) for name in sorted(old.keys() | new.keys())
            if old.get(name) != new.get(name)}  # fmt: skip


def write_run_json(run_dir: Path, algo: str, args, mesh=None) -> dict:
    """Write run.json for a fresh run. A resumed run keeps the original record and appends to its
    `resumes` list when, at which commit, with which packages and device, and which (result-neutral)
    fields it changed, so the file always describes the experiment as it was started."""
    path = run_dir / RUN_JSON
    now = {
        "git": git_commit(),
        "packages": package_versions(),
        "device": device_info(mesh),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if args.resume and path.is_file():
        record = json.loads(path.read_text())
        changed = config_changes(record["args"], args_record(args))
        entry = {**now, "changed": {name: {"old": old, "new": new} for name, (old, new) in changed.items()}}
        record["resumes"] = [*record.get("resumes", []), entry]
    else:
        record = {"algo": algo, "args": args_record(args), **now}
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return record


class RunLogger:
    """Appends one JSON object per line to metrics.jsonl; optional TensorBoard and progress bar.

    `enabled=False` (processes other than 0 of a multi-process run) makes every method a no-op.
    """

    def __init__(
        self, run_dir: Path, total_steps: int, tensorboard: bool, progress: bool, enabled: bool = True
    ):
        self.path = run_dir / "metrics.jsonl"
        self.enabled = enabled
        self._writer = None
        if tensorboard and enabled:
            from tensorboard.summary import Writer  # tensorboard's own writer: no torch, no TensorFlow

            self._writer = Writer(str(run_dir / "tensorboard"))
        self._bar = None
        if progress and enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, unit="step", unit_scale=True, dynamic_ncols=True)
        self._latest_return = None

    def truncate(self, num_records: int) -> None:
        """Keep the first `num_records` lines (those the checkpoint being resumed had seen)."""
        if not self.enabled:
            return
        lines = self.path.read_text().splitlines(keepends=True) if self.path.exists() else []
        atomic_write_text(self.path, "".join(lines[:num_records]))
        if self._bar is not None and lines[:num_records]:
            self._bar.update(json.loads(lines[num_records - 1])["env_steps"])

    def write(self, record: dict) -> None:
        if not self.enabled:
            return
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if self._writer is not None:
            for name, value in record.items():
                if isinstance(value, int | float) and name != "env_steps":
                    self._writer.add_scalar(name, value, record["env_steps"])
        if "eval/return_deterministic" in record:
            self._latest_return = record["eval/return_deterministic"]

    def progress(self, env_steps: int, sps: float) -> None:
        if self._bar is None:
            return
        self._bar.update(env_steps - self._bar.n)
        postfix = {"sps": f"{sps:,.0f}"}
        if self._latest_return is not None:
            postfix["return"] = f"{self._latest_return:.1f}"
        self._bar.set_postfix(postfix)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._writer is not None:
            self._writer.close()
