"""The model card's snippets, as a visitor follows them: the robot snippet runs, exactly as the card shows
it, next to the two files its `hf download` line fetches, in a process where importing jax, gsbpolicy
or export fails; the install line and the code link name the code URL (pyproject.toml's, or --code-url)."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from test_bad_inputs_publish import REPO, make_run_folder

from export.runtime import OnnxPolicy
from gsbpolicy import GSBPolicy
from hub_cards import publish
from hub_cards.card import default_code_url

BLOCKED = ("jax", "jaxlib", "equinox", "gsbpolicy", "export", "hub_cards", "trainers")
BLOCK_PACKAGES = f"""
import importlib.abc
import sys


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: a robot has only numpy and onnxruntime)", name=name)
        return None


sys.meta_path.insert(0, Blocker())
"""
"""A sitecustomize that makes the packages of this repository and JAX unimportable."""


def code_blocks(card: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", card, flags=re.DOTALL)


def the_block(card: str, language: str, containing: str) -> str:
    (block,) = [block for block in code_blocks(card, language) if containing in block]
    return block


@pytest.fixture(scope="module")
def published(tmp_path_factory, tiny_spec) -> Path:
    """A dry-run Hub folder with policy.onnx (exported and verified by the publisher) and its runtime."""
    root = tmp_path_factory.mktemp("card")
    run = make_run_folder(root / "run", tiny_spec)
    out = root / "out"
    argv = [str(run), "--repo-id", "org/flow", "--out", str(out), "--dry-run", "--no-video",
            "--code-url", "https://example.org/me/gsbpolicy-fork"]  # fmt: skip
    assert publish.main(argv) == 0
    return out


def test_the_runtime_is_published_byte_for_byte_next_to_the_onnx_file(published):
    assert (published / "policy.onnx").is_file()
    assert (published / "onnx_policy.py").read_bytes() == (REPO / "export" / "runtime.py").read_bytes()


def test_the_robot_snippet_runs_with_numpy_and_onnxruntime_only(published, tmp_path):
    card = (published / "README.md").read_text()
    (download,) = [
        line for line in the_block(card, "bash", "hf download").splitlines() if "hf download" in line
    ]
    files = download.split("hf download org/flow ")[1].split(" --local-dir")[0].split()
    assert files == ["policy.onnx", "onnx_policy.py"]
    robot = tmp_path / "robot"  # what `hf download ... --local-dir .` leaves there
    robot.mkdir()
    for name in files:
        shutil.copyfile(published / name, robot / name)
    snippet = the_block(card, "python", "from onnx_policy import OnnxPolicy")
    (robot / "snippet.py").write_text(snippet)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_PACKAGES)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(blocker), "HOME": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=robot, env=env, capture_output=True, text=True)

    for name in ("jax", "gsbpolicy", "export"):  # the blocker works, so the snippet cannot lean on them
        assert "blocked: a robot" in run("-c", f"import {name}").stderr
    done = run("snippet.py")
    assert done.returncode == 0, done.stderr
    zeros = np.zeros(4, np.float32)
    onnx_action = OnnxPolicy(published / "policy.onnx").predict(zeros)[0]
    assert done.stdout.strip() == str(onnx_action)
    np.testing.assert_allclose(onnx_action, GSBPolicy.from_pretrained(published).predict(zeros)[0], atol=1e-5)


def test_the_card_links_and_installs_from_the_code_url(published):
    card = (published / "README.md").read_text()
    assert "<https://example.org/me/gsbpolicy-fork>" in card  # --code-url
    (install,) = the_block(card, "bash", 'pip install "gsbpolicy @').splitlines()
    assert install == 'pip install "gsbpolicy @ git+https://example.org/me/gsbpolicy-fork"'
    assert 'GSBPolicy.from_pretrained("org/flow")' in the_block(card, "python", "import gymnasium")


def test_the_default_code_url_is_pyprojects():
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert default_code_url() == urls["Repository"] and urls["Repository"].startswith("https://")
