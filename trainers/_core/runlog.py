"""Run records: run.json (resolved config and provenance), metrics.jsonl, progress bar, TensorBoard,
Weights & Biases."""

import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import jax

from gsbpolicy._files import append_text, atomic_write_text, canonical_sha256, loads_json

from .init_from import provenance

RUN_JSON = "run.json"
PACKAGES = (
    "gsbpolicy",
    "jax",
    "jaxlib",
    "equinox",
    "optax",
    "numpy",
    "gymnasium",
    "mujoco",
    "mujoco-mjx",
    "playground",
    "tyro",
    "stable-baselines3",
    "torch",
)


def read_jsonl(path: Path, error: type[Exception] = ValueError) -> list[dict]:
    """The records of a JSON-lines file (none if it does not exist); a line that is not a JSON object (or not
    UTF-8, or nested too deeply to parse) raises `error` naming the file and the line."""
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        try:
            record = loads_json(line, f"{path} line {number}")
        except ValueError as err:
            raise error(f"{err}; fix or remove that line") from None
        if not isinstance(record, dict):
            raise error(
                f"{path} line {number} holds {type(record).__name__}, not a JSON object; fix or remove it"
            )
        records.append(record)
    return records


def experiment_sha256(record: dict) -> str:
    """The hash of the experiment a run.json record describes (its algorithm and the args it started with), which
    every checkpoint carries: a resume whose run.json no longer hashes to it is refused."""
    return canonical_sha256({"algo": record.get("algo"), "args": record.get("args")})


SOURCE_ROOT = Path(__file__).resolve().parents[2]

NOT_CODE = (":(exclude)hub_cards/results", ":(exclude)README.md", ":(exclude)docs")
"""What `dirty` ignores: the committed results, the README and the documentation. No trainer reads them, and a
suite's `--publish` rewrites them after every run, so counting them would mark every later run of that suite
dirty though the code it ran is exactly the commit's."""


def git_commit(root: Path = SOURCE_ROOT) -> dict:
    """The source tree's commit and whether its code had uncommitted changes (None outside a git checkout);
    changes to `NOT_CODE` do not count."""

    def git(*args):
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    return {
        "commit": commit,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE))
        if commit
        else None,
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


def flatten(tree: dict, prefix: str = "") -> dict:
    flat = {}
    for name, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def config_changes(old: dict, new: dict) -> dict[str, tuple]:
    """{dotted field: (old value, new value)} for every field that differs (None where one lacks it)."""
    old, new = flatten(old), flatten(new)
    return {
        name: (old.get(name), new.get(name))
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    }


def module_name(args_type: type) -> str:
    """The trainer module a config type belongs to, by its import name also when it runs as `__main__`: what
    `python -m` runs it (run.json records it, and a model card's reproduce command names it)."""
    module = sys.modules[args_type.__module__]
    spec = getattr(module, "__spec__", None)
    return spec.name if spec is not None else args_type.__module__


def write_run_json(run_dir: Path, algo: str, args, mesh=None, group: tuple[int, ...] | None = None) -> dict:
    """Write run.json for a fresh run. A resumed run keeps the original record and appends to its
    `resumes` list when, at which commit, with which packages and device, and which (result-neutral)
    fields it changed, so the file always describes the experiment as it was started. `group`: the seeds
    this process trains together (`--seeds`), recorded as `seed_group` (its timings are shared)."""
    path = run_dir / RUN_JSON
    now = {
        "git": git_commit(),
        "packages": package_versions(),
        "device": device_info(mesh),
        **({"seed_group": list(group)} if group else {}),
        "compile_cache": jax.config.jax_compilation_cache_dir
        if jax.config.jax_enable_compilation_cache
        else None,
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if args.resume and path.is_file():
        record = json.loads(path.read_text())
        changed = config_changes(record["args"], args_record(args))
        entry = {**now, "changed": {name: {"old": old, "new": new} for name, (old, new) in changed.items()}}
        record["resumes"] = [*record.get("resumes", []), entry]
    else:
        record = {
            "algo": algo,
            "module": module_name(type(args)),
            "args": args_record(args),
            **provenance(args),
            **now,
        }
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return record


def current_args(record: dict) -> dict:
    """The config in effect now: run.json keeps the args the run was started with, and each resume records
    its changes against those, so the latest resume's changes applied to them are the current args."""
    args = json.loads(json.dumps(record["args"]))
    changed = record["resumes"][-1]["changed"] if record.get("resumes") else {}
    for dotted, change in changed.items():
        *groups, name = dotted.split(".")
        node = args
        for group in groups:
            node = node.setdefault(group, {})
        node[name] = change["new"]
    return args


def scalars(record: dict) -> dict:
    """The numbers of a metrics record that are plotted against its env_steps."""
    return {
        name: value
        for name, value in record.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and name != "env_steps"
    }


class WandbRun:
    """The Weights & Biases run of a run folder (`--log.wandb`): the same records as metrics.jsonl, at step
    env_steps, with run.json's config.

    Its id comes from the run folder's path and start time, so a --resume continues the same wandb run and
    a new run in a reused folder starts a new one. After a resume, the records between the checkpoint and
    the kill are logged again at steps wandb has already seen; wandb keeps the first values (for an exact
    resume, the same numbers).
    """

    def __init__(self, run_dir: Path, record: dict, log: dict):
        import wandb  # lazily: the `track` extra (LogArgs.validate checked it is installed)

        args = current_args(record)
        identity = f"{run_dir.resolve()}|{record['started']}"
        self._run = wandb.init(
            project=log["wandb_project"],
            entity=log["wandb_entity"],
            name=run_dir.name,
            group=f"{record['algo']}:{args['env']}",
            dir=str(run_dir),
            config={"algo": record["algo"], **args, "git": record["git"]},
            id=hashlib.sha256(identity.encode()).hexdigest()[:16],
            resume="allow",
            reinit="create_new",  # the seeds of a --seeds group log side by side from one process
        )

    def write(self, record: dict) -> None:
        self._run.log(scalars(record), step=record["env_steps"])

    def close(self) -> None:
        self._run.finish()


class RunLogger:
    """Appends one JSON object per line to metrics.jsonl; optional TensorBoard, Weights & Biases and
    progress bar.

    Whether to log to wandb is read from run.json, which the run folder writes before making the logger:
    the wandb run takes its config from that record anyway, and a resume may switch `--log.wandb` on or off.
    `enabled=False` (processes other than 0 of a multi-process run) makes every method a no-op.
    """

    def __init__(
        self, run_dir: Path, total_steps: int, tensorboard: bool, progress: bool, enabled: bool = True
    ):
        self.path = run_dir / "metrics.jsonl"
        self.enabled = enabled
        self.num_records = 0  # records written (or kept by `truncate`): what a checkpoint says it follows
        self._digest = hashlib.sha256()  # of the lines written so far: what a checkpoint vouches for
        self._writer = None
        if tensorboard and enabled:
            from tensorboard.summary import Writer  # tensorboard's own writer: no torch, no TensorFlow

            self._writer = Writer(str(run_dir / "tensorboard"))
        self._bar = None
        if progress and enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, unit="step", unit_scale=True, dynamic_ncols=True)
        self._wandb = None
        if enabled:
            record = json.loads((run_dir / RUN_JSON).read_text())
            log = current_args(record)["log"]
            if log.get("wandb"):
                self._wandb = WandbRun(run_dir, record, log)
        self._latest_return = None

    @property
    def metrics_sha256(self) -> str:
        """SHA-256 of the lines of metrics.jsonl written (or kept by `truncate`) so far."""
        return self._digest.copy().hexdigest()

    def truncate(self, num_records: int) -> int:
        """Keep the first `num_records` lines (those the checkpoint being resumed had seen); returns how many
        lines were dropped."""
        self.num_records = num_records
        if not self.enabled:
            return 0
        lines = self.path.read_bytes().splitlines(keepends=True) if self.path.exists() else []
        kept = b"".join(lines[:num_records])
        atomic_write_text(self.path, kept.decode())
        self._digest = hashlib.sha256(kept)
        if self._bar is not None and lines[:num_records]:
            self._bar.update(json.loads(lines[num_records - 1])["env_steps"])
        return len(lines) - min(num_records, len(lines))

    def write(self, record: dict) -> None:
        self.num_records += 1
        if not self.enabled:
            return
        line = json.dumps(record) + "\n"
        append_text(self.path, line)  # never through a link planted in the run folder
        self._digest.update(line.encode())
        if self._writer is not None:
            for name, value in scalars(record).items():
                self._writer.add_scalar(name, value, record["env_steps"])
        if self._wandb is not None:
            self._wandb.write(record)
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
        if self._wandb is not None:
            self._wandb.close()
