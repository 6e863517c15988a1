"""Mutation testing of the maths and training modules with mutmut 3 (not part of CI: it takes minutes per module).

    pip install -c tests/constraints.txt -e ".[mutation]"
    python tests/mutation/run.py gae sde            # named modules (see MODULES), one after the other
    python tests/mutation/run.py --all              # every module in MODULES
    python tests/mutation/run.py sde --minutes 20   # stop after 20 minutes, report what was tested
    python tests/mutation/run.py sde --resume --scratch DIR   # then test the mutants that stop left
    python tests/mutation/run.py gae --max-children 2 --scratch /tmp/mut

Each module runs in its own scratch copy of the package sources and tests (mutmut writes a `mutants/`
tree and its own config there, so the repository stays untouched), against only the fast test files that
pin that module (mutmut further narrows each mutant to the tests that call the mutated function). The raw
report -- counts, mutation score and the diff of every surviving mutant -- goes to
`hub_cards/results/raw/mutation_<module>.txt`. A survivor needs either a test that kills it or a line in
`hub_cards/results/raw/mutation_survivors.txt` explaining why it is equivalent. To check a new test against
a survivor without a whole rerun: copy the test file into SCRATCH/MODULE/tests and SCRATCH/MODULE/mutants/tests,
run `mutmut run MUTANT_NAME` in SCRATCH/MODULE, then `python tests/mutation/run.py MODULE --report-only
--scratch SCRATCH`.

JAX is not fork-safe once its backend has started, and a jit cache inherited from a parent that ran the
unmutated code would hide the mutant. So mutmut's fork server is used with only plain imports preloaded:
every mutant's tests start their JAX backend from scratch. They do share one persistent compilation cache per
module (SCRATCH/MODULE/compile_cache), which cannot hide a mutant: its key is a hash of the compiled program
(debug locations stripped), so a mutant that changes what a jitted function computes misses it and compiles,
and only the functions it leaves untouched (most of them) are read back instead of compiled again. To recheck
a survivor with `mutmut run NAME` by hand, export GSBPOLICY_COMPILE_CACHE=SCRATCH/MODULE/compile_cache first.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "hub_cards" / "results" / "raw"

LOSS_PINS = ["tests/test_pins_losses.py", "tests/test_pins_hyperparameters.py"]
"""The pins every algorithm module's mutants run against: its loss terms and its preset values."""

MODULES = {
    "gae": ("trainers/_core/gae.py", ["tests/test_gae.py", "tests/test_pins_core.py"]),
    "sde": ("gsbpolicy/_sde.py", ["tests/test_sde.py", "tests/test_pins_core.py"]),
    "schedules": ("gsbpolicy/_schedules.py", ["tests/test_sde.py", "tests/test_pins_core.py"]),
    "normalizer": ("gsbpolicy/_normalizer.py", ["tests/test_normalizer.py", "tests/test_pins_core.py"]),
    "networks": (
        "gsbpolicy/_networks.py",
        ["tests/test_gsbpolicy.py", "tests/test_pins_core.py", "tests/test_pins_networks.py"],
    ),
    "gaussian": (
        "gsbpolicy/_gaussian.py",
        [
            "tests/test_gaussian_ppo.py",
            "tests/test_pins_losses.py",
            "tests/test_pins_baselines.py",
            "tests/test_policy_kinds.py",
        ],
    ),
    "coupling": (
        "gsbpolicy/_coupling.py",
        ["tests/test_genpo.py", "tests/test_pins_baselines.py", "tests/test_policy_kinds.py"],
    ),
    "ddpm": ("gsbpolicy/_ddpm.py", ["tests/test_dppo.py", "tests/test_io.py"]),
    "policy": (
        "gsbpolicy/_policy.py",
        [
            "tests/test_gsbpolicy.py",
            "tests/test_sde.py",
            "tests/test_pins_core.py",
            "tests/test_policy_kinds.py",
        ],
    ),
    "update": ("trainers/_core/update.py", ["tests/test_pins_update.py", "tests/test_gae.py"]),
    "clipped_ratio": ("trainers/_core/clipped_ratio.py", [*LOSS_PINS, "tests/test_pins_baselines.py"]),
    "gsb_mdpo": ("trainers/gsb_mdpo.py", ["tests/test_gsb_mdpo.py", *LOSS_PINS]),
    **{
        name: (f"trainers/{name}.py", [f"tests/test_{name}.py", *LOSS_PINS, "tests/test_pins_baselines.py"])
        for name in ("gaussian_ppo", "dppo", "fpo", "fpo_pp", "genpo")
    },
}
"""module name -> (file to mutate, the fast test files that pin it)."""

SLOW_TESTS = (
    "not end_to_end and not onnx and not presets and not trainer_writes and not runs_end and not publishes"
)
"""Deselected everywhere: training runs, ONNX export, publishing and preset tables pin nothing the mutants
change that the fast tests do not, and each costs tens of seconds per mutant."""

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
timeout_multiplier = 100
"""


# timeout_multiplier: mutmut's default CPU-time limit per mutant (15x the unmutated tests' time, doubled) is
# too tight for the jitted training code: every mutant of `make_update`, even one in a branch the tests never
# take, "timed out" (its tests recompile what the timing run compiled once). 100x still catches real hangs.


def _mutmut(args: list[str], cwd: Path) -> str:
    return subprocess.run(["mutmut", *args], cwd=cwd, capture_output=True, text=True).stdout


def _copy_sources(work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.onnx", "mutation")
    for entry in COPIED:
        source = ROOT / entry
        if source.is_dir():
            shutil.copytree(source, work / entry, ignore=ignore)
        else:
            shutil.copy2(source, work)


def _run_mutmut(work: Path, max_children: int, minutes: float | None) -> None:
    """`mutmut run` in `work`, stopped after `minutes` (the verdicts it reached are kept)."""
    with (work / "mutmut.log").open("w") as log:
        # One compilation cache shared by the module's mutants (see the module docstring).
        env = {**os.environ, "GSBPOLICY_COMPILE_CACHE": str(work / "compile_cache")}
        process = subprocess.Popen(["mutmut", "run", "--max-children", str(max_children)], cwd=work, env=env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            process.wait(timeout=None if minutes is None else 60 * minutes)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)  # its own session: mutmut, fork server and workers
            process.wait()


def run_module(
    name: str, scratch: Path, max_children: int, minutes: float | None, resume: bool = False
) -> Counter:
    """Mutate one module in a fresh scratch copy (or, with `resume`, test the mutants a stopped run left
    unchecked in its copy, adding to its wall time); write its raw report; return its status counts."""
    module_file, tests = MODULES[name]
    work = scratch / name
    before = 0.0
    command = (
        f"python tests/mutation/run.py {name}{' --resume' if resume else ''} --max-children {max_children}"
    )
    command += f" --minutes {minutes}" if minutes else ""
    if resume:
        if not (work / "setup.cfg").exists():
            sys.exit(f"nothing to resume: {work} holds no mutation run of {name}")
        before = json.loads((work / "elapsed.json").read_text())["seconds"]
        provenance = _provenance(work)
        provenance["runs"].append(f"{command}, at {_commit()}")
    else:
        _copy_sources(work)
        (work / "setup.cfg").write_text(_config(module_file, tests))
        (work / "preload.txt").write_text("\n".join(PRELOAD) + "\n")
        provenance = {"source": _commit(), "runs": [command], "tests": f"{' '.join(tests)} -k '{SLOW_TESTS}'"}
    (work / "provenance.json").write_text(json.dumps(provenance, indent=1))
    start = time.monotonic()
    _run_mutmut(work, max_children, minutes)
    (work / "elapsed.json").write_text(json.dumps({"seconds": before + time.monotonic() - start}))
    return report_module(name, work)


def _commit() -> str:
    """The repository's commit, and whether uncommitted changes were copied with it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    return head.stdout.strip() + (" + working tree" if dirty else "")


def _provenance(work: Path) -> dict:
    """What a scratch copy was made from and the commands that ran in it (recorded when they started, so that
    a later --report-only or --resume reports them, not the repository as it is then)."""
    path = work / "provenance.json"
    if not path.exists():  # a copy made before provenance was recorded
        return {"source": "not recorded", "runs": ["not recorded"], "tests": "not recorded"}
    return json.loads(path.read_text())


def report_module(name: str, work: Path) -> Counter:
    """Write `hub_cards/results/raw/mutation_<name>.txt` from the verdicts in the scratch copy `work`."""
    module_file = MODULES[name][0]
    timing = json.loads((work / "elapsed.json").read_text()) if (work / "elapsed.json").exists() else {}
    elapsed = timing.get("seconds", float("nan"))
    listing = _mutmut(["results", "--all", "true"], work)
    statuses = [line.strip().rsplit(": ", 1) for line in listing.splitlines() if ": " in line]
    if not statuses:
        sys.exit(f"mutmut produced no mutants for {module_file}; see {work / 'mutmut.log'}")
    counts = Counter(status for _, status in statuses)
    tested = len(statuses) - counts["not checked"]
    # Only "killed" is credited: a timeout (mutmut also reports a worker that raised as one) is listed with
    # the survivors for a look.
    not_killed = [mutant for mutant, status in statuses if status not in ("killed", "not checked")]
    provenance = _provenance(work)
    unchecked = counts["not checked"]
    stopped = f" (stopped early: {unchecked} of {len(statuses)} not checked)" if unchecked else ""
    report = [
        f"mutmut run over {module_file} ({provenance['source']}){stopped}",
        "command: " + "; then ".join(provenance["runs"]),
        f"tests: {provenance['tests']}",
        f"wall time: {elapsed:.0f} s for {tested} mutants tested ({elapsed / max(tested, 1):.1f} s each)",
        f"score: {counts['killed']}/{tested} killed ({100 * counts['killed'] / max(tested, 1):.1f} %)",
        "counts: " + json.dumps(dict(counts)),
        "",
        "not killed:" if not_killed else "not killed: none",
        *(_mutmut(["show", mutant], work) for mutant in not_killed),
        "all mutants:",
        *(f"  {mutant}: {status}" for mutant, status in statuses),
    ]
    RAW.mkdir(parents=True, exist_ok=True)
    (RAW / f"mutation_{name}.txt").write_text("\n".join(report) + "\n")
    print(f"{name}: {report[4]}{stopped}; {len(not_killed)} not killed; {elapsed:.0f} s", flush=True)
    return counts


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=", ".join(MODULES))
    parser.add_argument("--all", action="store_true", help="every module")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--minutes", type=float, help="stop each module after this long (partial report)")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="only rewrite the reports from the verdicts already in --scratch (e.g. after a stop)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue a run that --minutes stopped: test the mutants left unchecked in its --scratch copy",
    )
    parser.add_argument("--scratch", type=Path, help="where the scratch copies go (default: a temp dir)")
    args = parser.parse_args(argv)
    modules = list(MODULES) if args.all else args.modules
    if not modules:
        parser.error("name at least one module, or --all")
    unknown = sorted(set(modules) - set(MODULES))
    if unknown:
        parser.error(f"unknown module {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    if shutil.which("mutmut") is None:
        parser.error('mutmut is not installed: pip install -c tests/constraints.txt -e ".[mutation]"')
    if (args.report_only or args.resume) and args.scratch is None:
        parser.error("--report-only and --resume need the --scratch of the run")
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="gsbpolicy-mutation-"))
    for name in modules:
        if args.report_only:
            report_module(name, scratch / name)
        else:
            run_module(name, scratch, args.max_children, args.minutes, args.resume)


if __name__ == "__main__":
    main()
