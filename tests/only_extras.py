"""Run Python as if only some of the project's extras were installed: the test environment has every extra, so a
page or a README block that silently needs one more would pass here and fail for a user who installed what the
documentation names. `prelude(extras)` is source to put before a subprocess's own code; it makes every installed
top-level module that no distribution of `gsbpolicy[extras]`'s requirements (followed to the end) provides fail
to import, as an absent package does."""

import re
import tomllib
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = {"gsbpolicy", "trainers", "export", "hub_cards", "tests"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(name: str) -> tuple[list[str], dict[str, list[str]]] | None:
    """(requirements, extras) of distribution `name`, this checkout's pyproject.toml for the project itself (the
    installed metadata may be another checkout's); None if it is not installed."""
    if _canonical(name) == "gsbpolicy":
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        return project["dependencies"], project["optional-dependencies"]
    try:
        return distribution(name).requires or [], {}
    except PackageNotFoundError:  # a dependency for another platform or Python, absent here
        return None


def distributions(extras: list[str]) -> set[str]:
    """The canonical names of every distribution `pip install ".[extras]"` brings in."""
    seen: dict[str, set[str]] = {}
    todo = [("gsbpolicy", set(extras))]
    while todo:
        name, wanted = todo.pop()
        key = _canonical(name)
        if key in seen and wanted <= seen[key]:
            continue
        seen.setdefault(key, set()).update(wanted)
        found = _requirements(name)
        if found is None:
            continue
        plain, by_extra = found
        lines = plain + [line for extra in wanted for line in by_extra.get(extra, [])]
        for line in lines:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in wanted | {""}):
                todo.append((requirement.name, set(requirement.extras)))
    return set(seen)


def blocked_modules(extras: list[str]) -> list[str]:
    """Installed top-level modules that no distribution of `gsbpolicy[extras]` provides."""
    allowed = distributions(extras)
    return sorted(
        module
        for module, owners in packages_distributions().items()
        if module not in PROJECT_PACKAGES and not any(_canonical(owner) in allowed for owner in owners)
    )


def prelude(extras: list[str]) -> str:
    """Python source that makes the modules outside `gsbpolicy[extras]` unimportable in this process."""
    return f"""
import sys

class _OutsideTheExtras:
    BLOCKED = frozenset({blocked_modules(extras)!r})

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (outside gsbpolicy{extras!r})", name=name)
        return None

sys.meta_path.insert(0, _OutsideTheExtras())
"""
