"""Set a checkout's own benchmark runs beside the committed results of the same suite.

The runner writes `<results dir>/<suite>.comparison.md` after a run outside the committed results folder:
for every (task, column) of the new summary, the final deterministic return (mean +/- sample std over the seeds
that ran) next to the committed one, so that a fresh clone re-running a suite sees at once whether it
reproduces what the README reports.
"""

import json
from pathlib import Path

from gsbpolicy._files import atomic_write_text

from .aggregate import RESULTS_DIR


def _cells(summary: dict) -> dict[tuple[str, str], dict]:
    return {
        (task, column): cell for task, columns in summary["tasks"].items() for column, cell in columns.items()
    }


def _describe(cell: dict | None) -> str:
    if cell is None:
        return "not run"
    return f"{cell['final_mean']:.1f} ± {cell['final_std']:.1f} (seeds {', '.join(map(str, cell['seeds']))})"


def comparison_markdown(suite: str, new: dict, committed: dict | None) -> str:
    """A table of the new summary's cells beside the committed summary's (None: nothing committed)."""
    old = _cells(committed) if committed is not None else {}
    lines = [
        f"# {suite}: this checkout's runs beside the committed results",
        "",
        "Final deterministic return, mean ± sample std over seeds. Differences within a few std over 3 seeds are "
        "seed noise; a different CPU, GPU or package version can also move them.",
        "",
        "| task | column | these runs | committed |",
        "|---|---|---|---|",
    ]
    for (task, column), cell in sorted(_cells(new).items()):
        lines.append(f"| {task} | {column} | {_describe(cell)} | {_describe(old.get((task, column)))} |")
    return "\n".join(lines) + "\n"


def write_comparison(suite: str, results_dir: Path, committed_dir: Path = RESULTS_DIR) -> str:
    """Write `<results_dir>/<suite>.comparison.md` and return its text."""
    new = json.loads((results_dir / f"{suite}.json").read_text())
    committed_path = committed_dir / f"{suite}.json"
    committed = json.loads(committed_path.read_text()) if committed_path.exists() else None
    text = comparison_markdown(suite, new, committed)
    atomic_write_text(results_dir / f"{suite}.comparison.md", text)
    return text
