"""The training command that reproduces a run, rebuilt from its run.json.

Every resolved field is written out as a flag (not only those that differ from the preset), so the
command stays exact when a preset's values change later: CleanRL's habit of publishing the full
command next to the numbers. The flags are tyro's: `--group.field-name VALUE`, `--group.flag` /
`--group.no-flag` for booleans, `None` for an unset optional.
"""

import shlex

SKIPPED = ("output_dir", "resume", "preset")
"""Top-level fields left out: where the run is written and whether it continued a checkpoint do not
change the result, and the preset is passed first as `--preset` (it picks the starting values)."""


def _flag(path: str, value) -> list[str]:
    name = "--" + path.replace("_", "-")
    if isinstance(value, bool):
        head, _, leaf = name.rpartition(".")
        return [name if value else (f"{head}.no-{leaf}" if head else f"--no-{leaf[2:]}")]
    if value is None:
        return [name, "None"]
    if isinstance(value, list):  # an empty list is the default of its field (`--seeds`), and no flag says it
        return [name, *(str(v) for v in value)] if value else []
    return [name, str(value)]


def command_lines(run: dict) -> list[str]:
    """The command as lines (top-level fields first, then one line per group), shell-quoted."""
    args = run["args"]
    # run.json files written before the trainer module was recorded name the algorithm only: trainers.<algo>.
    module = run.get("module") or f"trainers.{run['algo']}"
    first = ["python", "-m", module, "--preset", str(args.get("preset", "cpu"))]
    groups = []
    for name, value in args.items():
        if name in SKIPPED:
            continue
        if isinstance(value, dict):
            group = [token for field, inner in value.items() for token in _flag(f"{name}.{field}", inner)]
            groups.append(group)
        else:
            first += _flag(name, value)
    return [shlex.join(tokens) for tokens in (first, *groups)]


def command_argv(run: dict) -> list[str]:
    """The command's arguments after `python -m trainers.<algo>` (what the trainer's parser receives)."""
    return shlex.split(" ".join(command_lines(run)))[3:]
