"""Benchmark summaries generated from the committed run ledgers (`hub_cards/results/<suite>.runs.jsonl`).

    python -m hub_cards.aggregate            # regenerate every suite's summary, table, plot and README block
    python -m hub_cards.aggregate --check    # fail if any committed file differs from what the ledgers give

For each suite: `<suite>.json` (per task x method: seeds, final return mean +/- population std across seeds,
the curve at each evaluation point, budget, commits, hardware), `<suite>.md` (the table README.md includes
between `<!-- suite:<name>:start -->` and `<!-- suite:<name>:end -->`) and `<suite>.png` (mean +/- one std
band per method, one panel per task, as in the paper's figures). Nothing here is typed by hand.
"""

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np

from gsbpolicy._io import atomic_write_bytes

RESULTS_DIR = Path(__file__).parent / "results"
README = Path(__file__).parents[1] / "README.md"


def _read_ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _curve(records: list[dict], key: str) -> dict:
    """Mean and population std across seeds at the evaluation points every seed has."""
    common = sorted(set.intersection(*(set(r["curve"]["env_steps"]) for r in records)))
    per_seed = []
    for r in records:
        by_step = dict(zip(r["curve"]["env_steps"], r["curve"][key], strict=True))
        per_seed.append([by_step[s] for s in common])
    if not common or any(v is None for row in per_seed for v in row):
        return {"env_steps": [], "mean": [], "std": []}
    values = np.asarray(per_seed, dtype=float)
    return {"env_steps": common, "mean": _round(values.mean(0)), "std": _round(values.std(0))}


def _round(values) -> list[float]:
    return [round(float(v), 3) for v in np.atleast_1d(values)]


def _mean(values):
    values = [v for v in values if v is not None]
    return round(float(np.mean(values)), 3) if values else None


def hardware_label(record: dict) -> str:
    """The machine a run ran on, in words: CPU, cores, GPU."""
    hw = record.get("hardware") or {}
    return f"{hw.get('cpu', '?')}, {hw.get('cores', '?')} cores, GPU {hw.get('gpu') or 'none'}"


REFERENCE = "gsb_mdpo"
"""The method whose step-clip fraction the benchmark tables report."""
MIN_SEEDS_FOR_VERDICT = 3


def verdict(reference: dict | None, other: dict) -> str | None:
    """How the reference column (GSB-MDPO, or an ablation's control) fares against `other` on one task:
    "win", "tie" or "loss".

    A tie when the means differ by less than the larger of the two across-seed stds: with 3-5 seeds a gap
    inside one std is not evidence. None for the reference itself, or when either has fewer than
    `MIN_SEEDS_FOR_VERDICT` seeds.
    """
    if reference is None or reference is other:
        return None
    if min(len(reference["seeds"]), len(other["seeds"])) < MIN_SEEDS_FOR_VERDICT:
        return None
    gap = reference["final_mean"] - other["final_mean"]
    if abs(gap) < max(reference["final_std"], other["final_std"]):
        return "tie"
    return "win" if gap > 0 else "loss"


def summarize(suite_name: str, records: list[dict]) -> dict:
    """The `<suite>.json` summary (schema in hub_cards/results/README.md)."""
    from trainers.suites import SUITES

    suite = SUITES[suite_name]
    order = {name: i for i, name in enumerate(suite.variant_names)}
    tasks: dict[str, dict] = {}
    for task in suite.tasks:
        by_variant: dict[str, list[dict]] = {}
        for r in records:
            if r["task"] == task:
                by_variant.setdefault(r["variant"], []).append(r)
        if not by_variant:
            continue
        tasks[task] = {}
        for variant in sorted(by_variant, key=lambda v: order.get(v, len(order))):
            runs = sorted(by_variant[variant], key=lambda r: r["seed"])
            finals = np.asarray([r["final"]["mean"] for r in runs], dtype=float)
            machines = [hardware_label(r) for r in runs]
            entry = {
                "method": runs[0]["method"],
                "seeds": [r["seed"] for r in runs],
                "final_mean": round(float(finals.mean()), 3),
                "final_std": round(float(finals.std()), 3),
                "final_per_seed": _round(finals),
                "curve": _curve(runs, "deterministic"),
                "curve_stochastic": _curve(runs, "stochastic"),
                "env_steps": runs[0]["final"]["env_steps"],
                "wall_s_mean": _mean(r["cost"]["wall_s"] for r in runs),
                "wall_s_min": round(min(r["cost"]["wall_s"] for r in runs), 3),
                "wall_s_min_by_hardware": {
                    label: round(
                        min(r["cost"]["wall_s"] for r, m in zip(runs, machines, strict=True) if m == label), 3
                    )
                    for label in sorted(set(machines))
                },
                "peak_rss_mib_mean": _mean(r["cost"].get("peak_rss_mib") for r in runs),
                "mean_rss_mib_mean": _mean(r["cost"].get("mean_rss_mib") for r in runs),
                "peak_gpu_mib_mean": _mean(r["cost"].get("peak_gpu_mib") for r in runs),
                "mean_gpu_mib_mean": _mean(r["cost"].get("mean_gpu_mib") for r in runs),
                "hardware": sorted(set(machines)),
                "hardware_per_seed": machines,
                "runs_sharing_machine": sum(r.get("concurrent_runs", 1) > 1 for r in runs),
                "reused_from": sorted({r["reused_from"] for r in runs if r.get("reused_from")}),
            }
            clips = [r["step_clip_frac"] for r in runs if r.get("step_clip_frac")]
            if clips:
                n = min(len(c["value"]) for c in clips)
                values = np.asarray([c["value"][:n] for c in clips])
                entry["step_clip_frac"] = {
                    "env_steps": clips[0]["env_steps"][:n],
                    "mean": _round(values.mean(0)),
                    "mean_over_training": _round(values.mean())[0],
                    "peak": _round(values.mean(0).max())[0],
                }
            tasks[task][variant] = entry
        for v, e in tasks[task].items():
            baseline = suite.variant(v).baseline if v in order else REFERENCE
            e["compared_with"] = baseline if baseline != v else None
            e["verdict"] = verdict(tasks[task].get(baseline), e)
    first = records[0] if records else {}
    return {
        "suite": suite.name,
        "kind": suite.kind,
        "description": suite.description,
        "budget_env_steps": suite.total_steps,
        "budget_note": suite.budget_note,
        "preset": suite.preset,
        "overrides": list(suite.args),
        "eval_protocol": suite.eval_protocol,
        "hardware": first.get("hardware"),
        "device": first.get("device"),
        "packages": first.get("packages"),
        "commits": sorted({r["git"]["commit"] for r in records if r["git"].get("commit")}),
        "num_runs": len(records),
        "tasks": tasks,
    }


# ---------------------------------------------------------------------------------------------- tables
def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def markdown(summary: dict) -> str:
    if summary["kind"] == "compute":
        return _compute_table(summary)
    variants = []
    for entries in summary["tasks"].values():
        variants += [v for v in entries if v not in variants]
    lines = [
        f"**{summary['suite']}**: {summary['description']} Budget {summary['budget_env_steps']:,} env steps "
        f"({summary['budget_note']}); final deterministic return, mean ± std across seeds (seeds). "
        f"Hardware: {_hardware_text(summary)}.",
        "",
        "| task | " + " | ".join(variants) + " |",
        "|---|" + "---|" * len(variants),
    ]
    for task, entries in summary["tasks"].items():
        best = max(e["final_mean"] for e in entries.values())
        cells = []
        for v in variants:
            e = entries.get(v)
            if e is None:
                cells.append("-")
                continue
            n = len(e["seeds"])
            # One seed has no spread: "± 0.0" would read as a measured zero variance.
            text = (
                f"{e['final_mean']:.1f} ± {e['final_std']:.1f} ({n})"
                if n > 1
                else f"{e['final_mean']:.1f} (1 seed)"
            )
            cells.append(f"**{text}**" if e["final_mean"] == best and len(entries) > 1 else text)
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    # Runs may have shared the machine (with each other, or with other work), so the fastest run per method
    # is the closest to its uncontended cost; a suite that ran on several machines gets one list per machine.
    fastest: dict[str, list[str]] = {}
    for label in sorted(
        {lb for entries in summary["tasks"].values() for e in entries.values() for lb in e["hardware"]}
    ):
        for v in variants:
            walls = [
                w
                for entries in summary["tasks"].values()
                if (e := entries.get(v)) and (w := e["wall_s_min_by_hardware"].get(label))
            ]
            if walls:
                fastest.setdefault(label, []).append(f"{v} {min(walls) / 60:.1f}")
    if len(fastest) == 1:
        text = f"(on the hardware above): {', '.join(next(iter(fastest.values())))}"
    else:
        text = "; ".join(f"on {label}: {', '.join(runs)}" for label, runs in fastest.items())
    if fastest:
        lines += ["", f"Fastest run per method, minutes end to end {text}."]
    shared = [f"{v} on {task} from {', '.join(e['reused_from'])}" for task, entries in summary["tasks"].items()
              for v, e in entries.items() if e.get("reused_from")]  # fmt: skip
    if shared:
        lines += [
            "",
            f"Runs shared with another suite (the same trainer command, trained once): {'; '.join(shared)}.",
        ]
    lines += _verdict_lines(summary)
    if summary["kind"] == "ablation":
        lines += ["", "| task | variant | deterministic ODE eval | stochastic SDE eval | step-clip fraction: "
                  "mean over training (peak) |", "|---|---|---|---|---|"]  # fmt: skip
        for task, entries in summary["tasks"].items():
            for v, e in entries.items():
                det, sto = e["curve"]["mean"], e["curve_stochastic"]["mean"]
                lines.append(f"| {task} | {v} | {_fmt(det[-1] if det else None)} | "
                             f"{_fmt(sto[-1] if sto else None)} | {_clip_text(e)} |")  # fmt: skip
    else:
        clips = [f"{task} {_clip_text(e)}" for task, entries in summary["tasks"].items()
                 if (e := entries.get(REFERENCE)) and "step_clip_frac" in e]  # fmt: skip
        if clips:
            lines += ["", f"{REFERENCE} step-clip fraction (share of rollout samples whose step log-ratio is "
                      f"clipped), mean over training (peak of the across-seed mean): {'; '.join(clips)}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def _clip_text(entry: dict) -> str:
    clip = entry.get("step_clip_frac")
    return f"{clip['mean_over_training']:.3f} ({clip['peak']:.3f})" if clip else "-"


def _verdict_lines(summary: dict) -> list[str]:
    """Where the reference column wins, ties and loses, per task, by `verdict`'s rule."""
    ablation = summary["kind"] == "ablation"
    words = (
        {"win": "worse than", "tie": "within noise of", "loss": "better than"}
        if ablation
        else {"win": "beats", "tie": "ties", "loss": "loses to"}
    )
    parts = []
    for task, entries in summary["tasks"].items():
        by_outcome: dict[str, list[str]] = {}
        for v, e in entries.items():
            if e.get("verdict"):
                by_outcome.setdefault(e["verdict"], []).append(v)
        if ablation:
            text = "; ".join(
                f"{v} {words[o]} {entries[v]['compared_with']}" for o, vs in by_outcome.items() for v in vs
            )
        else:
            text = "; ".join(f"{words[o]} {', '.join(vs)}" for o, vs in by_outcome.items())
        if text:
            parts.append(f"{task}: {text}")
    if not parts:
        return []
    head = "Each ablation against its control" if ablation else f"{REFERENCE} against the other methods"
    return [
        "",
        f"{head} (a tie when the means differ by less than the larger across-seed std; only columns with "
        f">= {MIN_SEEDS_FOR_VERDICT} seeds): {'. '.join(parts)}.",
    ]


def _hardware_text(summary: dict) -> str:
    """One machine for the whole table, or how many runs ran on each (the returns do not depend on it; the
    JSON's `hardware_per_seed` says which), and how many runs shared their machine with other runs (which
    slows only their wall-clock)."""
    runs_on: dict[str, int] = {}
    shared = total = 0
    for entries in summary["tasks"].values():
        for e in entries.values():
            for label in e["hardware_per_seed"]:
                runs_on[label] = runs_on.get(label, 0) + 1
            shared += e["runs_sharing_machine"]
            total += len(e["seeds"])
    if len(runs_on) <= 1:
        text = next(iter(runs_on), "none recorded")
    else:
        text = "; ".join(f"{label} ({n} run{'s' * (n != 1)})" for label, n in runs_on.items())
        text += f"; each seed's machine is listed in `{summary['suite']}.json`"
    return text + (f" ({shared} of {total} runs shared the machine with another run)" if shared else "")


def _compute_table(summary: dict) -> str:
    gpu = any(e.get("peak_gpu_mib_mean") for t in summary["tasks"].values() for e in t.values())
    memory = "GPU memory" if gpu else "RSS"
    lines = []
    for task, entries in summary["tasks"].items():
        base = entries.get("gaussian_ppo", {}).get("wall_s_mean")
        lines += [
            f"**{summary['suite']}** on {task}, {summary['budget_env_steps']:,} env steps per method "
            f"({summary['budget_note']}); hardware: {(summary['hardware'] or {}).get('cpu', '?')}, "
            f"GPU {(summary['hardware'] or {}).get('gpu') or 'none'}. Wall-clock is end-to-end (process start to exit).",
            "",
            f"| method | wall-clock | rel. time | peak {memory} | mean {memory} |",
            "|---|---|---|---|---|",
        ]
        for v, e in entries.items():
            peak = e["peak_gpu_mib_mean"] if gpu else e["peak_rss_mib_mean"]
            mean = e["mean_gpu_mib_mean"] if gpu else e["mean_rss_mib_mean"]
            rel = f"{e['wall_s_mean'] / base:.2f}×" if base else "-"
            lines.append(f"| {v} | {e['wall_s_mean'] / 60:.2f} min | {rel} | {_fmt(peak / 1024, 2)} GB | "
                         f"{_fmt(mean / 1024, 2)} GB |")  # fmt: skip
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- plots
def plot(summary: dict) -> bytes | None:
    """Learning curves, one panel per task, mean ± one std band per method (PNG bytes)."""
    if summary["kind"] == "compute" or not summary["tasks"]:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(summary["tasks"])
    ablation = summary["kind"] == "ablation"
    panels = len(tasks) + (1 if ablation else 0)
    cols = min(panels, 4)
    rows = -(-panels // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False, dpi=100)
    colors = plt.get_cmap("tab10")
    variants = []
    for entries in summary["tasks"].values():
        variants += [v for v in entries if v not in variants]
    for ax, task in zip(axes.flat, tasks, strict=False):
        for v, e in summary["tasks"][task].items():
            x = np.asarray(e["curve"]["env_steps"]) / 1e6
            mean, std = np.asarray(e["curve"]["mean"]), np.asarray(e["curve"]["std"])
            color = colors(variants.index(v) % 10)
            ax.plot(x, mean, label=v, color=color, lw=1.5)
            ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2, lw=0)
        ax.set_title(task)
        ax.set_xlabel("env steps (M)")
        ax.set_ylabel("return")
        ax.grid(alpha=0.3)
    if ablation:
        ax = axes.flat[len(tasks)]
        for v, e in summary["tasks"][tasks[0]].items():
            if "step_clip_frac" in e:
                x = np.asarray(e["step_clip_frac"]["env_steps"]) / 1e6
                ax.plot(x, e["step_clip_frac"]["mean"], label=v, color=colors(variants.index(v) % 10), lw=1)
        ax.set_title(f"step-clip fraction ({tasks[0]})")
        ax.set_xlabel("env steps (M)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[panels:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------- files
def generated_files(suite: str, results_dir: Path) -> dict[Path, bytes]:
    """Every file the suite's ledger determines, with its content."""
    summary = summarize(suite, _read_ledger(results_dir / f"{suite}.runs.jsonl"))
    files = {
        results_dir / f"{suite}.json": (json.dumps(summary, indent=1) + "\n").encode(),
        results_dir / f"{suite}.md": markdown(summary).encode(),
    }
    png = plot(summary)
    if png is not None:
        files[results_dir / f"{suite}.png"] = png
    return files


def readme_with_tables(readme: str, tables: dict[str, str]) -> str:
    """README text with each `<!-- suite:NAME:start -->...<!-- suite:NAME:end -->` block regenerated."""
    for suite, table in tables.items():
        start, end = f"<!-- suite:{suite}:start -->", f"<!-- suite:{suite}:end -->"
        if start in readme and end in readme:
            head, rest = readme.split(start, 1)
            _, tail = rest.split(end, 1)
            readme = f"{head}{start}\n{table}{end}{tail}"
    return readme


def ledger_suites(results_dir: Path) -> list[str]:
    return sorted(p.name.removesuffix(".runs.jsonl") for p in results_dir.glob("*.runs.jsonl"))


def write_suite(suite: str, results_dir: Path = RESULTS_DIR, readme: Path = README) -> None:
    files = generated_files(suite, results_dir)
    for path, content in files.items():
        atomic_write_bytes(path, content)
    if readme.exists() and results_dir.resolve() == RESULTS_DIR.resolve():
        md = files[results_dir / f"{suite}.md"].decode()
        atomic_write_bytes(readme, readme_with_tables(readme.read_text(), {suite: md}).encode())


def stale_files(results_dir: Path = RESULTS_DIR, readme: Path = README) -> list[str]:
    """Committed files that differ from what the ledgers generate (empty when up to date)."""
    stale, tables = [], {}
    for suite in ledger_suites(results_dir):
        files = generated_files(suite, results_dir)
        stale += [str(p) for p, content in files.items() if not p.exists() or p.read_bytes() != content]
        tables[suite] = files[results_dir / f"{suite}.md"].decode()
    if readme.exists() and readme.read_text() != readme_with_tables(readme.read_text(), tables):
        stale.append(str(readme))
    return stale


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", nargs="*", help="suites to regenerate (default: every ledger)")
    parser.add_argument("--check", action="store_true", help="only report files that are out of date")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        if stale:
            sys.exit("out of date (run `python -m hub_cards.aggregate`): " + ", ".join(stale))
        print("benchmark summaries are up to date")
        return
    for suite in args.suite or ledger_suites(RESULTS_DIR):
        write_suite(suite)
        print(f"wrote {suite}")


if __name__ == "__main__":
    main()
