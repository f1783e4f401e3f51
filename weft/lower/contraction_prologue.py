"""A fused region's elementwise producers of a contraction's operand run while packing it.

A region ``(p1, ..., c, t1, ...)`` whose members before the contraction ``c`` are
elementwise (no fold), private, and read only by ``c`` or by each other is a
**prologue**: each read of a prologue buffer inside ``c``'s factors is replaced by
the producer's body, its axes substituted by the read's index, so the packing
evaluates it once per packed element and the intermediate never exists.
Before/after (a norm's scale and shift, then a linear)::

    n[b, i, k] = (x[b, i, k] - mean[b, i]) * rstd[b, i] * gamma[k] + beta[k]     (private)
    y[b, i, j] = sum_k n[b, i, k] * w[j, k]

    x factor of the microkernel: (x[b, i, k] - mean[b, i]) * rstd[b, i] * gamma[k] + beta[k]

Each packed value is the producer's own operations on the same float32 values in
the same order, so it equals the stored intermediate bit for bit, and Strict bytes
are those of the unfused members. A read with padding (its out-of-range value is
the padding, not the producer's body) keeps the region off this path.
"""

from __future__ import annotations

import dataclasses

from weft.ir import AxisIndex, DType, Expr, Kernel, Load, Plan


def _substitute(node, axes: dict[str, object], inline):
    """``node`` with every ``AxisIndex`` in ``axes`` replaced and every load ``inline`` rewrites
    rewritten; ``inline`` returns None to keep a load (or raises ``_Refused``)."""
    if isinstance(node, AxisIndex):
        return axes.get(node.axis, node)
    if isinstance(node, Load):
        index = tuple(_substitute(item, axes, inline) for item in node.index)
        load = dataclasses.replace(node, index=index)
        replaced = inline(load)
        return load if replaced is None else replaced
    if isinstance(node, tuple):
        return tuple(_substitute(item, axes, inline) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {}
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            if isinstance(value, tuple) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
                changes[field.name] = _substitute(value, axes, inline)
        return dataclasses.replace(node, **changes) if changes else node
    return node


class _Refused(Exception):
    pass


def prologue_inliner(plan: Plan, prologue: tuple[str, ...]):
    """A function from a factor of the contraction to the same factor with the prologue
    members' bodies in place of their reads, or None when ``prologue`` cannot be inlined."""
    kernels: dict[str, Kernel] = {}
    buffers = plan.buffer_map()
    for name in prologue:
        kernel = plan.kernel(name)
        if kernel.fold is not None or buffers[name].dtype is not DType.FLOAT32:
            return None
        kernels[name] = kernel

    def inline(load: Load):
        kernel = kernels.get(load.buffer)
        if kernel is None:
            return None
        if load.padding is not None:
            raise _Refused(load.buffer)
        axes = {axis.name: index for axis, index in zip(kernel.axes, load.index, strict=True)}
        return _substitute(kernel.body, axes, inline)

    def rewrite(factor: Expr) -> Expr | None:
        try:
            return _substitute(factor, {}, inline)
        except _Refused:
            return None

    return rewrite


def split_region(plan: Plan, members: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(prologue, contraction and tail) of a region whose one fold member is preceded only by
    elementwise members read by nothing after it; None otherwise."""
    folds = [index for index, name in enumerate(members) if plan.kernel(name).fold is not None]
    if len(folds) != 1:
        return None
    at = folds[0]
    prologue, rest = members[:at], members[at:]
    for name in rest[1:]:
        if set(plan.kernel(name).reads) & set(prologue):
            return None  # a tail member reads a prologue buffer: it is not the operand's alone
    return prologue, rest


__all__ = ["prologue_inliner", "split_region"]
