"""A fused region that is a contraction followed by its elementwise tail keeps the microkernel.

The tail members (bias add, GELU/SiLU, residual add, a scale) read the
contraction's output, and each other's, only at their own output point, so their
bodies inline into one **epilogue** expression over ``acc_at`` (the finished sum of
one output point), applied on the register tile before the store. Before/after::

    y[i, j] = sum_k x[i, k] * w[j, k]          (contraction)
    z[i, j] = y[i, j] + bias[j]                (private)
    g[i, j] = gelu(z[i, j])                    (the region's output)

    ContractionNest(kernel=y, epilogue=gelu(acc[i, j] + bias[j]), output=g, members=(y, z, g))

The tail's own operations run per element in its own order, so Strict bytes are
those of the unfused members. ``lower_contraction_region`` returns None for any
other region (the fused lowering then handles it as before).
"""

from __future__ import annotations

import dataclasses

from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    DType,
    Expr,
    IndexOf,
    Kernel,
    Load,
    Plan,
    Role,
    expr_dtype,
    walk_expr,
)
from weft.lower.contraction import ACC_BUFFER, ContractionNest, acc_at, lower_contraction
from weft.lower.nest import BufferView, LoweredFunction


def _inline(expr, kernel: Kernel, values: dict[str, Expr], names: dict[str, str]):
    """``kernel``'s body over the contraction's axes, with loads of earlier region members
    replaced by their values; None if one is read anywhere but at this output point, or
    inside a gather's index (the register tile holds values, not addresses)."""
    own_point = tuple(AxisIndex(axis.name) for axis in kernel.axes)
    failed = False

    def walk(node, in_index=False):
        nonlocal failed
        if isinstance(node, Load) and node.buffer in values:
            if node.index != own_point or node.padding is not None or in_index:
                failed = True
                return node
            return values[node.buffer]  # already over the contraction's axes
        if isinstance(node, AxisIndex):
            return AxisIndex(names.get(node.axis, node.axis))
        if isinstance(node, tuple):
            return tuple(walk(item, in_index) for item in node)
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            inside = in_index or isinstance(node, IndexOf)
            changes = {}
            for field in dataclasses.fields(node):
                value = getattr(node, field.name)
                if isinstance(value, tuple) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
                    changes[field.name] = walk(value, inside)
            return dataclasses.replace(node, **changes) if changes else node
        return node

    result = walk(expr)
    return None if failed else result


def epilogue_of(plan: Plan, members: tuple[str, ...]) -> tuple[Kernel, Expr] | None:
    """(the contraction, the tail as one expression over ``acc_at``) when ``members`` is a
    contraction followed by elementwise members of its output's shape, else None."""
    if len(members) < 2:
        return None
    first = plan.kernel(members[0])
    if first.fold is None:
        return None
    extents = tuple(a.extent for a in first.axes)
    buffers = plan.buffer_map()
    values: dict[str, Expr] = {first.output: acc_at(first)}
    for name in members[1:]:
        kernel = plan.kernel(name)
        if kernel.fold is not None or tuple(a.extent for a in kernel.axes) != extents:
            return None
        if buffers[name].dtype is not DType.FLOAT32:
            return None
        names = {axis.name: other.name for axis, other in zip(kernel.axes, first.axes, strict=True)}
        inlined = _inline(kernel.body, kernel, values, names)
        if inlined is None:
            return None
        values[name] = inlined
    epilogue = values[members[-1]]
    if _lane_by_lane(epilogue, buffers):
        return None
    return first, epilogue


def _lane_by_lane(expr: Expr, buffers: dict) -> bool:
    """Whether ``expr`` holds an integer division or a remainder of the accumulator: those
    run lane by lane from a scalar rendering (no vector integer division exists), which
    cannot read the register tile."""
    known = {**buffers, ACC_BUFFER: Buffer(ACC_BUFFER, (), DType.FLOAT32, Role.INTERMEDIATE)}
    for node in walk_expr(expr):
        if isinstance(node, Binary) and node.op in (BinaryOp.DIV, BinaryOp.FMOD) and (
                node.op is BinaryOp.FMOD or expr_dtype(node.left, known) is not DType.FLOAT32) and any(
                isinstance(inner, Load) and inner.buffer == ACC_BUFFER for inner in walk_expr(node)):
            return True
    return False


def lower_contraction_region(plan: Plan, members: tuple[str, ...], outputs: tuple[str, ...],
                             views: dict[str, BufferView], lanes: int, contract: str, parallel_min_work: int,
                             function_name) -> LoweredFunction | None:
    """One function: the microkernel with the region's tail as its epilogue, or None.
    ``function_name()`` is called only when the region qualifies (it may take a name).

    Only the last member may be seen outside (``outputs``); the others are private
    and get no memory at all. The final output must be laid out like the contraction's
    (row-major, same shape), since partial sums wait in it between fold blocks."""
    if tuple(outputs) != (members[-1],):
        return None
    found = epilogue_of(plan, members)
    if found is None:
        return None
    first, epilogue = found
    out_view, first_view = views[members[-1]], views[first.output]
    if out_view.shape != first_view.shape or out_view.strides != first_view.strides or \
            any(o != 0 for o in out_view.offsets):
        return None
    # the contraction's result is addressed through the final output's view
    local = {**views, first.output: dataclasses.replace(out_view, buffer=first.output)}
    nest = lower_contraction(first, local, lanes, contract, parallel_min_work)
    if nest is None:
        return None
    reads = {load.buffer for load in _loads(epilogue)}
    touched = dict.fromkeys((members[-1], *(v.buffer for v in nest.views if v.buffer != first.output), *sorted(reads)))
    nest = dataclasses.replace(nest, epilogue=epilogue, output=members[-1], members=members,
                               views=(*tuple(views[name] for name in touched), local[first.output]))
    params = tuple(views[name] for name in touched)
    return LoweredFunction(name=function_name(), members=members, nests=(nest,), params=params,
                           private=members[:-1])


def _loads(expr) -> list[Load]:
    from weft.ir import expr_loads

    return [load for load in expr_loads(expr) if load.buffer != ACC_BUFFER]


__all__ = ["ContractionNest", "epilogue_of", "lower_contraction_region"]
