"""Baseline rows for a card, read from the committed benchmark summaries hub_cards/results/<suite>.json.

The summaries are written by `python -m trainers.benchmark.aggregate` (schema: suite, budget_env_steps,
eval_protocol, tasks -> env id -> variant -> method / final_mean / final_std (sample std, ddof = 1, across
seeds) / seeds / env_steps ...; a variant is a method, or a method with extra arguments). A JSON file
there without a "suite" key is not a summary and is passed over; a malformed summary is an error naming
the file. The algorithms' display names come from the trainers' registry (`trainers.registry`, which imports no
trainer: the one module of `trainers` the cards import).
"""

import dataclasses
import json
from pathlib import Path

from trainers.registry import ALGORITHMS

RESULTS_DIR = Path(__file__).parent / "results"


def method_name(algo: str) -> str:
    """The display name of a trainer's algorithm id (an id the registry lacks is shown as it is)."""
    return next((a.label for a in ALGORITHMS if a.name == algo), algo)


@dataclasses.dataclass(frozen=True)
class BaselineRow:
    suite: str
    method: str
    mean: float
    std: float
    num_seeds: int
    env_steps: int
    file: str


def baseline_rows(env_id: str, results_dir: Path = RESULTS_DIR) -> list[BaselineRow]:
    """One row per (suite, variant) with a final result on `env_id`: suites by file name, variants in order."""
    rows = []
    for path in sorted(results_dir.glob("*.json")):
        try:
            summary = json.loads(path.read_text())
            if not (isinstance(summary, dict) and "suite" in summary):
                continue  # another tool's record kept beside the summaries (e.g. an agreement check)
            if summary.get("kind") == "finetune":
                continue  # runs started from demonstrations: not a baseline for a policy's own training
            suite, methods = summary["suite"], summary["tasks"].get(env_id, {})
            for variant, entry in methods.items():  # the summary's order: the suite's variant order
                method = method_name(entry.get("method", variant))
                rows.append(
                    BaselineRow(
                        suite=suite,
                        method=method if variant == entry.get("method", variant) else f"{method} ({variant})",
                        mean=float(entry["final_mean"]),
                        std=float(entry["final_std"]),
                        num_seeds=len(entry["seeds"]),
                        env_steps=int(entry["env_steps"]),
                        file=f"hub_cards/results/{path.name}",
                    )
                )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as err:
            raise ValueError(
                f"benchmark summary {path} does not follow the summary schema ({err!r})"
            ) from err
    return rows
