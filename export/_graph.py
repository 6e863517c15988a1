"""Semantics-preserving clean-ups of an exported policy graph that onnxruntime does not do itself.

jax2onnx lowers `jax.vmap(FlowPolicy.act)` faithfully, which leaves per-step bookkeeping around every
generation step: an identity `Transpose` after each batched matmul (a `moveaxis` of the batch axis
onto itself), a `Shape -> Gather` pair per broadcast to recover the symbolic batch size, and two scalar
`Mul`s (dt and output_scale) after the last layer. At batch size 1 each node costs onnxruntime roughly
as much as its arithmetic, so these passes cut the single-observation latency by about a quarter (see
`export.latency`). Every exported graph is verified against JAX afterwards, so a pass bug cannot ship.

Graphs with control flow (the `lax.scan` export, whose `Loop` body reads outer names) only lose the
unused initializers of their subgraphs.
"""

from collections import Counter

import numpy as np
import onnx
from onnx import helper, numpy_helper

_BATCH_SHAPE = "gsbpolicy_batch_shape"
_BATCH_SIZE = "gsbpolicy_batch_size"
_ZERO_INDEX = "gsbpolicy_zero_index"


def simplify(model: onnx.ModelProto, batch_input: str = "obs") -> onnx.ModelProto:
    """A simplified copy of `model`; `batch_input` is a graph input whose first dimension is the batch.

    Args:
        model: a graph exported by jax2onnx with a symbolic batch dimension.
        batch_input: the input whose dimension 0 names the batch symbol (e.g. "B").

    Returns:
        The simplified copy. A graph with control flow only loses the unused initializers jax2onnx
        leaves in its `Loop` bodies (onnxruntime warns about each one).
    """
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    if any(_subgraphs(node) for node in graph.node):
        _prune_subgraph_initializers(graph)
        return model
    _drop_identity_transposes(graph)
    _share_batch_size(model, batch_input)
    _fold_scalar_muls(graph)
    _remove_dead(graph)
    return model


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    graphs = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            graphs.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            graphs.extend(attr.graphs)
    return graphs


def _referenced_names(graph: onnx.GraphProto) -> set[str]:
    """Tensor names read by `graph`'s nodes and outputs, nested subgraphs included."""
    names = {value.name for value in graph.output}
    for node in graph.node:
        names.update(node.input)
        for subgraph in _subgraphs(node):
            names |= _referenced_names(subgraph)
    return names


def _prune_subgraph_initializers(graph: onnx.GraphProto) -> None:
    """Drop initializers of nested subgraphs that nothing reads (they are local to their subgraph)."""
    for node in graph.node:
        for subgraph in _subgraphs(node):
            _prune_subgraph_initializers(subgraph)
            used = _referenced_names(subgraph)
            kept = [init for init in subgraph.initializer if init.name in used]
            del subgraph.initializer[:]
            subgraph.initializer.extend(kept)


def _attribute(node: onnx.NodeProto, name: str):
    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return None


def _initializers(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    return {init.name: numpy_helper.to_array(init) for init in graph.initializer}


def _replace_nodes(graph: onnx.GraphProto, nodes, alias: dict[str, str]) -> None:
    """Set the node list to `nodes`, reading every aliased tensor name from its replacement."""
    nodes = list(nodes)
    for node in nodes:
        for i, name in enumerate(node.input):
            node.input[i] = alias.get(name, name)
    del graph.node[:]
    graph.node.extend(nodes)


def _drop_identity_transposes(graph: onnx.GraphProto) -> None:
    outputs = {value.name for value in graph.output}
    alias, kept = {}, []
    for node in graph.node:
        perm = _attribute(node, "perm")
        if node.op_type == "Transpose" and perm is not None and list(perm) == list(range(len(perm))):
            if node.output[0] not in outputs:
                # Nodes are in topological order, so a chain of identities resolves in one sweep.
                alias[node.output[0]] = alias.get(node.input[0], node.input[0])
                continue
        kept.append(node)
    _replace_nodes(graph, kept, alias)


def _first_dims(model: onnx.ModelProto) -> dict[str, str]:
    """Symbolic name of dimension 0 of every tensor whose first dimension is symbolic (shape inference)."""
    inferred = onnx.shape_inference.infer_shapes(model).graph
    dims = {}
    for value in (*inferred.input, *inferred.value_info, *inferred.output):
        shape = value.type.tensor_type.shape
        if shape.dim and shape.dim[0].dim_param:
            dims[value.name] = shape.dim[0].dim_param
    return dims


def _share_batch_size(model: onnx.ModelProto, batch_input: str) -> None:
    """Read the batch size once from `batch_input` instead of once per broadcast.

    jax2onnx emits `Gather(Shape(x), [0])` for every broadcast to a batched shape. When shape inference
    says dimension 0 of `x` is the batch symbol, it equals dimension 0 of the batch input, so all these
    lookups can share one; the `Concat`s and `Expand`s built from them then become identical and
    onnxruntime's common-subexpression elimination merges them.
    """
    graph = model.graph
    first_dims = _first_dims(model)
    symbol = first_dims.get(batch_input)
    if symbol is None:
        return
    consts = _initializers(graph)
    producers = {out: node for node in graph.node for out in node.output}
    outputs = {value.name for value in graph.output}
    alias, kept = {}, []
    for node in graph.node:
        if node.output[0] not in outputs and _is_batch_size_lookup(
            node, producers, consts, first_dims, symbol
        ):
            alias[node.output[0]] = _BATCH_SIZE
        else:
            kept.append(node)
    if not alias:
        return
    graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), _ZERO_INDEX))
    shared = [
        helper.make_node("Shape", [batch_input], [_BATCH_SHAPE]),
        helper.make_node("Gather", [_BATCH_SHAPE, _ZERO_INDEX], [_BATCH_SIZE], axis=0),
    ]
    _replace_nodes(graph, shared + kept, alias)


def _is_batch_size_lookup(node, producers, consts, first_dims, symbol) -> bool:
    """Whether `node` is `Gather(Shape(x), [0], axis=0)` with dimension 0 of `x` the batch symbol."""
    if node.op_type != "Gather" or (_attribute(node, "axis") or 0) != 0:
        return False
    index = consts.get(node.input[1])
    shape = producers.get(node.input[0])
    if index is None or index.shape != (1,) or index[0] != 0 or shape is None or shape.op_type != "Shape":
        return False
    whole_shape = _attribute(shape, "end") is None and (_attribute(shape, "start") or 0) == 0
    return whole_shape and first_dims.get(shape.input[0]) == symbol


def _scalar_operand(node: onnx.NodeProto, consts: dict[str, np.ndarray]) -> tuple[float, str] | None:
    """(value, other input) when `node` multiplies by a float32 scalar initializer."""
    for i in (0, 1):
        value = consts.get(node.input[i])
        if value is not None and value.shape == () and value.dtype == np.float32:
            return float(value), node.input[1 - i]
    return None


def _fold_scalar_muls(graph: onnx.GraphProto) -> None:
    """Fold `c * Gemm(...)` into the Gemm's alpha and beta, and `c1 * (c2 * x)` into `(c1 c2) * x`."""
    outputs = {value.name for value in graph.output}
    count = 0
    while True:
        consts = _initializers(graph)
        producers = {out: node for node in graph.node for out in node.output}
        uses = Counter(name for node in graph.node for name in node.input)
        for node in graph.node:
            operand = _scalar_operand(node, consts) if node.op_type == "Mul" else None
            if operand is None:
                continue
            scale, other = operand
            source = producers.get(other)
            if source is None or uses[other] != 1 or other in outputs:
                continue
            if source.op_type == "Gemm":
                _scale_gemm(source, scale)
                source.output[0] = node.output[0]
                graph.node.remove(node)
                break
            inner = _scalar_operand(source, consts) if source.op_type == "Mul" else None
            if inner is not None:
                name = f"gsbpolicy_folded_scale_{count}"
                count += 1
                graph.initializer.append(numpy_helper.from_array(np.float32(scale * inner[0]), name))
                node.input[:] = [name, inner[1]]
                graph.node.remove(source)
                break
        else:
            return


def _scale_gemm(gemm: onnx.NodeProto, scale: float) -> None:
    """c * (alpha A B + beta C) = (c alpha) A B + (c beta) C."""
    for name in ("alpha", "beta"):
        value = _attribute(gemm, name)
        kept = [attr for attr in gemm.attribute if attr.name != name]
        del gemm.attribute[:]
        gemm.attribute.extend([*kept, helper.make_attribute(name, (1.0 if value is None else value) * scale)])


def _remove_dead(graph: onnx.GraphProto) -> None:
    """Drop nodes that no graph output depends on, then unused initializers and stale value infos."""
    live = {value.name for value in graph.output}
    kept = []
    for node in reversed(graph.node):
        if any(out in live for out in node.output):
            kept.append(node)
            live.update(name for name in node.input if name)
    _replace_nodes(graph, reversed(kept), {})
    produced = {out for node in graph.node for out in node.output}
    initializers = [init for init in graph.initializer if init.name in live]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    value_info = [value for value in graph.value_info if value.name in produced]
    del graph.value_info[:]
    graph.value_info.extend(value_info)
