"""Mutation testing of the maths and training modules with mutmut 3 (not part of CI: it takes minutes per module).

    pip install -e ".[mutation]"
    python tests/mutation/run.py gae sde            # named modules (see MODULES), one after the other
    python tests/mutation/run.py --all              # every module in MODULES
    python tests/mutation/run.py gae --max-children 2 --scratch /tmp/mut

Each module runs in its own scratch copy of the package sources and tests (mutmut writes a `mutants/`
tree and its own config there, so the repository stays untouched), against only the fast test files that
pin that module (mutmut further narrows each mutant to the tests that call the mutated function). The raw
report -- counts, mutation score and the diff of every surviving mutant -- goes to
`hub_cards/results/raw/mutation_<module>.txt`. A survivor needs either a test that kills it or a line in
the report explaining why it is equivalent.

JAX is not fork-safe once its backend has started, and a jit cache inherited from a parent that ran the
unmutated code would hide the mutant. So mutmut's fork server is used with only plain imports preloaded:
every mutant's tests start their JAX backend, and compile, from scratch.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "hub_cards" / "results" / "raw"

MODULES = {
    "gae": ("trainers/_core/gae.py", ["tests/test_gae.py", "tests/test_pins_core.py"]),
    "sde": ("gsbpolicy/_sde.py", ["tests/test_sde.py", "tests/test_pins_core.py"]),
    "schedules": ("gsbpolicy/_schedules.py", ["tests/test_sde.py", "tests/test_pins_core.py"]),
    "normalizer": ("gsbpolicy/_normalizer.py", ["tests/test_normalizer.py", "tests/test_pins_core.py"]),
    "networks": ("gsbpolicy/_networks.py", ["tests/test_gsbpolicy.py", "tests/test_pins_core.py"]),
    "update": ("trainers/_core/update.py", ["tests/test_pins_update.py"]),
    "gsb_mdpo": ("trainers/gsb_mdpo.py", ["tests/test_gsb_mdpo.py", "tests/test_pins_losses.py"]),
    "gaussian_ppo": ("trainers/gaussian_ppo.py", ["tests/test_gaussian_ppo.py", "tests/test_pins_losses.py"]),
    "dppo": ("trainers/dppo.py", ["tests/test_dppo.py", "tests/test_pins_losses.py"]),
    "fpo": ("trainers/fpo.py", ["tests/test_fpo.py", "tests/test_pins_losses.py"]),
    "genpo": ("trainers/genpo.py", ["tests/test_genpo.py", "tests/test_pins_losses.py"]),
}
"""module name -> (file to mutate, the fast test files that pin it)."""

SLOW_TESTS = "not end_to_end and not onnx and not presets and not trainer_writes and not runs_end"
"""Deselected everywhere: training runs, ONNX export and preset tables pin nothing the mutants change
that the fast tests do not, and each costs tens of seconds per mutant."""

COPIED = ["gsbpolicy", "trainers", "export", "tests", "pyproject.toml"]
PRELOAD = [
    "numpy",
    "jax",
    "jax.numpy",
    "equinox",
    "optax",
    "jaxtyping",
    "hypothesis",
    "safetensors",
    "tyro",
    "gymnasium",
    "mujoco",
    "mujoco.mjx",
    "mujoco_playground",
]
"""Imported once by the fork server (importing trainers._core pulls in MuJoCo Playground, 20-50 s on a busy
2-core machine, which each mutant would otherwise pay): plain imports only, nothing that starts the JAX
backend. Some are pytest
plugins, which pytest then cannot assertion-rewrite: the warning it gives is ignored above (the project
turns warnings into errors, which would fail every mutant's run before its first test)."""


def _config(module_file: str, tests: list[str]) -> str:
    lines = "\n    ".join
    return f"""[mutmut]
source_paths =
    gsbpolicy
    trainers
only_mutate =
    {module_file}
also_copy =
    export
pytest_add_cli_args_test_selection =
    {lines(tests)}
pytest_add_cli_args =
    -p
    no:cacheprovider
    -W
    ignore::pytest.PytestAssertRewriteWarning
    -k
    {SLOW_TESTS}
process_isolation = forkserver
forkserver_warmup = import
preload_modules_file = preload.txt
use_git_change_detection = false
"""


def _mutmut(args: list[str], cwd: Path, log) -> subprocess.CompletedProcess:
    result = subprocess.run(["mutmut", *args], cwd=cwd, capture_output=True, text=True)
    log.write(f"$ mutmut {' '.join(args)}  (exit {result.returncode})\n")
    return result


def run_module(name: str, scratch: Path, max_children: int) -> dict:
    """Mutate one module in a fresh scratch copy; write its raw report; return its counts."""
    module_file, tests = MODULES[name]
    work = scratch / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.onnx", "mutation")
    for entry in COPIED:
        source = ROOT / entry
        (
            shutil.copytree(source, work / entry, ignore=ignore)
            if source.is_dir()
            else shutil.copy2(source, work)
        )
    (work / "setup.cfg").write_text(_config(module_file, tests))
    (work / "preload.txt").write_text("\n".join(PRELOAD) + "\n")

    log_path = work / "mutmut.log"
    start = time.monotonic()
    with log_path.open("w") as log:
        run = _mutmut(["run", "--max-children", str(max_children)], work, log)
        log.write(run.stdout[-20_000:] + run.stderr[-20_000:])
        elapsed = time.monotonic() - start
        _mutmut(["export-cicd-stats"], work, log)
        listing = _mutmut(["results", "--all", "true"], work, log).stdout
    stats_file = work / "mutants" / "mutmut-cicd-stats.json"
    if not stats_file.exists():
        sys.exit(f"mutmut failed on {module_file}; see {log_path}")
    counts = json.loads(stats_file.read_text())
    statuses = [line.strip().rsplit(": ", 1) for line in listing.splitlines() if ": " in line]
    survivors = [mutant for mutant, status in statuses if status != "killed"]
    diffs = [_mutmut(["show", mutant], work, open("/dev/null", "w")).stdout for mutant in survivors]
    # Only "killed" counts: a timeout or crash (mutmut's "timeout" also covers a worker that raised) is listed
    # with the survivors for a look, not credited.
    score = counts["killed"] / counts["total"] if counts["total"] else float("nan")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    report = [
        f"mutmut run over {module_file} ({commit.stdout.strip()} + working tree)",
        f"command: python tests/mutation/run.py {name} --max-children {max_children}",
        f"tests: {' '.join(tests)} -k '{SLOW_TESTS}'",
        f"wall time: {elapsed:.0f} s for {counts['total']} mutants ({elapsed / max(counts['total'], 1):.1f} s each)",
        f"score: {counts['killed']}/{counts['total']} killed ({100 * score:.1f} %)",
        "counts: " + json.dumps(counts),
        "",
        "all mutants:",
        *(f"  {mutant}: {status}" for mutant, status in statuses),
        "",
        "survivors:" if survivors else "survivors: none",
        *diffs,
    ]
    RAW.mkdir(parents=True, exist_ok=True)
    (RAW / f"mutation_{name}.txt").write_text("\n".join(report) + "\n")
    print(f"{name}: {report[4]}; {len(survivors)} not killed; {elapsed:.0f} s", flush=True)
    return counts


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=", ".join(MODULES))
    parser.add_argument("--all", action="store_true", help="every module")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--scratch", type=Path, help="where the scratch copies go (default: a temp dir)")
    args = parser.parse_args(argv)
    modules = list(MODULES) if args.all else args.modules
    if not modules:
        parser.error("name at least one module, or --all")
    unknown = sorted(set(modules) - set(MODULES))
    if unknown:
        parser.error(f"unknown module {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    if shutil.which("mutmut") is None:
        parser.error('mutmut is not installed: pip install -e ".[mutation]"')
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="gsbpolicy-mutation-"))
    for name in modules:
        run_module(name, scratch, args.max_children)


if __name__ == "__main__":
    main()
