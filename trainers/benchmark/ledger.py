"""The run ledgers (the committed ones in `hub_cards/results`) and what the summaries read beside them.

Each line of `<suite>.runs.jsonl` is one finished run, as the benchmark runner recorded it: its curve, final
evaluation, cost, hardware and commit. `exploration_probe.json` holds `trainers.lab.exploration_probe`'s
results by env, quoted under the tables of the suites that ran those envs. The runner adds lines through
`append_ledger` only, so that each run is in a ledger once however many runners add at the same time.
"""

import fcntl
import json
import os
from pathlib import Path

from gsbpolicy._files import atomic_write_text, open_no_follow

from .._core.runlog import read_jsonl

RESULTS_DIR = Path(__file__).parents[2] / "hub_cards" / "results"
PROBE_FILE = "exploration_probe.json"


def read_ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ledger_path(results_dir: Path, suite: str) -> Path:
    """Where a suite's ledger lives in `results_dir`."""
    return results_dir / f"{suite}.runs.jsonl"


def run_key(record: dict) -> tuple[str, str, int]:
    """What a ledger line is a run of: (task, variant name, seed)."""
    return record["task"], record["variant"], record["seed"]


def record_json(record: dict) -> str:
    """A ledger line as written (keys sorted, so equal records are equal lines)."""
    return json.dumps(record, sort_keys=True)


def append_ledger(path: Path, *records: dict) -> list[dict]:
    """Add the records whose run the ledger does not hold yet; returns those added. The ledger is rewritten
    atomically (a crash leaves the old or the new file) under an exclusive lock on `<ledger>.lock`, so that
    runners merging at the same time (a --wait and a --status, say) add each run exactly once. A line that is
    not a JSON object raises ValueError naming the file and the line (`read_jsonl`)."""
    if not records:
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_no_follow(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held = {run_key(r) for r in read_jsonl(path)}
        added = []
        for record in records:
            if run_key(record) not in held:
                held.add(run_key(record))
                added.append(record)
        if added:
            text = (path.read_text() if path.exists() else "") + "".join(record_json(r) + "\n" for r in added)
            atomic_write_text(path, text)
        return added
    finally:
        os.close(fd)  # releases the lock


def ledger_suites(results_dir: Path) -> list[str]:
    """The suites that have a ledger in `results_dir`."""
    return sorted(p.name.removesuffix(".runs.jsonl") for p in results_dir.glob("*.runs.jsonl"))


def read_probes(path: Path) -> dict[str, dict]:
    """The exploration probe's entries by env in `path` ({} when there is none yet).

    Raises:
        ValueError: naming the file, when it is not valid JSON or not an object.
    """
    if not path.exists():
        return {}
    try:
        entries = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path} is not valid JSON ({err}); move it away and rerun trainers.lab.exploration_probe"
        ) from None
    if not isinstance(entries, dict):
        raise ValueError(f"{path} holds {type(entries).__name__}, not the probe's entries by env")
    return entries


def floors_path(results_dir: Path, suite: str) -> Path:
    """Where `trainers.benchmark.floors` writes a suite's do-nothing and random scores."""
    return results_dir / f"{suite}.floors.json"


def read_floors(results_dir: Path, suite) -> dict | None:
    """The committed floors of `suite` (None for a suite without floors, or before they were scored)."""
    path = floors_path(results_dir, suite.name)
    return json.loads(path.read_text()) if suite.floors and path.exists() else None


def shared_machine(record: dict) -> bool:
    """Whether another run shared the machine: this runner's own (`--jobs`) or any other trainer seen."""
    return record.get("concurrent_runs", 1) > 1 or record["cost"].get("other_trainers_peak", 0) > 0


def hardware_label(record: dict) -> str:
    """The machine a run ran on, in words: CPU, cores, GPU."""
    hw = record.get("hardware") or {}
    return f"{hw.get('cpu', '?')}, {hw.get('cores', '?')} cores, GPU {hw.get('gpu') or 'none'}"
