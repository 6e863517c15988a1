"""The README's steps timed as a new user runs them, one after another in a fresh folder (a benchmark script).

    python -m trainers.lab.perf.new_user [--out hub_cards/results/raw/new_user_steps.json]

Runs the Quickstart's training, the "A control script" block (as use_policy.py), the ONNX export, the
"A robot" block (as onnx_run.py), `hub_cards.publish --dry-run` and the learning-curve plot, in an empty
folder with an empty compilation cache (what a first run on a fresh machine meets) and this repository on
PYTHONPATH (standing in for the clone). `trainers.lab.perf.report` turns the result into the README's sentence.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainers.lab.perf import write_result

ROOT = Path(__file__).resolve().parents[3]
RUN = "runs/InvertedPendulum-v5/gsb_mdpo/seed_0"
STEPS = (
    ("train (the Quickstart)", "python -m trainers.gsb_mdpo --log.no-progress"),
    ("load and evaluate (Using a policy)", "python use_policy.py"),
    ("ONNX export", f"python -m export.onnx {RUN}/policy --out policy.onnx"),
    ("ONNX control loop", "python onnx_run.py"),
    (
        "publish --dry-run",
        f"python -m hub_cards.publish {RUN} --repo-id me/gsb-mdpo-InvertedPendulum-v5 --dry-run",
    ),
    ("learning curves", f"python -m hub_cards.curves {RUN} --out curves.png"),
)
SCRIPTS = {"use_policy.py": "## A control script", "onnx_run.py": "## A robot"}


def readme_block(heading: str, readme: str) -> str:
    """The first Python block under `heading` in the README."""
    section = readme.split(heading + "\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    readme = (ROOT / "README.md").read_text()
    result = {
        "what": "the README's steps as a new user runs them, timed one after another in a fresh folder",
        "script": "python -m trainers.lab.perf.new_user (PYTHONPATH stands in for the clone; an empty compilation cache)",
        "load_average_start": os.getloadavg(),
        "steps": [],
    }
    output = []
    with tempfile.TemporaryDirectory() as folder:
        for name, heading in SCRIPTS.items():
            Path(folder, name).write_text(readme_block(heading, readme))
        env = {**os.environ, "PYTHONPATH": str(ROOT), "GSBPOLICY_COMPILE_CACHE": str(Path(folder, "cache"))}
        for step, command in STEPS:
            start = time.perf_counter()
            done = subprocess.run(command.split(), cwd=folder, env=env, capture_output=True, text=True)
            seconds = round(time.perf_counter() - start, 1)
            output.append(f"== rc={done.returncode} {seconds} s: {command}\n{done.stdout}{done.stderr}")
            result["steps"].append(
                {"command": command, "seconds": seconds, "exit_code": done.returncode, "step": step}
            )
            if done.returncode:
                sys.exit(f"{command} failed:\n{done.stdout}{done.stderr}")
    final = re.search(r"return (\S+ \+/- \S+ over \d+ deterministic episodes)", output[0])
    result["final_return"] = final.group(1) if final else "not printed"
    result["raw_output"] = "\n".join(output)
    write_result(result, args.out)


if __name__ == "__main__":
    main()
