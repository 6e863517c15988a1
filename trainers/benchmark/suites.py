"""Benchmark suites as data: tasks, budget, seeds, the preset each method starts from, overrides, protocol.

A suite run is (task x variant x seed). A *variant* is a method (an algorithm of `trainers.registry`) plus
extra CLI arguments, so ablations are suites too. `python -m trainers.benchmark --suite NAME` runs one.

The paper suites reproduce Tables 1-2 exactly (each method's own column, the shared rollout rows) and need
GPUs. The CPU suites keep each method's paper column (networks, learning rates, algorithm coefficients)
and shrink only the rollout geometry and the budget, so that one method x task x seed fits in about
30 minutes on a 2-core CPU; `budget_note` says how the budget was chosen.
"""

import dataclasses
import json
from pathlib import Path

from .ablation_suites import ABLATIONS, PAPER_GYM_ITERATIONS, PAPER_UPDATES_ARGS
from .compute_suites import COMPUTE_CPU, COMPUTE_GPU, COMPUTE_GPU_PLAYGROUND
from .defaults_suites import DEFAULTS_SUITES
from .finetune_suite import FINETUNE_SUITE
from .suite_types import PAPER_METHODS, Suite, Variant, available_methods
from .table_suites import TABLE_SUITES

__all__ = [
    "PAPER_GYM_ITERATIONS",
    "PAPER_METHODS",
    "PAPER_UPDATES_ARGS",
    "PREREGISTRATION_FILE",
    "SUITES",
    "Suite",
    "Variant",
    "available_methods",
    "confirmatory_suite",
]

SUITES: dict[str, Suite] = {
    s.name: s
    # In the order the cost page lists them.
    for s in (
        *TABLE_SUITES,
        *ABLATIONS,
        FINETUNE_SUITE,
        COMPUTE_CPU,
        COMPUTE_GPU_PLAYGROUND,
        *DEFAULTS_SUITES,
        COMPUTE_GPU,
    )
}
"""Every suite by name: the defined ones, then a confirmatory suite for each registered claim with a suite."""


PREREGISTRATION_FILE = Path(__file__).resolve().parents[2] / "hub_cards" / "results" / "preregistration.json"
"""The pre-registered claims (`trainers.benchmark.preregistration`); each one that runs a suite defines it here."""


def confirmatory_suite(registration: dict) -> Suite:
    """The suite of a registered claim's runs: its source suite's preset, geometry, evaluation and budget, on the
    registered tasks only, the treatment everywhere and each task's comparator on that task, at the registered
    (fresh) seeds of each task. Its ledger holds nothing else, so no exploratory run can enter the verdict."""
    source = SUITES[registration["source"]]
    by_task = {e["task"]: e for e in registration["tasks"]}
    comparators: dict[str, list[str]] = {}
    for e in registration["tasks"]:
        comparators.setdefault(e["comparator"], []).append(e["task"])
    treatment = registration["treatment"]
    # Each comparator's page verdict reads the treatment against it (a summary compares a column with its
    # `baseline`); the treatment is compared with nothing.
    variants = [dataclasses.replace(source.variant(treatment), tasks=None, baseline=treatment)]
    variants += [
        dataclasses.replace(source.variant(c), tasks=tuple(t), baseline=treatment)
        for c, t in comparators.items()
    ]
    return dataclasses.replace(
        source,
        name=registration["suite"],
        description=f"Confirmatory runs of the pre-registered claim `{registration['id']}`: "
        f"{registration['claim']} ({source.name}'s settings, fresh seeds).",
        tasks=tuple(by_task),
        seeds=tuple(sorted({s for e in registration["tasks"] for s in e["seeds"]})),
        task_seeds=tuple((t, tuple(e["seeds"])) for t, e in by_task.items()),
        variants=tuple(variants),
        budget_note=f"{source.steps(registration['tasks'][0]['task']):,} env steps, {source.name}'s budget",
        kind="confirmatory",
        floors=False,
    )


def _registered() -> list[dict]:
    if not PREREGISTRATION_FILE.exists():
        return []
    return json.loads(PREREGISTRATION_FILE.read_text())["registrations"]


SUITES.update({r["suite"]: confirmatory_suite(r) for r in _registered() if r.get("suite")})
