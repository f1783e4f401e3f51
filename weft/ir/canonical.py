"""Canonical forms of groups of members: the same work under other names.

Every layer of a decoder (every head, every block) emits the same members under
different buffer names. ``canonical_group`` describes a group of members with the
names abstracted away, buffers numbered by first appearance and each member's axes
by position, so two groups that compute the same thing on differently named
buffers get the same ``key``::

    l0_q_add[i0:1, i1:32] = l0_q_linear[i0, i1] + l0_q_bias[i1]
    l7_q_add[i0:1, i1:32] = l7_q_linear[i0, i1] + l7_q_bias[i1]
    -> key (("b0", (1, 32), None, (add, (load b1 (a0, a1)), (load b2 (a1,))), ...), ...)
       buffers ("l0_q_add", "l0_q_linear", "l0_q_bias") and ("l7_q_add", "l7_q_linear", "l7_q_bias")

``buffers`` pairs the two: position ``n`` of one group plays the role of position
``n`` of the other, so work lowered for one is reused for the other by passing its
buffers instead. The key keeps everything that can change the generated code or its
cost: bodies and index maps (layouts), extents, fold combiners, buffer shapes and
dtypes, which buffers stay private, and any extra facts the caller adds (the tile
axes of a region, the contract).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
    Load,
    Plan,
    Unary,
    Where,
)


@dataclass(frozen=True, slots=True)
class Canonical:
    """A name-free ``key`` (hashable) and the group's buffers in canonical order."""

    key: tuple
    buffers: tuple[str, ...]

    def renaming(self, other: Canonical) -> dict[str, str]:
        """Each of this group's buffers -> the buffer playing its role in ``other`` (same key)."""
        if other.key != self.key:
            raise ValueError("groups with different canonical keys do not correspond")
        return dict(zip(self.buffers, other.buffers, strict=True))


class _Namer:
    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}

    def __call__(self, buffer: str) -> int:
        number = self.numbers.get(buffer)
        if number is None:
            number = self.numbers[buffer] = len(self.numbers)
        return number


def _index(index: IndexExpr, axes: Mapping[str, str], namer: _Namer) -> tuple:
    match index:
        case AxisIndex(axis):
            return ("x", axes.get(axis, axis))
        case IndexConst(value):
            return ("c", value)
        case IndexAdd(left, right):
            return ("+", _index(left, axes, namer), _index(right, axes, namer))
        case IndexMul(operand, factor):
            return ("*", _index(operand, axes, namer), factor)
        case IndexFloorDiv(operand, divisor):
            return ("/", _index(operand, axes, namer), divisor)
        case IndexMod(operand, divisor):
            return ("%", _index(operand, axes, namer), divisor)
        case IndexOf(value):
            return ("of", _expr(value, axes, namer))
    raise TypeError(f"not an index expression: {index!r}")


def _expr(expr: Expr, axes: Mapping[str, str], namer: _Namer) -> tuple:
    match expr:
        case Load(buffer, index, padding):
            # the index first: buffers are numbered in the order a walk meets them
            encoded = tuple(_index(i, axes, namer) for i in index)
            return ("load", namer(buffer), encoded, padding)
        case Const(value, dtype):
            return ("const", type(value).__name__, value, dtype.value)
        case IndexValue(index, dtype):
            return ("index", _index(index, axes, namer), dtype.value)
        case Unary(op, operand):
            return (op.value, _expr(operand, axes, namer))
        case Binary(op, left, right):
            return (op.value, _expr(left, axes, namer), _expr(right, axes, namer))
        case Where(condition, if_true, if_false):
            return ("where", _expr(condition, axes, namer), _expr(if_true, axes, namer),
                    _expr(if_false, axes, namer))
        case Cast(operand, dtype):
            return ("cast", _expr(operand, axes, namer), dtype.value)
    raise TypeError(f"not an expression: {expr!r}")


def member_form(plan: Plan, member: str) -> tuple[tuple, int, tuple[str, ...]]:
    """``member`` described with its own buffers numbered by first appearance (its output
    last): the form, a small number standing for it in this plan (equal forms, equal
    numbers), and the member's buffers in that order. Computed once per member of a plan."""
    derived = plan.index.derived
    forms = derived.setdefault("canonical_member_forms", {})
    if member not in forms:
        numbers = derived.setdefault("canonical_form_numbers", {})
        kernel = plan.kernel(member)
        namer = _Namer()
        axes = {axis.name: f"a{n}" for n, axis in enumerate(kernel.axes)}
        axes.update({axis.name: f"f{n}" for n, axis in enumerate(kernel.fold_axes)})
        body = _expr(kernel.body, axes, namer)
        namer(member)
        form = (
            tuple(axis.extent for axis in kernel.axes),
            (kernel.fold.combiner.value, tuple(axis.extent for axis in kernel.fold.axes)) if kernel.fold else None,
            body,
        )
        forms[member] = (form, numbers.setdefault(form, len(numbers)), tuple(namer.numbers))
    return forms[member]


def canonical_group(
    plan: Plan, members: Iterable[str], private: Iterable[str] = (), extra: tuple = (), stable: bool = False
) -> Canonical:
    """The canonical form of ``members`` (in the order given) of ``plan`` (see module doc).

    ``private`` names the members whose output lives only inside the group;
    ``extra`` is added to the key as it is (it must already be free of names). Each
    member's own form is computed once per plan; the group renumbers its buffers.
    The key holds each member's form by its number in this plan (cheap to hash and
    compare: keys of one plan compare correctly); ``stable`` puts the forms themselves
    in it instead, so keys of different plans compare (and digests last).
    """
    namer = _Namer()
    described = []
    for member in members:
        form, number, buffers = member_form(plan, member)
        described.append((form if stable else number, tuple(namer(buffer) for buffer in buffers)))
    hidden = set(private)
    buffers = tuple(namer.numbers)
    layouts = _layouts(plan)
    shapes = tuple((layouts[name], name in hidden) for name in buffers)
    return Canonical((tuple(described), shapes, extra), buffers)


def _layouts(plan: Plan) -> dict[str, tuple]:
    """Buffer -> (shape, dtype), once per plan."""
    layouts = plan.index.derived.get("canonical_layouts")
    if layouts is None:
        layouts = {name: (buffer.shape, buffer.dtype.value) for name, buffer in plan.index.buffers.items()}
        plan.index.derived["canonical_layouts"] = layouts
    return layouts


def _axis_positions(plan: Plan, member: str) -> dict[str, int]:
    positions = plan.index.derived.setdefault("canonical_axis_positions", {})
    if member not in positions:
        positions[member] = {axis.name: n for n, axis in enumerate(plan.kernel(member).axes)}
    return positions[member]


def canonical_tiled_group(
    plan: Plan,
    members: tuple[str, ...],
    private: tuple[str, ...],
    anchor: str,
    anchor_axes: tuple[str, ...],
    tile_maps: tuple[tuple[str, tuple[tuple[str, str], ...]], ...],
    extra: tuple = (),
    stable: bool = False,
) -> Canonical:
    """``canonical_group`` of a region tiled along common axes (``weft.compose.Region``'s
    fields): the tiling options are part of the key, each axis by its position in its member."""

    def position(member: str, axis: str) -> int:
        return _axis_positions(plan, member)[axis]

    order = {name: n for n, name in enumerate(members)}
    tiling = (
        tuple(position(anchor, axis) for axis in anchor_axes),
        tuple(
            (position(anchor, axis), tuple(sorted((order[member], position(member, carried))
                                                  for member, carried in mapping)))
            for axis, mapping in tile_maps
        ),
    )
    return canonical_group(plan, members, private, (tiling, *extra), stable)
