"""Lowering: members and fused regions plus a tiling become loop nests, as data.

The unfused seam is ``lower_plan``::

    lower_plan(plan, groups, target) -> LoweredPlan

``groups`` is a tuple of tuples of member names, in execution order; each group
becomes one function (``LoweredFunction``) whose nests run one after another.
``groups=None`` is the unfused baseline: one member per group. Fused regions are
lowered by ``weft.lower.fused.lower_partition`` (``weft.fuse`` hands it the regions
``weft.compose`` chose; this package imports nothing from ``weft.compose``: it reads
regions and the rewrite's pass through the protocols of ``weft.lower.region``).

A fused lowering builds on the same values (see ``weft.lower.nest``): restrict a
member nest to a tile with ``AxisRange`` (loop values, ``weft.lower.values``, using
the tile variable), re-map a private intermediate to tile-local ``Scratch`` through a
``BufferView`` (storage name, offsets, strides), put the nests of a region inside one
``LoweredFunction.tile_loop`` (the nests then have ``parallel=False``; the tile
loop carries the parallelism), leave out of ``LoweredFunction.params`` the
buffers that became scratch, and list them in ``LoweredFunction.private``:
``weft.runtime.plan_arena`` gives arena space only to members' outputs that are
neither plan inputs/outputs nor private. ``tests/lower/test_hooks.py`` builds such
a function by hand.

Identical groups (the same canonical form, ``weft.ir.canonical``: every layer of a
decoder) are lowered once and the other occurrences call that function with their own
buffers (``weft.lower.reuse``); ``LoweredPlan.functions`` lists the calls in execution
order, and calls that share a function share its name.

Every contraction (any view of its operands, any leading axes) is served by one
packed microkernel, ``weft.lower.contraction.ContractionNest`` (C in
``weft.codegen.contraction``), unfused or fused with its elementwise tail as an
epilogue (``weft.lower.contraction_epilogue``). Other nests are chosen in
``weft.lower.schedule`` (vector axis, register block,
packed panels, transposed tiles for Strict row reductions, fold lanes under
Inference). Nothing here writes C: ``weft.codegen`` renders every nest type
(``MemberNest``, ``GemmCall``, the one pass ``weft.lower.online.OnlinePass``).
"""

from weft.lower.nest import (
    AxisRange,
    BufferView,
    GemmCall,
    LoweredFunction,
    LoweredPlan,
    MemberNest,
    Scratch,
    TileLoop,
)
from weft.lower.schedule import Target, default_views, lower_group, lower_member, lower_plan

__all__ = [
    "AxisRange", "BufferView", "GemmCall", "LoweredFunction", "LoweredPlan", "MemberNest", "Scratch",
    "Target", "TileLoop", "default_views", "lower_group", "lower_member", "lower_plan",
]
