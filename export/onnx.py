"""ONNX export of a trained policy of any kind, verified against JAX before it is written.

    python -m export.onnx POLICY --out FILE.onnx [--mode ode|sde] [--opset N] [--loop unrolled|scan]
        [--steps K] [--obs-names NAME ...] [--obs-units UNIT ...] [--act-names NAME ...] [--act-units UNIT ...]

POLICY is a policy folder or a Hub repo id: a flow policy (GSB-MDPO, DPPO, FPO), a Gaussian actor
(Gaussian PPO, SB3 PPO) or GenPO's coupling flow. jax2onnx traces the module's real `act` (mode `ode`,
the deterministic policy: input `obs` [B, obs_dim]) or `act_stochastic` (mode `sde`, the stochastic
policy: inputs `obs` and standard normal `noise` [B, *noise_shape], which is [N+1, act_dim] for a flow,
[act_dim] for a Gaussian and [2 act_dim] for GenPO) under `jax.vmap`, so the observation normalizer, the
network (for flows the N-step integration), the squash, the rescale and the final clip to the action
bounds are all in the graph; the output is `action` [B, act_dim] and the batch dimension B is symbolic.
Noise is an input because random ops in ONNX cannot be made to match JAX's generator.

The file's `metadata_props` carry the robot contract of `export.contract` (names and units, bounds, control
period, sampler, provenance; see docs/robot.md). `--steps K` exports the deterministic flow policy with K Euler
steps of the same drift instead of the trained N: an approximation, labelled so in the file (`sampler`).

A policy with NaN or inf weights is refused. Every export is checked with `onnx.checker`, then run in
onnxruntime against JAX at batch sizes 1, 7 and 64 on random and on real observations; it is written
(atomically) only if the largest absolute difference is at most 1e-5, otherwise the command prints the
table of differences and fails. Every error is one line on stderr: bad input (a missing, corrupt or
non-finite policy, a run folder instead of its policy/, an unwritable --out) exits 2 before any work, a
failed verification or a missing `onnx` extra exits 1.

jax2onnx is imported inside the functions that need it: its first import takes seconds.
"""

import argparse
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import gsbpolicy
from gsbpolicy import GSBPolicy, HubRequestError, PolicySpec, load_policy
from gsbpolicy._cli import (
    FAILURE,
    CommandError,
    OneLineParser,
    check_output_file,
    one_line,
    refuse_owned,
    require_extra,
    run_command,
)
from gsbpolicy._files import atomic_write_bytes
from gsbpolicy._internal import CONFIG_NAME, policy_kind, policy_tensors
from gsbpolicy.hub import check_policy_name

from . import ONNX_MODULES

# Run as `python -m export.onnx` without the extra, this prints one line instead of an import traceback.
require_extra("onnx", ONNX_MODULES, "python -m export.onnx", exit_now=__name__ == "__main__")

import onnx  # noqa: E402

from . import _graph  # noqa: E402
from .contract import contract  # noqa: E402
from .runtime import make_session  # noqa: E402

ONNX_NAME = "policy.onnx"
"""File name of the export inside a policy folder."""
DEFAULT_OPSET = 23
MIN_OPSET = 17
"""The oldest opset the exporter is tested with (export.latency compares opsets down to it)."""
MODES = ("ode", "sde")
LOOPS = ("unrolled", "scan")
TOLERANCE = 1e-5
BATCH_SIZES = (1, 7, 64)


class ExportVerificationError(RuntimeError):
    """The exported graph does not reproduce the JAX policy (or is not a valid ONNX model).

    `report` holds the table of differences when the graph ran but disagreed with JAX."""

    def __init__(self, message: str, report: "VerificationReport | None" = None):
        super().__init__(message)
        self.report = report


@dataclasses.dataclass(frozen=True)
class Check:
    """One parity check: onnxruntime against JAX on `batch` observations from `source`."""

    source: str
    batch: int
    max_abs_diff: float


@dataclasses.dataclass(frozen=True)
class VerificationReport:
    """All parity checks of one export and the observations they used."""

    mode: str
    checks: tuple[Check, ...]
    real_source: str
    """Where the "real" observations came from (a Gymnasium rollout or the normalizer statistics)."""

    @property
    def max_abs_diff(self) -> float:
        return max(check.max_abs_diff for check in self.checks)

    @property
    def passed(self) -> bool:
        # Written so that a NaN difference fails.
        return all(check.max_abs_diff <= TOLERANCE for check in self.checks)

    def table(self) -> str:
        """The checks as a text table."""
        lines = [f"{'observations':12s} {'batch':>5s} {'max |onnx - jax|':>17s}"]
        lines += [f"{c.source:12s} {c.batch:5d} {c.max_abs_diff:17.3e}" for c in self.checks]
        lines.append(f"mode {self.mode}; tolerance {TOLERANCE:g}; real observations: {self.real_source}")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------- tracing
def _batched_action_fn(policy, mode: str):
    """The traced function: the policy's own action method, vmapped over the batch."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return jax.vmap(policy.act if mode == "ode" else policy.act_stochastic)


def _traced_fn(policy, mode: str):
    """What `trace` hands jax2onnx: the policy's own batched action, except GenPO's deterministic action,
    traced as its stochastic one from a batched zero x_0 (the same values: `act` is the flow from
    x_0 = 0). jax2onnx broadcasts the unbatched zero start of `GenPOFlow.act` against the symbolic batch
    wrongly (the graph then runs at batch size act_dim only); `verify` compares with `act` itself."""
    if mode == "ode" and policy_kind(policy) == "genpo":
        stochastic = jax.vmap(policy.act_stochastic)
        return lambda obs: stochastic(obs, jnp.zeros((obs.shape[0], *policy.noise_shape()), obs.dtype))
    return _batched_action_fn(policy, mode)


def _input_specs(policy, mode: str) -> tuple[list[tuple], list[str]]:
    shapes, names = [("B", policy.spec.obs_dim)], ["obs"]
    if mode == "sde":
        shapes.append(("B", *policy.noise_shape()))
        names.append("noise")
    return shapes, names


def _spec_dict(spec) -> dict:
    """The spec as saved in config.json (JSON types: tuples become lists)."""
    if isinstance(spec, PolicySpec):
        return spec.to_dict()
    return json.loads(json.dumps(dataclasses.asdict(spec)))


def metadata(policy, mode: str, loop: str, contract_fields: dict[str, str] | None = None) -> dict[str, str]:
    """The ONNX `metadata_props` of an export (strings; lists and the full spec as JSON): the policy's shape
    and the robot contract (`contract_fields`, by default the one `export.contract` derives from the policy).

    `num_steps` is written for the kinds that have generation steps (flow and GenPO) only."""
    spec, kind = policy.spec, policy_kind(policy)
    config = _spec_dict(spec)
    text = json.dumps(config, sort_keys=True)
    props = {
        "gsbpolicy_version": gsbpolicy.__version__,
        "kind": kind,
        "spec_hash": spec.hash()
        if isinstance(spec, PolicySpec)
        else hashlib.sha256(text.encode()).hexdigest()[:16],
        "spec": text,
        "mode": mode,
        "loop": loop,
        "obs_dim": str(spec.obs_dim),
        "act_dim": str(spec.act_dim),
        "noise_shape": json.dumps(list(policy.noise_shape())),
        "squash": spec.squash,
        "action_low": json.dumps(config["action_low"]),
        "action_high": json.dumps(config["action_high"]),
        "env_id": json.dumps(spec.env_id),
        "inputs": json.dumps(_input_specs(policy, mode)[1]),
    }
    if kind != "gaussian":
        props["num_steps"] = str(spec.num_steps)
    return props | (contract_fields if contract_fields is not None else contract(policy, mode=mode))


@contextlib.contextmanager
def _quiet(logger_name: str):
    # onnx_ir warns about every untyped shape value jax2onnx creates; the model is checked anyway.
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def trace(
    policy,
    mode: str = "ode",
    opset: int = DEFAULT_OPSET,
    loop: str = "unrolled",
    simplify: bool = True,
    contract_fields: dict[str, str] | None = None,
) -> onnx.ModelProto:
    """Trace the policy's action method into an ONNX model (not yet verified).

    Args:
        policy: the policy module to export (a `FlowPolicy`, `GaussianActor` or `GenPOFlow`).
        mode: `ode` (deterministic, input `obs`) or `sde` (stochastic, inputs `obs` and `noise`).
        opset: ONNX opset.
        loop: `unrolled`: the N generation steps become N copies of the step (fastest in onnxruntime);
            `scan`: the sampler's `lax.scan` becomes one ONNX `Loop` (smaller graph, slower).
        simplify: apply the graph clean-ups of `export._graph`.
        contract_fields: the robot contract to write (default: derived from the policy alone).
    """
    from jax2onnx import to_onnx

    if loop not in LOOPS:
        raise ValueError(f"loop must be one of {LOOPS}, got {loop!r}")
    shapes, names = _input_specs(policy, mode)
    fn = _traced_fn(policy, mode)
    # Under `jax.disable_jit` the samplers' `lax.scan` runs its body as a Python loop, so tracing the
    # unchanged policy methods yields the unrolled steps (jax/_src/lax/control_flow/loops.py).
    unroll = jax.disable_jit() if loop == "unrolled" else contextlib.nullcontext()
    with unroll, _quiet("onnx_ir.serde"):
        model = to_onnx(
            fn, shapes, input_names=names, output_names=["action"], opset=opset, model_name="gsbpolicy"
        )
    if simplify:
        model = _graph.simplify(model, batch_input="obs")
    model.doc_string = (
        f"gsbpolicy {policy_kind(policy)} policy ({mode}): obs [B, obs_dim] -> action [B, act_dim]"
    )
    onnx.helper.set_model_props(model, metadata(policy, mode, loop, contract_fields))
    return model


# -------------------------------------------------------------------------------------- verification
def _normalizer_observations(policy, count: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform observations within mean +- 3 std of the policy's observation statistics."""
    norm = policy.normalizer
    mean = np.asarray(norm.mean, np.float32)
    std = np.sqrt(np.asarray(norm.var, np.float32) + norm.eps)
    return (mean + 3.0 * std * rng.uniform(-1.0, 1.0, (count, mean.size))).astype(np.float32)


def _rollout_observations(policy, env_id: str, count: int, seed: int) -> np.ndarray:
    """`count` observations visited by the deterministic policy itself in the Gymnasium env `env_id`."""
    import gymnasium

    spec = policy.spec
    env = gymnasium.make(env_id)
    try:
        if env.observation_space.shape != (spec.obs_dim,) or env.action_space.shape != (spec.act_dim,):
            raise ValueError(
                f"{env_id} has observation shape {env.observation_space.shape} and action shape "
                f"{env.action_space.shape}; the policy has ({spec.obs_dim},) and ({spec.act_dim},)"
            )
        act = jax.jit(_batched_action_fn(policy, "ode"))
        obs, _ = env.reset(seed=seed)
        rows = []
        while len(rows) < count:
            rows.append(np.asarray(obs, np.float32))
            action = np.asarray(act(rows[-1][None]))[0]
            action = np.clip(action, env.action_space.low, env.action_space.high)
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                obs, _ = env.reset()
        return np.stack(rows)
    finally:
        env.close()


def real_observations(policy, count: int, seed: int = 0) -> tuple[np.ndarray, str]:
    """Realistic observations for verification and a description of where they came from.

    A rollout of the policy in its Gymnasium env when `spec.env_id` names one with matching
    dimensions; otherwise observations drawn from the policy's normalizer statistics.
    """
    env_id = policy.spec.env_id
    reason = "the spec has no env_id"
    if env_id:
        try:
            return _rollout_observations(policy, env_id, count, seed), f"gymnasium {env_id} rollout"
        except Exception as err:  # an unregistered id, a missing simulator, wrong dims: all fall back
            reason = f"{env_id} unusable: {type(err).__name__}: {err}"
    rng = np.random.default_rng(seed)
    return _normalizer_observations(policy, count, rng), f"normalizer mean +- 3 std ({reason})"


def verify(model: onnx.ModelProto, policy, mode: str, seed: int = 0) -> VerificationReport:
    """Check `model` with `onnx.checker` and against the JAX policy; raise if anything is off.

    Raises:
        ExportVerificationError: the model is invalid, does not run in onnxruntime, or differs from
            JAX by more than `TOLERANCE` anywhere (the message holds the table of differences).
    """
    try:
        onnx.checker.check_model(model, full_check=True)
        session = make_session(model.SerializeToString())
    except Exception as err:  # checker and onnxruntime raise their own error types
        raise ExportVerificationError(f"exported model is invalid: {type(err).__name__}: {err}") from err
    reference = jax.jit(_batched_action_fn(policy, mode))
    rng = np.random.default_rng(seed)
    real, real_source = real_observations(policy, max(BATCH_SIZES), seed)
    spec = policy.spec
    checks = []
    for source in ("random", "real"):
        for batch in BATCH_SIZES:
            obs = (
                rng.standard_normal((batch, spec.obs_dim), np.float32) if source == "random" else real[:batch]
            )
            inputs = [obs]
            if mode == "sde":
                inputs.append(rng.standard_normal((batch, *policy.noise_shape()), np.float32))
            feeds = dict(zip(_input_specs(policy, mode)[1], inputs, strict=True))
            onnx_action = session.run(["action"], feeds)[0]
            jax_action = np.asarray(reference(*inputs))
            if onnx_action.shape != jax_action.shape:
                raise ExportVerificationError(
                    f"onnx action shape {onnx_action.shape} != jax action shape {jax_action.shape}"
                )
            checks.append(Check(source, batch, float(np.max(np.abs(onnx_action - jax_action)))))
    report = VerificationReport(mode, tuple(checks), real_source)
    if not report.passed:
        raise ExportVerificationError(
            f"ONNX export differs from JAX by {report.max_abs_diff:.3g}, more than {TOLERANCE:g}", report
        )
    return report


# ------------------------------------------------------------------------------------------- writing
def with_steps(policy, steps: int):
    """The deterministic flow policy integrated with `steps` Euler steps of the same drift (an approximation of
    the trained N-step sampler unless `steps` is N). Only velocity-parameterised flows: a DDPM-parameterised
    network's drift depends on N itself."""
    if policy_kind(policy) != "flow" or policy.spec.parameterization != "velocity":
        kind = policy_kind(policy) if policy_kind(policy) != "flow" else "DDPM-parameterised flow"
        raise ValueError(f"--steps needs a flow policy whose network is the drift; this is a {kind} policy")
    if steps < 1:
        raise ValueError(f"--steps must be >= 1, got {steps}")
    spec = dataclasses.replace(policy.spec, num_steps=steps)
    return gsbpolicy.FlowPolicy(spec, policy.normalizer, policy.drift_net, policy.schedule)


def export(
    policy,
    out: str | os.PathLike,
    mode: str = "ode",
    opset: int = DEFAULT_OPSET,
    loop: str = "unrolled",
    progress: Callable[[str], None] | None = None,
    *,
    steps: int | None = None,
    folder: str | os.PathLike | None = None,
    names: dict[str, list[str] | None] | None = None,
) -> VerificationReport:
    """Trace, verify and (only if verification passes) write the ONNX policy to `out`. `progress` is told,
    in a line, what each slow step (tracing, verifying) is about to do.

    Args:
        steps: generation steps of the exported deterministic flow policy (default: the trained N).
        folder: the policy folder `policy` came from: its results.json and run.json give the provenance.
        names: the user's `obs_names`, `obs_units`, `act_names`, `act_units` for the contract.

    Raises:
        ValueError: a weight or statistic is NaN or inf (a diverged policy is never exported), `steps` with a
            policy or mode that has none, names of the wrong count, or `out` is a run's or a saved policy's own
            file.
        ExportVerificationError: the graph does not reproduce the JAX policy.
    """
    out = Path(out)
    refuse_owned(out, "out", ValueError)  # checked before the slow tracing, like the command's --out
    policy_tensors(policy)  # raises ValueError naming the first non-finite tensor
    if steps is not None and mode != "ode":
        raise ValueError("--steps exports the deterministic policy: use it with --mode ode")
    fields = contract(policy, mode=mode, steps=steps, folder=folder, **(names or {}))
    if steps is not None:
        policy = with_steps(policy, steps)
    say = progress or (lambda line: None)
    say(f"tracing the {policy_kind(policy)} policy with jax2onnx (mode {mode}, loop {loop}) ...")
    model = trace(policy, mode, opset, loop, contract_fields=fields)
    sizes = ", ".join(map(str, BATCH_SIZES))
    say(f"checking parity with JAX at batch sizes {sizes} on random and real observations ...")
    report = verify(model, policy, mode)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, model.SerializeToString())
    return report


def export_policy_folder(
    folder: str | os.PathLike,
    mode: str = "ode",
    opset: int = DEFAULT_OPSET,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Export the policy saved in `folder` to `<folder>/policy.onnx` (the trainers' and publisher's step).

    Returns:
        The path of the written file; nothing is written if verification fails.
    """
    folder = Path(folder)
    out = folder / ONNX_NAME
    export(load_policy(folder), out, mode, opset, progress=progress, folder=folder)
    return out


def load_policy_module(name: str | os.PathLike):
    """The policy module (any kind) of a policy folder or a Hub repo id."""
    return GSBPolicy.from_pretrained(name).policy


def load_policy_argument(name: str):
    """The policy a command line names (a policy folder or a Hub repo id); a usage `CommandError` that
    says what is wrong otherwise (a run folder is the common mistake: its policy is in RUN/policy)."""
    try:
        check_policy_name(name)
    except ValueError as err:
        raise CommandError(f"POLICY: {err}") from None
    path = Path(name).expanduser()
    if path.is_dir() and not (path / CONFIG_NAME).is_file():
        if (path / "policy" / CONFIG_NAME).is_file():
            raise CommandError(f"{path} is a training run folder: use {path / 'policy'}")
        raise CommandError(f"{path} is not a policy folder: it has no {CONFIG_NAME}")
    if path.is_file():
        raise CommandError(f"{path} is a file; POLICY is a policy folder or a Hub repo id")
    try:
        return load_policy_module(name)
    except HubRequestError as err:  # the Hub failed: not the user's input
        raise CommandError(str(err), FAILURE) from None
    except (OSError, ValueError) as err:  # missing or corrupt files, unknown Hub repos, invalid ids
        message = one_line(err)
        raise CommandError(message if name in message else f"cannot load {name}: {message}") from err


def check_opset(parser: argparse.ArgumentParser, opset: int) -> None:
    """A usage error unless `opset` is between `MIN_OPSET` and the newest the installed onnx knows."""
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= newest:
        parser.error(
            f"--opset must be between {MIN_OPSET} and {newest} (the installed onnx's newest), got {opset}"
        )


def _progress(line: str) -> None:
    print(line, flush=True)  # stdout: stderr is kept for the one error line


def _export_command(args: argparse.Namespace) -> None:
    check_output_file(args.out, "--out")
    if args.out.is_symlink():  # the write would replace the link, not what it points at: say so before
        raise CommandError(
            f"--out {args.out} is a symbolic link (to {os.readlink(args.out)}); give a plain file path"
        )
    policy = load_policy_argument(args.policy)
    folder = Path(args.policy).expanduser()
    names = {key: getattr(args, key) for key in ("obs_names", "obs_units", "act_names", "act_units")}
    try:
        report = export(
            policy,
            args.out,
            args.mode,
            args.opset,
            args.loop,
            progress=_progress,
            steps=args.steps,
            folder=folder if folder.is_dir() else None,  # a Hub id: no local results.json to read
            names=names,
        )
    except ValueError as err:  # --steps or names that do not fit this policy
        raise CommandError(one_line(err)) from None
    except ExportVerificationError as err:
        if err.report is not None:
            print(err.report.table())
        raise CommandError(f"export failed, nothing written: {err}", FAILURE) from err
    print(report.table())
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes, opset {args.opset}, loop {args.loop})")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m export.onnx",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("policy", help="policy folder or Hub repo id")
    parser.add_argument("--out", required=True, type=Path, help="ONNX file to write")
    parser.add_argument("--mode", choices=MODES, default="ode")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET, help=f"ONNX opset, {MIN_OPSET} or newer")
    parser.add_argument("--loop", choices=LOOPS, default="unrolled")
    parser.add_argument(
        "--steps",
        type=int,
        help="export the deterministic flow policy with K Euler steps of the same drift (an approximation "
        "of the trained N-step sampler unless K = N; see the steps table in docs/robot.md)",
    )
    for side, size in (("obs", "obs_dim"), ("act", "act_dim")):
        parser.add_argument(
            f"--{side}-names", nargs="+", metavar="NAME", help=f"{size} names written into the contract"
        )
        parser.add_argument(
            f"--{side}-units", nargs="+", metavar="UNIT", help=f"{size} units written into the contract"
        )
    args = parser.parse_args(argv)
    check_opset(parser, args.opset)
    return run_command(lambda: _export_command(args), kept="no ONNX file was written")


if __name__ == "__main__":
    sys.exit(main())
