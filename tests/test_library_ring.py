"""The library ring (`gsbpolicy` and `export`) holds only what the library ring uses: a gsbpolicy module that
only the trainers or the cards import belongs to their ring, not to the deployable package (issue 66)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEAM = "_internal"
"""gsbpolicy/_internal.py only re-exports: a module counts as used where a name it re-exports is imported."""


def _seam_sources() -> dict[str, str]:
    """{name re-exported by the seam: the gsbpolicy module it comes from}."""
    tree = ast.parse((ROOT / "gsbpolicy" / f"{SEAM}.py").read_text())
    return {a.asname or a.name: n.module for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}


def _modules_imported_by(path: Path, seam: dict[str, str]) -> set[str]:
    """The gsbpolicy modules (by file stem) that `path` imports, through the seam or directly."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        module, names = node.module or "", [a.name for a in node.names]
        if node.level == 1 and path.parent.name == "gsbpolicy":  # from ._x import y / from . import _x
            found |= {module} if module else set(names)
        elif module == f"gsbpolicy.{SEAM}":
            found |= {seam[name] for name in names}
        elif module.startswith("gsbpolicy."):
            found.add(module.split(".")[1])
        elif module == "gsbpolicy":
            found |= set(names)
    return found


def test_every_gsbpolicy_module_is_used_by_the_library_ring():
    seam = _seam_sources()
    library = [*ROOT.glob("gsbpolicy/*.py"), *ROOT.glob("export/**/*.py")]
    used = set().union(*(_modules_imported_by(p, seam) for p in library if p.stem != SEAM))
    modules = {p.stem for p in ROOT.glob("gsbpolicy/*.py")} - {"__init__", SEAM}
    assert not modules - used, (
        f"gsbpolicy modules no gsbpolicy or export module uses: {sorted(modules - used)}"
    )
