"""Fused lowering: a region plus a tile size becomes one C function with one tile loop.

Built on the hooks of ``weft.lower.nest`` (``AxisRange``, ``BufferView``,
``TileLoop``, ``Scratch``); each member keeps the nest the unfused path would give
it, so every fold keeps the oracle's order and Strict stays bit-identical::

    for (wf_tile = 0; wf_tile < T; wf_tile += 16) {        /* parallel over tiles */
        float s_scratch[16 * T];                            /* private: tile-local */
        member s: i in [wf_tile, min(wf_tile + 16, T))      /* address (i - wf_tile) */
        member m: ...                                       /* each fold ascending */
        member o: writes rows [wf_tile, ...) of the output
    }

A region whose tile-local scratch would not fit ``SCRATCH_BUDGET`` even with a
tile of one is lowered member by member instead (reported by ``weft explain``
through the compile, never silently wrong).
"""

from __future__ import annotations

import dataclasses
import math

from weft.compose.partition import Partition
from weft.compose.regions import Region
from weft.ir import Plan
from weft.lower.access import row_major_strides
from weft.lower.nest import AxisRange, BufferView, LoweredFunction, LoweredPlan, MemberNest, Scratch, TileLoop
from weft.lower.schedule import (
    PARALLEL_MIN_WORK,
    Target,
    c_identifier,
    default_views,
    lower_group,
    lower_member,
)

SCRATCH_BUDGET = 256 * 1024
"""Bytes of tile-local scratch per tile (it lives on each thread's stack)."""

TILE_VARIABLE = "wf_tile"


def region_scratch_bytes(plan: Plan, region: Region, size: int, names: tuple[str, ...] | None = None) -> int:
    """Bytes of tile-local scratch for ``region`` (or just ``names``) at tile ``size``."""
    tile_of = dict(region.tile_axes)
    total = 0
    for name in region.private if names is None else names:
        kernel = plan.kernel(name)
        elements = 1
        for axis in kernel.axes:
            elements *= size if axis.name == tile_of[name] else axis.extent
        total += elements * plan.buffer(name).dtype.itemsize
    return total


def choose_tile(plan: Plan, region: Region, extent: int, lanes: int) -> int | None:
    """The largest tile (a multiple of the lanes where possible) whose scratch fits the budget."""
    for size in (4 * lanes, 2 * lanes, lanes, 8, 4, 2, 1):
        size = min(size, extent)
        if region_scratch_bytes(plan, region, size) <= SCRATCH_BUDGET:
            return size
    return None


def scratch_views(
    plan: Plan, region: Region, views: dict[str, BufferView], size: int, taken: set[str], names: tuple[str, ...]
) -> tuple[dict[str, BufferView], tuple[Scratch, ...]]:
    """``views`` with each buffer in ``names`` re-mapped to tile-local scratch of tile ``size``."""
    tile_of = dict(region.tile_axes)
    result = dict(views)
    scratch = []
    for name in names:
        buffer = plan.buffer(name)
        position = [axis.name for axis in plan.kernel(name).axes].index(tile_of[name])
        tile_shape = tuple(size if n == position else extent for n, extent in enumerate(buffer.shape))
        pointer = c_identifier(f"scratch_{name}", taken)
        result[name] = BufferView(
            buffer=name,
            pointer=pointer,
            dtype=buffer.dtype,
            shape=buffer.shape,  # logical shape: padding checks stay global
            strides=row_major_strides(tile_shape),
            offsets=tuple(TILE_VARIABLE if n == position else "0" for n in range(len(buffer.shape))),
        )
        scratch.append(Scratch(pointer, buffer.dtype, math.prod(tile_shape)))
    return result, tuple(scratch)


def tiled_nest(
    plan: Plan, region: Region, member: str, views: dict[str, BufferView], target: Target, size: int,
    parallel: bool = False,
) -> MemberNest:
    """``member``'s own nest, restricted to the rows of the current tile. It keeps its own
    parallel loop only when asked (``parallel``: the tile loop has a single tile)."""
    kernel = plan.kernel(member)
    tile_axis = dict(region.tile_axes)[member]
    extent = next(axis.extent for axis in kernel.axes if axis.name == tile_axis)
    # a library body ignores ranges, so inside a tile every member is a loop nest
    nest = lower_member(kernel, views, dataclasses.replace(target, use_blas=False))
    assert isinstance(nest, MemberNest)
    stop = f"wfc_minl({TILE_VARIABLE} + {size}, {extent})"
    ranges = tuple(AxisRange(r.axis, TILE_VARIABLE, stop) if r.axis == tile_axis else r for r in nest.ranges)
    return dataclasses.replace(nest, ranges=ranges, parallel=parallel and nest.parallel)


def region_extent(plan: Plan, region: Region) -> int:
    anchor = plan.kernel(region.anchor)
    return next(axis.extent for axis in anchor.axes if axis.name == dict(region.tile_axes)[region.anchor])


def function_params(nests, private) -> tuple[BufferView, ...]:
    params: dict[str, BufferView] = {}
    for nest in nests:
        for view in nest.views:
            if view.buffer not in private:
                params.setdefault(view.buffer, view)
    return tuple(params.values())


def lower_region(
    plan: Plan, region: Region, views: dict[str, BufferView], target: Target, taken: set[str], tile: int | None = None
) -> LoweredFunction | None:
    """One tiled C function for ``region``; None if its scratch cannot fit (lower unfused)."""
    extent = region_extent(plan, region)
    size = tile or choose_tile(plan, region, extent, target.lanes)
    if size is None:
        return None
    size = min(size, extent)
    local_views, scratch = scratch_views(plan, region, views, size, taken, region.private)
    tiles = -(-extent // size)
    # one tile (a decode step's single row): parallelism comes from the members' own loops
    nests = tuple(tiled_nest(plan, region, name, local_views, target, size, tiles == 1) for name in region.members)
    work = sum(math.prod(axis.extent for axis in plan.kernel(name).all_axes) for name in region.members)
    return LoweredFunction(
        name=region_function_name(region, taken),
        members=region.members,
        nests=nests,
        params=function_params(nests, region.private),
        tile_loop=TileLoop(TILE_VARIABLE, extent, size, parallel=tiles >= 2 and work >= PARALLEL_MIN_WORK),
        scratch=scratch,
        private=region.private,
    )


def region_function_name(region: Region, taken: set[str]) -> str:
    return "r" + c_identifier(f"{region.anchor}_x{region.size}"[:48], taken)[1:]


def lower_partition(
    plan: Plan, partition: Partition, target: Target, tile: int | None = None, online_lowering=None
) -> LoweredPlan:
    """Every region of ``partition`` as one C function, in execution order.

    ``online_lowering(plan, region, views, target, taken)`` may claim a region (the
    rescaled one-pass form under Inference) by returning a function, or None.
    """
    views = default_views(plan)
    taken: set[str] = set(view.pointer for view in views.values())
    functions = []
    for region in partition.regions:
        function = None
        if region.is_fused and online_lowering is not None:
            function = online_lowering(plan, region, views, target, taken)
        if function is None and region.is_fused:
            function = lower_region(plan, region, views, target, taken, tile)
        if function is not None:
            functions.append(function)
            continue
        for member in region.members:
            functions.append(lower_group(plan, (member,), views, target, taken))
    return LoweredPlan(functions=tuple(functions), buffers=plan.buffers, lanes=target.lanes, contract=target.contract)
