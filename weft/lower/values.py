"""Loop values of the nest IR: where a range starts and stops, and how far a view is
offset, as data (docs/design.md section 7: the lowering writes no C).

A value is an ``int``, a named loop variable (``Var``: the tile loop's variable, the
one pass's block start) or one of the few operations tiling needs, on non-negative
integers. The tile of a region that enumerates two axes by one flat variable starts,
along the outer axis with 4 tiles of 16 rows and 3 tiles inside it, at::

    Product(Remainder(Quotient(Var("wf_tile"), 3), 4), 16)    # ((wf_tile / 3) % 4) * 16

and stops at ``Minimum(Sum(start, 16), extent)`` when the extent is not a multiple of
the tile. ``weft.codegen.values.c_value`` prints them; the cost model and ``explain``
read them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Var:
    """A loop variable, by name."""

    name: str


@dataclass(frozen=True, slots=True)
class Sum:
    left: LoopValue
    right: LoopValue


@dataclass(frozen=True, slots=True)
class Product:
    value: LoopValue
    factor: int


@dataclass(frozen=True, slots=True)
class Quotient:
    """``value // divisor`` (both non-negative)."""

    value: LoopValue
    divisor: int


@dataclass(frozen=True, slots=True)
class Remainder:
    value: LoopValue
    modulus: int


@dataclass(frozen=True, slots=True)
class Minimum:
    left: LoopValue
    right: LoopValue


LoopValue = int | Var | Sum | Product | Quotient | Remainder | Minimum


def uses(value: LoopValue, variable: str) -> bool:
    """Whether ``value`` depends on the loop variable named ``variable``."""
    match value:
        case Var(name):
            return name == variable
        case Sum(left, right) | Minimum(left, right):
            return uses(left, variable) or uses(right, variable)
        case Product(inner, _) | Quotient(inner, _) | Remainder(inner, _):
            return uses(inner, variable)
    return False


def renamed(value: LoopValue, names: dict[str, str]) -> LoopValue:
    """``value`` with each loop variable named in ``names`` renamed."""
    match value:
        case Var(name):
            return Var(names.get(name, name))
        case Sum(left, right):
            return Sum(renamed(left, names), renamed(right, names))
        case Minimum(left, right):
            return Minimum(renamed(left, names), renamed(right, names))
        case Product(inner, factor):
            return Product(renamed(inner, names), factor)
        case Quotient(inner, divisor):
            return Quotient(renamed(inner, names), divisor)
        case Remainder(inner, modulus):
            return Remainder(renamed(inner, names), modulus)
    return value
