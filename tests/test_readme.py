"""README.md is the front page: at most 200 lines, its two commands are the ones a newcomer runs (the training
command trains, saves a loadable policy and refuses to run again over it; the test command is exactly what
`.ci/run` runs, through the lock), its code snippets are blocks of the documentation's pages, which
`tests/test_docs.py` runs, and its numbers are generated (the aggregation's and the performance report's checks
fail when a block is stale)."""

import ast
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from only_extras import prelude

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
QUICKSTART_RUN = Path("runs/InvertedPendulum-v5/gsb_mdpo/seed_0")


def test_the_readme_is_one_page():
    assert len(README.splitlines()) <= 200


def _bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README, re.S)


@pytest.mark.slow
def test_the_training_command_trains_saves_and_refuses_to_run_again(tmp_path):
    (train,) = [line for line in _bash_blocks()[0].splitlines() if line.startswith("python -m")]
    argv = [sys.executable, *shlex.split(train)[1:], "--total-steps", "2048", "--log.no-progress"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    policy = QUICKSTART_RUN / "policy"
    assert (
        f"policy saved to {policy}: return " in done.stdout.splitlines()[-1]
        and "deterministic episodes on InvertedPendulum-v5" in done.stdout.splitlines()[-1]
    )
    assert (tmp_path / policy / "model.safetensors").is_file()
    again = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert (
        again.returncode == 2
        and again.stderr.count("\n") == 1
        and "already holds a finished run" in again.stderr
    )


def test_ci_runs_the_readme_test_command_through_the_lock():
    """`.ci/run` installs and tests exactly as the README tells a newcomer, and the lock it installs through
    pins every dependency pyproject.toml names (a dependency added without `bash .ci/lock` fails here)."""
    install, test = re.search(r"```bash\n(pip install [^\n]*\.\[dev\]\") && (python -m pytest[^\n]*)\n```",
                              README).groups()  # fmt: skip
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    steps = test.split(" && ")
    assert install in [line.replace(" -q ", " ") for line in ci] and all(step in ci for step in steps)
    assert steps[-1].endswith(" tests/lab")  # the lab's tests are a step of their own (norecursedirs)
    assert "-c tests/constraints.txt" in install and 'python -m venv "$venv"' in ci
    lock = (ROOT / "tests" / "constraints.txt").read_text()
    pinned = {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in
              re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", lock, re.M)}  # fmt: skip
    assert pinned["torch"] == "2.13.0"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    named = [
        *project["dependencies"],
        *(r for extra in project["optional-dependencies"].values() for r in extra),
    ]
    for requirement in named:
        name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", requirement).group()).lower()
        if name in ("gsbpolicy", "mutmut") or requirement.startswith("jax[cuda"):
            continue  # the project itself; extras outside `dev` (mutation testing, CUDA)
        assert name in pinned, f"{requirement} is not in tests/constraints.txt: run bash .ci/lock"


def test_every_number_block_is_generated():
    """The README's numbers sit in blocks the generators fill (`perf:new-user`, `headline`, `claims`), not in prose."""
    for name in ("perf:new-user", "headline", "claims"):
        assert f"<!-- {name}:start -->" in README and f"<!-- {name}:end -->" in README
    prose = re.sub(r"<!-- (\S+):start -->.*?<!-- \1:end -->", "", README, flags=re.S)
    prose = re.sub(r"```.*?```", "", prose, flags=re.S)
    assert not re.findall(r"(?<![-\w.])\d+\.\d+\b", prose), "a decimal number typed into the README's prose"


@pytest.mark.slow
def test_the_own_env_example_learns(tmp_path):
    """The README's own-env example, run as written (seed 0, 8,192 env steps): the trained policy at least halves
    doing nothing's accumulated distance (-64 on these 50 episodes) on the same episodes."""
    (block,) = [
        code for code in re.findall(r"```python\n(.*?)```", README, re.S) if "gsb_mdpo.train(Reach" in code
    ]
    (tmp_path / "reach.py").write_text(block)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "reach.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    trained, floor = map(float, re.search(r"trained (\S+), doing nothing (\S+)", done.stdout).groups())
    assert floor < -50 and trained > floor / 2, done.stdout


def test_one_install_brings_everything_the_readme_uses():
    """The README's first install command (its extras) is all its blocks and its `python -m` commands need: each
    module they import or run imports where only those extras are installed. The test command's block brings its
    own install (`.[dev]`) and is left out."""
    install = re.search(r'pip install -c tests/constraints\.txt -e "\.\[([a-z0-9,]+)\]"', _bash_blocks()[0])
    assert install, _bash_blocks()[0]
    extras = install.group(1).split(",")
    blocks = re.findall(r"```(?:bash|python)\n(.*?)```", README, re.S)
    used = {name for name in re.findall(r"python -m ([\w.]+)", README) if name not in ("venv", "pytest")}
    for code in (c for c in blocks if not c.startswith("pip install") or "[dev]" not in c):
        if code.lstrip().startswith(("import", "from")):
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Import):
                    used |= {alias.name for alias in node.names}
                elif isinstance(node, ast.ImportFrom):
                    used.add(node.module)
    assert {"trainers.gsb_mdpo", "export.onnx", "export.runtime", "gsbpolicy"} <= used, used
    script = (
        prelude(extras)
        + f"import importlib\nfor name in {sorted(used)!r}:\n    importlib.import_module(name)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_install_hint_keeps_the_lock():
    """An install from a clone (`pip install ... -e`), printed by a command or written on a page, goes through
    the lock as the README's commands do: without `-c tests/constraints.txt` pip takes whatever is newest."""
    paths = [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md")]
    paths += [
        p
        for package in ("gsbpolicy", "trainers", "export", "hub_cards", "tests")
        for p in (ROOT / package).rglob("*.py")
    ]
    hints = [
        (path.relative_to(ROOT), hint)
        for path in paths
        for hint in re.findall(r"pip install[^`'\\\n]*? -e [^`'\\\n]*", path.read_text())
    ]
    assert len(hints) > 10 and all("-c tests/constraints.txt" in hint for _, hint in hints), [
        h for h in hints if "-c tests/constraints.txt" not in h[1]
    ]
