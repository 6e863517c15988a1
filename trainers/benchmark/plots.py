"""A suite's learning curves as a PNG: one panel per task, mean ± one sample std band per column, as in the paper's
figures (ablations add the step-clip fraction, fine-tuning suites the path KL to the clone)."""

import io

import numpy as np

from .summary import columns


def plot(summary: dict) -> bytes | None:
    """Learning curves, one panel per task, mean ± one sample std band per method (PNG bytes)."""
    if summary["kind"] == "compute" or not summary["tasks"]:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(summary["tasks"])
    ablation = summary["kind"] == "ablation"
    finetune = summary["kind"] == "finetune"
    panels = len(tasks) * (2 if finetune else 1) + (1 if ablation else 0)
    cols = min(panels, 4)
    rows = -(-panels // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False, dpi=100)
    colors = plt.get_cmap("tab10")
    variants = columns(summary["tasks"])
    for ax, task in zip(axes.flat, tasks, strict=False):
        _returns_panel(ax, summary, task, lambda v: colors(variants.index(v) % 10))
    if ablation:
        ax = axes.flat[len(tasks)]
        for v, e in summary["tasks"][tasks[0]].items():
            if "step_clip_frac" in e:
                x = np.asarray(e["step_clip_frac"]["env_steps"]) / 1e6
                ax.plot(x, e["step_clip_frac"]["mean"], label=v, color=colors(variants.index(v) % 10), lw=1)
        ax.set_title(f"share of clipped generation steps ({tasks[0]})")
        ax.set_xlabel("env steps (M)")
        ax.grid(alpha=0.3)
    if finetune:
        for ax, task in zip(list(axes.flat)[len(tasks) :], tasks, strict=False):
            for v, e in summary["tasks"][task].items():
                if "path_kl_init" in e:
                    x = np.asarray(e["path_kl_init"]["env_steps"]) / 1e6
                    ax.plot(x, e["path_kl_init"]["mean"], label=v, color=colors(variants.index(v) % 10), lw=1)
            ax.set_title(f"path KL to the clone ({task})")
            ax.set_yscale("symlog", linthresh=0.1)  # a diverged column must not flatten the others
            ax.set_xlabel("env steps (M)")
            ax.grid(alpha=0.3)
    for ax in list(axes.flat)[panels:]:
        ax.axis("off")
    # One legend for every column: a reference column may run on some tasks only (not the first).
    labelled = {
        label: handle
        for ax in axes.flat
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)
    }
    axes.flat[0].legend(labelled.values(), labelled.keys(), fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def _returns_panel(ax, summary: dict, task: str, color_of) -> None:
    """One task's return curves, mean ± one sample std band per column, and doing nothing's return if scored."""
    for v, e in summary["tasks"][task].items():
        x = np.asarray(e["curve"]["env_steps"]) / 1e6
        mean, std = np.asarray(e["curve"]["mean"]), np.asarray(e["curve"]["std"])
        ax.plot(x, mean, label=v, color=color_of(v), lw=1.5)
        ax.fill_between(x, mean - std, mean + std, color=color_of(v), alpha=0.2, lw=0)
    if "floors" in summary:
        floor = summary["floors"]["tasks"][task]["do-nothing"]["mean"]
        ax.axhline(floor, color="0.4", ls="--", lw=1, label="do nothing")
    ax.set_title(task.rpartition(":")[2])  # "module:Env-v0" -> "Env-v0"
    ax.set_xlabel("env steps (M)")
    ax.set_ylabel("return")
    ax.grid(alpha=0.3)
