"""Index-map algebra for views: simplification and reshape grouping.

Views compose index maps instead of copying, so a reshape of a transpose of a
slice reads its source through one index expression. Left alone those expressions
fill with floor-divs and mods that cancel (``(4*h + d) // 4`` is ``h`` when
``0 <= d < 4``); ``simplify_index`` folds them using the axis extents of the
member that reads them, so the printed plan and the composition engine see the
plain affine map::

    x[(4*h + d) // 4, (4*h + d) % 4]   ->   x[h, d]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from weft.ir.nodes import (
    AxisIndex,
    Binary,
    BinaryOp,
    Cast,
    Const,
    DType,
    Expr,
    IndexAdd,
    IndexConst,
    IndexExpr,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    IndexValue,
    Load,
    Unary,
    Where,
    index_add,
    index_mul,
)
from weft.ir.verify import index_range

Affine = tuple[dict[IndexExpr, int], int]  # {atom: coefficient}, constant


def _affine(index: IndexExpr) -> Affine:
    """Split an (already simplified) index into atom terms and a constant."""
    match index:
        case IndexConst(value):
            return {}, value
        case IndexAdd(left, right):
            left_terms, left_const = _affine(left)
            right_terms, right_const = _affine(right)
            terms = dict(left_terms)
            for atom, coefficient in right_terms.items():
                terms[atom] = terms.get(atom, 0) + coefficient
            return {a: c for a, c in terms.items() if c != 0}, left_const + right_const
        case IndexMul(operand, factor):
            terms, const = _affine(operand)
            return {a: c * factor for a, c in terms.items() if c * factor != 0}, const * factor
    return {index: 1}, 0


def _rebuild(terms: Mapping[IndexExpr, int], const: int) -> IndexExpr:
    result: IndexExpr = IndexConst(0)
    for atom, coefficient in terms.items():
        result = index_add(result, index_mul(atom, coefficient))
    return index_add(result, IndexConst(const))


def _merge_quotient_remainder(terms: dict[IndexExpr, int], const: int) -> Affine:
    """``c*d*(a // d) + c*(a % d)`` is ``c*a`` (a reshape read back through its inverse:
    ``28*(p // 28) + p % 28`` is ``p``)."""
    for atom, coefficient in list(terms.items()):
        if not isinstance(atom, IndexMod) or atom not in terms:
            continue
        quotient = IndexFloorDiv(atom.operand, atom.divisor)
        if terms.get(quotient) != coefficient * atom.divisor:
            continue
        del terms[atom], terms[quotient]
        inner, inner_const = _affine(atom.operand)
        for other, c in inner.items():
            terms[other] = terms.get(other, 0) + c * coefficient
        const += inner_const * coefficient
        return _merge_quotient_remainder({a: c for a, c in terms.items() if c != 0}, const)
    return terms, const


def _range(terms: Mapping[IndexExpr, int], const: int, extents: Mapping[str, int]) -> tuple[int, int] | None:
    low = high = const
    for atom, coefficient in terms.items():
        bounds = index_range(atom, extents)
        if bounds is None:
            return None
        a, b = bounds[0] * coefficient, bounds[1] * coefficient
        low += min(a, b)
        high += max(a, b)
    return low, high


def simplify_index(index: IndexExpr, extents: Mapping[str, int]) -> IndexExpr:
    """An equivalent index with cancelling floor-divs and mods removed."""
    match index:
        case AxisIndex() | IndexConst():
            return index
        case IndexOf(value):
            return IndexOf(simplify_expr(value, extents))
        case IndexAdd() | IndexMul():
            parts = [simplify_index(p, extents) for p in (_operands(index))]
            if isinstance(index, IndexMul):
                return _rebuild(*_affine(index_mul(parts[0], index.factor)))
            return _rebuild(*_merge_quotient_remainder(*_affine(index_add(parts[0], parts[1]))))
        case IndexFloorDiv(operand, divisor):
            return _simplify_floordiv(simplify_index(operand, extents), divisor, extents)
        case IndexMod(operand, divisor):
            return _simplify_mod(simplify_index(operand, extents), divisor, extents)
    raise TypeError(f"not an index expression: {index!r}")


def _operands(index: IndexAdd | IndexMul) -> list[IndexExpr]:
    return [index.left, index.right] if isinstance(index, IndexAdd) else [index.operand]


def _simplify_floordiv(operand: IndexExpr, divisor: int, extents: Mapping[str, int]) -> IndexExpr:
    if divisor == 1:
        return operand
    if isinstance(operand, IndexFloorDiv):  # (x // a) // b == x // (a*b)
        return _simplify_floordiv(operand.operand, operand.divisor * divisor, extents)
    terms, const = _affine(operand)
    quotient = {a: c // divisor for a, c in terms.items() if c % divisor == 0}
    rest = {a: c for a, c in terms.items() if c % divisor != 0}
    quotient_const, rest_const = divmod(const, divisor)
    bounds = _range(rest, rest_const, extents)
    if bounds is not None and 0 <= bounds[0] and bounds[1] < divisor:
        return _rebuild(quotient, quotient_const)
    whole = _range(terms, const, extents)
    if whole is not None and whole[0] // divisor == whole[1] // divisor:
        return IndexConst(whole[0] // divisor)
    return IndexFloorDiv(operand, divisor)


def _simplify_mod(operand: IndexExpr, divisor: int, extents: Mapping[str, int]) -> IndexExpr:
    if divisor == 1:
        return IndexConst(0)
    terms, const = _affine(operand)
    rest = {a: c for a, c in terms.items() if c % divisor != 0}
    rest_const = const % divisor
    bounds = _range(rest, rest_const, extents)
    if bounds is not None and 0 <= bounds[0] and bounds[1] < divisor:
        return _rebuild(rest, rest_const)
    return IndexMod(_rebuild(rest, rest_const), divisor)


def simplify_expr(expr: Expr, extents: Mapping[str, int]) -> Expr:
    """Simplify every index inside a body expression."""
    match expr:
        case Load(buffer, index, padding):
            return Load(buffer, tuple(simplify_index(i, extents) for i in index), padding)
        case IndexValue(index, dtype):
            return IndexValue(simplify_index(index, extents), dtype)
        case Const():
            return expr
        case Unary(op, operand):
            return Unary(op, simplify_expr(operand, extents))
        case Cast(operand, dtype):
            return Cast(simplify_expr(operand, extents), dtype)
        case Binary(op, left, right):
            return _fold_binary(op, simplify_expr(left, extents), simplify_expr(right, extents), extents)
        case Where(condition, if_true, if_false):
            condition = simplify_expr(condition, extents)
            if isinstance(condition, Const) and condition.dtype is DType.BOOL:
                return simplify_expr(if_true if condition.value else if_false, extents)
            return Where(condition, simplify_expr(if_true, extents), simplify_expr(if_false, extents))
    if dataclasses.is_dataclass(expr):
        return expr
    raise TypeError(f"not an expression: {expr!r}")


_COMPARE = {
    BinaryOp.LT: lambda lo, hi, c: True if hi < c else False if lo >= c else None,
    BinaryOp.LE: lambda lo, hi, c: True if hi <= c else False if lo > c else None,
    BinaryOp.GT: lambda lo, hi, c: True if lo > c else False if hi <= c else None,
    BinaryOp.GE: lambda lo, hi, c: True if lo >= c else False if hi < c else None,
}


def _fold_binary(op: BinaryOp, left: Expr, right: Expr, extents: Mapping[str, int]) -> Expr:
    """Decide index comparisons whose outcome the axis ranges fix (concat / padding guards),
    and drop the constant operands of ``and``/``or`` that result."""
    if op in _COMPARE and isinstance(left, IndexValue) and isinstance(right, Const) and not right.dtype.is_float:
        bounds = index_range(left.index, extents)
        if bounds is not None:
            decided = _COMPARE[op](bounds[0], bounds[1], right.value)
            if decided is not None:
                return Const(decided, DType.BOOL)
    if op in (BinaryOp.AND, BinaryOp.OR):
        for constant, other in ((left, right), (right, left)):
            if isinstance(constant, Const) and constant.dtype is DType.BOOL:
                absorbing = op is BinaryOp.OR
                return constant if bool(constant.value) is absorbing else other
    return Binary(op, left, right)


def reshape_groups(source: tuple[int, ...], target: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """Pair runs of source dims with runs of target dims of equal product.

    Size-1 dims are left out of every group (they carry no index). Returns
    ``[(source_dims, target_dims), ...]`` as positions; the caller has checked
    that both shapes hold the same number of elements.
    """
    src = [d for d, n in enumerate(source) if n != 1]
    dst = [d for d, n in enumerate(target) if n != 1]
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(src) and j < len(dst):
        src_group, dst_group = [src[i]], [dst[j]]
        src_product, dst_product = source[src[i]], target[dst[j]]
        while src_product != dst_product:
            if src_product < dst_product:
                i += 1
                src_group.append(src[i])
                src_product *= source[src[i]]
            else:
                j += 1
                dst_group.append(dst[j])
                dst_product *= target[dst[j]]
        groups.append((src_group, dst_group))
        i += 1
        j += 1
    return groups


def reshape_index(
    source: tuple[int, ...], target: tuple[int, ...], index: tuple[IndexExpr, ...]
) -> tuple[IndexExpr, ...]:
    """Source index for a target index of a row-major reshape (group-local flat index)."""
    result: list[IndexExpr] = [IndexConst(0)] * len(source)
    for src_group, dst_group in reshape_groups(source, target):
        flat: IndexExpr = IndexConst(0)
        for d in dst_group:
            flat = index_add(index_mul(flat, target[d]), index[d])
        stride = 1
        for d in reversed(src_group):
            position = flat // stride if stride != 1 else flat
            result[d] = position % source[d] if d != src_group[0] else position
            stride *= source[d]
    return tuple(result)
