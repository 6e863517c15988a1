"""An environment for a subprocess in which some top-level packages cannot be imported: proof that code runs
without them (the ONNX runtime without JAX, the robot's control loop with nothing but onnxruntime and numpy)."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_SITECUSTOMIZE = """
import importlib.abc
import sys

BLOCKED = {blocked!r}


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked: {why}")
        return None


sys.meta_path.insert(0, Blocker())
"""


def env_without(folder: Path, blocked: tuple[str, ...], why: str, path: str = str(REPO)) -> dict[str, str]:
    """`os.environ` with a `sitecustomize.py` (written under `folder`) that makes importing any of `blocked`
    fail with `why`, and `path` after it on PYTHONPATH."""
    blocker = folder / "blocker"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(blocked=blocked, why=why))
    return {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{path}"}
