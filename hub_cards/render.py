"""Render a card folder's README.md and learning-curve PNG from its files, or check they are up to date.

    python -m hub_cards.render [FOLDER ...] [--check]

FOLDER (default: every hub_cards/examples/*/) holds config.json, results.json, run.json and
metrics.jsonl; README.md and learning_curve.png are written next to them. `--check` writes nothing and
exits 1 listing the files that differ from a fresh rendering (README text compared exactly; the PNG by
the digest of its inputs, see curves.py). Committed example cards carry baseline rows from
hub_cards/results/*.json: after the benchmark summaries change, rerun this to refresh them.
"""

import argparse
import sys
from pathlib import Path

from gsbpolicy._files import atomic_write_bytes

from .baselines import method_name
from .card import default_repo_name, render_card
from .curves import CURVE_NAME, png_digest, render_curve
from .folder import CardSource, FolderError

EXAMPLES_DIR = Path(__file__).parent / "examples"
EXAMPLE_ORG = "your-org"
"""Namespace of the repo id shown in the committed example cards' usage snippets."""
README = "README.md"
ONNX = "policy.onnx"
VIDEO = "replay.mp4"


def render_folder(
    folder: Path,
    repo_id: str,
    *,
    license: str = "apache-2.0",
    video_steps: int | None = None,
    code_url: str | None = None,
) -> dict[str, bytes]:
    """{file name: bytes} of the card and the curve for the files in `folder` (nothing is written)."""
    source = CardSource.from_folder(folder)
    title = (
        f"{source.env_id}: {method_name(source.algo)}, seed {', '.join(map(str, source.results['seeds']))}"
    )
    has_onnx = (folder / ONNX).is_file()
    readme = render_card(
        source,
        repo_id,
        license=license,
        has_onnx=has_onnx,
        contract=_contract(folder / ONNX) if has_onnx else None,
        video_steps=video_steps if (folder / VIDEO).is_file() else None,
        code_url=code_url,
    )
    return {README: readme.encode(), CURVE_NAME: render_curve(source.metrics, title)}


def _contract(path: Path) -> dict | None:
    """policy.onnx's shape fields and robot contract (`export.inspect.contract_json`), read and checked as a
    robot reads them; None for a file exported before the contract existed."""
    from export.inspect import contract_json  # onnxruntime: present wherever policy.onnx was made
    from export.runtime import OnnxPolicy

    try:
        data = contract_json(OnnxPolicy(path))
    except ValueError as err:  # an unreadable or inconsistent file must not be published with a card
        raise FolderError(f"{path}: {err}") from err
    return data if data["contract"] is not None else None


def example_repo_id(folder: Path) -> str:
    return f"{EXAMPLE_ORG}/{default_repo_name(CardSource.from_folder(folder))}"


def stale_files(folder: Path) -> list[str]:
    """Names of the generated files in `folder` that are missing or differ from a fresh rendering."""
    fresh = render_folder(folder, example_repo_id(folder))
    stale = []
    readme = folder / README
    if not readme.is_file() or readme.read_bytes() != fresh[README]:
        stale.append(README)
    curve = folder / CURVE_NAME
    if not curve.is_file() or png_digest(curve.read_bytes()) != png_digest(fresh[CURVE_NAME]):
        stale.append(CURVE_NAME)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hub_cards.render",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folders", nargs="*", type=Path, help="card folders (default: hub_cards/examples/*/)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a card is out of date")
    args = parser.parse_args(argv)
    folders = args.folders or sorted(p for p in EXAMPLES_DIR.iterdir() if p.is_dir())
    if not folders:
        parser.error(f"no card folders given and none under {EXAMPLES_DIR}")
    problems = []
    for folder in folders:
        try:
            if args.check:
                problems += [f"{folder / name}" for name in stale_files(folder)]
                continue
            for name, data in render_folder(folder, example_repo_id(folder)).items():
                atomic_write_bytes(folder / name, data)
            print(f"rendered {folder / README} and {folder / CURVE_NAME}")
        except (FolderError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    if problems:
        print(
            "out of date (regenerate with `python -m hub_cards.render`):",
            *problems,
            sep="\n  ",
            file=sys.stderr,
        )
        return 1
    if args.check:
        print(f"{len(folders)} card folder(s) up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
