"""The performance numbers of the README and the documentation, generated from the committed measurements.

    python -m trainers.lab.perf.report            # regenerate the blocks
    python -m trainers.lab.perf.report --check    # exit 1 if a block is out of date

Reads hub_cards/results/raw/: `startup_cpu.json` (`trainers.lab.perf.startup`), `seed_groups_*.json`
(`trainers.lab.perf.seed_groups`) and `ci_wall_clock.json` (the CI runs, the first the baseline) for the block
`<!-- perf:compile-once:start -->` ... `<!-- perf:compile-once:end -->` of docs/scaling-out.md, and
`new_user_steps.json` (the Getting started steps timed as a new user runs them) for `<!-- perf:new-user:... -->`
in docs/getting-started.md. A missing file leaves its rows out.
"""

import argparse
import json
import sys
from pathlib import Path

from gsbpolicy._files import atomic_write_text
from trainers.benchmark.aggregate import ROOT, with_block

RAW = Path(__file__).resolve().parents[3] / "hub_cards" / "results" / "raw"
BLOCK = "perf:compile-once"
NEW_USER_BLOCK = "perf:new-user"


def _load(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def startup_lines(data: dict) -> list[str]:
    lines = [
        "Time to the first finished iteration (process start to its metrics record; median of "
        f"{len(next(iter(data['cases'].values()))['cold_s'])} pairs; `python -m trainers.lab.perf.startup`, "
        f"{data['cpu_count']}-core CPU). The first record includes one iteration's own work, which no "
        "cache removes; the last two columns take one compiled iteration (the second's time) out:",
        "",
        "| run | cache off | cold cache | warm cache | warm / cold | one compiled iteration | "
        "startup overhead, warm / cold |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, case in data["cases"].items():
        cold, warm, off = _median(case["cold_s"]), _median(case["warm_s"]), _median(case["cache_off_s"])
        iteration = _median(case["iteration_s"])
        lines.append(
            f"| {name} | {off:.1f} s | {cold:.1f} s | {warm:.1f} s | {warm / cold:.2f} | "
            f"{iteration:.1f} s | {warm - iteration:.1f} s / {cold - iteration:.1f} s = "
            f"{(warm - iteration) / (cold - iteration):.2f} |"
        )
    return [*lines, ""]


def _device(data: dict) -> str:
    hardware = data["hardware"]
    return "a 2-core CPU" if hardware["platform"] == "cpu" else f"an {hardware['device_kind']}"


def seed_group_lines(results: list[dict]) -> list[str]:
    lines = [
        "Seeds 0..n-1 in one process (`--seeds`) against the same seeds one process after another (each arm "
        "from an empty compilation cache; `python -m trainers.lab.perf.seed_groups`):",
        "",
        "| task, geometry | where | seeds | one process | one after another | wall-clock gain | "
        "env steps/s, grouped / separate |",
        "|---|---|---|---|---|---|---|",
    ]
    notes = []
    for data in results:
        mark = ""
        if "note" in data:
            notes.append(f"({chr(ord('a') + len(notes))}) {data['note']}.")
            mark = f" ({chr(ord('a') + len(notes) - 1)})"
        for size in data["sizes"]:
            lines.append(
                f"| {data['env']}, {data['suite']} ({data['iterations']} iterations) | {_device(data)} | "
                f"{size['seeds']} | {size['grouped_wall_s']:.0f} s | {size['separate_wall_s']:.0f} s{mark} | "
                f"{size['wall_ratio_separate_over_grouped']:.2f}x | "
                f"{size['throughput_ratio_grouped_over_separate']:.2f}x |"
            )
    return [*lines, "", *(f"{note}  " for note in notes), *([""] if notes else [])]


def ci_lines(data: dict) -> list[str]:
    """The CI wall-clock of each recorded run as a ratio of its machine's baseline: runs are grouped by
    machine (a run naming a `machine` starts a new group; ratios across machines would measure the machines),
    and the first run of a group is its baseline."""
    groups: list[tuple[str, list[dict]]] = []
    for run in data["runs"]:
        if not groups or "machine" in run:
            groups.append((run.get("machine", data["machine"]), []))
        groups[-1][1].append(run)
    sentences = []
    for machine, (first, *later) in groups:
        steps = [
            f"{run['wall_s']:.0f} s at {run['commit']} ({run['tests']} tests), "
            f"{run['wall_s'] / first['wall_s']:.2f}x"
            for run in later
        ]
        then = ", then " + "; ".join(steps) if steps else ""
        sentences.append(
            f"On {machine}: {first['wall_s']:.0f} s at {first['commit']} ({first['tests']} tests){then}."
        )
    header = "CI wall-clock (`bash .ci/run` on a clean clone: install, ruff and tests; each ratio is to the first run on its machine)."
    return [" ".join([header, *sentences]), ""]


def block(raw: Path = RAW) -> str:
    lines = []
    if (startup := _load(raw / "startup_cpu.json")) is not None:
        lines += startup_lines(startup)
    groups = [_load(path) for path in sorted(raw.glob("seed_groups_*.json"))]
    if groups:
        lines += seed_group_lines(groups)
    if (ci := _load(raw / "ci_wall_clock.json")) is not None:
        lines += ci_lines(ci)
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    return f"{seconds // 60:.0f} min {seconds % 60:.0f} s" if seconds >= 60 else f"{seconds:.0f} s"


def new_user_block(raw: Path = RAW) -> str:
    """The Quickstart's timings: what each README step took when run as a new user would."""
    data = _load(raw / "new_user_steps.json")
    if data is None:
        return ""
    seconds = {step["step"]: step["seconds"] for step in data["steps"]}
    train = seconds["train (the Quickstart)"]
    load = data["load_average_start"][0]
    busy = ": another job was running" if load >= 1 else ""
    return (
        f"On a 2-core CPU (load average {load:.1f} at the start{busy}), training took "
        f"{_minutes(train)} and reached {data['final_return']}; then loading and "
        f"evaluating the policy took {seconds['load and evaluate (Using a policy)']:.0f} s, the ONNX export "
        f"{seconds['ONNX export']:.0f} s, the ONNX control loop {seconds['ONNX control loop']:.0f} s, and "
        f"`hub_cards.publish --dry-run` (ONNX export and a 500-step replay video included) "
        f"{seconds['publish --dry-run']:.0f} s (`hub_cards/results/raw/new_user_steps.json`).\n"
    )


PAGES = {
    ROOT / "docs" / "scaling-out.md": BLOCK,
    ROOT / "docs" / "getting-started.md": NEW_USER_BLOCK,
    ROOT / "README.md": NEW_USER_BLOCK,
}
"""Which page holds which block."""


def updated_pages() -> dict[Path, tuple[str, str]]:
    """Each page's text now and with its block regenerated."""
    contents = {BLOCK: block(), NEW_USER_BLOCK: new_user_block()}
    return {
        page: (page.read_text(), with_block(page.read_text(), name, contents[name]))
        for page, name in PAGES.items()
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m trainers.lab.perf.report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--check", action="store_true", help="only say whether the blocks are up to date")
    opts = parser.parse_args(argv)
    pages = updated_pages()
    if opts.check:
        stale = [str(page) for page, (now, updated) in pages.items() if now != updated]
        if stale:
            sys.exit(f"out of date: {', '.join(stale)}; run `python -m trainers.lab.perf.report`")
        print("performance blocks are up to date")
        return
    for page, (_, updated) in pages.items():
        atomic_write_text(page, updated)
    print(f"wrote the {BLOCK} and {NEW_USER_BLOCK} blocks of {', '.join(str(p) for p in pages)}")


if __name__ == "__main__":
    main()
