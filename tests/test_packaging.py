"""What `pip install` puts on the path (README, "What pip install puts on your path"): the library
`gsbpolicy` and the command packages `trainers`, `export` and `hub_cards`, as top-level packages, so that
`python -m trainers.gsb_mdpo` and the other commands read the same in a clone and after an install; the lab
(`trainers.lab`) stays in the clone. The wheel itself is not built here (too slow for every run); its package
list comes from pyproject.toml, found as setuptools finds it."""

import importlib.metadata
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("gsbpolicy", "trainers", "export", "hub_cards")


def test_the_wheel_installs_the_library_and_the_command_packages_and_nothing_else():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["packages"]["find"]["include"] == [f"{name}*" for name in TOP_LEVEL]
    for name in TOP_LEVEL:
        assert (ROOT / name / "__init__.py").is_file(), f"{name} is not a package"
    others = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} - set(TOP_LEVEL)
    assert others <= {"tests"}, f"packages the wheel would leave out: {others}"


def test_the_wheel_holds_no_lab_module():
    from setuptools import find_namespace_packages

    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    shipped = find_namespace_packages(str(ROOT), include=find["include"], exclude=find.get("exclude", ()))
    lab = [p for p in shipped if p == "trainers.lab" or p.startswith("trainers.lab.")]
    assert "trainers.benchmark" in shipped and "trainers._core" in shipped and lab == []
    assert (ROOT / "trainers" / "lab" / "claims.py").is_file()  # the lab is there, and left out


def test_no_other_installed_distribution_claims_the_generic_names():
    # Another distribution shipping a top-level `export` or `trainers` would overwrite these files on install.
    claims = importlib.metadata.packages_distributions()
    for name in TOP_LEVEL:
        assert set(claims.get(name, [])) <= {"gsbpolicy"}, f"{name} is also installed by {claims[name]}"
