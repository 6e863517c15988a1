"""Command-line parsing: `--preset NAME` picks a preset object (built for `--env`), tyro does the rest."""

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import tyro

from .config import TrainArgs

Preset = Callable[[str | None], TrainArgs]
"""Builds a preset for an env id (None: the preset's default env)."""


def parse(args_type: type, presets: dict[str, Preset], default_preset: str, description: str, argv=None):
    """Parse `argv` into `args_type`, starting from the preset named by `--preset` (built for `--env`).

    Every other option overrides a field of the preset; `--help` lists them all with their current values.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
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
        raise SystemExit(f"invalid configuration: {err}") from err
    return args


FLOW_POLICY_HINT = 'from gsbpolicy import GSBPolicy; GSBPolicy.from_pretrained("{}")'


def run_cli(args_type: type, presets: dict[str, Preset], make_algorithm, description: str, argv=None,
            load_hint: str = FLOW_POLICY_HINT) -> Path:  # fmt: skip
    """A trainer's `main`: parse (default preset "cpu"), train, then say where the policy is and how to load it."""
    from .loop import train

    args = parse(args_type, presets, "cpu", description, argv)
    policy_dir = train(make_algorithm(args.algo), args)
    print(f"\npolicy saved to {policy_dir}")
    print(f"load it with: {load_hint.format(policy_dir)}")
    return policy_dir
