"""Learning curves: the PNG of a card, drawn from the run's metrics.jsonl evaluation records, and the
standalone plot of one or more runs' metrics (no publishing):

    python -m hub_cards.curves RUN_DIR [RUN_DIR ...] --out curves.png [--metric M] [--x env_steps] [--per-run]

`--out`'s suffix picks the format: .png, .svg or .pdf.

Each curve is labelled by algorithm, env and seed from run.json. Runs of one algorithm on one env are
drawn as one curve, the mean over their seeds with a one-std band (at the x values they all logged);
`--per-run` draws every run on its own. A single run's evaluation curve gets the band of its episodes.

The card's picture is rendered deterministically (Agg, fixed size and dpi, matplotlib's default style whatever
the user's matplotlibrc says, no Software/date metadata). Rasterised text still depends on the local
matplotlib and FreeType builds, so the PNG also carries, in a text chunk, a digest of what it was drawn
from (the plotted numbers and this module's source): the staleness check compares that digest, not
pixels.
"""

import hashlib
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

from gsbpolicy._cli import CommandError, OneLineParser, check_output_file, require_extra, run_command
from gsbpolicy._files import atomic_write_bytes

from .folder import FolderError, _read_json, read_metrics

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


def _band(ax, x, mean, std, label: str) -> None:
    """A curve with a shaded band of one std either side."""
    (line,) = ax.plot(x, mean, marker="o", markersize=3, label=label)
    lower = [m - s for m, s in zip(mean, std, strict=True)]
    upper = [m + s for m, s in zip(mean, std, strict=True)]
    ax.fill_between(x, lower, upper, color=line.get_color(), alpha=0.2, linewidth=0)


FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
"""What `--out`'s suffix may be, and the matplotlib format it writes: the bytes match the name."""


def _draw(
    plot: Callable, *, size: tuple, xlabel: str, ylabel: str, title: str, metadata: dict, fmt: str = "png"
) -> bytes:
    """The bytes (PNG unless `fmt`) of one set of axes that `plot(ax)` fills, with this module's fixed look."""
    import matplotlib

    matplotlib.use("Agg")  # no display: the only backend that never opens a window
    from matplotlib import style
    from matplotlib.figure import Figure

    with style.context("default"):
        fig = Figure(figsize=size, dpi=100)
        ax = fig.add_subplot()
        plot(ax)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        fig.tight_layout()
        buffer = io.BytesIO()
        # The Software field is PNG's: leaving it out keeps the card's picture free of version strings.
        extra = {"Software": None, **metadata} if fmt == "png" else metadata
        fig.savefig(buffer, format=fmt, metadata=extra)
    return buffer.getvalue()


def render_curve(metrics: list[dict], title: str) -> bytes:
    """The PNG bytes: evaluation return against env steps, mean +/- std over episodes, per mode."""
    series = eval_series(metrics)

    def plot(ax):
        for mode, label in MODES:
            if mode in series:
                _band(ax, series["env_steps"], series[mode]["mean"], series[mode]["std"], label)

    digest = source_digest(series, title)
    return _draw(
        plot,
        size=(6.4, 3.6),
        xlabel="env steps",
        ylabel="episode return",
        title=title,
        metadata={DIGEST_KEY: digest},
    )


def png_digest(png: bytes) -> str | None:
    """The source digest stored in a PNG written by `render_curve` (None if it has none)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return image.text.get(DIGEST_KEY)


# ------------------------------------------------------------------------------------------ standalone plot
X_AXES = ("env_steps", "iteration")


def run_series(run_dir: Path, metric: str, x: str) -> dict:
    """One run's `metric` against `x`, with its algorithm, env and seed from run.json; a folder that is not
    a run, or a metric the run never logged, is a usage error naming it."""
    if not run_dir.is_dir():
        raise CommandError(f"{run_dir} is not a folder (give run folders: the ones holding run.json)")
    try:
        run, records = _read_json(run_dir / "run.json"), read_metrics(run_dir / "metrics.jsonl")
        algo, env, seed = run["algo"], run["args"]["env"], run["args"]["seed"]
    except FolderError as err:
        raise CommandError(f"{err} (is {run_dir} a run folder?)") from err
    except (KeyError, TypeError) as err:
        raise CommandError(f"{run_dir / 'run.json'} lacks the field {err}: not a run record") from err
    points = [r for r in records if metric in r and x in r]
    if not points:
        logged = sorted({name for r in records for name, v in r.items() if isinstance(v, int | float)} - {x})
        raise CommandError(
            f"{run_dir / 'metrics.jsonl'} has no {metric!r}; --metric is one of: {', '.join(logged)}"
        )
    return {
        "algo": algo,
        "env": env,
        "seed": seed,
        "x": [r[x] for r in points],
        "mean": [r[metric] for r in points],
        "std": [r.get(f"{metric}_std", 0.0) for r in points],  # an evaluation's spread over its episodes
    }


def seed_curves(runs: list[dict], per_run: bool) -> list[dict]:
    """The curves to draw: each run alone, or the runs of each (algorithm, env) as the mean and std over
    their seeds at the x values they all logged."""
    if per_run:
        return [{**run, "label": f"{run['algo']} on {run['env']}, seed {run['seed']}"} for run in runs]
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault((run["algo"], run["env"]), []).append(run)
    curves = []
    for (algo, env), members in groups.items():
        seeds = [run["seed"] for run in members]
        if len(set(seeds)) < len(seeds):
            raise CommandError(
                f"two {algo} runs on {env} have the same seed: a band is over seeds; use --per-run"
            )
        if len(members) == 1:
            curves.append({**members[0], "label": f"{algo} on {env}, seed {seeds[0]}"})
            continue
        common = sorted(set.intersection(*(set(run["x"]) for run in members)))
        if not common:
            raise CommandError(f"the {algo} runs on {env} share no x value to average at; use --per-run")
        values = [[dict(zip(run["x"], run["mean"], strict=True))[x] for run in members] for x in common]
        means = [sum(v) / len(v) for v in values]
        stds = [(sum((e - m) ** 2 for e in v) / len(v)) ** 0.5 for v, m in zip(values, means, strict=True)]
        label = f"{algo} on {env}, {len(members)} seeds ({', '.join(map(str, sorted(seeds)))})"
        curves.append({"x": common, "mean": means, "std": stds, "label": label})
    return curves


def plot_runs(run_dirs: list[Path], metric: str, x: str, per_run: bool = False, fmt: str = "png") -> bytes:
    """The bytes (PNG unless `fmt`: svg, pdf) of the runs' `metric` against `x` (see the module docstring)."""
    curves = seed_curves([run_series(run_dir, metric, x) for run_dir in run_dirs], per_run)

    def plot(ax):
        for curve in curves:
            _band(ax, curve["x"], curve["mean"], curve["std"], curve["label"])

    return _draw(
        plot, size=(7.2, 4.2), xlabel=x.replace("_", " "), ylabel=metric, title=metric, metadata={}, fmt=fmt
    )


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m hub_cards.curves",
        description="Plot one or more runs' learning curves from their metrics.jsonl (nothing is published).",
    )
    parser.add_argument(
        "runs", nargs="+", type=Path, metavar="RUN_DIR", help="run folders (run.json, metrics.jsonl)"
    )
    parser.add_argument("--out", type=Path, required=True, help="the file to write: .png, .svg or .pdf")
    parser.add_argument(
        "--metric",
        default="eval/return_deterministic",
        help="a metrics.jsonl field (default: eval/return_deterministic; e.g. "
        "eval/return_stochastic, train/episode_return, train/step_clip_frac)",
    )
    parser.add_argument("--x", choices=X_AXES, default="env_steps", help="the x axis (default: env_steps)")
    parser.add_argument("--per-run", action="store_true", help="one curve per run instead of a seed band")
    args = parser.parse_args(argv)

    def work() -> None:
        check_output_file(args.out, "--out")
        fmt = FORMATS.get(args.out.suffix.lower())
        if fmt is None:
            raise CommandError(
                f"--out {args.out}: the suffix picks the format, one of {', '.join(FORMATS)}; "
                f"got {args.out.suffix or 'none'}"
            )
        require_extra("hub", ["matplotlib"], "python -m hub_cards.curves")
        data = plot_runs(args.runs, args.metric, args.x, args.per_run, fmt)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(args.out, data)
        print(f"wrote {args.out}: {args.metric} of {len(args.runs)} run(s)")

    return run_command(work)


if __name__ == "__main__":
    sys.exit(main())
