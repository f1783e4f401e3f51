"""How an index expression moves along one axis: affine coefficients and load kinds.

Lowering and rendering both ask the same question of a ``Load``: when the vector
axis advances by one, does the address advance by one (a contiguous vector load),
stay put (a broadcast), or do something else (lane-by-lane gather)?
"""

from __future__ import annotations

import enum
import math

from weft.ir import (
    AxisIndex,
    IndexAdd,
    IndexConst,
    IndexExpr,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    Load,
    index_axes,
)


class Access(enum.Enum):
    BROADCAST = "broadcast"    # independent of the axis
    CONTIGUOUS = "contiguous"  # address advances by exactly one element per step
    GATHER = "gather"          # anything else: assembled lane by lane


def affine_terms(index: IndexExpr) -> tuple[dict[str, int], int] | None:
    """``({axis: coefficient}, constant)`` when the index is affine, else None."""
    match index:
        case AxisIndex(axis):
            return {axis: 1}, 0
        case IndexConst(value):
            return {}, value
        case IndexAdd(left, right):
            a, b = affine_terms(left), affine_terms(right)
            if a is None or b is None:
                return None
            coefficients = dict(a[0])
            for axis, factor in b[0].items():
                coefficients[axis] = coefficients.get(axis, 0) + factor
            return coefficients, a[1] + b[1]
        case IndexMul(operand, factor):
            inner = affine_terms(operand)
            if inner is None:
                return None
            return {axis: value * factor for axis, value in inner[0].items()}, inner[1] * factor
    return None


def has_index_of(index: IndexExpr) -> bool:
    """Whether ``index`` holds a data-dependent part (a gather)."""
    match index:
        case IndexOf():
            return True
        case IndexAdd(left, right):
            return has_index_of(left) or has_index_of(right)
        case IndexMul(operand, _) | IndexFloorDiv(operand, _) | IndexMod(operand, _):
            return has_index_of(operand)
    return False


def axis_step(index: IndexExpr, axis: str) -> int | None:
    """How much ``index`` changes when ``axis`` grows by one; None if not affine in it. A
    term without ``axis`` is constant along it, affine or not (a grouped head's
    ``(h // 7) * 64 + e`` steps by one along ``e``), except a gathered one: its lanes are
    checked one by one."""
    if axis not in index_axes(index):
        return 0
    if has_index_of(index):
        terms = affine_terms(index)
        return None if terms is None else terms[0].get(axis, 0)
    match index:
        case AxisIndex():
            return 1
        case IndexAdd(left, right):
            a, b = axis_step(left, axis), axis_step(right, axis)
            return None if a is None or b is None else a + b
        case IndexMul(operand, factor):
            inner = axis_step(operand, axis)
            return None if inner is None else inner * factor
    return None


def address_step(load: Load, strides: tuple[int, ...], axis: str) -> int | None:
    """Change of the element address of ``load`` per unit step of ``axis``."""
    total = 0
    for index, stride in zip(load.index, strides, strict=False):
        step = axis_step(index, axis)
        if step is None:
            return None
        total += step * stride
    return total


def load_access(load: Load, strides: tuple[int, ...], axis: str) -> Access:
    """Classify a load along ``axis`` (padding loads that move are gathers: each lane is checked)."""
    if not any(axis in index_axes(index) for index in load.index):
        return Access.BROADCAST
    if load.padding is not None:
        return Access.GATHER
    step = address_step(load, strides, axis)
    return Access.CONTIGUOUS if step == 1 else Access.GATHER


def transposable(load: Load, strides: tuple[int, ...], lane_axis: str, fold_axis: str) -> bool:
    """Strided along the lanes but unit-stride along the fold axis: a tile transpose serves it."""
    if load.padding is not None:
        return False
    step = address_step(load, strides, lane_axis)
    return step not in (None, 0, 1) and address_step(load, strides, fold_axis) == 1


def unwrapped_step(index: IndexExpr, axis: str) -> tuple[int, tuple[tuple[IndexExpr, int], ...]] | None:
    """The step of ``index`` along ``axis`` if no floor-div or mod inside it wraps within a
    vector, and the ``(operand, divisor)`` pairs whose quotient must then stay constant
    across the lanes (checked at run time). A reshape ``x[f // 64, f % 64]`` along ``f``
    steps by (0, 1) inside any 16 lanes that do not cross a multiple of 64. None when a
    gather index moves with the axis."""
    if axis not in index_axes(index):
        return 0, ()
    match index:
        case AxisIndex(name):
            return (1 if name == axis else 0), ()
        case IndexAdd(left, right):
            a, b = unwrapped_step(left, axis), unwrapped_step(right, axis)
            if a is None or b is None:
                return None
            return a[0] + b[0], a[1] + b[1]
        case IndexMul(operand, factor):
            inner = unwrapped_step(operand, axis)
            return None if inner is None else (inner[0] * factor, inner[1])
        case IndexFloorDiv(operand, divisor):
            inner = unwrapped_step(operand, axis)
            return None if inner is None else (0, inner[1] + ((operand, divisor),))
        case IndexMod(operand, divisor):
            inner = unwrapped_step(operand, axis)
            return None if inner is None else (inner[0], inner[1] + ((operand, divisor),))
        case IndexOf():
            return None
    return None


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    running = 1
    for extent in reversed(shape):
        strides.append(running)
        running *= extent
    return tuple(reversed(strides))


def _quotient_terms(index: IndexExpr) -> dict[tuple[str, int], int] | None:
    """``index`` as a sum of ``coefficient * (axis // divisor)`` terms (divisor 1: the axis
    itself) and a constant (key ``("", 1)``), using ``a % m = a - m * (a // m)`` and
    ``(a // d) // m = a // (d * m)`` (floor division: exact for every integer); None
    when a division or remainder is taken of anything but one such quotient."""
    match index:
        case AxisIndex(axis):
            return {(axis, 1): 1}
        case IndexConst(value):
            return {("", 1): value}
        case IndexAdd(left, right):
            a, b = _quotient_terms(left), _quotient_terms(right)
            if a is None or b is None:
                return None
            for key, coefficient in b.items():
                a[key] = a.get(key, 0) + coefficient
            return a
        case IndexMul(operand, factor):
            inner = _quotient_terms(operand)
            return None if inner is None else {key: value * factor for key, value in inner.items()}
        case IndexFloorDiv(operand, divisor) | IndexMod(operand, divisor) if divisor > 0:
            inner = _quotient_terms(operand)
            if inner is None or len(inner) != 1 or next(iter(inner.values())) != 1 or ("", 1) in inner:
                return None
            axis, inner_divisor = next(iter(inner))
            quotient = (axis, inner_divisor * divisor)
            if isinstance(index, IndexFloorDiv):
                return {quotient: 1}
            if divisor == 1:  # a % 1 is 0
                return {}
            return {(axis, inner_divisor): 1, quotient: -divisor}
    return None


def _divisions(index: IndexExpr) -> int:
    match index:
        case IndexFloorDiv(operand, _) | IndexMod(operand, _):
            return 1 + _divisions(operand)
        case IndexAdd(left, right):
            return _divisions(left) + _divisions(right)
        case IndexMul(operand, _):
            return _divisions(operand)
    return 0


def flat_address(index: tuple[IndexExpr, ...], strides: tuple[int, ...]) -> IndexExpr | None:
    """The element address ``sum(index[d] * strides[d])`` as one index expression with the
    reshape's divisions cancelled, when that needs fewer divisions than the index itself
    (else None). A row-major ``(O, C, 3, 3)`` weight read as ``(o, t // 9, t // 3 % 3, t % 3)``
    is at ``o * 9C + t``: no division left."""
    total: dict[tuple[str, int], int] = {}
    for position, stride in zip(index, strides, strict=True):
        terms = _quotient_terms(position)
        if terms is None:
            return None
        for key, coefficient in terms.items():
            total[key] = total.get(key, 0) + coefficient * stride
    address: IndexExpr = IndexConst(total.pop(("", 1), 0))
    for (axis, divisor), coefficient in sorted(total.items()):
        if coefficient:
            quotient = AxisIndex(axis) if divisor == 1 else IndexFloorDiv(AxisIndex(axis), divisor)
            address = IndexAdd(address, quotient if coefficient == 1 else IndexMul(quotient, coefficient))
    if _divisions(address) >= sum(_divisions(position) for position in index):
        return None
    return address


PATTERN_PERIOD_LIMIT = 1 << 16
"""The longest period ``lane_pattern`` evaluates (points of the axis); beyond it, lane by lane."""


def _eval_index(index: IndexExpr, value: int) -> int:
    """``index`` with its one axis at ``value`` (the caller's terms have no other axis)."""
    match index:
        case AxisIndex():
            return value
        case IndexConst(constant):
            return constant
        case IndexAdd(left, right):
            return _eval_index(left, value) + _eval_index(right, value)
        case IndexMul(operand, factor):
            return _eval_index(operand, value) * factor
        case IndexFloorDiv(operand, divisor):
            return _eval_index(operand, value) // divisor
        case IndexMod(operand, divisor):
            return _eval_index(operand, value) % divisor
    raise TypeError(f"not an index without gathers: {index!r}")


def _terms(index: IndexExpr) -> list[IndexExpr]:
    return [*_terms(index.left), *_terms(index.right)] if isinstance(index, IndexAdd) else [index]


def _divisors(index: IndexExpr) -> list[int]:
    match index:
        case IndexAdd(left, right):
            return _divisors(left) + _divisors(right)
        case IndexMul(operand, _):
            return _divisors(operand)
        case IndexFloorDiv(operand, divisor) | IndexMod(operand, divisor):
            return [abs(divisor), *_divisors(operand)]
    return []


def lane_pattern(index: IndexExpr, axis: str, lanes: int) -> tuple[int, ...] | None:
    """``index`` at lanes ``0 .. lanes-1`` of a vector along ``axis``, less its value at lane 0,
    when that is one constant pattern for every vector whose first point along ``axis`` is a
    multiple of ``lanes`` (and any values of the other axes); else None.

    A rotation's partner ``(i // 2) * 2 + (i + 1) % 2`` gives (1, 0, 3, 2, ...); a table read
    per pair ``(i // 2) % 16`` gives (0, 0, 1, 1, ...). The index must be a sum of terms free
    of ``axis`` and terms of ``axis`` alone (no gather); those are evaluated over one period of
    the divisors and their drift checked, so the pattern holds at every multiple of ``lanes``."""
    moving = [term for term in _terms(index) if axis in index_axes(term)]
    if any(index_axes(term) != {axis} or has_index_of(term) for term in moving):
        return None
    period = lanes
    for divisor in (d for term in moving for d in _divisors(term)):
        period = period * divisor // math.gcd(period, divisor)
        if period > PATTERN_PERIOD_LIMIT:
            return None

    def at(value: int) -> int:
        return sum(_eval_index(term, value) for term in moving)

    drift = at(period) - at(0)
    if any(at(value + period) - at(value) != drift for value in range(period)):
        return None
    pattern = None
    for start in range(0, period, lanes):
        base = at(start)
        found = tuple(at(start + lane) - base for lane in range(lanes))
        if pattern is None:
            pattern = found
        elif found != pattern:
            return None
    return pattern

