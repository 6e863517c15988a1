"""Single-observation latency of the ONNX policy against the jitted JAX policy, and the network's floor.

    python -m export.latency POLICY [--mode ode|sde] [--opset 23 [17 ...]] [--repeats 3000]
    python -m export.latency --spec-preset gym      # random weights, 16 steps, 3x256 silu MLP

POLICY is a policy folder or a Hub repo id. Every onnxruntime session uses one intra-op thread and all
graph optimisations, and the whole process is pinned to one core (`--no-pin` to disable), so the
numbers are what one core of a robot computer would see. Rows:

- onnxruntime on the exported graph (unrolled steps + `export._graph` clean-ups), one row per opset;
- the same through `OnnxPolicy.predict` (input checks included: what a control loop calls);
- onnxruntime on the unrolled graph without the clean-ups, and on the `lax.scan` -> `Loop` graph;
- JAX: `GSBPolicy.act` on a numpy observation, and the raw jitted `FlowPolicy.act` on a device array;
- floors: the network's N * (depth + 1) matrix products alone in onnxruntime, and its FLOPs divided by
  the single-thread sgemm peak.

Every graph timed here is verified against JAX first. Timings on a shared machine are noisy; p99 is
the number that matters for a control loop. Errors are one line, as in `export.onnx` (exit 2 for bad
input, 1 for a failure).
"""

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from gsbpolicy import FlowPolicy, GSBPolicy, PolicySpec, make_policy
from gsbpolicy._cli import CommandError, OneLineParser, require_extra, run_command
from gsbpolicy._internal import policy_kind

from . import ONNX_MODULES

# Run as `python -m export.latency` without the extra, this prints one line instead of an import traceback.
require_extra("onnx", ONNX_MODULES, "python -m export.latency", exit_now=__name__ == "__main__")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from .onnx import (  # noqa: E402
    DEFAULT_OPSET,
    MODES,
    ExportVerificationError,
    check_opset,
    load_policy_argument,
    trace,
    verify,
)
from .runtime import OnnxPolicy, make_session  # noqa: E402

GYM_PRESET = PolicySpec(
    obs_dim=17,
    act_dim=6,
    num_steps=16,
    width=256,
    depth=3,
    activation="silu",
    time_embedding="fourier",
    time_embed_dim=16,
    sigma_schedule="linear",
    sigma_max=3.0,
    sigma_min=0.3,
    action_low=(-1.0,) * 6,
    action_high=(1.0,) * 6,
)
"""The `gym`-preset architecture (HalfCheetah dimensions), for timing without a trained policy."""
_PEAK_SIZE = 512


def time_call(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(median, p99) wall time of `fn()` in microseconds, after a warm-up."""
    for _ in range(max(50, repeats // 20)):
        fn()
    times = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - start
    return float(np.median(times) * 1e6), float(np.percentile(times, 99) * 1e6)


def _layer_sizes(spec: PolicySpec) -> list[tuple[int, int]]:
    """(in, out) of the drift MLP's layers; the time embedding is constant per step and folded away."""
    sizes = [spec.obs_dim + spec.act_dim + spec.time_embed_dim] + [spec.width] * spec.depth + [spec.act_dim]
    return list(zip(sizes[:-1], sizes[1:], strict=True))


def network_flops(spec: PolicySpec) -> int:
    """Multiply-add FLOPs of one action: N steps of the drift MLP's matrix products."""
    return 2 * spec.num_steps * sum(fan_in * fan_out for fan_in, fan_out in _layer_sizes(spec))


def matmul_chain_model(spec: PolicySpec, opset: int) -> onnx.ModelProto:
    """The network's N * (depth + 1) Gemms in sequence, and nothing else but a Concat per step.

    Each step's output is padded back to the first layer's width by a Concat with zeros (the real
    graph concatenates [obs, action, time embedding] there too), so no Gemm can be skipped.
    """
    rng = np.random.default_rng(0)
    layers = _layer_sizes(spec)
    initializers, nodes, current = [], [], "x"
    for i, (fan_in, fan_out) in enumerate(layers):
        weight = rng.normal(0.0, fan_in**-0.5, (fan_out, fan_in)).astype(np.float32)
        initializers += [
            numpy_helper.from_array(weight, f"w{i}"),
            numpy_helper.from_array(np.zeros(fan_out, np.float32), f"b{i}"),
        ]
    pad_width = layers[0][0] - spec.act_dim
    initializers.append(numpy_helper.from_array(np.zeros((1, pad_width), np.float32), "pad"))
    for step in range(spec.num_steps):
        for i in range(len(layers)):
            nodes.append(helper.make_node("Gemm", [current, f"w{i}", f"b{i}"], [f"h{step}_{i}"], transB=1))
            current = f"h{step}_{i}"
        if step < spec.num_steps - 1:
            nodes.append(helper.make_node("Concat", [current, "pad"], [f"in{step}"], axis=1))
            current = f"in{step}"
    graph = helper.make_graph(
        nodes,
        "matmul_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, layers[0][0]])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, [1, spec.act_dim])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def sgemm_peak_gflops(opset: int, repeats: int = 50) -> float:
    """Single-thread float32 matmul throughput of onnxruntime on a compute-bound 512^3 product."""
    n = _PEAK_SIZE
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "a"], ["c"])],
        "sgemm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])],
    )
    session = make_session(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()
    )
    a = np.random.default_rng(0).standard_normal((n, n), np.float32)
    median_us, _ = time_call(lambda: session.run(None, {"a": a}), repeats)
    return 2 * n**3 / median_us / 1e3


def pin_to_one_core() -> int | None:
    """Pin every thread of this process (and threads started later) to one core; None if unsupported."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    core = min(os.sched_getaffinity(0))
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), {core})
    return core


def _onnx_rows(policy: FlowPolicy, mode: str, opsets: list[int], feeds: dict, workdir: str, repeats: int):
    """(label, median, p99, nodes) of each exported variant, verified against JAX before timing."""
    variants = [(f"export: unrolled + clean-ups, opset {opset}", opset, "unrolled", True) for opset in opsets]
    variants += [
        (f"unrolled, no clean-ups, opset {opsets[0]}", opsets[0], "unrolled", False),
        (f"lax.scan -> Loop, opset {opsets[0]}", opsets[0], "scan", True),
    ]
    rows = []
    for label, opset, loop, simplify in variants:
        model = trace(policy, mode, opset, loop, simplify)
        verify(model, policy, mode)
        session = make_session(model.SerializeToString())
        timing = time_call(lambda s=session: s.run(None, feeds), repeats)
        rows.append((f"onnxruntime {label}", *timing, len(model.graph.node)))
        if label == variants[0][0]:
            rows.append(_runtime_row(model, mode, feeds["obs"][0], workdir, repeats))
    return rows


def _runtime_row(model: onnx.ModelProto, mode: str, obs: np.ndarray, workdir: str, repeats: int):
    """What a control loop pays: `OnnxPolicy.predict` on one observation, input checks included."""
    path = os.path.join(workdir, "policy.onnx")
    onnx.save(model, path)
    runtime = OnnxPolicy(path)
    deterministic = mode == "ode"
    timing = time_call(lambda: runtime.predict(obs, deterministic=deterministic), repeats)
    return ("OnnxPolicy.predict (checks + run)", *timing, len(model.graph.node))


def _jax_rows(policy: FlowPolicy, mode: str, obs: np.ndarray, noise: np.ndarray, repeats: int):
    wrapped = GSBPolicy(policy)
    params, static = eqx.partition(policy, eqx.is_array)
    obs_device, noise_device = jnp.asarray(obs), jnp.asarray(noise)
    if mode == "ode":
        raw = jax.jit(lambda p, o: eqx.combine(p, static).act(o))
        call_raw = lambda: raw(params, obs_device).block_until_ready()  # noqa: E731
        call_wrapped = lambda: wrapped.act(obs)  # noqa: E731
    else:
        raw = jax.jit(lambda p, o, n: eqx.combine(p, static).act_stochastic(o, n))
        call_raw = lambda: raw(params, obs_device, noise_device).block_until_ready()  # noqa: E731
        call_wrapped = lambda: wrapped.act(obs, noise)  # noqa: E731
    identity = jax.jit(lambda o: o + 1.0)
    call_predict = lambda: wrapped.predict(obs, deterministic=mode == "ode")  # noqa: E731
    return [
        ("jax GSBPolicy.predict(numpy obs) (checks + run)", *time_call(call_predict, repeats), None),
        ("jax GSBPolicy.act(numpy obs)", *time_call(call_wrapped, repeats), None),
        ("jax raw jitted FlowPolicy.act (device array)", *time_call(call_raw, repeats), None),
        (
            "floor: a jitted identity (JAX dispatch)",
            *time_call(lambda: identity(obs_device).block_until_ready(), repeats),
            None,
        ),
    ]


def _floor_rows(spec: PolicySpec, opset: int, repeats: int):
    chain = make_session(matmul_chain_model(spec, opset).SerializeToString())
    x = np.zeros((1, _layer_sizes(spec)[0][0]), np.float32)
    peak = sgemm_peak_gflops(opset)
    flops = network_flops(spec)
    floor_us = flops / peak / 1e3
    return [
        (
            f"floor: the {spec.num_steps * (spec.depth + 1)} matmuls alone (onnxruntime)",
            *time_call(lambda: chain.run(None, {"x": x}), repeats),
            None,
        ),
        (
            f"floor: {flops / 1e6:.2f} MFLOP / {peak:.0f} GFLOP/s (1-thread sgemm peak)",
            floor_us,
            floor_us,
            None,
        ),
    ]


def _print_table(rows) -> None:
    print(f"{'call (batch 1)':62s} {'median us':>10s} {'p99 us':>10s} {'nodes':>6s}")
    for label, median, p99, nodes in rows:
        print(f"{label:62s} {median:10.1f} {p99:10.1f} {'' if nodes is None else nodes:>6}")


def _latency_command(args: argparse.Namespace) -> None:
    if args.policy is not None:
        policy = load_policy_argument(args.policy)
        if policy_kind(policy) != "flow":  # the floor model below is the flow's N-step MLP chain
            raise CommandError(
                f"export.latency measures flow policies; {args.policy} is a {policy_kind(policy)} policy"
            )
    else:
        policy = make_policy(GYM_PRESET, key=jax.random.key(0))
    core = None if args.no_pin else pin_to_one_core()
    spec = policy.spec
    rng = np.random.default_rng(0)
    obs = rng.standard_normal(spec.obs_dim, np.float32)
    noise = rng.standard_normal((spec.num_steps + 1, spec.act_dim), np.float32)
    feeds = {"obs": obs[None]} | ({"noise": noise[None]} if args.mode == "sde" else {})
    with tempfile.TemporaryDirectory() as workdir:
        rows = _onnx_rows(policy, args.mode, args.opset, feeds, workdir, args.repeats)
    rows += _jax_rows(policy, args.mode, obs, noise, args.repeats) + _floor_rows(
        spec, args.opset[0], args.repeats
    )
    print(
        f"{spec.num_steps} steps, {spec.depth}x{spec.width} {spec.activation} MLP, obs {spec.obs_dim}, act "
        f"{spec.act_dim}, mode {args.mode}; 1 intra-op thread; "
        + ("not pinned" if core is None else f"pinned to core {core}")
    )
    _print_table(rows)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m export.latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("policy", nargs="?", help="policy folder or Hub repo id")
    parser.add_argument(
        "--spec-preset", choices=["gym"], help="time a random-weight policy of this architecture"
    )
    parser.add_argument("--mode", choices=MODES, default="ode")
    parser.add_argument(
        "--opset", type=int, nargs="+", default=[DEFAULT_OPSET], help="one export row per opset"
    )
    parser.add_argument("--repeats", type=int, default=3000)
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one core")
    args = parser.parse_args(argv)
    if (args.policy is None) == (args.spec_preset is None):
        parser.error("give exactly one of POLICY and --spec-preset")
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    for opset in args.opset:
        check_opset(parser, opset)
    # An export that does not match JAX is a failure to report, not a number to time.
    return run_command(lambda: _latency_command(args), failures=(ExportVerificationError,))


if __name__ == "__main__":
    sys.exit(main())
