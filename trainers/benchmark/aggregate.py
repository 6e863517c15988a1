"""Everything the framework generates from the committed run ledgers (`hub_cards/results/<suite>.runs.jsonl`).

    python -m trainers.benchmark.aggregate          # regenerate every suite's files and the headline
    python -m trainers.benchmark.aggregate --check  # fail if a committed file differs from the ledgers' output

For each suite: its summary `hub_cards/results/<suite>.json` (`summary`), and its documentation page
`docs/benchmarks/<suite>.md` (`report`) with its learning curves `docs/benchmarks/<suite>.png` (`plots`). From
every summary together: the README's headline (the block between `<!-- headline:start -->` and
`<!-- headline:end -->`: the aggregate IQM of each suite), the cost table of docs/reproducing.md (from the
ledgers' wall-clock) and the table of pre-registrations. For a results folder other than the committed one (a
suite run on its own), the pages go beside its summaries and no README is touched. Nothing here is typed by
hand. The paper's claims are the lab's: `python -m trainers.lab.aggregate` runs this, then writes them.
"""

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

from gsbpolicy._files import atomic_write_bytes

from . import confirmatory
from .ledger import (
    PROBE_FILE,
    RESULTS_DIR,
    hardware_label,
    ledger_suites,
    read_floors,
    read_ledger,
    read_probes,
)
from .plots import plot
from .preregistration import TOY_LOG, load
from .report import TEMPLATES, markdown
from .suites import PREREGISTRATION_FILE, SUITES
from .summary import summarize

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
DOCS_DIR = ROOT / "docs" / "benchmarks"
REPRODUCING = ROOT / "docs" / "reproducing.md"
PREREGISTRATIONS_PAGE = DOCS_DIR / "preregistration.md"
HEADLINE = "headline"


def summaries(results_dir: Path, suites: list[str] | None = None) -> dict[str, dict]:
    """The summaries of `suites` (default: every ledger's), by suite name."""
    names = ledger_suites(results_dir) if suites is None else suites
    probes = read_probes(results_dir / PROBE_FILE)
    floors = {s: read_floors(results_dir, SUITES[s]) for s in names if s in SUITES}
    return {
        s: summarize(s, read_ledger(results_dir / f"{s}.runs.jsonl"), probes, floors.get(s)) for s in names
    }


TOY_SUMMARY = "toy_tilt_sweep.json"


def measurements(results_dir: Path) -> dict:
    """The committed measurements the claims read besides the suites: `runtime-*.json`
    (`python -m trainers.lab.perf.runtime`), by file name, and the toy sweep's summary."""
    toy = results_dir / TOY_SUMMARY
    return {
        "runtime": {p.name: json.loads(p.read_text()) for p in sorted(results_dir.glob("runtime-*.json"))},
        "toy": json.loads(toy.read_text()) if toy.exists() else None,
        "confirmatory": registered_runs(results_dir),
    }


def registrations_table(results_dir: Path) -> str:
    """The pre-registrations with their comparators, seeds, planned power and where their runs stand."""
    judged = []
    for registration, records in registered_runs(results_dir).values():
        rule = confirmatory.judge if registration.get("suite") else confirmatory.judge_toy
        # A suite's page exists once its ledger has a run (the page is generated from the ledger).
        page = bool(registration.get("suite") and records)
        judged.append((registration, rule(registration, records), page))
    return TEMPLATES.get_template("preregistration.md.jinja").render(
        registrations=judged, test_names=confirmatory.TEST_NAMES
    )


def registered_runs(results_dir: Path) -> dict[str, tuple[dict, list[dict]]]:
    """Each pre-registered claim in `results_dir` with the records it may read: its suite's ledger, or the toy's
    run log (`confirmatory` selects the registered runs from them)."""
    found = {}
    for registration in load(results_dir / PREREGISTRATION_FILE.name):
        path = results_dir / (f"{registration['suite']}.runs.jsonl" if registration.get("suite") else TOY_LOG)
        found[registration["id"]] = (registration, read_ledger(path) if path.exists() else [])
    return found


def pages_dir(results_dir: Path) -> Path:
    """Where the Markdown pages and plots of `results_dir`'s summaries go: the documentation for the committed
    results, beside the summaries otherwise."""
    return DOCS_DIR if committed(results_dir) else results_dir


def suite_files(summary: dict, results_dir: Path) -> dict[Path, bytes]:
    """Every file one suite's summary determines, with its content."""
    suite, pages = summary["suite"], pages_dir(results_dir)
    png = plot(summary)
    page = TEMPLATES.get_template("suite_page.md.jinja").render(
        s=summary, tables=markdown(summary), plot=f"{suite}.png" if png else None
    )
    files = {
        results_dir / f"{suite}.json": (json.dumps(summary, indent=1) + "\n").encode(),
        pages / f"{suite}.md": page.encode(),
    }
    if png is not None:
        files[pages / f"{suite}.png"] = png
    return files


def headline(all_summaries: dict[str, dict]) -> str:
    """The README's headline: each suite's aggregate IQM per column with its interval."""
    suites = [s for s in all_summaries.values() if (s.get("aggregate_iqm") or {}).get("columns")]
    return TEMPLATES.get_template("headline.md.jinja").render(suites=suites)


def cost_rows(results_dir: Path = RESULTS_DIR) -> list[dict]:
    """What each defined suite costs, from its ledger: runs committed of those planned, their summed wall-clock
    (every attempt of every run, as the runner recorded it), and the machines they ran on. A line the runner copied
    from another suite's ledger (`reused_from`) is a committed run here but cost nothing here: its wall-clock
    counts in the suite that ran it, so that the column sums each run's cost once."""
    rows = []
    for suite in SUITES.values():
        path = results_dir / f"{suite.name}.runs.jsonl"
        records = read_ledger(path) if path.exists() else []
        rows.append(
            {
                "suite": suite,
                "planned": suite.planned_runs,
                "runs": len(records),
                "hours": sum(r["cost"]["wall_s"] for r in records if not r.get("reused_from")) / 3600,
                "hardware": sorted({hardware_label(r) for r in records}),
            }
        )
    return rows


def generated(all_summaries: dict[str, dict], suites: list[str], results_dir: Path) -> dict[Path, bytes]:
    """The files of `suites`."""
    files = {}
    for suite in suites:
        files |= suite_files(all_summaries[suite], results_dir)
    return files


def with_block(text: str, name: str, content: str) -> str:
    """`text` with its `<!-- NAME:start -->...<!-- NAME:end -->` block regenerated (unchanged if it has none)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        return text
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{content}{end}{tail}"


Blocks = list[tuple[Path, str, str]]
"""Generated blocks of hand-written pages: (file, block name, content)."""


def write(files: dict[Path, bytes], blocks: Blocks) -> None:
    """Write `files` and regenerate `blocks` in the pages that hold them."""
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, content)
    for path, name, text in blocks:
        atomic_write_bytes(path, with_block(path.read_text(), name, text).encode())


def outdated(files: dict[Path, bytes], blocks: Blocks) -> list[str]:
    """The paths among `files` and `blocks` whose committed content differs from the generated one."""
    stale = [str(p) for p, content in files.items() if not p.exists() or p.read_bytes() != content]
    return stale + [
        str(path)
        for path, name, text in blocks
        if path.read_text() != with_block(path.read_text(), name, text)
    ]


def committed(results_dir: Path) -> bool:
    """Whether `results_dir` is the committed results folder (whose pages are the documentation's)."""
    return results_dir.resolve() == RESULTS_DIR.resolve()


def write_suites(
    suites: list[str] | None = None, results_dir: Path = RESULTS_DIR, readme: Path = README
) -> dict[str, dict]:
    """Regenerate `suites` (default: every ledger's), and the generated blocks of the README and the
    documentation when `results_dir` is the committed one; returns every defined suite's summary. The headline
    reads every ledger of a defined suite: one left by a suite since removed has no summary, and must not stop
    the runner's regeneration of the suite it ran."""
    all_summaries = summaries(results_dir, [s for s in ledger_suites(results_dir) if s in SUITES])
    files = generated(all_summaries, suites or list(all_summaries), results_dir)
    write(files, _blocks(all_summaries, readme, results_dir) if committed(results_dir) else [])
    return all_summaries


def _blocks(all_summaries: dict[str, dict], readme: Path, results_dir: Path) -> Blocks:
    """The generated blocks of hand-written pages, for the files that exist: the README's headline, and for the
    committed results the cost table of docs/reproducing.md and the pre-registrations' table."""
    blocks = [(readme, HEADLINE, headline(all_summaries))]
    if committed(results_dir):
        blocks.append((REPRODUCING, "cost", TEMPLATES.get_template("cost.md.jinja").render(rows=cost_rows())))
        blocks.append((PREREGISTRATIONS_PAGE, "registrations", registrations_table(results_dir)))
    return [(path, name, text) for path, name, text in blocks if path.exists()]


def write_suite(suite: str, results_dir: Path = RESULTS_DIR, readme: Path = README) -> None:
    """What the benchmark runner calls after each finished run."""
    write_suites([suite], results_dir, readme)


def stale_files(
    results_dir: Path = RESULTS_DIR, readme: Path = README, all_summaries: dict[str, dict] | None = None
) -> list[str]:
    """Committed files that differ from what the ledgers generate (empty when up to date); `all_summaries`:
    the ledgers' summaries when the caller has them already."""
    all_summaries = summaries(results_dir) if all_summaries is None else all_summaries
    files = generated(all_summaries, list(all_summaries), results_dir)
    return outdated(files, _blocks(all_summaries, readme, results_dir))


@dataclasses.dataclass(frozen=True)
class Aggregation:
    """One regenerating command: what it writes and checks, and how it names itself in its messages."""

    module: str
    """Its module (`python -m <module>`)."""
    doc: str
    """Its --help text."""
    write: Callable[[list[str] | None], object]
    """Regenerate the given suites (None: every ledger's) and what is generated from them."""
    stale: Callable[[], list[str]]
    """The committed files that differ from what the results generate."""
    wrote: str
    """What `write` regenerates besides the suites' files, for its report."""

    def main(self, argv=None) -> None:
        """The command line: regenerate, or only check (`--check`)."""
        parser = argparse.ArgumentParser(
            prog=f"python -m {self.module}",
            description=self.doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("--suite", nargs="*", help="suites to regenerate (default: every ledger)")
        parser.add_argument("--check", action="store_true", help="only report files that are out of date")
        args = parser.parse_args(argv)
        try:
            self._run(parser, args)
        except ValueError as err:
            sys.exit(f"error: {err}")

    def _run(self, parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
        if args.check:
            stale = self.stale()
            if stale:
                sys.exit(f"out of date (run `python -m {self.module}`): " + ", ".join(stale))
            print("benchmark summaries are up to date")
            return
        known = ledger_suites(RESULTS_DIR)
        if unknown := [s for s in args.suite or () if s not in known]:
            parser.error(
                f"no ledger for {', '.join(unknown)} in {RESULTS_DIR}; suites with a ledger: {', '.join(known)}"
            )
        self.write(args.suite)
        print(f"wrote {', '.join(args.suite or known)}, {self.wrote}")


main = Aggregation(
    "trainers.benchmark.aggregate", __doc__, write_suites, stale_files, "the README headline"
).main

if __name__ == "__main__":
    main()
