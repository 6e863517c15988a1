"""README code blocks marked `<!-- example:NAME -->` run as written, in a fresh process and folder."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_example(name: str) -> str:
    match = re.search(
        rf"<!-- example:{name} -->\n```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S
    )
    assert match, f"README.md has no example {name!r}"
    return match.group(1)


@pytest.mark.slow
def test_custom_env_example_runs_as_written(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(readme_example("custom-env"))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "over 8 episodes" in done.stdout
        and (tmp_path / "runs" / "reach" / "policy" / "config.json").is_file()
    )
