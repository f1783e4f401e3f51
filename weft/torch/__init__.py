"""``torch.compile(model, backend="weft")``: PyTorch models through Weft.

    model = torch.compile(model, backend="weft", options={"contract": "inference", "threads": 2})

Registered through the ``torch_dynamo_backends`` entry point (pyproject.toml), so
the name works after ``pip install weft[torch]``; ``weft.torch.backend`` may also be
passed directly. Dynamo captures the graph; ``aot_autograd`` with the core ATen
decompositions turns it into ATen ops (SDPA decomposed into bmm/softmax); each op
Weft can lower becomes ``weft.nn`` members and connected runs of them one compiled
plan (``weft/torch/graph.py``). Ops Weft cannot lower run in eager and are named in a
``WeftFallbackWarning``; ``weft.torch.explain`` prints the whole account.

Training graphs: the forward graph goes through Weft; the backward graph runs in
PyTorch eager (reported as such by ``explain``).
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from weft.torch.decompose import DECOMPOSITIONS
from weft.torch.graph import (
    FallbackError,
    GraphReport,
    WeftDynamicShapeWarning,
    WeftFallbackWarning,
    WeftGraph,
)
from weft.torch.options import Options, parse_options
from weft.torch.values import LoweringError

_REPORTS: contextvars.ContextVar[list | None] = contextvars.ContextVar("weft_torch_reports", default=None)


def _record(report: GraphReport) -> None:
    sink = _REPORTS.get()
    if sink is not None:
        sink.append(report)


def _eager_backward(gm: torch.fx.GraphModule, example_inputs) -> Callable:
    return make_boxed_func(gm.forward)


def backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None, **kwargs) -> Callable:
    """The dynamo backend. ``options``: see ``weft.torch.options.Options``; other keyword
    arguments torch passes (``mode=``) are accepted and ignored."""
    parsed = parse_options(options)
    params = frozenset(position for position, value in enumerate(example_inputs)
                       if isinstance(value, torch.nn.Parameter))
    graphs: list[WeftGraph] = []

    def forward_compiler(aten_gm: torch.fx.GraphModule, aten_inputs) -> Callable:
        same_inputs = len(aten_inputs) == len(example_inputs)
        graph = WeftGraph(aten_gm, parsed, params if same_inputs else frozenset(), _record)
        graphs.append(graph)
        return make_boxed_func(graph)

    compiled = aot_autograd(fw_compiler=forward_compiler, bw_compiler=_eager_backward,
                            decompositions=decompositions())(gm, example_inputs)
    compiled.weft_graphs = graphs
    return compiled


EXTRA_DECOMPOSITIONS = (
    # ops PyTorch keeps whole in its core set: into the means, rsqrt and elementwise ops Weft lowers
    # (not batch norm: its decomposition is the training op, which mutates the running statistics
    # and so breaks aot_autograd's functional graph; nor group norm, whose decomposition reads
    # through as_strided: both have their own lowerings, weft.torch.aten)
    torch.ops.aten.linalg_vector_norm.default,  # F.normalize, torch.linalg.vector_norm
)


def decompositions() -> dict:
    """The core ATen decompositions plus ``EXTRA_DECOMPOSITIONS``, with the backend's own in place
    of PyTorch's where those are wrong (``weft.torch.decompose``: SDPA's flash op on CPU)."""
    return {**core_aten_decompositions(), **get_decompositions(list(EXTRA_DECOMPOSITIONS)), **DECOMPOSITIONS}


def explain(model: Callable, *example_inputs, options: dict | None = None, file=None, **example_kwargs) -> list:
    """Compile ``model`` with the weft backend on these inputs, run it once and print the
    partitions, the ops that fell back to eager (and why) and the regions Weft fused.
    Returns the ``GraphReport`` of every graph compiled. Dynamo's caches are reset first
    (``torch._dynamo.reset()``) so the model is captured afresh."""
    import torch._dynamo

    reports: list[GraphReport] = []
    token = _REPORTS.set(reports)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=backend, options=options or {})
        with torch.no_grad():
            compiled(*example_inputs, **example_kwargs)
    finally:
        _REPORTS.reset(token)
    print(format_reports(reports), file=file or sys.stdout)
    return reports


def format_reports(reports: list[GraphReport]) -> str:
    lines = [f"weft.torch: {len(reports)} graph(s) compiled"]
    for number, report in enumerate(reports):
        lines.append(f"graph {number}: inputs {report.signature}")
        if report.dynamic:
            lines.append(f"  dynamic shapes: {report.dynamic}")
        for partition in report.partitions:
            ops = ", ".join(f"{op} x{count}" for op, count in sorted(partition.ops.items()))
            lines.append(f"  partition {partition.name}: {sum(partition.ops.values())} ATen ops -> "
                         f"{partition.plan_members} members; ops: {ops}")
            for region in partition.fused_regions:
                lines.append(f"    fused region: {', '.join(region)}")
            if not partition.fused_regions:
                lines.append("    no fused regions (every member runs alone)")
        if report.fallbacks:
            lines.append(f"  fell back to eager ({sum(report.fallbacks.values())} ops):")
            for op, count in sorted(report.fallbacks.items()):
                lines.append(f"    {op} x{count}: {report.reasons.get(op, '')}")
        else:
            lines.append("  no op fell back to eager")
        if report.empty:
            empty = ", ".join(f"{op} x{count}" for op, count in sorted(report.empty.items()))
            lines.append(f"  left to eager, zero-size tensors (nothing to compute): {empty}")
    return "\n".join(lines)


__all__ = ["FallbackError", "GraphReport", "LoweringError", "Options", "WeftDynamicShapeWarning",
           "WeftFallbackWarning", "backend", "explain", "format_reports"]
