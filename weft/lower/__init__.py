"""Lowering: members (later fused regions) plus a tiling become loop nests.

The seam between composition and code generation is ``lower_plan``::

    lower_plan(plan, groups, target) -> LoweredPlan

``groups`` is a tuple of tuples of member names, in execution order; each group
becomes one C function (``LoweredFunction``) whose nests run one after another.
``groups=None`` is the unfused baseline: one member per group. ``weft.compile``
calls it with ``None`` for ``fusion="off"``; for any other policy it imports
``weft.compose`` and uses ``compose.lower_fused(plan, config, target)`` (a
complete ``LoweredPlan``) if present, else ``compose.plan_groups(plan, config)``
fed to ``lower_plan``.

A fused lowering builds on the same values (see ``weft.lower.nest``): restrict a
member nest to a tile with ``AxisRange`` (C expressions using the tile
variable), re-map a private intermediate to tile-local ``Scratch`` through a
``BufferView`` (pointer, offsets, strides), put the nests of a region inside one
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
Inference) and rendered by ``weft.codegen``; a nest type the C renderer does not
know may render itself (``nest.render(lines, indent, counter)``).
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
