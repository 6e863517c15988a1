"""Imports only point downwards: the deployable library never drags in training or torch code."""

import subprocess
import sys

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
