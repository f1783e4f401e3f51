"""A fused region that is a contraction followed by its elementwise tail keeps the microkernel.

The tail members (bias add, GELU/SiLU, residual add, a scale) read the
contraction's output, and each other's, only at their own output point, so their
bodies inline into one **epilogue** expression over ``acc_at`` (the finished sum of
one output point), applied on the register tile before the store. Before/after::

    y[i, j] = sum_k x[i, k] * w[j, k]          (contraction)
    z[i, j] = y[i, j] + bias[j]                (private)
    g[i, j] = gelu(z[i, j])                    (the region's output)

    ContractionNest(kernel=y, epilogue=gelu(acc[i, j] + bias[j]), output=g, members=(y, z, g))

A tail member may have another shape than the contraction's output when it reads it
through a row-major reshape (a convolution's bias add: the patch contraction writes
``conv[n, g, o, p]``, the add reads ``conv[n, o // Og, o % Og, y * OW + x]``): its axes are
then the reshape's index over the contraction's axes (``o -> g*Og + o``, ``y -> p // OW``,
``x -> p % OW``) and, simplified, each load of a region member must come out at that
member's own flat position; the final output is written through a view of the
contraction's shape over the same row-major memory::

    add[n, o, y, x] = conv[n, 0, o, y*28 + x] + b[o]      ->    epilogue acc[n, g, o, p] + b[o]

The tail's own operations run per element in its own order, so Strict bytes are
those of the unfused members. ``lower_contraction_region`` returns None for any
other region (the fused lowering then handles it as before).
"""

from __future__ import annotations

import dataclasses
import math

from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    DType,
    Expr,
    IndexConst,
    IndexExpr,
    IndexOf,
    Kernel,
    Load,
    Plan,
    Role,
    expr_dtype,
    walk_expr,
)
from weft.ir.indexing import reshape_index, simplify_expr, simplify_index
from weft.lower.access import row_major_strides
from weft.lower.contraction import ACC_BUFFER, ContractionNest, acc_at, lower_contraction
from weft.lower.contraction_prologue import prologue_inliner, split_region
from weft.lower.nest import BufferView, LoweredFunction


def _point_in(shape: tuple[int, ...], first: Kernel) -> tuple[IndexExpr, ...]:
    """The index, into a row-major ``shape`` of as many elements as ``first``'s output,
    of the element at ``first``'s output point (the same flat position): ``first``'s own
    point when the shapes agree, else the reshape's index over ``first``'s axes, simplified
    (``(p // 28, p % 28)`` for a (.., 784) contraction read as (.., 28, 28))."""
    point = tuple(AxisIndex(axis.name) for axis in first.axes)
    extents = tuple(axis.extent for axis in first.axes)
    if shape == extents:
        return point
    names = {axis.name: axis.extent for axis in first.axes}
    return tuple(simplify_index(i, names) for i in reshape_index(shape, extents, point))


def _canonical(index: tuple[IndexExpr, ...], extents: dict[str, int]) -> tuple[IndexExpr, ...]:
    """``index`` with the axes of extent one read as 0, simplified: the reshape's index and
    the view's (already simplified when traced) then compare equal when they are."""
    def zero(node):
        if isinstance(node, AxisIndex):
            return IndexConst(0) if extents.get(node.axis) == 1 else node
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            changes = {f.name: zero(getattr(node, f.name)) for f in dataclasses.fields(node)
                       if dataclasses.is_dataclass(getattr(node, f.name))}
            return dataclasses.replace(node, **changes) if changes else node
        return node

    return tuple(simplify_index(zero(i), extents) for i in index)


def _inline(kernel: Kernel, first: Kernel, values: dict[str, Expr], shapes: dict[str, tuple[int, ...]]):
    """``kernel``'s body over the contraction's axes, with loads of earlier region members
    replaced by their values; None if one is read anywhere but at this output point, or
    inside a gather's index (the register tile holds values, not addresses).

    A member of another shape than the contraction's output (a reshape of it, as a
    convolution's (N, O, H, W) bias add over its (N, G, O/G, H*W) contraction) is read at
    the same flat position: its axes become the reshape's index over the contraction's
    axes, and a member it loads must then be read at that member's own flat position."""
    extents = {axis.name: axis.extent for axis in first.axes}
    own_shape = tuple(axis.extent for axis in kernel.axes)
    axes = dict(zip((axis.name for axis in kernel.axes), _point_in(own_shape, first), strict=True))
    reshaped = own_shape != tuple(extents.values())
    failed = False

    def walk(node, in_index=False):
        nonlocal failed
        if isinstance(node, Load) and node.buffer in values:
            index = tuple(walk(i, True) for i in node.index)
            if reshaped:
                index = tuple(simplify_index(i, extents) for i in index)
            if _canonical(index, extents) != _canonical(_point_in(shapes[node.buffer], first), extents) or \
                    node.padding is not None or in_index:
                failed = True
                return node
            return values[node.buffer]  # already over the contraction's axes
        if isinstance(node, AxisIndex):
            return axes[node.axis] if node.axis in axes else node
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

    result = walk(kernel.body)
    if failed:
        return None
    return simplify_expr(result, extents) if reshaped else result


def epilogue_of(plan: Plan, members: tuple[str, ...]) -> tuple[Kernel, Expr] | None:
    """(the contraction, the tail as one expression over ``acc_at``) when ``members`` is a
    contraction followed by elementwise members of its output's shape, else None."""
    if len(members) < 2:
        return None
    first = plan.kernel(members[0])
    if first.fold is None:
        return None
    size = math.prod(a.extent for a in first.axes)
    buffers = plan.buffer_map()
    values: dict[str, Expr] = {first.output: acc_at(first)}
    shapes = {first.output: tuple(a.extent for a in first.axes)}
    for name in members[1:]:
        kernel = plan.kernel(name)
        if kernel.fold is not None or math.prod(a.extent for a in kernel.axes) != size:
            return None
        if buffers[name].dtype is not DType.FLOAT32:
            return None
        inlined = _inline(kernel, first, values, shapes)
        if inlined is None:
            return None
        values[name] = inlined
        shapes[name] = tuple(a.extent for a in kernel.axes)
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
    (same shape and strides, or both row-major: a reshape), since partial sums wait in it
    between fold blocks."""
    if tuple(outputs) != (members[-1],):
        return None
    split = split_region(plan, members)
    if split is None:
        return None
    prologue, rest = split
    if len(rest) > 1:
        found = epilogue_of(plan, rest)
        if found is None:
            return None
        first, epilogue = found
    elif prologue:
        first, epilogue = plan.kernel(rest[0]), None
    else:
        return None
    rewrite = prologue_inliner(plan, prologue) if prologue else None
    if prologue and rewrite is None:
        return None
    out_view, first_view = views[members[-1]], views[first.output]
    if any(o != 0 for o in out_view.offsets):
        return None
    if out_view.shape != first_view.shape:  # a reshape of the contraction: the same row-major elements
        if out_view.strides != row_major_strides(out_view.shape) or first_view.strides != row_major_strides(
                first_view.shape):
            return None
        out_view = dataclasses.replace(out_view, shape=first_view.shape, strides=first_view.strides,
                                       offsets=first_view.offsets)
    elif out_view.strides != first_view.strides:
        return None
    # the contraction's result is addressed through the final output's view
    local = {**views, members[-1]: out_view, first.output: dataclasses.replace(out_view, buffer=first.output)}
    nest = lower_contraction(first, local, lanes, contract, parallel_min_work, rewrite_factor=rewrite)
    if nest is None:
        return None
    reads = {load.buffer for load in _loads(epilogue)} if epilogue is not None else set()
    touched = dict.fromkeys((members[-1], *(v.buffer for v in nest.views if v.buffer != first.output), *sorted(reads)))
    nest = dataclasses.replace(nest, epilogue=epilogue, output=members[-1], members=rest, prologue=prologue,
                               views=(*tuple(local[name] for name in touched), local[first.output]))
    params = tuple(views[name] for name in touched)
    return LoweredFunction(name=function_name(), members=members, nests=(nest,), params=params,
                           private=members[:-1])


def _loads(expr) -> list[Load]:
    from weft.ir import expr_loads

    return [load for load in expr_loads(expr) if load.buffer != ACC_BUFFER]


__all__ = ["ContractionNest", "epilogue_of", "lower_contraction_region"]
