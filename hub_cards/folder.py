"""The files a card is made from, read and checked: config.json, results.json, run.json, metrics.jsonl.

A Hub folder (and a committed example under hub_cards/examples/) holds them side by side; a training
run folder holds run.json and metrics.jsonl with the other two in its `policy/` subfolder. Everything a
card says comes from these files, so each is validated here with an error that names the file and the
problem, before anything is rendered or pushed.
"""

import dataclasses
import datetime
import json
import math
from pathlib import Path

from gsbpolicy import PolicyFormatError
from gsbpolicy._files import loads_json, read_json, sha256_bytes
from gsbpolicy._internal import config_kind_and_spec

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
RESULTS = "results.json"
RUN = "run.json"
METRICS = "metrics.jsonl"
ONNX_RUNTIME = "onnx_policy.py"
"""Published next to policy.onnx: a copy of export/runtime.py, so a robot runs the policy without gsbpolicy."""

RESULTS_FIELDS = {
    "env_id": str,
    "mean": float,
    "std": float,
    "n_episodes": int,
    "returns": list,
    "lengths": list,
    "deterministic": bool,
    "seeds": list,
    "env_steps": int,
    "git_commit": (str, type(None)),  # None: trained outside a git checkout
    "date": str,
}
"""results.json fields (written by trainers/_core/loop.py `Trainer.finish`) and their JSON types."""


class FolderError(ValueError):
    """A file a card or an upload needs is missing, unreadable or inconsistent."""


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise FolderError(f"{path} is missing")
    value = read_json(path, FolderError)
    if not isinstance(value, dict):
        raise FolderError(f"{path} must hold a JSON object, found {type(value).__name__}")
    return value


def _is(value, kind) -> bool:
    if kind is float:  # JSON writes 1000.0 as a float but a hand-made file may say 1000
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def validate_results(results: dict, where: Path) -> dict:
    """Check results.json against `RESULTS_FIELDS` and for internal consistency; returns it unchanged."""
    missing = [name for name in RESULTS_FIELDS if name not in results]
    if missing:
        raise FolderError(f"{where} lacks the field(s) {', '.join(missing)}")
    for name, kind in RESULTS_FIELDS.items():
        if not _is(results[name], kind):
            raise FolderError(f"{where}: field {name!r} has type {type(results[name]).__name__}")
    returns, lengths, n = results["returns"], results["lengths"], results["n_episodes"]
    if n < 1 or len(returns) != n or len(lengths) != n:
        raise FolderError(
            f"{where}: n_episodes = {n} but {len(returns)} returns and {len(lengths)} lengths are listed"
        )
    if not all(_is(r, float) and math.isfinite(r) for r in returns):
        raise FolderError(f"{where}: returns must be finite numbers")
    if not all(_is(length, int) and length >= 1 for length in lengths):
        raise FolderError(f"{where}: lengths must be positive integers")
    # mean/std are what the card publishes: they must be the episodes' mean and population std.
    mean = sum(returns) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in returns) / n)
    scale = max(1.0, abs(mean))
    # Written as "not close" so that a NaN mean or std (JSON's NaN literal) fails too.
    if not (abs(results["mean"] - mean) <= 1e-6 * scale and abs(results["std"] - std) <= 1e-6 * scale):
        raise FolderError(
            f"{where}: mean/std ({results['mean']}, {results['std']}) are not the mean and population std "
            f"of the listed returns ({mean}, {std})"
        )
    if not results["seeds"] or not all(_is(s, int) for s in results["seeds"]):
        raise FolderError(f"{where}: seeds must be a non-empty list of integers")
    try:
        datetime.datetime.fromisoformat(results["date"])
    except ValueError as err:
        raise FolderError(f"{where}: date {results['date']!r} is not an ISO 8601 timestamp") from err
    return results


def read_metrics(path: Path) -> list[dict]:
    """metrics.jsonl as a list of records (one JSON object per line)."""
    if not path.is_file():
        raise FolderError(f"{path} is missing")
    records = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        record = loads_json(line, f"{path}, line {number}", FolderError)
        if (
            not isinstance(record, dict)
            or record.get("type") not in ("train", "eval")
            or "env_steps" not in record
        ):
            raise FolderError(
                f"{path}, line {number}: not a metrics record (needs 'type' 'train' or 'eval', and 'env_steps')"
            )
        for name, value in record.items():
            if name != "type" and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise FolderError(f"{path}, line {number}: {name!r} is {value!r}, not a number")
        bad = [
            name for name, value in record.items() if isinstance(value, float) and not math.isfinite(value)
        ]
        if bad:  # a card must never plot or quote the numbers of a diverged run
            raise FolderError(
                f"{path}, line {number}: {bad[0]!r} is {record[bad[0]]}: the run diverged; publish a run "
                "whose numbers stayed finite"
            )
        records.append(record)
    return records


def _agree(field: str, values: dict[str, object]) -> None:
    """`values` ({file name: value}) must all be equal; otherwise name the field and each file's value."""
    if len({json.dumps(value, sort_keys=True) for value in values.values()}) > 1:
        said = ", ".join(f"{name} says {value!r}" for name, value in values.items())
        raise FolderError(f"the files disagree on the {field}: {said} (were they written by different runs?)")


def _check_metrics_sequence(metrics: list[dict], results: dict, where: Path) -> None:
    """One run's metrics: train iterations 1, 2, 3, ... and env steps that never go back, ending at the
    env steps of results.json. Two trainers appending to one file break this at the first interleaved
    line."""
    previous_steps, expected_iteration, last_train_steps = 0, 1, None
    for number, record in enumerate(metrics, start=1):
        steps = record["env_steps"]
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < previous_steps:
            raise FolderError(
                f"{where}, line {number}: env_steps {steps!r} after {previous_steps}: the records of "
                "more than one run are mixed (two trainers on one --output-dir?)"
            )
        previous_steps = steps
        if record["type"] == "train":
            if record.get("iteration") != expected_iteration:
                raise FolderError(
                    f"{where}, line {number}: train iteration {record.get('iteration')!r} where "
                    f"{expected_iteration} was due: the records of more than one run are mixed "
                    "(two trainers on one --output-dir?)"
                )
            expected_iteration += 1
            last_train_steps = steps
    if last_train_steps is not None and last_train_steps != results["env_steps"]:
        raise FolderError(
            f"the files disagree on the env steps: {METRICS} ends at {last_train_steps}, "
            f"{RESULTS} says {results['env_steps']}"
        )


def _run_commits(run: dict) -> list[str | None]:
    """The commits a run was trained at: the first start's and those of any resumes run.json records."""
    commits = [run["git"].get("commit")]
    for resume in run.get("resumes", []) if isinstance(run.get("resumes"), list) else []:
        if isinstance(resume, dict) and isinstance(resume.get("git"), dict):
            commits.append(resume["git"].get("commit"))
    return commits


def check_one_run(spec: dict, results: dict, run: dict, metrics: list[dict], metrics_path: Path) -> None:
    """config.json (its `spec`), results.json, run.json and metrics.jsonl must come from the same run: the
    same env, algorithm, seed and commit, and one unbroken sequence of metrics that ends where the results
    do."""
    args = run["args"]
    _agree(
        "environment",
        {RESULTS: results["env_id"], RUN: args.get("env"), CONFIG: spec.get("env_id")},
    )
    if "algo" in results:  # results.json files written before the field existed lack it
        _agree("algorithm", {RESULTS: results["algo"], RUN: run["algo"]})
    _agree("seed", {RESULTS: results["seeds"], RUN: [args.get("seed")]})
    if results["git_commit"] not in _run_commits(run):
        _agree("commit", {RESULTS: results["git_commit"], RUN: run["git"].get("commit")})
    _check_metrics_sequence(metrics, results, metrics_path)


@dataclasses.dataclass(frozen=True)
class CardSource:
    """The validated contents of the files a card is rendered from."""

    config: dict
    results: dict
    run: dict
    metrics: list[dict]

    @property
    def env_id(self) -> str:
        return self.results["env_id"]

    @property
    def algo(self) -> str:
        return self.run["algo"]

    @property
    def kind(self) -> str:
        """The policy kind: `flow`, `gaussian` or `genpo`."""
        return config_kind_and_spec(self.config, CONFIG)[0]

    @property
    def spec(self) -> dict:
        return config_kind_and_spec(self.config, CONFIG)[1]

    @classmethod
    def read(cls, config: Path, results: Path, run: Path, metrics: Path) -> "CardSource":
        config_data, run_data = _read_json(config), _read_json(run)
        results_data = validate_results(_read_json(results), results)
        try:
            _, spec = config_kind_and_spec(config_data, config)
        except PolicyFormatError as err:
            raise FolderError(str(err)) from err
        for name in ("algo", "args", "git", "packages", "device"):
            if name not in run_data:
                raise FolderError(f"{run} lacks the field {name!r}")
        if not isinstance(run_data["args"], dict) or not isinstance(run_data["git"], dict):
            raise FolderError(f"{run}: 'args' and 'git' must be JSON objects")
        metrics_data = read_metrics(metrics)
        check_one_run(spec, results_data, run_data, metrics_data, metrics)
        recorded = results_data.get("metrics_sha256")  # results.json files written before the field lack it
        if recorded is not None and recorded != sha256_bytes(metrics.read_bytes()):
            raise FolderError(
                f"{metrics} is not the metrics file the run finished with ({results} records another sha256): it "
                "was edited after training"
            )
        return cls(config_data, results_data, run_data, metrics_data)

    @classmethod
    def from_folder(cls, folder: Path) -> "CardSource":
        """A Hub folder or a committed example: the four files side by side."""
        return cls.read(folder / CONFIG, folder / RESULTS, folder / RUN, folder / METRICS)


def run_policy_dir(run_dir: Path) -> Path:
    """The policy folder of a training run folder (runs/<env>/<algo>/seed_<k>/policy)."""
    if not run_dir.is_dir():
        raise FolderError(f"run folder not found: {run_dir}")
    if not (run_dir / RUN).is_file():
        hint = (
            " (that is a policy folder: pass the run folder above it)" if (run_dir / CONFIG).is_file() else ""
        )
        raise FolderError(f"{run_dir} is not a training run folder: it has no {RUN}{hint}")
    policy_dir = run_dir / "policy"
    if policy_dir.is_symlink() and not policy_dir.resolve().is_relative_to(run_dir.resolve()):
        raise FolderError(
            f"{policy_dir} is a link to {policy_dir.resolve()}, outside {run_dir}: refusing to publish it"
        )
    for name in (CONFIG, WEIGHTS, RESULTS):
        if not (policy_dir / name).is_file():
            raise FolderError(f"{policy_dir / name} is missing: did the run finish?")
    return policy_dir
