"""How far a reader must jump to follow a run folder from `python -m trainers.gsb_mdpo` to the saved policy.

    python tests/regression/walk.py              # print the walk and, per file, how often it returns there
    python tests/regression/walk.py --max 2      # exit 1 when a file is returned to more than twice

A tiny run (Gymnasium, 2 iterations, a checkpoint and an evaluation each) is trained in this process with an
audit hook (`sys.addaudithook`) that sees every file operation under its run folder: each open, rename,
mkdir or removal there is one thing the run does to its folder. The repository functions on the call stack
of each such operation (frames in `trainers/` and `gsbpolicy/`, from the command's `main` down) are the
places a reader follows to see why it happens. Reading each place once, in call order (the call tree's
depth-first order, a place at its first visit), gives the walk; a file is *returned to* when the walk enters
it again after having left it. The library (`gsbpolicy/`) is read as an API: the walk stops at the first
library function of a stack, so a helper such as `atomic_write_text` is one place, not its internals.
"""

import argparse
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "trainers", ROOT / "gsbpolicy")
EVENTS = {
    "open",
    "os.rename",
    "os.replace",
    "os.mkdir",
    "os.remove",
    "os.rmdir",
    "shutil.rmtree",
    "os.truncate",
}
TINY = ["--env", "InvertedPendulum-v5", "--total-steps", "2048", "--rollout.num-envs", "8",
        "--log.checkpoint-every", "1", "--log.no-progress", "--eval.num-evals", "2", "--eval.episodes", "1",
        "--eval.final-episodes", "1", "--log.keep-best"]  # fmt: skip
"""Two iterations of 1024 steps, each evaluated and checkpointed, with the best-policy candidate kept."""


def _place(frame) -> tuple[str, str] | None:
    """(file relative to the repository, function) of a repository frame; None for any other."""
    path = Path(frame.f_code.co_filename)
    if not any(path.is_relative_to(package) for package in PACKAGES):
        return None
    return str(path.relative_to(ROOT)), frame.f_code.co_qualname


def chain(frame) -> list[tuple[str, str]]:
    """The repository places on the stack of `frame`, outermost first, cut after the first library one."""
    places = []
    while frame is not None:
        if (place := _place(frame)) is not None and place[1] != "<module>":
            places.append(place)
        frame = frame.f_back
    places.reverse()
    library = next((i for i, (file, _) in enumerate(places) if file.startswith("gsbpolicy")), None)
    return places if library is None else places[: library + 1]


def record_walk(run_dir: Path, argv: list[str]) -> list[tuple[str, str]]:
    """Train `argv` into `run_dir` and return the walk: every place on the way to a run-folder file operation,
    at its first visit."""
    walk, seen, prefix = [], set(), str(run_dir)

    def hook(event, args):
        if event not in EVENTS or not args:
            return
        target = args[0]
        if not isinstance(target, str | bytes | os.PathLike) or not os.fsdecode(target).startswith(prefix):
            return
        for place in chain(sys._getframe(1)):
            if place not in seen:
                seen.add(place)
                walk.append(place)

    sys.addaudithook(hook)  # cannot be removed: the measurement runs once per process
    sys.path.insert(0, str(ROOT))  # this checkout's packages, not an installed copy
    from trainers import gsb_mdpo

    gsb_mdpo.main([*argv, "--output-dir", prefix])
    return walk


def returns(walk: list[tuple[str, str]]) -> Counter:
    """{file: how many times the walk enters it again after leaving it}."""
    counts, visited, current = Counter(), set(), None
    for file, _ in walk:
        if file != current:
            if file in visited:
                counts[file] += 1
            visited.add(file)
            current = file
    return counts


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=None, help="fail when a file is returned to more often")
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        walk = record_walk(Path(scratch) / "run", TINY)
    counts = returns(walk)
    for number, (file, function) in enumerate(walk, 1):
        print(f"{number:3d}  {file}  {function}")
    files = len({file for file, _ in walk})
    print(f"{len(walk)} places in {files} files; {sum(counts.values())} returns to a file left earlier")
    for file, count in counts.most_common():
        print(f"  {count}  {file}")
    if opts.max is not None and counts and max(counts.values()) > opts.max:
        raise SystemExit(f"a file is returned to more than {opts.max} times")


if __name__ == "__main__":
    main()
