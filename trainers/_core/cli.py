"""Command-line parsing and the trainers' `main`: `--preset NAME` picks a preset object (built for `--env`),
tyro does the rest. Bad input ends a command with one line on stderr, never a traceback: exit status 2
for a usage error (a bad value, an unusable run folder), 1 for a failure (a missing extra, a run that went
non-finite, a corrupt checkpoint). tyro's own parse errors (`--seed abc`, an unknown option) are reduced to
their first line, exit 2.

`--preset` is read before tyro because a preset is a function of the env (`--env Hopper-v5` with the `gym`
preset gives Hopper's Table 2 column): tyro's own config subcommands choose among fixed default objects.
"""

import contextlib
import io
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import tyro

from gsbpolicy import HubRequestError
from gsbpolicy._cli import FAILURE, USAGE, MissingExtraError, OneLineParser, one_line, write_failure
from gsbpolicy._files import LinkError
from gsbpolicy.gym import EnvOutputError

from .checkpoint import CheckpointError
from .config import TrainArgs
from .runlog import module_name
from .stops import out_of_memory, sigterm_raises, stop_signal, where_it_stopped
from .update import NonFiniteError

Preset = Callable[[str | None], TrainArgs]
"""Builds a preset for an env id (None: the preset's default env)."""


def parse(args_type: type, presets: dict[str, Preset], default_preset: str, description: str, argv=None):
    """Parse `argv` into `args_type`, starting from the preset named by `--preset` (built for `--env`).

    Every other option overrides a field of the preset; `--help` lists them all with their current values.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = OneLineParser(add_help=False)
    pre.add_argument("--preset", choices=sorted(presets), default=default_preset)
    pre.add_argument("--env", default=None)
    known, rest = pre.parse_known_args(argv)
    if known.env is not None and not known.env.strip():
        fail(f"--env must name an env (a Gymnasium id or a Playground task name), got {known.env!r}", USAGE)
    for flag_name in ("--seeds",):  # tyro reads a list flag with no values as the empty default
        at = [i for i, arg in enumerate(rest) if arg == flag_name]
        if any(i + 1 == len(rest) or rest[i + 1].startswith("--") for i in at):
            fail(f"{flag_name} needs at least one value (or leave it out)", USAGE)
    base = presets[known.preset](known.env)
    if known.env:
        rest = ["--env", known.env, *rest]
    preset_help = ", ".join(f"{name}" for name in sorted(presets))
    description = (
        f"{description}\n\n--preset {{{preset_help}}} (default {default_preset}) selects the starting values."
    )
    prog = f"python -m {module_name(args_type)}"
    args = tyro_cli(args_type, default=base, args=rest, description=description, prog=prog)
    try:
        args.validate()
    except ValueError as err:
        fail(f"invalid configuration: {err}", USAGE)
    except MissingExtraError as err:
        fail(str(err), FAILURE)
    return args


def tyro_message(text: str) -> str:
    """The first paragraph of a tyro error box ("Error parsing --seed: invalid literal ..."), as one line.
    The box is drawn in Unicode on a terminal and in ASCII elsewhere; both are read."""
    lines = []
    for line in text.strip().splitlines()[1:]:  # the first line is the box's title bar
        inner = line.strip().strip("│|").strip()
        if inner and set(inner) <= set("─-+╰╯"):  # a rule: the end of the first paragraph
            if any(lines):
                break
            continue
        lines.append(inner)
    return " ".join(part for part in lines if part) or text.strip()


def tyro_cli(*args, **kwargs):
    """`tyro.cli`, with its boxed parse errors turned into one `error:` line (exit status 2); `--help` and
    everything tyro prints for a successful parse pass through unchanged."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            args = tyro.cli(*args, **kwargs)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            fail(tyro_message(captured.getvalue()), USAGE)
        sys.stderr.write(captured.getvalue())
        raise
    sys.stderr.write(captured.getvalue())
    return args


class CliExit(SystemExit):
    """A command's end after its one-line error was printed: the exit status is `code`, and `str()` is the
    message (so that callers of a trainer's `main(argv)`, tests among them, can read it)."""

    def __init__(self, message: str, code: int):
        super().__init__(code)
        self.message = message

    def __str__(self) -> str:
        return self.message


def fail(message: str, code: int) -> NoReturn:
    """Print `error: MESSAGE` as one line on stderr and exit with `code`."""
    message = one_line(message)
    print(f"error: {message}", file=sys.stderr)
    raise CliExit(message, code)


def train_main(args_type: type, presets: dict[str, Preset], make_trainer, description: str, argv):
    """A trainer's `main`: parse (default preset "cpu"), set up the run with `make_trainer(args)`, train, then
    say where the policy is and how to load it. Whatever stops the run early (a bad argument, Ctrl-C, SIGTERM,
    a full disk, out of memory) is one line (`stops`)."""
    args = parse(args_type, presets, "cpu", description, argv)
    with sigterm_raises():
        try:
            trainer = make_trainer(args)
        except (
            ValueError
        ) as err:  # what setting up finds wrong with the arguments: the run folder, device sizes
            fail(str(err), USAGE)
        except BaseException as err:
            _stopped(err, args, "while setting up the run; nothing was trained")
        try:
            result = trainer.run()
        except BaseException as err:
            _stopped(err, args, where_it_stopped(trainer.folders))
    for policy_dir in result if isinstance(result, list) else [result]:  # a seed group: one folder per seed
        print(closing_lines(policy_dir))
    return result


def _stopped(err: BaseException, args, where: str) -> None:
    """End the command with one line for every way a run stops that is not a bug; re-raise anything else."""
    if (signal_stop := stop_signal(err)) is not None:
        fail(f"{signal_stop[0]} {where}", signal_stop[1])
    if isinstance(err, NonFiniteError | CheckpointError | MissingExtraError | HubRequestError):
        fail(str(err), FAILURE)
    if isinstance(err, LinkError):
        fail(str(err), FAILURE)
    if isinstance(err, EnvOutputError):  # outside an iteration: the first reset, or the final evaluation
        fail(f"{err}; stopped {where}", FAILURE)
    if isinstance(err, OSError):
        fail(f"{write_failure(err)}; stopped {where}", FAILURE)
    if (memory := out_of_memory(err, args)) is not None:
        fail(f"{memory}; stopped {where}", FAILURE)
    raise err


LOAD_HINT = "from gsbpolicy import GSBPolicy; GSBPolicy.from_pretrained({!r})"
"""How every policy folder loads (`{}` is the folder, as a Python string literal): one loader for every kind."""


def quote(path: Path | str) -> str:
    """`path` as one shell word, for the commands printed for the user to copy."""
    return shlex.quote(str(path))


def saved_line(policy_dir: Path) -> str:
    """The one line that ends training (the command line's and `train()`'s): where the policy is and what its
    final evaluation scored, and, with `--log.keep-best`, the best evaluated policy beside it."""
    results = json.loads((policy_dir / "results.json").read_text())
    line = (
        f"policy saved to {policy_dir}: return {results['mean']:.1f} +/- {results['std']:.1f} over "
        f"{results['n_episodes']} deterministic episodes on {results['env_id']}"
    )
    best = policy_dir.parent / "best_policy"
    if (best / "best.json").is_file():
        record = json.loads((best / "best.json").read_text())
        line += (
            f"; best evaluated policy (return {record['mean']:.1f} over {record['n_episodes']} episodes at "
            f"{record['env_steps']:,} env steps) saved to {best}"
        )
    return line


def closing_lines(policy_dir: Path) -> str:
    """What the end of training prints: what to do next with the policy, then `saved_line`."""
    return "\n".join(
        [
            "\nnext, with the policy below:",
            f"  load it:    {LOAD_HINT.format(str(policy_dir))}",
            # Quoted for the shell: a folder name with a space or a `$(...)` is copied as one argument.
            f"  export it:  python -m export.onnx {quote(policy_dir)} --out {quote(policy_dir / 'policy.onnx')}",
            f"  publish it: python -m hub_cards.publish {quote(policy_dir.parent)} --repo-id ORG/NAME --dry-run",
            saved_line(policy_dir),
        ]
    )


def loop_trainer(algorithm, args):
    """The shared loop's trainer for `args`: a `SeedGroup` when `--seeds` names several seeds, else a `Trainer`
    (of `args.seed`, or of the one seed `--seeds` names, in the folder a group would give it)."""
    from .config import for_seed
    from .loop import Trainer

    if len(args.seeds) > 1:
        from .seed_group import SeedGroup  # Playground only: imports MJX

        return SeedGroup(algorithm, args)
    return Trainer(algorithm, for_seed(args, args.seeds[0]) if args.seeds else args)
