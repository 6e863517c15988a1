"""MuJoCo Playground and MJX, imported without the two optional packages they load for backends this
training path never uses.

Importing `mujoco_playground` also imports torch (for its RSL-RL wrapper) and, through MJX, NVIDIA Warp and
MuJoCo Warp (MJX's `impl="warp"` backend) whenever they are installed: on a 2-core CPU that is most of the
5-6 s a Playground process spends importing. Training here always asks for `impl="jax"` and never uses the
torch wrapper, so while Playground imports, those names are marked missing: both libraries take the branch
they have for a missing package (MJX then reports `WARP_INSTALLED = False`, and its printed notice of it is
swallowed). A package the process had already imported is left as it is, and importing one later works as
usual (the SB3 trainer imports torch itself).
"""

import contextlib
import io
import sys

UNUSED_BACKENDS = ("torch", "warp")


def _import_without_unused_backends() -> None:
    if "mujoco_playground" in sys.modules:
        return
    hidden = [name for name in UNUSED_BACKENDS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # `import name` now raises ImportError
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import mujoco_playground  # noqa: F401
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


_import_without_unused_backends()

from mujoco import mjx  # noqa: E402
from mujoco_playground import MjxEnv, State, dm_control_suite  # noqa: E402

__all__ = ["MjxEnv", "State", "dm_control_suite", "mjx"]
