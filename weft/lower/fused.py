"""Fused lowering: a region plus a tiling becomes one C function with one tile loop.

Built on the hooks of ``weft.lower.nest`` (``AxisRange``, ``BufferView``,
``TileLoop``, ``Scratch``); each member keeps the nest the unfused path would give
it, so every fold keeps the oracle's order and Strict stays bit-identical.

The region's tile axis (the longest common anchor axis) is cut into tiles of
``size``; every common axis before it (batch, heads) into tiles of one, so
tile-local scratch holds one query tile of one head, not of every head. The tiles
of all those axes are enumerated by one flat, parallel loop::

    for (wf_tile = 0; wf_tile < B*H*ceil(T/16); wf_tile += 1) {     /* parallel */
        float s_scratch[1 * 1 * 16 * T];                            /* private: tile-local */
        member s: b = wf_tile / (H*T/16), h = ..., i in [i0, min(i0 + 16, T))
        member m: ...                                               /* each fold ascending */
        member o: writes its rows of the output
    }

Private members whose lifetimes within a tile do not overlap share one array
(scores and probabilities, row max and row sum). Whether a region fits
``SCRATCH_BUDGET`` at all (with a tile of one) is ``region_fit``; the greedy
partition asks it before taking a candidate, so a chosen region always lowers
fused here. There is no silent member-by-member fallback: a fused region handed
to ``lower_partition`` that does not lower raises ``CompileError``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from weft.errors import CompileError
from weft.ir import OUTSIDE, AxisIndex, Kernel, Plan, index_axes
from weft.ir.canonical import Canonical, canonical_tiled_group
from weft.lower.access import Access, load_access, row_major_strides
from weft.lower.contraction import lower_contraction
from weft.lower.contraction_epilogue import lower_contraction_region
from weft.lower.library import lower_library
from weft.lower.nest import AxisRange, BufferView, LoweredFunction, LoweredPlan, MemberNest, Scratch, TileLoop
from weft.lower.region import FusedRegion, Partition
from weft.lower.reuse import SharedLowering
from weft.lower.row_max import with_plain_max
from weft.lower.row_prefetch import with_row_prefetch
from weft.lower.schedule import (
    PARALLEL_MIN_WORK,
    Target,
    default_views,
    lower_group,
    lower_member,
    storage_name,
)
from weft.lower.values import LoopValue, Minimum, Product, Quotient, Remainder, Sum, Var

SCRATCH_BUDGET = 256 * 1024
"""Bytes of tile-local scratch per tile (it lives on each thread's stack)."""

TILE_VARIABLE = "wf_tile"


@dataclass(frozen=True, slots=True)
class Tiling:
    """Tiles of a region's common anchor axes, enumerated by one flat loop variable.

    ``axes`` holds (anchor axis, extent, tile size), outermost first; ``maps`` gives
    for each anchor axis every member's axis that carries it.
    """

    axes: tuple[tuple[str, int, int], ...]
    maps: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]

    @property
    def count(self) -> int:
        return math.prod(-(-extent // size) for _, extent, size in self.axes)

    def size(self, anchor_axis: str) -> int:
        return next(size for name, _, size in self.axes if name == anchor_axis)

    def start(self, anchor_axis: str) -> LoopValue:
        """The current tile's first point along ``anchor_axis``."""
        inner = 1
        for name, extent, size in reversed(self.axes):
            tiles = -(-extent // size)
            if name == anchor_axis:
                if tiles == 1:
                    return 0
                index: LoopValue = Var(TILE_VARIABLE) if inner == 1 else Quotient(Var(TILE_VARIABLE), inner)
                if inner * tiles < self.count:
                    index = Remainder(index, tiles)
                return index if size == 1 else Product(index, size)
            inner *= tiles
        raise KeyError(anchor_axis)

    def stop(self, anchor_axis: str) -> LoopValue:
        extent = next(extent for name, extent, _ in self.axes if name == anchor_axis)
        size = self.size(anchor_axis)
        if size >= extent:
            return extent
        if extent % size == 0:
            return Sum(self.start(anchor_axis), size)
        return Minimum(Sum(self.start(anchor_axis), size), extent)

    def member_axes(self, member: str) -> dict[str, str]:
        """``member``'s tiled axes -> the anchor axis each carries."""
        return {dict(mapping)[member]: anchor_axis for anchor_axis, mapping in self.maps if member in dict(mapping)}

    def ranges(self, member: str) -> dict[str, tuple[LoopValue, LoopValue, int]]:
        """``member``'s tiled axes -> (start, stop, tile size)."""
        return {
            axis: (self.start(anchor_axis), self.stop(anchor_axis), self.size(anchor_axis))
            for axis, anchor_axis in self.member_axes(member).items()
        }


def region_tiling(plan: Plan, region: FusedRegion, size: int, primary: str | None = None) -> Tiling:
    """Tile ``primary`` (default ``region.tile_axis``) by ``size`` and every common axis before it by one."""
    anchor = plan.kernel(region.anchor)
    order = [axis.name for axis in anchor.axes]
    primary = primary or region.tile_axis
    axes = []
    for axis in anchor.axes:
        if axis.name == primary:
            axes.append((axis.name, axis.extent, min(size, axis.extent)))
        elif axis.name in region.anchor_axes and order.index(axis.name) < order.index(primary):
            axes.append((axis.name, axis.extent, 1))
    maps = tuple((name, mapping) for name, mapping in region.tile_maps if name in {a for a, _, _ in axes})
    if not maps:  # a region built without tile_maps: the primary axis alone
        maps = ((primary, region.tile_axes),)
        axes = [a for a in axes if a[0] == primary]
    return Tiling(tuple(axes), maps)


def tile_shape(plan: Plan, name: str, tiling: Tiling) -> tuple[int, ...]:
    tiled = tiling.ranges(name)
    return tuple(tiled[axis.name][2] if axis.name in tiled else axis.extent for axis in plan.kernel(name).axes)


def region_scratch_bytes(plan: Plan, region: FusedRegion, tiling: Tiling, names: tuple[str, ...] | None = None) -> int:
    """Bytes of tile-local scratch for ``region``'s private members (or just ``names``)."""
    return sum(
        math.prod(tile_shape(plan, name, tiling)) * plan.buffer(name).dtype.itemsize
        for name in (region.private if names is None else names)
    )


def share_scratch(plan: Plan, region: FusedRegion, tiling: Tiling) -> tuple[dict[str, int], list[tuple[str, int]]]:
    """Private members whose lifetimes in the tile do not overlap share one scratch array.

    A member's array is live from its own nest to the last nest reading it
    (region order); attention's scores are dead once the exps are written, so
    the probabilities reuse their array. Returns member -> slot, and per slot
    (the member naming it, elements).
    """
    order = {name: position for position, name in enumerate(region.members)}
    readers = plan.index.readers
    slot_of: dict[str, int] = {}
    slots: list[list] = []  # [first member, elements, dtype, last position]
    for name in region.private:
        first = order[name]
        last = max((order[r] for r in readers[name] if r in order), default=first)
        need = math.prod(tile_shape(plan, name, tiling))
        dtype = plan.buffer(name).dtype
        free = [n for n, slot in enumerate(slots) if slot[2] is dtype and slot[3] < first]
        if free:  # best fit: the smallest array that holds it, else the largest (grows least)
            holding = [n for n in free if slots[n][1] >= need]
            chosen = min(holding, key=lambda n: slots[n][1]) if holding else max(free, key=lambda n: slots[n][1])
            slots[chosen][1] = max(slots[chosen][1], need)
            slots[chosen][3] = last
        else:
            chosen = len(slots)
            slots.append([name, need, dtype, last])
        slot_of[name] = chosen
    return slot_of, [(slot[0], slot[1]) for slot in slots]


def shared_scratch_bytes(plan: Plan, region: FusedRegion, tiling: Tiling) -> int:
    slot_of, slots = share_scratch(plan, region, tiling)
    return sum(elements * plan.buffer(name).dtype.itemsize for name, elements in slots)


REUSE_LANES = 4
"""A fused contraction must use each element of an out-of-cache operand at least this many
vectors' worth of times per read (the largest tile ``choose_tiling`` tries)."""


def starved_contraction(plan: Plan, region: FusedRegion, tiling: Tiling, lanes: int) -> tuple[str, str, int] | None:
    """(member, operand, bytes) when a contraction member, restricted to one tile, would use
    each element of a large operand fewer times than unfused (and fewer than
    ``REUSE_LANES * lanes``).

    An operand element is reused by every output point of the tile along the output
    axes its load does not index (a weight, by the tile's rows). Unfused, the member
    reuses it along their whole extents; a tile that cuts that below a few vectors of
    uses makes an out-of-cache operand (larger than the scratch budget) stream from
    memory every few rows: vit-block's MLP tiled one row at a time re-read its 16 MB
    weight for each of 5,184 rows, and with 16 rows per tile the fused matrix products
    still ran 2-5x slower than unfused. Such a tiling does not fit.
    """
    for name in region.members:
        kernel = plan.kernel(name)
        if not kernel.is_contraction:
            continue
        shape = dict(zip((axis.name for axis in kernel.axes), tile_shape(plan, name, tiling), strict=True))
        primary = tiling.axes[-1][0] if tiling.axes else None
        outer = {axis for axis, anchor_axis in tiling.member_axes(name).items() if anchor_axis != primary}
        for load in kernel.loads:
            buffer = plan.buffer(load.buffer)
            # bytes of the operand that consecutive tiles (along the primary axis) share:
            # a head's keys stay in cache across that head's query tiles; a weight does not
            size = buffer.dtype.itemsize
            for dim, index in zip(buffer.shape, load.index, strict=True):
                size *= 1 if index_axes(index) & outer else dim
            if size <= SCRATCH_BUDGET:
                continue
            indexed = set().union(*(index_axes(index) for index in load.index))
            free = [axis for axis in kernel.axes if axis.name not in indexed]
            tiled_reuse = math.prod(shape[axis.name] for axis in free)
            whole_reuse = math.prod(axis.extent for axis in free)
            if tiled_reuse < min(REUSE_LANES * lanes, whole_reuse):
                return name, load.buffer, size
    return None


ROW_SCRATCH_BUDGET = 8 * 1024
"""Scratch of a region without a contraction (a row-wise chain: softmax, a norm). Its
intermediates are re-read within the tile, so small tiles keep them in L1, and rows of
scratch and input do not sit whole pages apart (4 KiB rows alias in the store buffer).
Softmax 8192 x 1024, greedy Inference, 1 thread, thread CPU time on the 16-lane EPYC:
32 rows per tile (128 KiB scratch) 4.6 ms, 8 rows 5.2, 4 rows 4.3, 2 rows 3.9, 1 row
3.3-3.5; a hand-written row loop 3.1. Layer norm 8192 x 1024: 2.2-2.6 ms at every size."""

MIN_TILES = 8
"""A tiling with fewer tiles than this is taken only when no axis offers more (parallelism)."""


def choose_tiling(plan: Plan, region: FusedRegion, lanes: int, fits=None, contract: str = "inference") -> Tiling | None:
    """The tiling of ``region`` the lowering uses, or None when nothing fits the budget.

    Common anchor axes are tried outermost first (extent one skipped), each with the
    largest tile (a multiple of the lanes where possible) whose scratch fits; the
    first giving at least ``MIN_TILES`` tiles wins. Outermost first keeps the inner
    axes whole inside a tile: a contraction in the region then reuses its other
    operand (a weight) across a tile of rows instead of re-reading all of it for
    every row (vit-block's ``qkv_linear qkv_add`` tiled along its 3072 outputs with
    rows tiled by one re-read the 12 MB weight 5,184 times: 16x slower than
    unfused). When no axis gives enough tiles, the longest common axis
    (``region.tile_axis``), then the others, with the largest tile that fits. A region
    without a contraction (and no ``fits`` of its own) first tries the same order within
    ``ROW_SCRATCH_BUDGET``. Under Strict, one that folds takes tiles of ``lanes`` rows: a
    row's fold keeps the oracle's order, one add chain, latency-bound in a tile of one row;
    with a vector of rows each lane runs its own row's chain, in order (layer norm 4096 x
    1024, greedy Strict, 1 thread: 1 row per tile 7.7 ms, 16 rows 2.2 ms, 64 rows 2.8 ms,
    unfused 2.9 ms).
    """
    row_chain = fits is None and not any(plan.kernel(member).is_contraction for member in region.members)
    if row_chain and contract == "strict" and any(plan.kernel(member).fold for member in region.members):
        for name in (name for name, extent in ((a.name, a.extent) for a in plan.kernel(region.anchor).axes)
                     if extent >= lanes and name in ({n for n, _ in region.tile_maps} or {region.tile_axis})):
            tiling = region_tiling(plan, region, lanes, name)
            if tiling.count >= MIN_TILES and shared_scratch_bytes(plan, region, tiling) <= SCRATCH_BUDGET:
                return tiling
    within = fits or (lambda tiling: shared_scratch_bytes(plan, region, tiling) <= SCRATCH_BUDGET)

    def fits(tiling: Tiling) -> bool:
        return starved_contraction(plan, region, tiling, lanes) is None and within(tiling)

    sizes = (4 * lanes, 2 * lanes, lanes, 8, 4, 2, 1)
    extents = {axis.name: axis.extent for axis in plan.kernel(region.anchor).axes}
    common = {name for name, _ in region.tile_maps} if region.tile_maps else {region.tile_axis}
    outermost = [name for name in extents if name in common and extents[name] > 1]
    if row_chain:
        for name in outermost:  # a row-wise chain: the largest tile whose scratch stays in L1
            for size in sizes:
                tiling = region_tiling(plan, region, size, name)
                if tiling.count >= MIN_TILES and shared_scratch_bytes(plan, region, tiling) <= ROW_SCRATCH_BUDGET:
                    return tiling
    for name in outermost:
        for size in sizes:
            tiling = region_tiling(plan, region, size, name)
            if tiling.count >= MIN_TILES and fits(tiling):
                return tiling
    for name in dict.fromkeys([region.tile_axis, *outermost]):  # fewer tiles, longest axis first
        for size in sizes:
            tiling = region_tiling(plan, region, size, name)
            if fits(tiling):
                return tiling
    return None


TILE_INNERMOST = True
"""Tile-local scratch keeps the primary tile axis innermost (``tile_inner_strides``)."""


def rows_innermost_pays(plan: Plan, member: str, private: set[str]) -> bool:
    """Whether ``member``'s tile scratch may take the tile rows as its inner dimension: no
    load of a global buffer, in ``member`` or in a kernel reading it, is contiguous along
    the axis of ``member``'s inner dimension (softmax's ``E = exp(x - m)`` reads ``x``
    along its rows, so ``E`` keeps rows of ``j``; attention's scores read ``k[j, d]``
    with ``j`` strided, so they take ``i`` inner). Without this test softmax and layer
    norm ran 2.3-2.7x slower (their members would gather their input)."""
    kernel = plan.kernel(member)

    def contiguous_global(reader: Kernel, axis: str) -> bool:
        return any(
            load.buffer not in private and load_access(load, row_major_strides(plan.buffer(load.buffer).shape), axis)
            is Access.CONTIGUOUS
            for load in reader.loads
        )

    if contiguous_global(kernel, kernel.axes[-1].name):
        return False
    for reader in (plan.kernel(name) for name in plan.readers_of(member) if name != OUTSIDE):
        for load in reader.loads:
            if load.buffer != member:
                continue
            inner = load.index[-1]
            if not isinstance(inner, AxisIndex) or contiguous_global(reader, inner.axis):
                return False
    return True


def tile_inner_strides(shape: tuple[int, ...], names: list[str], tiling: Tiling, member: str) -> tuple[int, ...]:
    """Strides of a private member's tile scratch: row-major, but with the axis carrying the
    tiling's primary axis (attention's query rows ``i``) innermost.

    A tile's rows are then the contiguous dimension of every private array, so each
    member's nest (which picks its vector axis by contiguous access) takes the rows as its
    vector lanes: the row max and row sum fold along ``j`` lane-wise, one row per lane,
    instead of gathering a row's column with a stride of the row length. Only the layout
    of scratch changes, not any fold's order, so Strict stays bit-identical.
    """
    if not TILE_INNERMOST or not tiling.axes:
        return row_major_strides(shape)
    primary = tiling.axes[-1][0]
    inner = [axis for axis, anchor_axis in tiling.member_axes(member).items() if anchor_axis == primary]
    if not inner or inner[0] not in names:
        return row_major_strides(shape)
    position = names.index(inner[0])
    order = [n for n in range(len(shape)) if n != position] + [position]
    strides = [0] * len(shape)
    step = 1
    for n in reversed(order):
        strides[n] = step
        step *= shape[n]
    return tuple(strides)


def scratch_views(
    plan: Plan, views: dict[str, BufferView], tiling: Tiling, taken: set[str], names: tuple[str, ...],
    region: FusedRegion | None = None,
) -> tuple[dict[str, BufferView], tuple[Scratch, ...]]:
    """``views`` with each buffer in ``names`` re-mapped to tile-local scratch; with
    ``region`` (nests in region order), members with disjoint lifetimes share arrays."""
    result = dict(views)
    scratch = []
    slot_of, slots = share_scratch(plan, region, tiling) if region is not None else ({}, [])
    pointers = {}
    for number, (first, elements) in enumerate(slots):
        pointers[number] = storage_name(f"scratch_{first}", taken)
        scratch.append(Scratch(pointers[number], plan.buffer(first).dtype, elements))
    for name in names:
        buffer = plan.buffer(name)
        tiled = tiling.ranges(name)
        axes = plan.kernel(name).axes
        shared = name in slot_of
        pointer = pointers[slot_of[name]] if shared else storage_name(f"scratch_{name}", taken)
        shape = tile_shape(plan, name, tiling)
        result[name] = BufferView(
            buffer=name,
            pointer=pointer,
            dtype=buffer.dtype,
            shape=buffer.shape,  # logical shape: padding checks stay global
            strides=tile_inner_strides(shape, [axis.name for axis in axes], tiling, name)
            if rows_innermost_pays(plan, name, set(names)) else row_major_strides(shape),
            offsets=tuple(tiled[axis.name][0] if axis.name in tiled else 0 for axis in axes),
        )
        if not shared:
            scratch.append(Scratch(pointer, buffer.dtype, math.prod(shape)))
    return result, tuple(scratch)


def tiled_nest(
    plan: Plan, member: str, views: dict[str, BufferView], target: Target, tiling: Tiling, parallel: bool = False
) -> MemberNest:
    """``member``'s own nest, restricted to the current tile. It keeps its own parallel
    loop only when asked (``parallel``: the tile loop has a single tile)."""
    # a library body ignores ranges, so inside a tile every member is a loop nest
    nest = lower_member(plan.kernel(member), views, dataclasses.replace(target, use_blas=False))
    assert isinstance(nest, MemberNest)
    tiled = tiling.ranges(member)
    ranges = tuple(AxisRange(r.axis, *tiled[r.axis][:2]) if r.axis in tiled else r for r in nest.ranges)
    return dataclasses.replace(nest, ranges=ranges, parallel=parallel and nest.parallel)


def function_params(nests, private) -> tuple[BufferView, ...]:
    params: dict[str, BufferView] = {}
    for nest in nests:
        for view in nest.views:
            if view.buffer not in private:
                params.setdefault(view.buffer, view)
    return tuple(params.values())


def region_work(plan: Plan, region: FusedRegion) -> int:
    return sum(math.prod(axis.extent for axis in plan.kernel(name).all_axes) for name in region.members)


def tile_loop(plan: Plan, region: FusedRegion, tiling: Tiling) -> TileLoop:
    parallel = tiling.count >= 2 and region_work(plan, region) >= PARALLEL_MIN_WORK
    return TileLoop(TILE_VARIABLE, tiling.count, 1, parallel=parallel, tiles=tiling.axes)


def lower_region(
    plan: Plan, region: FusedRegion, views: dict[str, BufferView], target: Target, taken: set[str], tile: int | None = None,
    tiling: Tiling | None = None,
) -> LoweredFunction | None:
    """One tiled C function for ``region``; None if its scratch cannot fit (lower unfused).
    ``tiling`` (a priced choice) wins over ``tile`` and over ``choose_tiling``."""
    if tiling is None:
        tiling = region_tiling(plan, region, tile) if tile else choose_tiling(plan, region, target.lanes,
                                                                              contract=target.contract)
    if tiling is None:
        return None
    local_views, scratch = scratch_views(plan, views, tiling, taken, region.private, region)
    # one tile (a decode step's single row): parallelism comes from the members' own loops
    single = tiling.count == 1
    nests = tuple(tiled_nest(plan, name, local_views, target, tiling, single) for name in region.members)
    params = function_params(nests, region.private)
    nests = with_row_prefetch(nests, params, tiling, TILE_VARIABLE, target.contract)
    nests = with_plain_max(nests, region.private, target.contract)
    return LoweredFunction(
        name=region_function_name(region, taken),
        members=region.members,
        nests=nests,
        params=params,
        tile_loop=tile_loop(plan, region, tiling),
        scratch=scratch,
        private=region.private,
    )


def region_function_name(region: FusedRegion, taken: set[str]) -> str:
    return "r" + storage_name(f"{region.anchor}_x{region.size}"[:48], taken)[1:]


def microkernel_lost(plan: Plan, region: FusedRegion, views: dict[str, BufferView], target: Target) -> tuple[str, ...]:
    """Contraction members of ``region`` that the microkernel runs on their own but that its
    plain fused form would run as generic tiled nests. A generic nest runs a contraction at
    20-40% of the FMA peak against the microkernel's 85-100%: fused norm2 + fc1 of vit-block
    (dim 256) took 14 ms against 2.4 ms for fc1 alone, more than any traffic the fusion saves.
    Not lost: a region that keeps a contraction's result private when it is larger than the
    region's outputs (Strict attention's tokens x tokens scores), where never materialising it
    is the fusion's point; and the one pass, Inference's attention form, which keeps its
    products on the register tile or folds them in the pass."""
    if not target.microkernel:
        return ()
    lost = tuple(
        name for name in region.members
        if plan.kernel(name).is_contraction
        and lower_contraction(plan.kernel(name), views, target.lanes, target.contract, PARALLEL_MIN_WORK) is not None
    )
    largest_output = max(plan.buffer(name).nbytes for name in region.outputs)
    if any(name in region.private and plan.buffer(name).nbytes > largest_output for name in lost):
        return ()  # the fusion keeps a contraction's larger result from existing (Strict attention's scores)
    return lost


def region_fit(plan: Plan, region: FusedRegion, target: Target, online_lowering=None, views=None) -> str | None:
    """None when ``lower_partition`` can emit ``region`` as one function; else why not.

    The same tries ``lower_partition`` makes: the microkernel with the region around it as
    prologue and epilogue, the one-pass form (when given; it keeps less scratch), then the
    plain fused form at any tile size down to one, unless it would run a contraction as a
    generic tiled nest instead of the microkernel (``microkernel_lost``).
    """
    if not region.is_fused:
        return None
    if region.tile_axis is None:
        return f"{region.anchor} has no output axis to tile along"
    views = views if views is not None else default_views(plan)
    if target.microkernel and lower_contraction_region(plan, region.members, region.outputs, views, target.lanes,
                                                       target.contract, PARALLEL_MIN_WORK, lambda: "probe"):
        return None
    lost = microkernel_lost(plan, region, views, target)
    if not lost and choose_tiling(plan, region, target.lanes, contract=target.contract) is not None:
        return None
    if online_lowering is not None:
        probe = {view.pointer for view in views.values()}
        if online_lowering(plan, region, views, target, probe) is not None:
            return None
    if lost:
        return (f"contraction member {lost[0]} would run as a generic tiled nest inside the region, not as the"
                " microkernel it runs alone (3-6x slower than the traffic fusing saves)")
    smallest = region_tiling(plan, region, 1)
    need = shared_scratch_bytes(plan, region, smallest)
    if need <= SCRATCH_BUDGET:
        starved = starved_contraction(plan, region, smallest, target.lanes)
        if starved is not None:
            member, operand, size = starved
            return (f"in every tiling that fits the scratch budget, contraction member {member} would use each"
                    f" element of {operand} ({size:,} B, out of cache) fewer than {REUSE_LANES * target.lanes} times per read")
        return "no tiling of it fits the one-pass or the plain fused form"
    return (f"scratch {need:,} B per tile row (a tile of one along {region.tile_axis})"
            f" exceeds the {SCRATCH_BUDGET:,} B budget")


def blas_lost(plan: Plan, region: FusedRegion, views=None) -> tuple[str, ...]:
    """Contraction members of fused ``region`` that would call BLAS unfused (under Inference
    with BLAS available) but are tiled loop nests inside the region (``tiled_nest`` has no
    library body: a library call ignores tile ranges). Reported by ``explain``; weighing this
    loss against the fusion's saved traffic is the cost model's job, not greedy's."""
    if not region.is_fused:
        return ()
    views = views if views is not None else default_views(plan)
    target = Target(lanes=16, contract="inference", use_blas=True)
    return tuple(
        name for name in region.members
        if plan.kernel(name).fold is not None and not isinstance(lower_member(plan.kernel(name), views, target), MemberNest)
    )


def _region_canonical(plan: Plan, region: FusedRegion, extra: tuple) -> Canonical:
    return canonical_tiled_group(
        plan, region.members, region.private, region.anchor, region.anchor_axes, region.tile_maps, extra
    )


def region_fits(plan: Plan, target: Target, online_lowering=None):
    """``region_fit`` bound to ``plan`` and ``target``: the ``fits`` of ``choose_regions``.

    Answers are remembered per region and by the region's canonical form: a region asked
    again (the priced survey, then its policy) costs a lookup, and an identical candidate in
    another layer is not fitted again."""
    views = default_views(plan)
    answers: dict[tuple, str | None] = {}
    by_region: dict[tuple, str | None] = {}  # (anchor, members): the canonical key costs ~60 us

    def fits(region: FusedRegion) -> str | None:
        if not region.is_fused:
            return None
        asked = (region.anchor, region.members)
        if asked in by_region:
            return by_region[asked]
        key = _region_canonical(plan, region, ()).key
        answer = answers.get(key, answers)  # hashes the (large) key once
        if answer is answers:
            answer = answers[key] = region_fit(plan, region, target, online_lowering, views)
        by_region[asked] = answer
        return answer

    return fits


def lower_partition(
    plan: Plan, partition: Partition, target: Target, tile: int | None = None, online_lowering=None,
    tilings: dict[str, Tiling] | None = None, bodies: dict | None = None,
) -> LoweredPlan:
    """Every region of ``partition`` as one C function call, in execution order.

    ``online_lowering(plan, region, views, target, taken)`` may claim a region (the
    rescaled one-pass form under Inference) by returning a function, or None.
    A fused region that lowers neither way raises ``CompileError`` (choose the
    partition with ``fits=region_fits(...)`` so that it cannot happen). ``tilings`` (anchor ->
    ``Tiling``, the priced policy's choices) lowers those regions in the plain fused form
    with that tiling. ``bodies`` (anchor -> a matcher's proof, ``weft.decide.library``)
    lowers those regions as their library body (``weft.lower.library``). Regions with the
    same canonical form (and the same chosen tiling or body) are lowered once and share
    the function (``weft.lower.reuse``).
    """
    views = default_views(plan)
    taken: set[str] = set(view.pointer for view in views.values())
    shared = SharedLowering(views)
    functions = []
    for region in partition.regions:
        chosen = (tilings or {}).get(region.anchor)
        body = (bodies or {}).get(region.anchor)
        canonical = _region_canonical(
            plan, region, ("tile", tile, online_lowering is not None, _tiling_form(plan, region, chosen),
                           None if body is None else body.body))
        function = shared.lower(
            canonical, region.members, region.private,
            lambda region=region, chosen=chosen, body=body: _lower_one(
                plan, region, views, target, taken, tile, online_lowering, chosen, body),
        )
        functions.append(function)
    return LoweredPlan(functions=tuple(functions), buffers=plan.buffers, lanes=target.lanes, contract=target.contract)


def _tiling_form(plan: Plan, region: FusedRegion, tiling: Tiling | None) -> tuple | None:
    """A chosen tiling without names: (position of the anchor axis, extent, tile size) per axis."""
    if tiling is None:
        return None
    order = [axis.name for axis in plan.kernel(region.anchor).axes]
    return tuple((order.index(name), extent, size) for name, extent, size in tiling.axes)


def _lower_one(plan, region, views, target, taken, tile, online_lowering, chosen=None, body=None) -> LoweredFunction:
    function = None
    if body is not None and region.is_fused:
        function = lower_library(plan, region.members, body, views, taken, target.lanes, region.private)
    if function is None and region.is_fused and target.microkernel:  # a contraction and its elementwise tail
        function = lower_contraction_region(plan, region.members, region.outputs, views, target.lanes,
                                            target.contract, PARALLEL_MIN_WORK,
                                            lambda region=region: region_function_name(region, taken))
    if function is None and region.is_fused and online_lowering is not None and chosen is None:
        function = online_lowering(plan, region, views, target, taken)
    if function is None and region.is_fused:
        function = lower_region(plan, region, views, target, taken, tile, chosen)
    if function is None and region.is_fused:
        raise CompileError(
            f"plan {plan.name}: region {region.anchor} ({' '.join(region.members)}) cannot be lowered fused: "
            f"{region_fit(plan, region, target, online_lowering, views)}; choose the partition with "
            "fits=weft.lower.fused.region_fits(plan, target) so greedy takes a smaller candidate"
        )
    if function is None:
        function = lower_group(plan, region.members, views, target, taken)
    return function
