"""The toy sweep's summary: its run log read (the latest record of each cell under each setting), what the runs
measured (the grid, the reproduction beside the extension, the other settings, reruns, coverage and the reachable
share), and its documentation page rendered from `templates/toy_tilt_sweep.md.jinja`."""

import json
from pathlib import Path

import jinja2
import numpy as np

from trainers._core.runlog import read_jsonl
from trainers.benchmark.report import TEMPLATES

from .tilt_settings import (
    COMMAND,
    LEGACY_SETTINGS,
    PAPER_PREFERENCE,
    QUADRANTS,
    Args,
    preferred_quadrant,
    settings,
)

PAGE = TEMPLATES.overlay(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")))
"""The suite pages' template settings (Markdown, strict, the `g` filter), with the toy's page as its template."""


class SweepLogError(ValueError):
    """The sweep's run log cannot be read."""


def read_log(path: Path) -> list[dict]:
    """The sweep's run log, settings renamed since a run was logged read under their present names
    (`LEGACY_SETTINGS`)."""
    records = read_jsonl(path, SweepLogError)
    for r in records:
        r["settings"] = {LEGACY_SETTINGS.get(k, k): v for k, v in r["settings"].items()}
    return records


def sweep_log_path(args: Args) -> Path:
    """The sweep's run log: one JSON record per run, in the order run."""
    return args.results_dir / "raw" / "toy_tilt_sweep.jsonl"


def reachable_log_path(results_dir: Path) -> Path:
    """Where `trainers.lab.toy_reachable` keeps its measurements."""
    return results_dir / "raw" / "toy_tilt_reachable.jsonl"


def coverage(record: dict) -> float | None:
    """The share of its own tilt an iteration realised, averaged over a run's iterations (None without
    any): the change of the centred log quadrant masses from one iteration's start to the next (the learned
    masses after the last), projected on the change its tilt exp(A / lambda) aimed at."""
    if not record["iterations"]:
        return None
    starts = [np.log(it["old"]) for it in record["iterations"]] + [np.log(record["learned"])]
    shares = []
    for it, start, end in zip(record["iterations"], starts, starts[1:], strict=False):
        aim = np.log(it["target"]) - start
        moved = end - start
        aim, moved = aim - aim.mean(), moved - moved.mean()
        shares.append(float(moved @ aim / (aim @ aim)))
    return float(np.mean(shares))


def tilted_l1(record: dict, share: float) -> float:
    """The L1 error the run would have if the learned masses were the old ones tilted by exp(share * A / beta),
    i.e. if every iteration had realised `share` of its tilt."""
    old, preference = np.asarray(record["old"]), np.asarray(record["preference"])
    reached = old * np.exp(share * preference / record["beta"])
    return float(np.abs(reached / reached.sum() - np.asarray(record["target"])).sum())


def _cell(r: dict) -> tuple:
    return r["beta"], tuple(r["preference"]), r["seed"]


def _is_paper_setting(beta: float, preference) -> bool:
    return beta == 1.0 and tuple(preference) == PAPER_PREFERENCE


def _sample_std(values) -> float:
    """The sample std (ddof = 1), what "±" means on the page; 0 for one value."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _grid(mine: list[dict]) -> list[dict]:
    """Mean and sample std of L1 over seeds per beta and preferred quadrant, of the current settings' runs `mine`."""
    by_cell: dict[tuple, list[dict]] = {}
    for r in mine:
        by_cell.setdefault((r["beta"], preferred_quadrant(r["preference"])), []).append(r)
    return [
        {
            "beta": beta,
            "preferred_quadrant": q,
            "paper_setting": _is_paper_setting(beta, runs[0]["preference"]),
            "seeds": [r["seed"] for r in runs],
            "l1": [r["l1"] for r in runs],
            "l1_mean": float(np.mean([r["l1"] for r in runs])),
            "l1_std": _sample_std([r["l1"] for r in runs]),
        }
        for (beta, q), runs in sorted(
            by_cell.items(), key=lambda item: (item[0][0], QUADRANTS.index(item[0][1]))
        )
    ]


def _other_settings(records: list[dict], current: dict, mine: list[dict], skip=()) -> list[dict]:
    """For every other setting in the log (but `skip`, shown on their own): what it changed, its mean L1, and
    the current settings' mean L1 on the same runs (beta, preference, seed), sorted by mean L1."""
    index = {_cell(r): r["l1"] for r in mine}
    others: dict[str, list[dict]] = {}
    for r in records:
        if r["settings"] != current and r["settings"] not in skip:
            others.setdefault(json.dumps(r["settings"], sort_keys=True), []).append(r)
    others = {key: _latest(runs, runs[0]["settings"]) for key, runs in others.items()}
    rows = []
    for key, runs in others.items():
        paired = [index.get(_cell(r)) for r in runs]
        rows.append(
            {
                "changed": {k: v for k, v in json.loads(key).items() if current.get(k) != v},
                "runs": len(runs),
                "cells": sorted({f"beta {r['beta']} {preferred_quadrant(r['preference'])}" for r in runs}),
                "l1_mean": float(np.mean([r["l1"] for r in runs])),
                "current_l1_mean_same_runs": float(np.mean(paired)) if None not in paired else None,
                "seconds_per_run": float(np.mean([r["seconds"] for r in runs])),
                "coverage": _mean_coverage(runs),
            }
        )
    return sorted(rows, key=lambda row: row["l1_mean"])


def _latest(records: list[dict], wanted: dict) -> list[dict]:
    """The runs logged under settings `wanted`, the latest record of each cell (a rerun supersedes)."""
    return list({_cell(r): r for r in records if r["settings"] == wanted}.values())


def _reruns(records: list[dict], current: dict) -> list[dict]:
    """Cells of the current settings run more than once (`--rerun`): every L1 in log order (the last is the
    one the tables use) and the commit of each run where it was recorded."""
    by_cell: dict[tuple, list[dict]] = {}
    for r in records:
        if r["settings"] == current:
            by_cell.setdefault(_cell(r), []).append(r)
    return [
        {
            "beta": runs[0]["beta"],
            "preferred_quadrant": preferred_quadrant(runs[0]["preference"]),
            "seed": runs[0]["seed"],
            "l1": [r["l1"] for r in runs],
            "commits": [r.get("git", {}).get("commit") for r in runs],
        }
        for runs in by_cell.values()
        if len(runs) > 1
    ]


def _loop_summary(runs: list[dict]) -> dict:
    """Mean L1 over a sweep's runs and, at the paper's setting, each seed's run (L1, when it started, the
    commit it ran at; None for runs logged before those were recorded)."""
    paper = sorted(
        (r for r in runs if _is_paper_setting(r["beta"], r["preference"])), key=lambda r: r["seed"]
    )
    return {
        "runs": len(runs),
        "l1_mean": float(np.mean([r["l1"] for r in runs])) if runs else None,
        "paper_setting": [
            {
                "seed": r["seed"],
                "l1": r["l1"],
                "started": r.get("started"),
                "commit": r.get("git", {}).get("commit"),
            }
            for r in paper
        ],
    }


def _command(current: dict, base_preference) -> str:
    defaults = settings(Args())
    overrides = []
    for k, v in current.items():
        flag = f"--{k.replace('_', '-')}"
        if defaults[k] != v:
            overrides.append((flag if v else f"--no-{flag[2:]}") if isinstance(v, bool) else f"{flag} {v}")
    if tuple(base_preference) != PAPER_PREFERENCE:
        overrides.append("--preference " + " ".join(f"{v:g}" for v in base_preference))
    return " ".join([f"{COMMAND} --sweep", *overrides])


def summarize(records: list[dict], current: dict, base_preference, reachable: list[dict] = ()) -> dict:
    """The current settings' grid (mean and std of L1 over seeds per beta and preferred quadrant); the
    reproduction (the paper's algorithm at the default settings) and the target-mass feedback extension at the
    same settings, side by side; for every other setting in the log its mean L1 next to the current settings'
    on the same runs; and the drift-reachable shares measured by `toy_reachable` (`reachable`: its log) with
    what they imply."""
    mine = _latest(records, current)
    paper_algorithm = settings(Args())
    extension = {**paper_algorithm, "target_mass_feedback": True}
    pretrained = [r["pretrain_seconds"] for r in mine if r["pretrain_seconds"]]
    floors = [r["prior_floor_l1"] for r in mine if "prior_floor_l1" in r]
    paper = [r["l1"] for r in mine if _is_paper_setting(r["beta"], r["preference"])]
    return {
        "command": _command(current, base_preference),
        "settings": current,
        "base_preference": list(base_preference),
        "grid": _grid(mine),
        "runs": len(mine),
        "l1_mean": float(np.mean([r["l1"] for r in mine])) if mine else None,
        "paper_setting_l1_mean": float(np.mean(paper)) if paper else None,
        "reproduction": _loop_summary(_latest(records, paper_algorithm))["paper_setting"],
        "loops": {
            "paper": _loop_summary(_latest(records, paper_algorithm)),
            "target_mass_feedback": _loop_summary(_latest(records, extension)),
        },
        "seconds_per_run": float(np.mean([r["seconds"] for r in mine])) if mine else None,
        "pretrain_seconds_per_seed": float(np.mean(pretrained)) if pretrained else None,
        "prior_floor_l1_mean": float(np.mean(floors)) if floors else None,
        "prior_floor_l1_max": float(np.max(floors)) if floors else None,
        "other_settings": _other_settings(records, current, mine, skip=(extension,)),
        "reruns": _reruns(records, current),
        "coverage_mean": _mean_coverage(mine),
        "reachable": _reachable_summary(reachable, current, mine),
    }


def _mean_coverage(runs: list[dict]) -> float | None:
    shares = [c for r in runs if (c := coverage(r)) is not None]
    return float(np.mean(shares)) if shares else None


def _reachable_summary(measured: list[dict], current: dict, mine: list[dict]) -> dict | None:
    """The drift-reachable share of each measured old policy, and for the current pretraining settings
    the L1 errors the sweep would have if every iteration realised exactly that share."""
    if not measured:
        return None
    rows = [
        {
            "changed": {k: v for k, v in r["pretraining"].items() if current.get(k) != v},
            "seed": r["seed"],
            "prior": r["prior_share"],
            "reachable": r["reachable"],
            "nonlinear": r["nonlinear"],
        }
        for r in measured
    ]
    shares = [row["reachable"] for row in rows if not row["changed"]]
    share = float(np.mean(shares)) if shares else None
    paper = [r for r in mine if _is_paper_setting(r["beta"], r["preference"])]
    return {
        "rows": sorted(rows, key=lambda row: (json.dumps(row["changed"], sort_keys=True), row["seed"])),
        "share_mean": share,
        "l1_at_share": float(np.mean([tilted_l1(r, share) for r in mine])) if share and mine else None,
        "paper_l1_at_share": float(np.mean([tilted_l1(r, share) for r in paper]))
        if share and paper
        else None,
    }


def render_page(summary: dict) -> str:
    """The sweep's documentation page: the reproduction beside the paper and the extension, the grid, what
    limits the tilt, then the other settings measured."""
    return PAGE.get_template("toy_tilt_sweep.md.jinja").render(
        s=summary,
        command=COMMAND,
        quadrants=QUADRANTS,
        paper_setting={
            name: _paper_setting(loop["paper_setting"]) for name, loop in summary["loops"].items()
        },
        grid=_grid_rows(summary["grid"]),
    )


def _paper_setting(runs: list[dict]) -> dict | None:
    """Mean and sample std of L1 over a loop's runs at the paper's setting, and their seeds (None without any)."""
    if not runs:
        return None
    l1 = [r["l1"] for r in runs]
    return {"mean": float(np.mean(l1)), "std": _sample_std(l1), "seeds": [r["seed"] for r in runs]}


def _grid_rows(grid: list[dict]) -> list[dict]:
    """The grid as the page's rows: per beta, its cell for each quadrant in order (None where not run) and the
    mean L1 over the row's runs."""
    cells = {(c["beta"], c["preferred_quadrant"]): c for c in grid}
    return [
        {
            "beta": beta,
            "cells": [cells.get((beta, q)) for q in QUADRANTS],
            "mean": float(np.mean([v for c in grid if c["beta"] == beta for v in c["l1"]])),
        }
        for beta in sorted({cell["beta"] for cell in grid})
    ]
