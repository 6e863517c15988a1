"""The cost and hardware parts of a suite page: the machines the runs ran on, the fastest run per column and
machine, and one cost table per machine for a suite with several tasks."""

from .report_cells import table


def _hardware_labels(summary: dict) -> list[str]:
    return sorted(
        {lb for entries in summary["tasks"].values() for e in entries.values() for lb in e["hardware"]}
    )


def fastest_text(summary: dict, variants: list[str]) -> str | None:
    """Runs may have shared the machine (with each other, or with other work), so the fastest run per method
    is the closest to its uncontended cost; a suite that ran on several machines gets one list per machine."""
    fastest: dict[str, list[str]] = {}
    for label in _hardware_labels(summary):
        for v in variants:
            walls = [
                w
                for entries in summary["tasks"].values()
                if (e := entries.get(v)) and (w := e["wall_s_min_by_hardware"].get(label))
            ]
            if walls:
                fastest.setdefault(label, []).append(f"{v} {min(walls) / 60:.1f}")
    if not fastest:
        return None
    if len(fastest) == 1:
        return f"(on the hardware above): {', '.join(next(iter(fastest.values())))}"
    return "; ".join(f"on {label}: {', '.join(runs)}" for label, runs in fastest.items())


def cost_tables(summary: dict, variants: list[str]) -> list[tuple[str, str]]:
    """A run's cost depends on the task (its simulation cost per step) as well as on the method, so a suite
    with several tasks also gets its fastest run per task and column, one table per machine."""
    if len(summary["tasks"]) < 2:
        return []

    def cell_on(label: str):
        def cell(entries: dict, e: dict) -> str:
            wall = e["wall_s_min_by_hardware"].get(label)
            return "-" if wall is None else f"{wall / 60:.1f}"

        return cell

    return [(label, table(summary, variants, cell_on(label))) for label in _hardware_labels(summary)]


def hardware_text(summary: dict) -> str:
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
