"""One (task, column) cell of a suite's summary, from that cell's runs: the seeds, the final return's mean, sample
std and interquartile mean with its bootstrap interval, the curves at each evaluation point, the fine-tuning and
clip-fraction series, and the cost and hardware (`summary` gathers the cells into a suite's summary)."""

import datetime

import numpy as np

from . import stats
from .ledger import hardware_label, shared_machine


def _curve(records: list[dict], key: str) -> dict:
    """Mean and sample std (`sample_std`) across seeds at the evaluation points every seed has, and each seed's value
    at the last of them (`last_per_seed`: what the ODE-vs-SDE comparison pairs up)."""
    common = sorted(set.intersection(*(set(r["curve"]["env_steps"]) for r in records)))
    per_seed = []
    for r in records:
        by_step = dict(zip(r["curve"]["env_steps"], r["curve"][key], strict=True))
        per_seed.append([by_step[s] for s in common])
    if not common or any(v is None for row in per_seed for v in row):
        return {"env_steps": [], "mean": [], "std": [], "last_per_seed": []}
    values = np.asarray(per_seed, dtype=float)
    return {
        "env_steps": common,
        "mean": _round(values.mean(0)),
        "std": _round(sample_std(values)),
        "last_per_seed": _round(values[:, -1]),
    }


def sample_std(values) -> np.ndarray:
    """The sample std across seeds (axis 0, ddof = 1: the unbiased variance's root), what "±" means on every
    page; 0 with one seed, which the pages print as "(1 seed)" with no spread."""
    values = np.asarray(values, dtype=float)
    return values.std(0, ddof=1) if len(values) > 1 else np.zeros(values.shape[1:])


def _round(values) -> list[float]:
    return [round(float(v), 3) for v in np.atleast_1d(values)]


def _mean(values):
    values = [v for v in values if v is not None]
    return round(float(np.mean(values)), 3) if values else None


def _constant_return(runs: list[dict]) -> float | None:
    """The one value every evaluation of every run returned (deterministic and stochastic), if there is one:
    a sparse-reward task that no run ever scored on, say."""
    values = {
        v for r in runs for key in ("deterministic", "stochastic") for v in r["curve"][key] if v is not None
    }
    values |= {r["final"]["mean"] for r in runs}
    return values.pop() if len(values) == 1 else None


def cell(runs: list[dict]) -> dict:
    """One (task, variant) cell of the summary: returns, curves, cost and hardware across its seeds."""
    finals = np.asarray([r["final"]["mean"] for r in runs], dtype=float)
    entry = {
        "method": runs[0]["method"],
        "seeds": [r["seed"] for r in runs],
        "final_mean": round(float(finals.mean()), 3),
        "final_std": round(float(sample_std(finals)), 3),
        "final_per_seed": _round(finals),
        **stats.iqm_interval(finals),
        "curve": _curve(runs, "deterministic"),
        "curve_stochastic": _curve(runs, "stochastic"),
        **_cost(runs),
        "started_first": _started_first(runs),
        "reused_from": sorted({r["reused_from"] for r in runs if r.get("reused_from")}),
        "constant_return": _constant_return(runs),
        "diverged": [
            {
                "seed": r["seed"],
                "iteration": r["diverged"]["iteration"],
                "quantity": r["diverged"]["quantity"],
                "last_eval_env_steps": r["final"]["env_steps"],
            }
            for r in runs
            if "diverged" in r
        ],
    }
    series_of = (
        ("path_kl_init", _path_kl(runs)),
        ("step_clip_frac", _clip_fraction(runs, "step_clip_frac")),
        ("sample_clip_frac", _clip_fraction(runs, "sample_clip_frac")),
    )
    for name, series in series_of:
        if series is not None:
            entry[name] = series
    return entry


def _started_first(runs: list[dict]) -> str | None:
    """When the earliest of the runs started (its finish time less its end-to-end wall-clock, which counts
    every attempt, so this is never later than the real start), ISO 8601 UTC; None if a run has no finish
    time. The claims page compares it with the commit of the rule that judges the runs."""
    if any("finished" not in r for r in runs):
        return None
    starts = [
        datetime.datetime.fromisoformat(r["finished"]) - datetime.timedelta(seconds=r["cost"]["wall_s"])
        for r in runs
    ]
    return min(starts).astimezone(datetime.UTC).isoformat(timespec="seconds")


def _cost(runs: list[dict]) -> dict:
    """Wall-clock, memory and hardware of a cell's runs. A diverged run stopped early, so its wall-clock is not
    what a run costs; it counts for the costs only when every seed diverged."""
    timed = [r for r in runs if "diverged" not in r] or runs
    machines = [hardware_label(r) for r in runs]
    timed_machines = [hardware_label(r) for r in timed]
    fastest = {}
    for r, label in zip(timed, timed_machines, strict=True):
        fastest[label] = min(fastest.get(label, np.inf), r["cost"]["wall_s"])
    return {
        "env_steps": timed[0]["final"]["env_steps"],
        "wall_s_mean": _mean(r["cost"]["wall_s"] for r in timed),
        "wall_s_min": round(min(r["cost"]["wall_s"] for r in timed), 3),
        "wall_s_min_by_hardware": {label: round(fastest[label], 3) for label in sorted(fastest)},
        "peak_rss_mib_mean": _mean(r["cost"].get("peak_rss_mib") for r in runs),
        "mean_rss_mib_mean": _mean(r["cost"].get("mean_rss_mib") for r in runs),
        "peak_gpu_mib_mean": _mean(r["cost"].get("peak_gpu_mib") for r in runs),
        "mean_gpu_mib_mean": _mean(r["cost"].get("mean_gpu_mib") for r in runs),
        "hardware": sorted(set(machines)),
        "hardware_per_seed": machines,
        "runs_sharing_machine": sum(shared_machine(r) for r in runs),
    }


def _aligned(series: list[dict]) -> tuple[list, np.ndarray]:
    """Per-seed curves cut to the shortest: (env_steps, values[seed, point])."""
    n = min(len(s["value"]) for s in series)
    return series[0]["env_steps"][:n], np.asarray([s["value"][:n] for s in series])


def _path_kl(runs: list[dict]) -> dict | None:
    """A fine-tuning column: how far each seed's policy moved from its clone (None unless every seed says)."""
    kls = [r["path_kl_init"] for r in runs if r.get("path_kl_init")]
    if len(kls) != len(runs):
        return None
    env_steps, values = _aligned(kls)
    return {
        "env_steps": env_steps,
        "mean": _round(values.mean(0)),
        "final_per_seed": _round(values[:, -1]),
        "final_mean": _round(values[:, -1].mean())[0],
        "final_std": _round(sample_std(values[:, -1]))[0],
    }


def _clip_fraction(runs: list[dict], key: str) -> dict | None:
    """A clip-fraction series across seeds: `step_clip_frac` (the share of generation steps whose log-ratio is
    clipped) or `sample_clip_frac` (the share of rollout samples with at least one clipped step)."""
    clips = [r[key] for r in runs if r.get(key)]
    if not clips:
        return None
    env_steps, values = _aligned(clips)
    return {
        "env_steps": env_steps,
        "mean": _round(values.mean(0)),
        "mean_over_training": _round(values.mean())[0],
        "peak": _round(values.mean(0).max())[0],
    }
