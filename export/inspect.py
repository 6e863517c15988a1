"""Print the robot contract of an exported policy: a table, or JSON.

    python -m export.inspect policy.onnx          # the contract as tables
    python -m export.inspect policy.onnx --json   # the same, as one JSON object

The file is read and checked by `OnnxPolicy` (numpy and onnxruntime), as a robot would read it; docs/robot.md
explains each field. A file exported before the contract existed prints its shape fields and a notice. Errors
are one line: a missing, corrupt or inconsistent file exits 2.
"""

import argparse
import json
import sys
from pathlib import Path

from gsbpolicy._cli import OneLineParser, run_command

from .runtime import OnnxPolicy

_SHAPE = ("kind", "mode", "obs_dim", "act_dim", "num_steps", "noise_shape", "inputs", "gsbpolicy_version")


def contract_json(policy: OnnxPolicy) -> dict:
    """The file's shape fields and its contract (None when it has none), as JSON values."""
    shape = {key: policy.metadata[key] for key in _SHAPE if key in policy.metadata}
    for key in ("obs_dim", "act_dim", "num_steps"):
        if key in shape:
            shape[key] = int(shape[key])
    for key in ("noise_shape", "inputs"):
        if key in shape:
            shape[key] = json.loads(shape[key])
    bounds = {
        "action_low": None if policy.action_low is None else policy.action_low.tolist(),
        "action_high": None if policy.action_high is None else policy.action_high.tolist(),
    }
    return shape | bounds | {"contract": policy.contract}


def _number(value) -> str:
    return "-" if value is None else f"{value:g}"


def _rows(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def contract_table(policy: OnnxPolicy) -> str:
    """The contract as text: one row per observation and per action entry, then the sampler and provenance."""
    data = contract_json(policy)
    contract = data["contract"]
    lines = [
        f"{policy.path}: {data.get('kind', 'flow')} policy, mode {data['mode']}, inputs {data.get('inputs')}"
    ]
    if contract is None:
        lines.append("no robot contract (exported before it existed): export it again to add it")
        return "\n".join(lines)
    low = contract["obs_low"] or [None] * policy.obs_dim
    high = contract["obs_high"] or [None] * policy.obs_dim
    lines += [
        "",
        f"observations ({policy.obs_dim}, raw: the normaliser is inside the graph; "
        f"names from {contract['obs_names_source']})",
    ]
    lines += _rows(
        ["index", "name", "unit", "low", "high"],
        [
            [str(i), name, unit or "-", _number(lo), _number(hi)]
            for i, (name, unit, lo, hi) in enumerate(
                zip(contract["obs_names"], contract["obs_units"], low, high, strict=True)
            )
        ],
    )
    lines += ["", f"actions ({policy.act_dim}; names from {contract['act_names_source']})"]
    action_low = data["action_low"] or [None] * policy.act_dim
    action_high = data["action_high"] or [None] * policy.act_dim
    lines += _rows(
        ["index", "name", "unit", "low", "high"],
        [
            [str(j), name, unit or "-", _number(lo), _number(hi)]
            for j, (name, unit, lo, hi) in enumerate(
                zip(contract["act_names"], contract["act_units"], action_low, action_high, strict=True)
            )
        ],
    )
    dt = contract["control_dt"]
    lines += ["", f"control period: {'unknown' if dt is None else f'{dt:g} s ({1 / dt:g} Hz)'}"]
    lines += [
        f"noise input: {data.get('noise_shape')} per observation"
        if data["mode"] == "sde"
        else "noise input: none (deterministic)"
    ]
    lines += ["", "sampler"] + _rows(
        ["field", "value"], [[k, json.dumps(v)] for k, v in contract["sampler"].items()]
    )
    lines += ["", "provenance"]
    lines += _rows(["field", "value"], [[k, json.dumps(v)] for k, v in contract["provenance"].items()])
    lines.append(f"\ncontract version {contract['contract_version']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m export.inspect",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("onnx", type=Path, help="an ONNX file written by export.onnx")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    args = parser.parse_args(argv)

    def work() -> None:
        policy = OnnxPolicy(args.onnx)
        print(json.dumps(contract_json(policy), indent=1) if args.json else contract_table(policy))

    return run_command(work, usage_errors=(ValueError, FileNotFoundError))


if __name__ == "__main__":
    sys.exit(main())
