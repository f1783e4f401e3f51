"""An ATen graph run through Weft: partitions compiled to plans, the rest in eager.

``WeftGraph`` is what the backend hands back to aot_autograd. On a call it looks
up the *shape signature* of its arguments (tensor shapes and dtypes, integer
sizes); the first call with a signature specializes the graph:

1. every node's value is computed on fake tensors of those shapes;
2. each tensor op is checked (``check_node``); unsupported ones are counted and
   reported (a ``WeftFallbackWarning``, or ``FallbackError`` under
   ``fallback="error"``);
3. ``CapabilityBasedPartitioner`` groups the supported nodes into cycle-free
   partitions; each partition is traced to a Plan, compiled with ``weft.compile``
   and replaced in a copy of the graph by one call of that compiled plan;
4. the rewritten graph runs as a ``torch.fx.GraphModule``: eager PyTorch for what
   fell back, one native call per Weft partition.

A returning signature reuses its specialization. A graph with symbolic sizes
(``dynamic=True``, or dynamo's automatic dynamic shapes after a second length) is never
recompiled by dynamo per length; Weft specializes it once per *bucket* (``weft/torch/buckets.py``:
inputs padded to the next power of two along their symbolic axes, reductions across them
masked, outputs cropped) where padding is proven sound, else once per distinct length, and
says why (``GraphReport.dynamic``, a ``WeftDynamicShapeWarning`` once per graph).
"""

from __future__ import annotations

import collections
import copy
import operator
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.fx as fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.tools_common import legalize_graph

from weft.compile import compile as compile_plan
from weft.errors import WeftError
from weft.torch.buckets import analyze
from weft.torch.options import Options
from weft.torch.partition import (
    VIEW_OPS,
    check_node,
    drop_identity_casts,
    is_empty,
    is_tensor_op,
    node_values,
    op_name,
    partition_inputs,
    trace_nodes,
)


class FallbackError(WeftError):
    """``fallback="error"``: the graph holds ops Weft cannot lower."""


class WeftFallbackWarning(UserWarning):
    """Ops of a torch.compile'd graph that run in PyTorch eager instead of Weft."""


class WeftDynamicShapeWarning(UserWarning):
    """A graph with symbolic sizes that Weft compiles once per distinct length (not per bucket)."""


@dataclass
class PartitionReport:
    name: str
    ops: dict[str, int]
    plan_members: int
    fused_regions: tuple[tuple[str, ...], ...]


@dataclass
class GraphReport:
    """What one specialization did: partitions compiled, ops that fell back and why."""

    signature: tuple
    partitions: list[PartitionReport] = field(default_factory=list)
    fallbacks: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    empty: dict[str, int] = field(default_factory=dict)  # ops on zero-size tensors: nothing to compute
    dynamic: str = ""  # how a graph with symbolic sizes was specialized: a bucket, or exact and why

    def fallback_text(self) -> str:
        return ", ".join(f"{op} x{count} ({self.reasons.get(op, '')})" for op, count in sorted(self.fallbacks.items()))


def signature_of(args: Sequence[object]) -> tuple:
    """The key a specialization is cached under: shapes, dtypes, and integer arguments."""
    parts = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            parts.append((tuple(arg.shape), arg.dtype))
        elif isinstance(arg, int | float | bool | torch.SymInt):
            parts.append(int(arg) if isinstance(arg, torch.SymInt) else arg)
        else:
            parts.append(type(arg).__name__)
    return tuple(parts)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().resolve_conj().numpy()


class PlanCall:
    """A compiled partition as an FX-callable: torch tensors in, torch tensors out (zero-copy).

    Parameters, buffers and lifted constants arrive as the same tensors on every call: their
    NumPy views are made on the first call and reused while the tensor's storage, shape and
    strides stay the same (an in-place update is seen: the view aliases the storage)."""

    def __init__(self, compiled, name: str, count: int) -> None:
        self.compiled = compiled
        self.__name__ = name
        self.count = count
        self._views: dict[int, tuple[tuple, np.ndarray]] = {}

    def _array(self, position: int, tensor: torch.Tensor) -> np.ndarray:
        if tensor.dtype is torch.float64 and tensor.ndim == 0:  # a dynamo scalar: the plan's float32 input
            return np.asarray(tensor.item(), dtype=np.float32)
        key = (tensor.data_ptr(), tensor.shape, tensor.stride(), tensor.dtype)
        bound = self._views.get(position)
        if bound is not None and bound[0] == key:
            return bound[1]
        array = to_numpy(tensor)
        self._views[position] = (key, array)
        return array

    def __call__(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results = self.compiled(*(self._array(n, t) for n, t in enumerate(tensors)))
        results = results if isinstance(results, tuple) else (results,)
        return tuple(torch.from_numpy(r) for r in results)

    def __repr__(self) -> str:
        return f"PlanCall({self.__name__})"


class _Supported(OperatorSupportBase):
    def __init__(self, supported: set[str]) -> None:
        self.supported = supported

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        return node.name in self.supported


def _users_outside(node: fx.Node, inside: set[fx.Node]) -> bool:
    return any(user not in inside for user in node.users)


def specialize(gm: fx.GraphModule, args: Sequence[object], options: Options,
               params: frozenset[int]) -> tuple[fx.GraphModule, GraphReport]:
    """A copy of ``gm`` whose supported partitions run as compiled Weft plans."""
    graph = copy.deepcopy(gm)
    values = node_values(graph, args)
    drop_identity_casts(graph.graph, values)
    report = GraphReport(signature_of(args))
    supported: set[str] = set()
    for node in graph.graph.nodes:
        if not is_tensor_op(node, values):
            continue
        if is_empty(values[node]):
            report.empty[op_name(node)] = report.empty.get(op_name(node), 0) + 1
            continue
        verdict = check_node(node, values)
        if verdict.supported:
            supported.add(node.name)
        else:
            name = op_name(node)
            report.fallbacks[name] = report.fallbacks.get(name, 0) + 1
            report.reasons.setdefault(name, verdict.reason)
    # a getitem of a supported multi-output node joins its producer
    for node in graph.graph.nodes:
        if node.target is operator.getitem and node.args[0].name in supported:
            supported.add(node.name)
    if report.fallbacks and options.fallback == "error":
        raise FallbackError(f"weft.torch: ops Weft cannot lower (fallback='error'): {report.fallback_text()}; "
                            "use options={'fallback': 'warn'} to run them in PyTorch eager")
    partitioner = CapabilityBasedPartitioner(graph, _Supported(supported), allows_single_node_partition=True)
    order = {node: position for position, node in enumerate(graph.graph.nodes)}
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    param_nodes = frozenset(placeholders[i] for i in params if i < len(placeholders))
    param_nodes |= frozenset(n for n in graph.graph.nodes if n.op == "get_attr")
    for number, partition in enumerate(partitioner.propose_partitions()):
        nodes = sorted(partition.nodes, key=order.__getitem__)
        if all(op_name(n) in VIEW_OPS for n in nodes):
            continue  # index maps only: eager views cost nothing, a plan would copy
        _replace_partition(graph, nodes, values, options, f"weft_partition_{number}", param_nodes, report)
    legalize_graph(graph)
    graph.graph.lint()
    graph.recompile()
    return graph, report


def _replace_partition(graph: fx.GraphModule, nodes: list[fx.Node], values, options: Options, name: str,
                       params: frozenset[fx.Node], report: GraphReport) -> None:
    inside = set(nodes)
    outputs = [n for n in nodes if _users_outside(n, inside) and isinstance(values[n], torch.Tensor)]
    if not outputs:
        return
    try:
        plan = trace_nodes(nodes, values, outputs, name=name, params=params)
        compiled = compile_plan(plan, contract=options.contract, threads=options.threads, fusion=options.fusion)
    except WeftError as problem:
        if options.fallback == "error":
            raise FallbackError(f"weft.torch: partition {name} could not be compiled: {problem}") from problem
        for node in nodes:
            if node.target is not operator.getitem:
                report.fallbacks[op_name(node)] = report.fallbacks.get(op_name(node), 0) + 1
                report.reasons.setdefault(op_name(node), f"its partition failed to compile: {problem}")
        return
    input_nodes = partition_inputs(nodes, values)  # the order trace_nodes gave the plan's inputs
    with graph.graph.inserting_after(nodes[-1]):
        call = graph.graph.call_function(PlanCall(compiled, name, len(outputs)), tuple(input_nodes))
    last = call
    for position, node in enumerate(outputs):
        with graph.graph.inserting_after(last):
            last = graph.graph.call_function(operator.getitem, (call, position))
        node.replace_all_uses_with(last)
    for node in reversed(nodes):
        if not node.users:
            graph.graph.erase_node(node)
    ops = collections.Counter(op_name(n) for n in nodes if n.target is not operator.getitem)
    fused = tuple(group for group in compiled.groups if len(group) > 1)
    report.partitions.append(PartitionReport(name, dict(ops), len(plan.kernels), fused))


class WeftGraph:
    """The compiled forward graph: specializations cached by shape signature (of the padded
    inputs, for a bucketed graph)."""

    def __init__(self, gm: fx.GraphModule, options: Options, params: frozenset[int], sink) -> None:
        self.gm = gm
        self.options = options
        self.params = params
        self.sink = sink
        self.specializations: dict[tuple, fx.GraphModule] = {}
        self._warned: set[str] = set()
        self.compiles = 0
        self.buckets, self.exact_reason = analyze(gm)
        if options.dynamic == "exact" and (self.buckets is not None or self.exact_reason):
            self.buckets, self.exact_reason = None, "options={'dynamic': 'exact'}"

    def __call__(self, *args):
        if self.buckets is not None:
            lengths = self.buckets.lengths(args)
            sizes = self.buckets.sizes(lengths)
            if sizes is not None:
                padded = self.buckets.pad(args, sizes, lengths)
                described = ", ".join(f"{s}={lengths[s]} in bucket {sizes[s]}" for s in self.buckets.symbols)
                masked = ", ".join(self.buckets.masked) or "nothing"
                runnable = self._specialization(self.buckets.gm, padded, f"buckets: {described}; masked: {masked}")
                with torch.no_grad():
                    return self.buckets.crop(runnable(*padded), lengths)
            note = f"exact per length: lengths {lengths} break a guard dynamo took at their buckets"
        else:
            note = f"exact per length: {self.exact_reason}" if self.exact_reason else ""
        runnable = self._specialization(self.gm, args, note)
        with torch.no_grad():
            return runnable(*args)

    def _specialization(self, gm: fx.GraphModule, args: Sequence[object], note: str) -> fx.GraphModule:
        key = signature_of(args)
        runnable = self.specializations.get(key)
        if runnable is not None:
            return runnable
        runnable, report = specialize(gm, args, self.options, self.params)
        report.dynamic = note
        self.compiles += 1
        self.specializations[key] = runnable
        self.sink(report)
        text = report.fallback_text()
        if report.fallbacks and text not in self._warned:
            self._warned.add(text)
            count = sum(report.fallbacks.values())
            warnings.warn(WeftFallbackWarning(
                f"weft.torch: {count} op(s) run in PyTorch eager, not Weft: {text}"), stacklevel=3)
        if self.exact_reason and self.options.dynamic == "buckets" and "dynamic" not in self._warned:
            self._warned.add("dynamic")
            warnings.warn(WeftDynamicShapeWarning(
                f"weft.torch: a graph with symbolic sizes is compiled once per distinct length, not per "
                f"bucket: {self.exact_reason}"), stacklevel=3)
        return runnable
