"""The learning-curve PNG of a card, drawn from the run's metrics.jsonl evaluation records.

The picture is rendered deterministically (Agg, fixed size and dpi, matplotlib's default style whatever
the user's matplotlibrc says, no Software/date metadata). Rasterised text still depends on the local
matplotlib and FreeType builds, so the PNG also carries, in a text chunk, a digest of what it was drawn
from (the plotted numbers and this module's source): the staleness check compares that digest, not
pixels.
"""

import hashlib
import io
import json
from pathlib import Path

CURVE_NAME = "learning_curve.png"
DIGEST_KEY = "gsbpolicy-source"
MODES = (("deterministic", "deterministic (ODE)"), ("stochastic", "stochastic (SDE)"))


class NoEvaluations(ValueError):
    """metrics.jsonl has no evaluation record to plot."""


def eval_series(metrics: list[dict]) -> dict:
    """Per mode: env steps, mean return and its std over the evaluation episodes."""
    evals = [r for r in metrics if r["type"] == "eval"]
    if not evals:
        raise NoEvaluations("metrics.jsonl has no evaluation records: nothing to plot")
    series = {"env_steps": [r["env_steps"] for r in evals]}
    for mode, _ in MODES:
        key = f"eval/return_{mode}"
        if all(key in r for r in evals):
            series[mode] = {"mean": [r[key] for r in evals], "std": [r.get(key + "_std", 0.0) for r in evals]}
    return series


def source_digest(series: dict, title: str) -> str:
    """sha256 of the plotted data and of the code that draws it."""
    payload = json.dumps({"series": series, "title": title}, sort_keys=True).encode()
    return hashlib.sha256(payload + Path(__file__).read_bytes()).hexdigest()


def render_curve(metrics: list[dict], title: str) -> bytes:
    """The PNG bytes: evaluation return against env steps, mean +/- std over episodes, per mode."""
    import matplotlib

    matplotlib.use("Agg")  # no display: the only backend that never opens a window
    from matplotlib import style
    from matplotlib.figure import Figure

    series = eval_series(metrics)
    steps = series["env_steps"]
    with style.context("default"):
        fig = Figure(figsize=(6.4, 3.6), dpi=100)
        ax = fig.add_subplot()
        for mode, label in MODES:
            if mode not in series:
                continue
            mean, std = series[mode]["mean"], series[mode]["std"]
            (line,) = ax.plot(steps, mean, marker="o", markersize=3, label=label)
            lower = [m - s for m, s in zip(mean, std, strict=True)]
            upper = [m + s for m, s in zip(mean, std, strict=True)]
            ax.fill_between(steps, lower, upper, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_xlabel("env steps")
        ax.set_ylabel("episode return")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        fig.tight_layout()
        buffer = io.BytesIO()
        metadata = {"Software": None, DIGEST_KEY: source_digest(series, title)}
        fig.savefig(buffer, format="png", metadata=metadata)
    return buffer.getvalue()


def png_digest(png: bytes) -> str | None:
    """The source digest stored in a PNG written by `render_curve` (None if it has none)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return image.text.get(DIGEST_KEY)
