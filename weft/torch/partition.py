"""Which ATen nodes Weft lowers, and the plan for a group of them.

Every node's value is first computed on fake tensors of the call's concrete shapes
(``node_values``), so a lowering sees exact extents and dtypes even when dynamo
handed over a graph with symbolic sizes. A node is supported when its op has a
lowering, its tensors are CPU, non-empty and of a Weft dtype, and a trial trace of
that node alone succeeds with the shape and dtype ATen reports. ``trace_nodes``
traces a connected set of supported nodes into one Plan.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

from weft import nn
from weft.errors import WeftError
from weft.ir import Plan
from weft.nn.tensor import Tensor
from weft.torch.aten import LOWERINGS
from weft.torch.values import EMPTY, TORCH_TO_WEFT, LoweringError, weft_dtype

# ops whose whole effect is an index map: a partition of only these is not worth a plan
VIEW_OPS = frozenset({
    "aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.permute.default",
    "aten.transpose.int", "aten.t.default", "aten.expand.default", "aten.unsqueeze.default",
    "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.select.int",
    "aten.slice.Tensor", "aten.clone.default", "aten.alias.default", "aten.detach.default",
    "aten.lift_fresh_copy.default", "aten.split_with_sizes.default", "aten.split.Tensor",
    "<built-in function getitem>",
})


def op_name(node: fx.Node) -> str:
    return str(node.target)


def node_values(gm: fx.GraphModule, args: Sequence[object]) -> dict[fx.Node, object]:
    """Each node's value (fake tensors, ints, tuples) for these concrete arguments."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
    values: dict[fx.Node, object] = {}

    class Recorder(fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            values[node] = result
            return result

    with mode:
        Recorder(gm).run(*fakes)
    return values


def is_tensor_op(node: fx.Node, values: dict[fx.Node, object]) -> bool:
    """A call producing tensors (not shape arithmetic on sizes)."""
    value = values.get(node)
    items = value if isinstance(value, tuple | list) else (value,)
    return node.op == "call_function" and any(isinstance(v, torch.Tensor) for v in items)


def is_empty(value: object) -> bool:
    """Every tensor in ``value`` has zero elements: nothing to compute, so no fallback either."""
    items = value if isinstance(value, tuple | list) else (value,)
    tensors = [item for item in items if isinstance(item, torch.Tensor)]
    return bool(tensors) and all(item.numel() == 0 for item in tensors)


def _tensors_ok(value: object, allow_empty: bool = False) -> bool:
    items = value if isinstance(value, tuple | list) else (value,)
    for item in items:
        if isinstance(item, torch.Tensor):
            if item.numel() == 0 and allow_empty:
                continue
            if item.dtype not in TORCH_TO_WEFT or item.device.type != "cpu" or item.numel() == 0:
                return False
            if item.layout is not torch.strided:
                return False
    return True


CONVERT = torch.ops.prims.convert_element_type.default


def is_float64_scalar(value: object) -> bool:
    """A 0-d float64 tensor: what dynamo passes for a Python float it made symbolic
    (``dynamic=True``), e.g. a rotary ``attention_scaling`` or an attention scale."""
    return isinstance(value, torch.Tensor) and value.dtype is torch.float64 and value.ndim == 0


def _scalar_cast_in(node: fx.Node, values: dict[fx.Node, object]) -> bool:
    """``convert_element_type(s, float32)`` of a 0-d float64 ``s``: the plan takes ``s`` as a
    float32 input, rounded at the boundary (``PlanCall``), which is exactly this cast."""
    return (node.target is CONVERT and len(node.all_input_nodes) == 1
            and is_float64_scalar(values.get(node.all_input_nodes[0]))
            and getattr(values.get(node), "dtype", None) is torch.float32)


def drop_identity_casts(graph: fx.Graph, values: dict[fx.Node, object]) -> None:
    """Remove ``convert_element_type(x, x.dtype)`` (a no-op): dynamo's float64 scalars pass
    through one before the cast to float32 that Weft can take over. A cast the graph returns
    stays (its result is a new tensor, never the input: aot_autograd relies on that)."""
    for node in list(graph.nodes):
        if any(user.op == "output" for user in node.users):
            continue
        if node.target is CONVERT and node.args and isinstance(node.args[0], fx.Node):
            source = values.get(node.args[0])
            result = values.get(node)
            if (isinstance(source, torch.Tensor) and isinstance(result, torch.Tensor)
                    and source.dtype is result.dtype and source.shape == result.shape):
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)


def _unfit(values: dict[fx.Node, object], nodes: Sequence[fx.Node]) -> str:
    """Why the tensors of a node do not fit Weft: the first dtype, device or empty one."""
    for node in nodes:
        value = values.get(node)
        for item in value if isinstance(value, tuple | list) else (value,):
            if not isinstance(item, torch.Tensor):
                continue
            if item.dtype not in TORCH_TO_WEFT:
                return f"dtype {item.dtype} (Weft computes in float32, int32, int64, bool)"
            if item.device.type != "cpu" or item.layout is not torch.strided:
                return f"tensor on {item.device} with layout {item.layout}"
            if item.numel() == 0:
                return "zero-size tensor"
    return "tensor does not fit"


def _multi_output(value: object) -> bool:
    """A tuple of tensors with at least one non-empty: its empty ones (batch norm's saved
    statistics in eval) are nothing to compute, and the lowering gives them as ``EMPTY``."""
    return isinstance(value, tuple | list) and any(isinstance(v, torch.Tensor) and v.numel() for v in value)


@dataclass(frozen=True)
class Verdict:
    supported: bool
    reason: str = ""


def check_node(node: fx.Node, values: dict[fx.Node, object]) -> Verdict:
    """Can Weft lower this node? (op known, tensors fit, trial trace agrees with ATen)."""
    if node.op != "call_function":
        return Verdict(False, "not a call")
    if node.target not in LOWERINGS:
        return Verdict(False, "no lowering")
    inputs = [n for n in node.all_input_nodes]
    concat = node.target is torch.ops.aten.cat.default
    if _scalar_cast_in(node, values):
        pass
    elif not _tensors_ok(values[node], _multi_output(values[node])) or \
            not all(_tensors_ok(values.get(n), concat or _multi_output(values.get(n))) for n in inputs):
        return Verdict(False, _unfit(values, [node, *inputs]))
    if node.target is operator.getitem:
        return Verdict(True)
    try:
        trace_nodes([node], values)
    except WeftError as problem:
        return Verdict(False, str(problem).split("\n")[0])
    return Verdict(True)


def _resolve(argument: object, env: dict[fx.Node, object], values: dict[fx.Node, object]) -> object:
    """Graph values to weft Tensors (or their concrete Python values: sizes, scalars)."""
    if isinstance(argument, fx.Node):
        if argument in env:
            return env[argument]
        value = values[argument]
        if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
            raise LoweringError(f"symbolic value {argument.name} without a concrete value")
        if isinstance(value, torch.Tensor) and value.numel() == 0:
            return EMPTY
        if isinstance(value, torch.Tensor):
            raise LoweringError(f"tensor {argument.name} is not an input of this partition")
        return value
    if isinstance(argument, tuple | list):
        return type(argument)(_resolve(a, env, values) for a in argument)
    if isinstance(argument, dict):
        return {k: _resolve(v, env, values) for k, v in argument.items()}
    if isinstance(argument, torch.dtype | torch.device | torch.layout | torch.memory_format):
        return argument
    return argument


def _check_result(node: fx.Node, result: object, expected: object) -> object:
    """The lowering agrees with ATen on shape; its dtype is cast to ATen's where they differ."""
    if isinstance(expected, tuple | list):
        if not isinstance(result, tuple | list) or len(result) != len(expected):
            raise LoweringError(f"{op_name(node)}: lowering returned {type(result).__name__}, ATen a tuple")
        return tuple(_check_result(node, r, e) if isinstance(e, torch.Tensor) and e.numel() else r
                     for r, e in zip(result, expected, strict=True))
    if not isinstance(result, Tensor):
        raise LoweringError(f"{op_name(node)}: lowering returned {type(result).__name__}")
    if tuple(result.shape) != tuple(expected.shape):
        raise LoweringError(f"{op_name(node)}: lowering gives shape {result.shape}, ATen {tuple(expected.shape)}")
    dtype = weft_dtype(expected.dtype, op_name(node))
    return nn.cast(result, dtype) if result.dtype is not dtype else result


def partition_inputs(nodes: Sequence[fx.Node], values: dict[fx.Node, object]) -> list[fx.Node]:
    """Tensor-valued nodes read by ``nodes`` but produced outside them, in first-use order."""
    inside = set(nodes)
    seen: list[fx.Node] = []
    for node in nodes:
        for source in node.all_input_nodes:
            value = values.get(source)
            if source not in inside and source not in seen and isinstance(value, torch.Tensor) and value.numel():
                seen.append(source)
    return seen


def trace_nodes(nodes: Sequence[fx.Node], values: dict[fx.Node, object],
                outputs: Sequence[fx.Node] | None = None, name: str = "torch_partition",
                params: frozenset[fx.Node] = frozenset()) -> Plan:
    """One Plan computing ``outputs`` (default: the last node) from the partition's inputs."""
    inputs = partition_inputs(nodes, values)
    wanted = list(outputs) if outputs is not None else [nodes[-1]]
    specs = [nn.spec((), "float32") if is_float64_scalar(values[n])  # cast at the boundary (PlanCall)
             else nn.spec(tuple(values[n].shape), weft_dtype(values[n].dtype, n.name), param=n in params)
             for n in inputs]

    def run(*tensors):
        env: dict[fx.Node, object] = dict(zip(inputs, tensors, strict=True))
        for node in nodes:
            args = _resolve(node.args, env, values)
            kwargs = _resolve(node.kwargs, env, values)
            kwargs.pop("device", None)
            kwargs.pop("pin_memory", None)
            kwargs.pop("layout", None)
            try:
                result = LOWERINGS[node.target](values[node], *args, **kwargs)
            except TypeError as problem:
                raise LoweringError(f"{op_name(node)}: arguments not understood ({problem})") from None
            env[node] = _check_result(node, result, values[node])
        results: list[Tensor] = []
        for node in wanted:  # a multi-output node (tried alone) contributes each of its tensors
            value = env[node]
            items = tuple(item for item in value if item is not EMPTY) if isinstance(value, tuple) else (value,)
            results += [item for item in items if isinstance(item, Tensor)]
            if not items or not all(isinstance(item, Tensor) for item in items):
                raise LoweringError(f"{op_name(node)}: output is not a tensor")
        results = tuple(results)
        return results if len(results) > 1 else results[0]

    return nn.trace(run, *specs, name=name)
