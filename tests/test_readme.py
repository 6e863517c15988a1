"""README code blocks marked `<!-- example:NAME -->` run as written, in a fresh process and folder: the
custom-env example, the Quickstart, "Using a policy" and the ONNX section. In bash blocks, `pip install`
lines are skipped (the test environment has every extra) and each `python -m` line is run."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_inputs_publish import make_run_folder

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART_RUN = Path("runs/InvertedPendulum-v5/gsb_mdpo/seed_0")
"""Where the Quickstart's command leaves its run, and where the later sections load it from."""


def readme_example(name: str, language: str = "python") -> str:
    match = re.search(
        rf"<!-- example:{name} -->\n```{language}\n(.*?)```", (ROOT / "README.md").read_text(), re.S
    )
    assert match, f"README.md has no {language} example {name!r}"
    return match.group(1)


def commands(block: str) -> list[list[str]]:
    """The `python -m` command lines of a bash block, as argv for this interpreter."""
    lines = [line for line in block.splitlines() if line.strip() and not line.startswith("pip install")]
    assert all(line.startswith("python -m ") for line in lines), lines
    return [[sys.executable, *shlex.split(line)[1:]] for line in lines]


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`argv` in a fresh process in `cwd`, this checkout importable as a clone's working tree is."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)


def run_python(block: str, cwd: Path) -> subprocess.CompletedProcess:
    script = cwd / "example.py"
    script.write_text(block)
    return run([sys.executable, str(script)], cwd)


@pytest.mark.slow
def test_custom_env_example_runs_as_written(tmp_path):
    done = run_python(readme_example("custom-env"), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "over 8 episodes" in done.stdout
        and (tmp_path / "runs" / "reach" / "policy" / "config.json").is_file()
    )


@pytest.mark.slow
def test_quickstart_trains_then_names_the_next_commands_and_refuses_to_rerun(tmp_path):
    (train,) = commands(readme_example("quickstart", "bash"))
    # The README's run is 150,000 env steps (minutes on two cores); two iterations show the same ending.
    smaller = ["--total-steps", "2048", "--log.no-progress"]
    done = run([*train, *smaller], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    policy = QUICKSTART_RUN / "policy"
    assert "final evaluation on InvertedPendulum-v5: return" in done.stdout
    assert "over 10 deterministic episodes" in done.stdout and f"policy saved to {policy}" in done.stdout
    assert (tmp_path / policy / "model.safetensors").is_file()
    again = run([*train, *smaller], tmp_path)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "already holds a finished run" in again.stderr


@pytest.mark.slow
def test_using_a_policy_and_the_onnx_section_run_as_written(tmp_path, tiny_spec):
    # What the Quickstart leaves behind, with an untrained policy: these sections only load and run it.
    (tmp_path / QUICKSTART_RUN).parent.mkdir(parents=True)
    make_run_folder(tmp_path / QUICKSTART_RUN, tiny_spec)
    used = run_python(readme_example("use-policy"), tmp_path)
    assert used.returncode == 0, used.stderr[-3000:]
    assert "'n_episodes': 10" in used.stdout and "'deterministic': True" in used.stdout
    (export,) = commands(readme_example("onnx-export", "bash"))
    exported = run(export, tmp_path)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "checking parity with JAX" in exported.stdout and (tmp_path / "policy.onnx").is_file()
    ran = run_python(readme_example("onnx-run"), tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert re.fullmatch(r"return -?\d+\.\d\n", ran.stdout)


@pytest.mark.slow
def test_demonstrations_to_a_published_fine_tuned_policy_run_as_written(tmp_path, tiny_spec):
    # The Quickstart's policy, untrained, as the demonstrator: the chain is the point, not the returns.
    (tmp_path / QUICKSTART_RUN).parent.mkdir(parents=True)
    make_run_folder(tmp_path / QUICKSTART_RUN, tiny_spec)
    steps = commands(readme_example("finetune", "bash"))
    assert [argv[2] for argv in steps] == [
        "trainers.collect", "trainers.bc", "trainers.gsb_mdpo", "export.onnx", "hub_cards.publish"
    ]  # fmt: skip
    # The README's sizes take minutes on two cores; these run the same commands in seconds.
    smaller = {
        "trainers.bc": ["--steps", "200", "--eval-episodes", "2"],
        "hub_cards.publish": ["--no-onnx"],  # the export above already checked it
        "trainers.gsb_mdpo": ["--total-steps", "2048", "--init.critic-warmup-steps", "1024", "--log.no-progress",
                              "--eval.episodes", "2", "--eval.final-episodes", "2"],
    }  # fmt: skip
    for argv in steps:
        done = run([*argv, *smaller.get(argv[2], [])], tmp_path)
        assert done.returncode == 0, (argv[2], done.stderr[-3000:])
    assert (tmp_path / "demos" / "data" / "metadata.json").is_file()
    run_json = json.loads((tmp_path / "runs" / "finetune" / "run.json").read_text())
    assert run_json["init"]["source"] == "runs/InvertedPendulum-v5/bc/seed_0/policy"
    assert (tmp_path / "finetune.onnx").is_file()
    card = (tmp_path / "runs" / "finetune" / "hub" / "README.md").read_text()
    # The card says where training started and how far it moved from there.
    assert "Fine-tuned from the pretrained policy `runs/InvertedPendulum-v5/bc/seed_0/policy`" in card
    assert run_json["init"]["weights_sha256"][:16] in card and "`train/path_kl_init`" in card


def test_ci_runs_the_readme_test_command_through_the_lock():
    """`.ci/run` installs and tests exactly as the README tells a newcomer, and the lock it installs through
    pins every dependency pyproject.toml names (a dependency added without `bash .ci/lock` fails here)."""
    readme = (ROOT / "README.md").read_text()
    install, test = re.search(r"```bash\n(pip install [^\n]*\.\[dev\]\") && (python -m pytest[^\n]*)\n```",
                              readme).groups()  # fmt: skip
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install in [line.replace(" -q ", " ") for line in ci] and test in ci
    assert "-c tests/constraints.txt" in install and 'python -m venv "$venv"' in ci
    lock = (ROOT / "tests" / "constraints.txt").read_text()
    pinned = {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in
              re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", lock, re.M)}  # fmt: skip
    assert pinned["torch"] == "2.13.0"
    import tomllib

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
