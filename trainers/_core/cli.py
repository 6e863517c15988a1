"""Command-line parsing and the trainers' `main`: `--preset NAME` picks a preset object (built for `--env`),
tyro does the rest. Bad input ends a command with one line on stderr, never a traceback: exit status 2
for a usage error (a bad value, an unusable run folder), 1 for a failure (a missing extra, a run that went
non-finite, a corrupt checkpoint). tyro's own type errors (`--seed abc`) keep tyro's boxed message, exit 2.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import tyro

from gsbpolicy.cli import FAILURE, USAGE, MissingExtraError, OneLineParser, one_line

from .checkpoint import CheckpointError
from .config import TrainArgs
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
    base = presets[known.preset](known.env)
    if known.env:
        rest = ["--env", known.env, *rest]
    preset_help = ", ".join(f"{name}" for name in sorted(presets))
    description = (
        f"{description}\n\n--preset {{{preset_help}}} (default {default_preset}) selects the starting values."
    )
    args = tyro.cli(args_type, default=base, args=rest, description=description)
    try:
        args.validate()
    except ValueError as err:
        fail(f"invalid configuration: {err}", USAGE)
    except MissingExtraError as err:
        fail(str(err), FAILURE)
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


def train_main(
    args_type: type, presets: dict[str, Preset], make_trainer, description: str, argv, load_hint: str
):
    """A trainer's `main`: parse (default preset "cpu"), set up the run with `make_trainer(args)`, train, then
    say where the policy is and how to load it (`load_hint` formatted with the policy folder)."""
    args = parse(args_type, presets, "cpu", description, argv)
    try:
        trainer = make_trainer(args)
    except ValueError as err:  # what setting up finds wrong with the arguments: the run folder, device sizes
        fail(str(err), USAGE)
    except MissingExtraError as err:
        fail(str(err), FAILURE)
    try:
        policy_dir = trainer.run()
    except (NonFiniteError, CheckpointError) as err:
        fail(str(err), FAILURE)
    print(f"\npolicy saved to {policy_dir}")
    print(f"load it with: {load_hint.format(policy_dir)}")
    return policy_dir


FLOW_POLICY_HINT = 'from gsbpolicy import GSBPolicy; GSBPolicy.from_pretrained("{}")'


def run_cli(args_type: type, presets: dict[str, Preset], make_algorithm, description: str, argv=None,
            load_hint: str = FLOW_POLICY_HINT) -> Path:  # fmt: skip
    """`train_main` for a trainer of the shared loop: `make_algorithm(args.algo)` is its algorithm."""
    from .loop import Trainer

    def make_trainer(args):
        return Trainer(make_algorithm(args.algo), args)

    return train_main(args_type, presets, make_trainer, description, argv, load_hint)
