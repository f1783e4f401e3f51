"""Lowering once per signature: identical groups share one lowered function.

The 24 layers of a decoder are the same regions on different buffers. Each distinct
group (same canonical key, ``weft.ir.canonical``) is lowered once; every other
occurrence becomes a *call* of that function with its own buffers: the same
``LoweredFunction`` (name, nests, tile loop, scratch) with the occurrence's members,
private members and parameters, the parameters in the order of the lowered one::

    r_l0_attn_out_x6(b_l0_q_rope, b_l0_k_cache, ...)     lowered, rendered, compiled once
    r_l0_attn_out_x6(b_l7_q_rope, b_l7_k_cache, ...)     layer 7: the same C function

The lowering of a group is a function of what its key holds (bodies, extents,
layouts, private buffers, tiling options) and of the target, so the reused function
computes, on the occurrence's buffers, exactly what lowering the occurrence would.
A parameter not addressed in place (a view other than the buffer's own) is never
remapped: that group is lowered again instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from weft.ir.canonical import Canonical
from weft.lower.nest import BufferView, LoweredFunction


def as_occurrence(
    function: LoweredFunction, lowered_for: Canonical, occurrence: Canonical, members: tuple[str, ...],
    private: tuple[str, ...], views: dict[str, BufferView],
) -> LoweredFunction | None:
    """``function`` (lowered for ``lowered_for``) called on ``occurrence``'s buffers, or None
    when a parameter cannot be remapped."""
    renaming = lowered_for.renaming(occurrence)
    params = []
    for view in function.params:
        if view.buffer not in renaming or views.get(view.buffer) != view:
            return None
        params.append(views[renaming[view.buffer]])
    return dataclasses.replace(function, members=members, private=private, params=tuple(params))


class SharedLowering:
    """One compile's lowered functions by canonical key (first occurrence lowers)."""

    def __init__(self, views: dict[str, BufferView]) -> None:
        self.views = views
        self._known: dict[tuple, tuple[LoweredFunction, Canonical]] = {}

    def lower(
        self, canonical: Canonical, members: tuple[str, ...], private: tuple[str, ...],
        lower_new: Callable[[], LoweredFunction | None],
    ) -> LoweredFunction | None:
        """The function for this occurrence: a call of a known one, else ``lower_new()``."""
        known = self._known.get(canonical.key)
        if known is not None:
            function = as_occurrence(known[0], known[1], canonical, members, private, self.views)
            if function is not None:
                return function
        function = lower_new()
        if function is not None and known is None:
            self._known[canonical.key] = (function, canonical)
        return function


def distinct_functions(functions: tuple[LoweredFunction, ...]) -> tuple[LoweredFunction, ...]:
    """Each function once (by name), in order of first call: what is rendered and compiled."""
    seen: dict[str, LoweredFunction] = {}
    for function in functions:
        seen.setdefault(function.name, function)
    return tuple(seen.values())
