"""Imports only point inwards: the deployable library never drags in training or torch code, and no ring imports
a ring outside it (the library, the framework, the lab: `RINGS`)."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RINGS = {
    "library": ("gsbpolicy", "export"),
    "framework": ("trainers", "hub_cards"),
    "lab": ("trainers.lab",),
}
"""The rings, innermost first, each with its packages: the library (the deployable policy and its ONNX export),
the framework (the trainers, their registry, presets, the benchmark runner and suites as data, the cards and
publishing) and the lab (the paper's experiments, timing scripts, claims and their reports; not in the wheel). A
module belongs to the ring of the longest package that contains it (`trainers.lab.claims` is the lab's,
`trainers.registry` the framework's); a module may import its own ring and the rings inside it only."""

FORBIDDEN = (
    "optax",
    "torch",
    "mujoco_playground",
    "trainers",
    "tyro",
    "stable_baselines3",
    "gymnasium",
    "huggingface_hub",
    "onnxruntime",
)


def test_importing_gsbpolicy_loads_no_training_stack():
    script = f"import sys, gsbpolicy\nprint(','.join(m for m in {FORBIDDEN!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "", f"gsbpolicy import loaded: {loaded.stdout.strip()}"


def test_a_gymnasium_run_does_not_import_mjx_or_playground():
    """MJX and MuJoCo Playground take seconds to import: a Gymnasium run (the default one) must not pay that
    at every start (trainers/_core/envs imports an env kind's code on first use)."""
    script = (
        "import sys\nfrom trainers import gsb_mdpo\nfrom trainers._core import cli, loop, envs\n"
        "from trainers._core.config import check_env_id\n"
        "check_env_id('InvertedPendulum-v5'); envs._load(envs._KINDS['gymnasium'][1])\n"
        "print(','.join(m for m in ('mujoco_playground', 'mujoco.mjx') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "", f"a Gymnasium run imported: {loaded.stdout.strip()}"


SEAMS = ("gsbpolicy._internal", "gsbpolicy._cli", "gsbpolicy._files")
"""The private modules the repository's commands may import: the library internals they build on, the one-line
command plumbing and the crash-safe file helpers. Users get `gsbpolicy.__all__`."""


def test_code_outside_gsbpolicy_uses_its_public_names_only():
    """trainers, export and hub_cards import `gsbpolicy`'s public names and modules, and its internals only
    through `SEAMS`, never another `gsbpolicy._*` module (the tests may pin internals)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    offenders = []
    for path in [
        *root.glob("trainers/**/*.py"),
        *root.glob("export/**/*.py"),
        *root.glob("hub_cards/**/*.py"),
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.relative_to(root)}: {n}" for n in names
                          if n.startswith("gsbpolicy._") and n not in SEAMS]  # fmt: skip
    assert not offenders


def ring_of(module: str) -> int | None:
    """The index in `RINGS` of the ring `module` belongs to (None: a module outside the repository's packages)."""
    owners = [
        (len(package), index)
        for index, packages in enumerate(RINGS.values())
        for package in packages
        if module == package or module.startswith(package + ".")
    ]
    return max(owners)[1] if owners else None


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module `source` (the code of `module`) imports, at any depth (imports inside functions included),
    relative imports resolved; for `from X import name` both X and X.name (name may be a module)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            named = [node.module] if node.module else []
            base = ".".join([*package[: len(package) - node.level + 1], *named] if node.level else named)
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


def outward_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """The imports in `source` of a ring outside `module`'s."""
    own = ring_of(module)
    return sorted(
        name
        for name in imported_modules(source, module, is_package)
        if own is not None and (ring_of(name) or 0) > own
    )


def test_no_ring_imports_a_ring_outside_it():
    offenders = []
    for package in ("gsbpolicy", "export", "trainers", "hub_cards"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            module = ".".join(parts[:-1] if is_package else parts)
            offenders += [f"{module}: {n}" for n in outward_imports(path.read_text(), module, is_package)]
    assert offenders == [], "an inner ring imports an outer one"


def test_the_ring_scan_sees_lazy_and_relative_imports():
    lazy = "def f():\n    from trainers.lab import claims\n"
    assert outward_imports(lazy, "trainers.benchmark.aggregate") == ["trainers.lab", "trainers.lab.claims"]
    assert outward_imports("from ..lab import claims\n", "trainers.benchmark.aggregate") == [
        "trainers.lab",
        "trainers.lab.claims",
    ]
    assert outward_imports("from trainers import lab\n", "hub_cards.card") == ["trainers.lab"]
    assert outward_imports("import trainers.registry\n", "gsbpolicy.hub") == ["trainers.registry"]
    assert outward_imports("from ..benchmark import aggregate\n", "trainers.lab.aggregate") == []
    assert outward_imports("from . import claims\n", "trainers.lab", is_package=True) == []
