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
