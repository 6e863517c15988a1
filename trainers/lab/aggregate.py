"""Everything generated from the committed results: the framework's files, then the lab's.

    python -m trainers.lab.aggregate          # regenerate every suite's files, the claims and the headline
    python -m trainers.lab.aggregate --check  # fail if a committed file differs from the results' output

First what `python -m trainers.benchmark.aggregate` writes (each suite's summary, page and plot, the README's
headline, the cost and pre-registration tables), then from every summary and the committed measurements
(`aggregate.measurements`) the paper's claims: the claims page `docs/benchmarks/claims.md` (`claims_report`) and
the README's one line per claim (the block between `<!-- claims:start -->` and `<!-- claims:end -->`). For a
results folder other than the committed one, the claims page goes beside its summaries and no README is touched.
"""

from pathlib import Path

from trainers.benchmark import aggregate
from trainers.benchmark.aggregate import README, RESULTS_DIR, Aggregation, Blocks

from . import claims_report

CLAIMS_BLOCK = "claims"
"""The README's block of one line per claim."""


def claims_files(all_summaries: dict[str, dict], results_dir: Path, readme: Path) -> tuple[dict, Blocks]:
    """The claims page (which reads every summary) and the README's claims block (when the README exists)."""
    measured = aggregate.measurements(results_dir)
    page = claims_report.page(all_summaries, measured).encode()
    lines = claims_report.one_line_each(all_summaries, measured)
    block = claims_report.TEMPLATES.get_template("readme_claims.md.jinja").render(claims=lines)
    blocks = [(readme, CLAIMS_BLOCK, block)] if readme.exists() else []
    return {aggregate.pages_dir(results_dir) / "claims.md": page}, blocks


def write_suites(
    suites: list[str] | None = None, results_dir: Path = RESULTS_DIR, readme: Path = README
) -> None:
    """The framework's regeneration of `suites` (default: every ledger's), then the claims; the README only for
    the committed results."""
    all_summaries = aggregate.write_suites(suites, results_dir, readme)
    files, blocks = claims_files(all_summaries, results_dir, readme)
    aggregate.write(files, blocks if aggregate.committed(results_dir) else [])


def stale_files(results_dir: Path = RESULTS_DIR, readme: Path = README) -> list[str]:
    """Committed files, the framework's and the lab's, that differ from what the results generate (empty when up
    to date)."""
    all_summaries = aggregate.summaries(results_dir)
    stale = aggregate.stale_files(results_dir, readme, all_summaries)
    return stale + aggregate.outdated(*claims_files(all_summaries, results_dir, readme))


main = Aggregation(
    "trainers.lab.aggregate", __doc__, write_suites, stale_files, "the claims and the README headline"
).main

if __name__ == "__main__":
    main()
