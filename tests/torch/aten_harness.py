"""Run an ATen graph's lowering through the NumPy oracle (no C compiler), for op tests."""

from __future__ import annotations

import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from weft.oracle import run as oracle_run
from weft.torch import decompositions
from weft.torch.partition import (
    check_node,
    is_empty,
    is_tensor_op,
    node_values,
    op_name,
    partition_inputs,
    trace_nodes,
)


def aten_graph(fn, *inputs, decompose: bool = True):
    table = decompositions() if decompose else None  # the backend's own table
    return make_fx(lambda *args: fn(*args), decomposition_table=table)(*inputs)


def run_lowered(fn, *inputs: torch.Tensor, decompose: bool = True):
    """(the ATen op names of ``fn``'s graph, the outputs of its Weft plan run by the oracle).
    Lifted constants (get_attr nodes) are plan inputs too, as in the backend."""
    gm = aten_graph(fn, *inputs, decompose=decompose)
    values = node_values(gm, inputs)
    # zero-size ops (batch norm's saved statistics in eval) are left to eager by the backend too
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and is_tensor_op(n, values) and not is_empty(values[n])]
    for node in nodes:
        verdict = check_node(node, values)
        assert verdict.supported, f"{op_name(node)} not lowered: {verdict.reason}"
    (result,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
    outputs = list(result) if isinstance(result, tuple | list) else [result]
    plan = trace_nodes(nodes, values, outputs)
    by_node = dict(zip([n for n in gm.graph.nodes if n.op == "placeholder"], inputs, strict=True))
    by_node.update({n: getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"})
    arrays = [by_node[n].numpy() for n in partition_inputs(nodes, values)]
    got = oracle_run(plan, *arrays)
    return {op_name(n) for n in nodes}, got if isinstance(got, tuple) else (got,)


def float64_eager(fn, *inputs):
    """``fn`` in float64 where the inputs are float32 (the independent reference)."""
    widened = [t.double() if t.dtype == torch.float32 else t for t in inputs]
    result = fn(*widened)
    items = result if isinstance(result, tuple | list) else (result,)
    return tuple(np.asarray(item.detach().numpy()) for item in items)
