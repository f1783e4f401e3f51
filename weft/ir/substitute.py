"""Pure rewrites of body and index expressions (composition and lowering use them).

Three operations, all building new frozen nodes:

* ``substitute_axes``: replace axis variables by index expressions
  (``i -> i + 16`` restricts a member to a tile; ``a -> j`` inlines a producer).
* ``map_loads``: replace every ``Load`` by whatever a function returns
  (inlining a producer's body, redirecting a load into tile-local scratch).
* ``inline_members``: substitute the bodies of elementwise producers into a reader,
  so that ``P[i,j] = E[i,j] / L[i]`` read as ``P[i,j]`` becomes
  ``exp(S[i,j] - M[i]) / L[i]`` (what the rescaling rewrite reasons about).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from weft.ir.nodes import (
    AxisIndex,
    Binary,
    Cast,
    Const,
    Expr,
    IndexAdd,
    IndexConst,
    IndexExpr,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    IndexValue,
    Kernel,
    Load,
    Unary,
    Where,
    index_add,
    index_mul,
)


def substitute_index(index: IndexExpr, mapping: Mapping[str, IndexExpr]) -> IndexExpr:
    """``index`` with each axis variable named in ``mapping`` replaced (constants folded)."""
    return _rebuild_index(index, mapping, lambda value: substitute_axes(value, mapping))


def _rebuild_index(
    index: IndexExpr, mapping: Mapping[str, IndexExpr], visit: Callable[[Expr], Expr]
) -> IndexExpr:
    """Substitute axes in ``index``; values inside ``IndexOf`` (gathers) go through ``visit``."""
    match index:
        case AxisIndex(axis):
            return mapping.get(axis, index)
        case IndexConst():
            return index
        case IndexAdd(left, right):
            return index_add(_rebuild_index(left, mapping, visit), _rebuild_index(right, mapping, visit))
        case IndexMul(operand, factor):
            return index_mul(_rebuild_index(operand, mapping, visit), factor)
        case IndexFloorDiv(operand, divisor):
            inner = _rebuild_index(operand, mapping, visit)
            if isinstance(inner, IndexConst):
                return IndexConst(inner.value // divisor)
            return IndexFloorDiv(inner, divisor)
        case IndexMod(operand, divisor):
            inner = _rebuild_index(operand, mapping, visit)
            if isinstance(inner, IndexConst):
                return IndexConst(inner.value % divisor)
            return IndexMod(inner, divisor)
        case IndexOf(value):
            return IndexOf(visit(value))
    raise TypeError(f"not an index expression: {index!r}")


def map_expr(expr: Expr, on_load: Callable[[Load], Expr], mapping: Mapping[str, IndexExpr]) -> Expr:
    """Rebuild ``expr`` bottom-up: axes in ``mapping`` substituted, every load through ``on_load``."""

    def visit(node: Expr) -> Expr:
        match node:
            case Load(buffer, index, padding):
                new_index = tuple(_rebuild_index(i, mapping, visit) for i in index)
                return on_load(Load(buffer, new_index, padding))
            case Const():
                return node
            case IndexValue(index, dtype):
                return IndexValue(_rebuild_index(index, mapping, visit), dtype)
            case Unary(op, operand):
                return Unary(op, visit(operand))
            case Binary(op, left, right):
                return Binary(op, visit(left), visit(right))
            case Where(condition, if_true, if_false):
                return Where(visit(condition), visit(if_true), visit(if_false))
            case Cast(operand, dtype):
                return Cast(visit(operand), dtype)
        raise TypeError(f"not an expression: {node!r}")

    return visit(expr)


def substitute_axes(expr: Expr, mapping: Mapping[str, IndexExpr]) -> Expr:
    """``expr`` with the axis variables in ``mapping`` replaced everywhere."""
    if not mapping:
        return expr
    return map_expr(expr, lambda load: load, mapping)


def map_loads(expr: Expr, on_load: Callable[[Load], Expr]) -> Expr:
    return map_expr(expr, on_load, {})


def inline_members(expr: Expr, producers: Mapping[str, Kernel]) -> Expr:
    """Substitute each elementwise producer's body for loads of its output, recursively.

    Before (``producers = {E: E[a,b] = exp(S[a,b] - M[a])}``)::

        L = sum_j E[i, j]
    after::

        L = sum_j exp(S[i, j] - M[i])
    """

    def on_load(load: Load) -> Expr:
        producer = producers.get(load.buffer)
        if producer is None or producer.fold is not None or load.padding is not None:
            return load
        mapping = {axis.name: index for axis, index in zip(producer.axes, load.index, strict=False)}
        return inline_members(substitute_axes(producer.body, mapping), producers)

    return map_loads(expr, on_load)


def rename_buffers(expr: Expr, names: Mapping[str, str]) -> Expr:
    return map_loads(expr, lambda load: Load(names.get(load.buffer, load.buffer), load.index, load.padding))
