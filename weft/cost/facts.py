"""What the cycle model reads from a lowered nest, as plain numbers (the adapter).

The model never reads C. It reads the structured fields of ``weft.lower.nest``:
the kernel (axes, fold, body), the vector axis and lanes, the register block
(``block_axis``, ``block_rows``, ``block_vectors``), fold lanes and accumulators,
``parallel``, and each view's strides (to tell contiguous, broadcast and gathered
accesses apart) and whether it points at tile-local scratch. Everything here is
derived once per region signature and cached by the caller; pricing a tiling is
then a formula over these numbers (``weft.cost.model``).

This module is the one place to update when the nest IR changes. Ranges and offsets
are loop values (``weft.lower.values``); the tiling is read from the tile loop
(``tile_sizes_of``), never from C.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from weft.ir import (
    Binary,
    BinaryOp,
    Cast,
    DType,
    Kernel,
    Unary,
    UnaryOp,
    Where,
    expr_axes,
    expr_children,
    index_axes,
)
from weft.lower.access import Access, address_step, has_index_of, load_access
from weft.lower.contraction import ContractionNest
from weft.lower.nest import GemmCall, LoweredFunction, MemberNest

ARITHMETIC = frozenset({
    BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL, BinaryOp.MAX, BinaryOp.MIN, BinaryOp.LT, BinaryOp.LE,
    BinaryOp.GT, BinaryOp.GE, BinaryOp.EQ, BinaryOp.NE, BinaryOp.AND, BinaryOp.OR,
})
TRANSCENDENTAL = {UnaryOp.EXP: "exp", UnaryOp.LOG: "log", UnaryOp.TANH: "exp", UnaryOp.ERF: "exp",
                  UnaryOp.SIGMOID: "exp", UnaryOp.SIN: "exp", UnaryOp.COS: "exp"}
DIVIDE_LIKE = frozenset({UnaryOp.SQRT, UnaryOp.RSQRT})


@dataclass(frozen=True, slots=True)
class OpCounts:
    """Operations per iteration point (vector-lane operations; a fold adds its combine)."""

    arithmetic: float = 0.0
    exp: float = 0.0
    log: float = 0.0
    divide: float = 0.0


@dataclass(frozen=True, slots=True)
class AccessFacts:
    """One load or store: which loop axes move its address, and how it sits in memory."""

    buffer: str
    itemsize: int
    axes: frozenset[str]
    unit_axis: str | None  # the axis along which the address advances by exactly one element
    scratch: bool  # tile-local scratch (private to a fused region)
    store: bool
    gather: bool  # moves with the vector axis but not contiguously: assembled lane by lane


@dataclass(frozen=True, slots=True)
class OperandFacts:
    """One buffer a contraction's factor (or its epilogue) reads: its bytes over the whole
    nest (its own axes' extents)."""

    buffer: str
    bytes: float


@dataclass(frozen=True, slots=True)
class ContractionFacts:
    """The microkernel's own structure (``weft.lower.contraction.ContractionNest``): extents,
    its blocking, what packing reads and evaluates, and the epilogue riding on the tile.

    ``x`` and ``y`` are the buffers each factor loads (after a prologue is inlined: the
    prologue's inputs); ``x_ops``/``y_ops`` what packing evaluates per packed element beyond
    the loads (a norm's scale and shift); ``epilogue_ops`` per output point, and
    ``epilogue_loads`` the buffers the epilogue reads at the output point (bias, residual).
    ``y_packing`` is how the codegen packs y (``weft.codegen.contraction``): "vector" (lanes
    along the columns, the factor evaluated per vector), "transposed" (a plain load along the
    fold: vectors transposed in registers) or "scalar" (element by element); x is always
    packed element by element (into mr-interleaved micro-panels)."""

    rows: int
    columns: int
    fold: int
    batches: int
    mr: int
    nr: int
    kc: int
    mc: int
    nc: int
    column_groups: int
    parallel_batches: bool
    pack_x: bool
    packed_y: bool
    stream_output: bool
    fma: bool
    x: tuple[OperandFacts, ...]
    y: tuple[OperandFacts, ...]
    x_ops: OpCounts
    y_ops: OpCounts
    y_packing: str
    output: str
    epilogue_ops: OpCounts
    epilogue_loads: tuple[OperandFacts, ...]


@dataclass(frozen=True, slots=True)
class NestFacts:
    """One member's nest. ``extents`` holds every axis (output and fold) of the kernel."""

    member: str
    extents: tuple[tuple[str, int], ...]
    output_axes: tuple[str, ...]
    fold_axes: tuple[str, ...]
    vector_axis: str | None  # the axis of the lanes (the innermost fold axis under fold lanes)
    span: int  # points of the vector axis in one register block
    block_axis: str | None
    block_rows: int
    lanes: int
    chains: int  # independent accumulation chains per fold step (latency bound of a fold)
    ops: OpCounts
    accesses: tuple[AccessFacts, ...]
    parallel: bool
    library: bool = False  # a BLAS call: compute at the measured GEMM rate
    fused_fma: bool = False
    blocks_per_item: int = 1  # vector blocks per work item (0: a whole row of them)
    transposed: bool = False  # strided loads read as lanes x lanes tiles transposed in registers
    shape: object | None = None  # its LoopShape, set by ``function_facts``
    contraction: ContractionFacts | None = None  # the microkernel: priced from its own blocking
    register_tile: tuple[int, int] = (0, 0)  # (rows, columns) of the microkernel's register tile it runs on
    packed_elements: float = 0.0  # elements its operands are packed by, one scalar copy each, per call
    transposed_elements: float = 0.0  # elements packed by lanes x lanes tiles transposed in registers, per call

    def extent(self, axis: str) -> int:
        return dict(self.extents)[axis]


@dataclass(frozen=True, slots=True)
class FunctionFacts:
    """One lowered function: its nests, and (fused) which axes its tile loop cuts.

    ``carried`` pairs each member axis with the anchor axis its tiles follow;
    ``scratch_bytes`` is the tile-local scratch of the lowering's own tiling, whose
    tile held ``scratch_points`` points of the tiled axes (scratch scales with it);
    ``prefetched`` the inputs whose rows for the *next* tile one of its nests prefetches
    while this tile computes (``weft.lower.row_prefetch``: a row chain tiled one row at a
    time, Inference), so their reads overlap the tile's in-core work (``weft.cost.model``).
    """

    name: str
    members: tuple[str, ...]
    nests: tuple[NestFacts, ...]
    fused: bool
    carried: tuple[tuple[str, str, str], ...] = ()  # (member, member axis, anchor axis)
    scratch_bytes: int = 0
    scratch_points: int = 1
    one_pass: bool = False
    prefetched: frozenset[str] = frozenset()  # buffers whose next tile a nest prefetches (MemberNest.prefetch)
    layout: TileLayout | None = field(default=None, compare=False, repr=False)  # derived: ``tile_layout``


@dataclass(frozen=True, slots=True)
class MemberTile:
    """One nest of a fused function, as every tiling sees it: its member axes the tile loop
    cuts, each with the anchor axis its tiles follow, and the buffers whose first touch in the
    tile is served where the tile fits (private scratch; ``True``: touched by an earlier nest
    of the tile, served where the tile fits or nearer)."""

    nest: NestFacts
    shape: LoopShape
    tiled: frozenset[str]
    carried: tuple[tuple[str, str], ...]  # (member axis, anchor axis)
    local: tuple[tuple[str, bool], ...]
    trips: tuple[int, ...]  # every loop's trips at the nest's own extents (0 where a tiling sets them)
    varying: tuple[tuple[int, str, int, int], ...]  # (loop, anchor axis, rule, n) of each loop a tiling cuts
    vector: tuple[str | None, int]  # the anchor its vector axis follows (None: not cut), and the axis' extent


@dataclass(frozen=True, slots=True)
class TileLayout:
    """What pricing a fused function reads before any tiling (``weft.cost.model``), derived
    once from its nests and ``carried``: the anchor axes (with their extents, in the order the
    nests carry them), each nest's ``MemberTile``, and each buffer's footprint in one tile as
    (bytes along its untiled axes, anchors of its tiled ones) per access: the tile's working
    set is the sum over buffers of the largest."""

    nests: tuple[NestFacts, ...]  # what it was derived from (``tile_layout`` checks it is current)
    carried: tuple[tuple[str, str, str], ...]
    anchors: tuple[tuple[str, int], ...]
    members: tuple[MemberTile, ...]
    footprints: tuple[tuple[tuple[int, tuple[str, ...]], ...], ...]
    # memo of each member's ``weft.cost.model.nest_plan``, per line size: no part of the value
    plans: dict = field(default_factory=dict, compare=False, repr=False)


def tile_layout(facts: FunctionFacts) -> TileLayout:
    """``facts.layout`` where it was derived from these nests, else derived now."""
    layout = facts.layout
    if layout is not None and layout.nests is facts.nests and layout.carried is facts.carried:
        return layout
    return derive_tile_layout(facts.nests, facts.carried)


def derive_tile_layout(nests: tuple[NestFacts, ...], carried: tuple[tuple[str, str, str], ...]) -> TileLayout:
    own_of: dict[str, dict[str, str]] = {}
    for member, axis, anchor in carried:
        own_of.setdefault(member, {})[axis] = anchor
    anchors: dict[str, int] = {}
    members = []
    footprints: dict[str, dict[tuple[int, tuple[str, ...]], None]] = {}
    seen: set[str] = set()
    for nest in nests:
        own = own_of.get(nest.member, {})
        extents = dict(nest.extents)
        for axis, anchor in own.items():
            anchors.setdefault(anchor, extents[axis])
        local: dict[str, bool] = {}
        for access in nest.accesses:
            axes = [axis for axis in access.axes if axis in extents]
            untiled = access.itemsize * math.prod(extents[axis] for axis in axes if axis not in own)
            entry = (untiled, tuple(sorted(own[axis] for axis in axes if axis in own)))
            footprints.setdefault(access.buffer, {})[entry] = None
            if access.buffer in seen:
                local[access.buffer] = True
            elif access.scratch:
                local.setdefault(access.buffer, False)
        seen.update(access.buffer for access in nest.accesses)
        tiled = frozenset(own)
        shape = nest.shape if nest.shape is not None and nest.shape.tiled == tiled else loop_shape(nest, tiled)
        trips = loop_trips(shape, extents.__getitem__, 0)
        varying = tuple((k + 1, own[axis], rule, n) for k, (axis, rule, n) in enumerate(shape.trip_rules)
                        if axis in own)
        for k, *_ in varying:
            trips[k] = 0
        vector = (own.get(nest.vector_axis), extents.get(nest.vector_axis, 0))
        members.append(MemberTile(nest, shape, tiled, tuple(own.items()), tuple(local.items()), tuple(trips), varying,
                                  vector))
    return TileLayout(nests, carried, tuple(anchors.items()), tuple(members),
                      tuple(_largest_untiled(tuple(entries)) for entries in footprints.values()))


def _largest_untiled(entries: tuple[tuple[int, tuple[str, ...]], ...]) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """The footprints of one buffer, those along no tiled axis reduced to their largest."""
    tiled = tuple(entry for entry in entries if entry[1])
    untiled = [size for size, anchors in entries if not anchors]
    return ((max(untiled), ()),) + tiled if untiled else tiled


def count_ops(kernel: Kernel, fused_fma: bool, reciprocal_axis: str | None = None) -> OpCounts:
    counted = expr_ops(kernel.body, reciprocal_axis)
    if kernel.fold is not None:
        return replace(counted, arithmetic=counted.arithmetic + (0 if fused_fma and kernel.is_contraction else 1))
    return counted


def expr_ops(expr, reciprocal_axis: str | None = None) -> OpCounts:
    """Vector operations of one evaluation of ``expr`` (loads and constants are free).

    ``reciprocal_axis``: the lanes' axis of a nest that divides by reciprocals
    (``MemberNest.reciprocal_divisors``): a division whose divisor does not move with it is
    one multiply per vector (its one scalar division per block is not counted)."""
    arithmetic = exp = log = divide = 0.0
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Binary):
            if node.op is BinaryOp.DIV and reciprocal_axis is not None \
                    and reciprocal_axis in expr_axes(node.left) and reciprocal_axis not in expr_axes(node.right):
                arithmetic += 1
            elif node.op is BinaryOp.DIV:
                divide += 1
            elif node.op in ARITHMETIC:
                arithmetic += 1
        elif isinstance(node, Unary):
            kind = TRANSCENDENTAL.get(node.op)
            if kind == "exp":
                exp += 1.5 if node.op is not UnaryOp.EXP else 1
            elif kind == "log":
                log += 1
            elif node.op in DIVIDE_LIKE:
                divide += 1
            else:
                arithmetic += 1
        elif isinstance(node, Where):
            arithmetic += 1
        elif isinstance(node, Cast):
            arithmetic += 0.5
        stack.extend(expr_children(node))
    return OpCounts(arithmetic, exp, log, divide)


VECTOR_PADDED = frozenset({DType.FLOAT32, DType.INT32})  # the dtypes the C loads padded by vectors


def _access(load, view, vector_axis: str | None, kernel_axes: tuple[str, ...], scratch: bool, store: bool) -> AccessFacts:
    axes = frozenset().union(*(index_axes(index) for index in load.index)) if load.index else frozenset()
    unit = next((axis for axis in reversed(kernel_axes) if axis in axes
                 and address_step(load, view.strides, axis) == 1), None)
    gather = vector_axis is not None and load_access(load, view.strides, vector_axis) is Access.GATHER
    if gather and load.padding is not None and view.dtype in VECTOR_PADDED \
            and address_step(load, view.strides, vector_axis) == 1 and not any(map(has_index_of, load.index)):
        gather = False  # a unit-stride halo read: one vector load wherever every lane is in range
    return AccessFacts(load.buffer, view.dtype.itemsize, axes, unit, scratch, store, gather)


def nest_facts(nest: MemberNest | GemmCall | ContractionNest, scratch_pointers: frozenset[str],
               contract: str) -> NestFacts:
    """The numbers of one nest (a BLAS call, and the contraction microkernel, are priced as a
    contraction at the GEMM rate; a microkernel's epilogue is not priced yet)."""
    from weft.ir import AxisIndex, Load, expr_loads

    kernel = nest.kernel
    fused_fma = contract == "inference" and kernel.is_contraction
    extents = tuple((axis.name, axis.extent) for axis in kernel.all_axes)
    names = tuple(name for name, _ in extents)
    if isinstance(nest, GemmCall):
        views = {view.buffer: view for view in (nest.a, nest.b, nest.c)}
        vector_axis, span, block_axis, rows, lanes, chains, parallel = kernel.axes[-1].name, 64, None, 1, 16, 24, True
    elif isinstance(nest, ContractionNest):
        views = {view.buffer: view for view in nest.views}
        b = nest.blocking
        vector_axis, span, block_axis, rows, lanes = nest.column_axis, b.nr, None, 1, nest.lanes
        chains, parallel = b.mr * b.nr // nest.lanes, nest.parallel
    else:
        views = {view.buffer: view for view in nest.views}
        lanes = nest.lanes
        if nest.fold_lanes:
            vector_axis = kernel.fold.axes[-1].name
            span, chains = lanes * nest.fold_accumulators, nest.fold_accumulators
        else:
            vector_axis = nest.vector_axis
            span = nest.block_vectors * lanes if vector_axis else 1
            chains = nest.block_rows * nest.block_vectors if vector_axis else nest.block_rows
        block_axis, rows, parallel = nest.block_axis, nest.block_rows, nest.parallel
    written = nest.output_buffer if isinstance(nest, ContractionNest) else kernel.output
    store = Load(written, tuple(AxisIndex(axis.name) for axis in kernel.axes))
    accesses = [_access(store, views[written], vector_axis, names, views[written].pointer in scratch_pointers, True)]
    loads = expr_loads(kernel.body)
    if isinstance(nest, ContractionNest) and nest.epilogue is not None:
        loads = [*loads, *(load for load in expr_loads(nest.epilogue) if load.buffer in views)]
    for load in dict.fromkeys(loads):
        view = views[load.buffer]
        accesses.append(_access(load, view, vector_axis, names, view.pointer in scratch_pointers, False))
    return NestFacts(
        member=kernel.output,
        extents=extents,
        output_axes=tuple(axis.name for axis in kernel.axes),
        fold_axes=tuple(axis.name for axis in kernel.fold_axes),
        vector_axis=vector_axis,
        span=max(1, span),
        block_axis=block_axis,
        block_rows=max(1, rows),
        lanes=lanes if vector_axis else 1,
        chains=max(1, chains),
        ops=count_ops(kernel, fused_fma, vector_axis if isinstance(nest, MemberNest) and nest.reciprocal_divisors
                      else None),
        accesses=tuple(accesses),
        parallel=parallel,
        library=isinstance(nest, GemmCall | ContractionNest),
        fused_fma=fused_fma,
        blocks_per_item=nest.blocks_per_item if isinstance(nest, MemberNest) else 0,
        transposed=isinstance(nest, MemberNest) and nest.transpose_fold,
        contraction=contraction_facts(nest, views) if isinstance(nest, ContractionNest) else None,
    )


def _operands(expr, views, kernel: Kernel) -> tuple[OperandFacts, ...]:
    """Each buffer ``expr`` loads, with its bytes over the nest (the extents of the axes its
    index moves with)."""
    from weft.ir import expr_loads

    extents = {axis.name: axis.extent for axis in kernel.all_axes}
    found: dict[str, float] = {}
    for load in expr_loads(expr):
        view = views.get(load.buffer)
        if view is None:  # the sum itself (an epilogue's acc)
            continue
        axes = frozenset().union(*(index_axes(index) for index in load.index)) if load.index else frozenset()
        size = float(view.dtype.itemsize)
        for axis in axes:
            size *= extents.get(axis, 1)
        found[load.buffer] = max(found.get(load.buffer, 0.0), size)
    return tuple(OperandFacts(buffer, size) for buffer, size in found.items())


def _y_packing(nest: ContractionNest, views) -> str:
    """How ``weft.codegen.contraction`` packs y (the same tests it makes)."""
    from weft.ir import Load, expr_loads

    column, y = nest.column_axis, nest.y_factor
    if any(load_access(load, views[load.buffer].strides, column) is Access.CONTIGUOUS for load in expr_loads(y)):
        return "vector"
    folds = nest.kernel.fold_axes
    if isinstance(y, Load) and y.padding is None and len(folds) == 1 and \
            address_step(y, views[y.buffer].strides, folds[0].name) == 1:
        return "transposed"
    return "scalar"


def contraction_facts(nest: ContractionNest, views) -> ContractionFacts:
    """The microkernel's numbers (see ``ContractionFacts``): packing evaluates each factor
    once per packed element, so a prologue's operations count per element of x, not per
    multiply; the epilogue's per output point."""
    kernel, b = nest.kernel, nest.blocking

    epilogue = nest.epilogue
    return ContractionFacts(
        rows=nest.rows, columns=nest.columns, fold=nest.fold_points, batches=nest.batch_points,
        mr=b.mr, nr=b.nr, kc=b.kc, mc=b.mc, nc=b.nc, column_groups=b.column_groups,
        parallel_batches=b.parallel_batches, pack_x=nest.pack_x, packed_y=nest.packed_y is not None,
        stream_output=nest.stream_output, fma=nest.fma,
        x=_operands(nest.x_factor, views, kernel), y=_operands(nest.y_factor, views, kernel),
        x_ops=expr_ops(nest.x_factor), y_ops=expr_ops(nest.y_factor), y_packing=_y_packing(nest, views),
        output=nest.output_buffer,
        epilogue_ops=expr_ops(epilogue) if epilogue is not None else OpCounts(),
        epilogue_loads=_operands(epilogue, views, kernel) if epilogue is not None else (),
    )


def _scores_packing(scores) -> tuple[float, float]:
    """(element by element, transposed in registers): the elements the one pass packs for its
    scores' register tile, per call (``weft.lower.online_scores``). K once, as whole key blocks
    (zeros past the pass axis): its full blocks by transposed tiles where its rows run along
    the fold (``PackedScores.k_transposed``), else element by element; Q once per tile, every
    query row by the fold, element by element (times the folded scale). Of the order of the
    FMAs when the pass axis is short (a 64-key window: K and Q are as many elements as 1/64 of
    the multiply-adds, which run 32 to a cycle). Grouped-query K (read as ``h // g``) is packed
    once per K/V head (``PackedScores.batch_points``), not once per query head; a concat's
    cache blocks (``y_plain``) by transposed tiles, the new key's block element by element."""
    keys = scores.batch_points * scores.panel_floats
    queries = math.prod(axis.extent for axis in scores.kernel.axes if axis.name != scores.column_axis) * scores.depth
    if not scores.k_transposed:
        return float(keys + queries), 0.0
    full = scores.batch_points * scores.plain_blocks * scores.block * scores.depth
    return float(keys - full + queries), float(full)


def _pass_nests(nest, private: frozenset[str], scratch_pointers: frozenset[str], contract: str) -> list[NestFacts]:
    """The one-pass form (``weft.lower.online.OnlinePass``): its streamed member nests (their
    blocks in scratch), then the reference fold and each dependent fold as a nest over the
    tile's rows x the pass axis. A dependent with an axis of its own (attention's output
    columns) keeps lanes along it and a group of rows in registers (each row of the shared
    operand loaded once per group); the others fold lanes along the pass axis. The dissolved
    members (the exp of the scores) are computed inline: one exp per point of the pass."""
    from dataclasses import replace

    rows = {axis for axis, _, _, _ in nest.rows}
    result = [nest_facts(streamed, scratch_pointers, contract) for streamed in nest.streamed_nests]
    if nest.scores is not None:  # the streamed contraction runs on the microkernel's register tile
        scores = nest.scores
        tile = (scores.rows, scores.block)
        scalar, transposed = _scores_packing(scores)
        packing = {"packed_elements": scalar, "transposed_elements": transposed}
        result = [replace(facts, library=True, register_tile=tile, **(packing if facts.member == scores.kernel.output else {}))
                  for facts in result]
    kernels = (nest.reference, *(dependent.kernel for dependent in nest.dependents))
    views = nest.local_views
    reference_reads = set(nest.reference.reads)
    for position, kernel in enumerate(kernels):
        own = [axis.name for axis in kernel.axes if axis.name not in rows]
        touched = tuple(views[name] for name in (kernel.output, *kernel.reads) if name in views)
        if len(touched) != 1 + len(kernel.reads):
            continue  # a buffer the pass keeps to itself: nothing to read
        if own:
            group_axis = next((axis.name for axis in reversed(kernel.axes) if axis.name in rows), None)
            fake = MemberNest(kernel=kernel, ranges=(), outer_axes=(), vector_axis=own[-1], lanes=nest.lanes,
                              block_axis=group_axis, block_rows=min(8, nest.row_count), block_vectors=1,
                              views=touched, parallel=False)
        else:
            fake = MemberNest(kernel=kernel, ranges=(), outer_axes=(), vector_axis=None, lanes=nest.lanes,
                              block_axis=None, block_rows=1, block_vectors=1, views=touched, parallel=False,
                              fold_lanes=kernel.fold is not None, fold_accumulators=4)
        facts = nest_facts(fake, scratch_pointers, contract)
        accesses = tuple(replace(a, scratch=a.scratch or a.buffer in private) for a in facts.accesses)
        if position and nest.pipelined:
            # a pipelined row pass reads each point from memory once, for the reference's fold;
            # the dependents fold the block before it, still in L1 (their loads: in-core work)
            accesses = tuple(a for a in accesses if a.store or a.buffer not in reference_reads)
        ops = facts.ops
        tile = nest.tile
        if tile is not None and nest.scores is not None and position == 1 + (tile.value_dependent or 0) and own:
            # the value dependent (attention's p x V) runs on the scores' register tile for every full block
            facts = replace(facts, library=True, register_tile=(nest.scores.rows, tile.chunk_vectors * nest.lanes))
        if position == 0 and nest.online.dissolved:
            ops = replace(ops, exp=ops.exp + 1.0, arithmetic=ops.arithmetic + 2.0)
        result.append(replace(facts, accesses=accesses, ops=ops))
    return result


TILE = "<tile>"


def nest_loops(nest: NestFacts, extent) -> list[tuple[str, int]]:
    """(axis, trips) outermost first; ``extent(axis)`` gives the points of an axis in one tile."""
    vector, block = nest.vector_axis, nest.block_axis
    loops = [(axis, extent(axis)) for axis in nest.output_axes if axis not in (vector, block)]
    if vector is not None and vector in nest.output_axes:
        loops.append((vector, -(-extent(vector) // nest.span)))
    if block is not None:
        loops.append((block, -(-extent(block) // nest.block_rows)))
    for axis in nest.fold_axes:
        loops.append((axis, -(-extent(axis) // nest.span) if axis == vector else extent(axis)))
    if block is not None:
        loops.append((block, min(nest.block_rows, extent(block))))
    if vector is not None:
        loops.append((vector, min(nest.span, extent(vector))))
    return loops


PLAIN, CEILING, AT_MOST = 0, 1, 2  # a loop's trips from its axis' extent e: e, ceil(e / n), min(n, e)


def trip_rules(nest: NestFacts) -> tuple[tuple[str, int, int], ...]:
    """``nest_loops`` as (axis, rule, n) per loop, outermost first, for ``loop_trips``."""
    vector, block = nest.vector_axis, nest.block_axis
    rules = [(axis, PLAIN, 0) for axis in nest.output_axes if axis not in (vector, block)]
    if vector is not None and vector in nest.output_axes:
        rules.append((vector, CEILING, nest.span))
    if block is not None:
        rules.append((block, CEILING, nest.block_rows))
    for axis in nest.fold_axes:
        rules.append((axis, CEILING, nest.span) if axis == vector else (axis, PLAIN, 0))
    if block is not None:
        rules.append((block, AT_MOST, nest.block_rows))
    if vector is not None:
        rules.append((vector, AT_MOST, nest.span))
    return tuple(rules)


def loop_trips(shape: LoopShape, extent, tile_count: int) -> list[int]:
    """The trips of every loop of ``shape``, the tile loop's ``tile_count`` first: ``nest_loops``
    from the rules ``loop_shape`` derived once."""
    trips = [tile_count]
    for axis, rule, n in shape.trip_rules:
        points = extent(axis)
        trips.append(points if rule == PLAIN else -(-points // n) if rule == CEILING else min(n, points))
    return trips


@dataclass(frozen=True, slots=True)
class AccessShape:
    """One access against a nest's loops (the tile loop first): which loops move it, which
    carries its unit stride, which its register block hoists it out of."""

    buffer: str
    itemsize: int
    moves: tuple[bool, ...]
    unit: tuple[bool, ...]
    counted: tuple[bool, ...]  # loops whose trips multiply the core's loads/stores of it
    scratch: bool
    store: bool
    gather: bool
    has_unit: bool
    # the same, as a price reads it (``weft.cost.model``): the loops that move it, innermost
    # first, each with whether it carries the unit stride; for each suffix of the loops k..
    # (k = 0 .. count), how many of those loops it holds (``inner_held``: k = 1 .. count); the
    # loops whose trips are counted in the core's loads and stores
    steps: tuple[tuple[int, bool], ...] = ()
    held: tuple[int, ...] = ()
    inner_held: tuple[int, ...] = ()
    counted_loops: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LoopShape:
    axes: tuple[str, ...]
    accesses: tuple[AccessShape, ...]
    register_from: int
    outer: int  # loops (after the tile loop) that enumerate work items
    vector_blocks: int  # position of the vector-block loop (-1: none)
    tiled: frozenset[str] = frozenset()
    trip_rules: tuple[tuple[str, int, int], ...] = ()  # ``nest_loops`` as data: see ``loop_trips``
    # memo of ``weft.cost.model.nest_plan`` at the nest's own extents, per line size: no part of the value
    plans: dict = field(default_factory=dict, compare=False, repr=False)


def loop_shape(nest: NestFacts, tiled: frozenset[str]) -> LoopShape:
    """The loop structure of ``nest`` (independent of extents; ``tiled``: its axes the tile loop
    cuts). ``function_facts`` derives it once per nest, so a price only multiplies trips."""
    axes = [TILE] + [axis for axis, _ in nest_loops(nest, lambda _axis: 1)]
    count = len(axes)
    register_from = count - (1 if nest.block_axis else 0) - (1 if nest.vector_axis else 0)
    fold = frozenset(nest.fold_axes)
    shapes = []
    for access in nest.accesses:
        moving = access.axes | ({TILE} if access.axes & tiled and not access.scratch else frozenset())
        moves = tuple(axis in moving for axis in axes)
        last = max((k for k in range(count) if moves[k]), default=-1)
        counted = tuple(
            k <= last and not (access.store and axes[k] in fold) and not (k >= register_from and not moves[k])
            for k in range(count)
        )
        unit = tuple(axis == access.unit_axis for axis in axes)
        steps = tuple((k, unit[k]) for k in range(count - 1, -1, -1) if moves[k])
        held = tuple(sum(moves[k:]) for k in range(count + 1))
        shapes.append(AccessShape(access.buffer, access.itemsize, moves, unit, counted, access.scratch, access.store,
                                   access.gather, access.unit_axis is not None, steps, held, held[1:],
                                   tuple(k for k in range(count) if counted[k])))
    outer = len([a for a in nest.output_axes if a not in (nest.vector_axis, nest.block_axis)])
    vector_blocks = 1 + outer if nest.vector_axis in nest.output_axes else -1
    return LoopShape(tuple(axes), tuple(shapes), register_from, outer, vector_blocks, tiled, trip_rules(nest))


def with_shapes(nests: list[NestFacts], carried: tuple[tuple[str, str, str], ...]) -> tuple[NestFacts, ...]:
    from dataclasses import replace

    return tuple(
        replace(nest, shape=loop_shape(nest, frozenset(axis for member, axis, _ in carried if member == nest.member)))
        for nest in nests
    )


def function_facts(function: LoweredFunction, contract: str, carried: tuple[tuple[str, str, str], ...] = (),
                   scratch_points: int = 1) -> FunctionFacts:
    """The facts of a lowered function (unfused members, or a fused region's tiled function)."""
    pointers = frozenset(s.pointer for s in function.scratch)
    nests: list[NestFacts] = []
    one_pass = False
    for nest in function.nests:
        if isinstance(nest, MemberNest | GemmCall | ContractionNest):
            nests.append(nest_facts(nest, pointers, contract))
        elif hasattr(nest, "streamed_nests") and hasattr(nest, "reference"):
            one_pass = True
            nests.extend(_pass_nests(nest, frozenset(function.private), pointers, contract))
        else:  # an unknown nest kind: nothing to read, so nothing priced (reported by the caller)
            raise TypeError(f"the cost model cannot read a {type(nest).__name__}")
    shaped = with_shapes(nests, carried if function.tile_loop is not None else ())
    return FunctionFacts(
        name=function.name,
        members=function.members,
        nests=shaped,
        fused=function.tile_loop is not None,
        carried=carried,
        scratch_bytes=sum(s.elements * s.dtype.itemsize for s in function.scratch),
        scratch_points=max(1, scratch_points),
        one_pass=one_pass,
        prefetched=_prefetched(function) if function.tile_loop is not None else frozenset(),
        layout=derive_tile_layout(shaped, carried) if function.tile_loop is not None else None,
    )


def _prefetched(function: LoweredFunction) -> frozenset[str]:
    """The buffers whose next tile some nest of ``function`` prefetches (by the pointers of
    ``MemberNest.prefetch``, named as the nests' views name them)."""
    members = [nest for nest in function.nests if isinstance(nest, MemberNest)]
    pointers = {prefetch.pointer for nest in members for prefetch in nest.prefetch}
    if not pointers:
        return frozenset()
    return frozenset(view.buffer for nest in members for view in nest.views if view.pointer in pointers)


def tile_sizes_of(function: LoweredFunction, carried: tuple[tuple[str, str, str], ...]) -> dict[str, int]:
    """anchor axis -> tile size the lowering chose, from the tiling its tile loop records
    (``TileLoop.tiles``): the anchor axes of ``carried`` cut into tiles smaller than the
    axis. Axes not found are whole (one tile)."""
    loop = function.tile_loop
    anchors = {anchor for _, _, anchor in carried}
    if loop is None:
        return {}
    return {axis: size for axis, extent, size in loop.tiles if axis in anchors and size < extent}
