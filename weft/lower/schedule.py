"""Choose a loop nest for each member: vector axis, register block, parallel loop.

The choices are made here, from the member and the target, and recorded in a
``MemberNest``; the C renderer only follows them.

Strict keeps every fold in the oracle's order, so lanes may only run along an
*output* axis (each lane is an independent output with its own ascending fold).
Matmul ``c[i, j] = sum_k a[i, k] * b[k, j]`` gets lanes along ``j`` (contiguous in
``b`` and ``c``), a block of rows along ``i`` (``a[i, k]`` is shared across the
lanes, ``b[k, j]`` across the rows) and ``k`` ascending innermost::

    work item = one block of block_vectors*lanes columns of j
      for i in blocks of block_rows:  acc[r][c] = 0;  for k: acc[r][c] += a[i+r,k] * b[k, j+c*L]
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    DType,
    Kernel,
    Load,
    Plan,
    expr_axes,
    expr_loads,
    walk_expr,
)
from weft.ir.canonical import canonical_group
from weft.lower.access import Access, address_step, load_access, row_major_strides, transposable
from weft.lower.contraction import lower_contraction
from weft.lower.fold_stream import staged_loads
from weft.lower.gemm import match_gemm
from weft.lower.nest import (
    AxisRange,
    BufferView,
    GemmCall,
    LoweredFunction,
    LoweredPlan,
    MemberNest,
)
from weft.lower.reuse import SharedLowering

# Work (output points x fold points) below which a nest runs on one thread: an
# OpenMP fork costs a few microseconds, more than a small member's whole run.
PARALLEL_MIN_WORK = 1 << 16

# Rows of the register block of a contraction (16-lane targets).
BLOCK_ROWS = 6


@dataclass(frozen=True, slots=True)
class Target:
    """What lowering needs to know of the machine and the contract."""

    lanes: int
    contract: str = "strict"
    use_blas: bool = False
    microkernel: bool = True  # contractions run by the packed microkernel (weft.lower.contraction)


def storage_name(name: str, taken: set[str]) -> str:
    """A storage name for a buffer (``layer0/q.1`` -> ``b_layer0_q_1``): letters, digits and
    ``_`` only, unique in ``taken``. A name, not code: codegen declares it as it sees fit."""
    base = "b_" + "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    candidate, suffix = base, 1
    while candidate in taken:
        suffix += 1
        candidate = f"{base}_{suffix}"
    taken.add(candidate)
    return candidate


def default_views(plan: Plan) -> dict[str, BufferView]:
    """Every buffer addressed in place, row-major, through its own pointer."""
    taken: set[str] = set()
    views = {}
    for buffer in plan.buffers:
        views[buffer.name] = BufferView(
            buffer=buffer.name,
            pointer=storage_name(buffer.name, taken),
            dtype=buffer.dtype,
            shape=buffer.shape,
            strides=row_major_strides(buffer.shape),
            offsets=(0,) * len(buffer.shape),
        )
    return views


def _vector_score(kernel: Kernel, axis: str, views: dict[str, BufferView]) -> int:
    """Contiguous accesses along ``axis`` count for it, gathers against it."""
    score = 0
    store = Load(kernel.output, tuple(AxisIndex(a.name) for a in kernel.axes))
    for load in (store, *expr_loads(kernel.body)):
        view = views[load.buffer]
        access = load_access(load, view.strides, axis)
        if access is Access.CONTIGUOUS and view.dtype.itemsize >= 4:
            score += 2 if load is store else 1
        elif access is Access.GATHER:
            score -= 1
    return score


def choose_vector_axis(kernel: Kernel, views: dict[str, BufferView], lanes: int) -> str | None:
    """The output axis with the best contiguous accesses and at least one full vector."""
    best, best_score = None, None
    for axis in kernel.axes:
        if axis.extent < lanes:
            continue
        score = _vector_score(kernel, axis.name, views)
        if best_score is None or score >= best_score:  # ties go to the inner axis
            best, best_score = axis.name, score
    return best


def choose_block_axis(kernel: Kernel, vector_axis: str | None, views: dict[str, BufferView]) -> str | None:
    """For a fold: an output axis some load does not depend on (its value is reused across rows)."""
    if kernel.fold is None or vector_axis is None:
        return None
    candidates = [a for a in kernel.axes if a.name != vector_axis and a.extent >= 2]
    for axis in reversed(candidates):
        loads = expr_loads(kernel.body)
        if any(address_step(load, views[load.buffer].strides, axis.name) == 0 for load in loads):
            return axis.name
    return None


def lower_member(kernel: Kernel, views: dict[str, BufferView], target: Target) -> MemberNest | GemmCall:
    """One member's nest (or a library body where the target allows it)."""
    if target.use_blas and target.contract == "inference":
        gemm = match_gemm(kernel, views)
        if gemm is not None:
            return gemm
    vector_axis = choose_vector_axis(kernel, views, target.lanes)
    fold_lanes = transpose_fold = False
    if kernel.fold is not None:
        inner = kernel.fold.axes[-1]
        loads = expr_loads(kernel.body)
        # fold lanes serve row reductions; a contraction with an output axis to block and
        # lanes along the other keeps register blocking and a packed panel instead
        blockable = kernel.is_contraction and choose_block_axis(kernel, vector_axis, views) is not None
        if target.contract == "inference" and inner.extent >= target.lanes and not blockable and (
            _contiguous_loads(loads, views, inner.name)
            > (_contiguous_loads(loads, views, vector_axis) if vector_axis else 0)
        ):
            fold_lanes, vector_axis = True, None
        elif vector_axis is not None and inner.extent >= target.lanes:
            transpose_fold = any(
                transposable(load, views[load.buffer].strides, vector_axis, inner.name)
                and views[load.buffer].dtype is DType.FLOAT32
                for load in loads
            )
    block_axis = choose_block_axis(kernel, vector_axis, views)
    if block_axis is not None:
        block_rows = min(BLOCK_ROWS if target.lanes >= 16 else 4, _extent(kernel, block_axis))
        block_vectors = 1 if transpose_fold else 2
    elif kernel.fold is not None:
        # a fold walking rows of a matrix (x @ W for one x, column sums) reads a strip of
        # block_vectors * lanes columns per row: wide strips keep each page visit long
        block_rows, block_vectors = 1, 1 if transpose_fold else 8
    else:
        block_rows, block_vectors = 1, 2
    packed = _packable(kernel, views, vector_axis, block_axis, block_rows, block_vectors * target.lanes)
    if packed:
        transpose_fold = False  # packed panels are already unit-stride along the lanes
        block_vectors = _packed_block_vectors(kernel, views, vector_axis, block_axis, block_rows, target.lanes)
        packed = _packable(kernel, views, vector_axis, block_axis, block_rows, block_vectors * target.lanes,
                           WIDE_PANEL_MAX_BYTES if block_vectors > NARROW_PACKED_BLOCK_VECTORS else PACK_MAX_BYTES)
    fold_chunk = _fold_chunk(kernel, views, vector_axis, block_axis, transpose_fold or fold_lanes)
    outer = tuple(a.name for a in kernel.axes if a.name not in (vector_axis, block_axis))
    outer_points = 1
    for axis in kernel.axes:
        if axis.name in outer:
            outer_points *= axis.extent
    work = 1
    for axis in kernel.all_axes:
        work *= axis.extent
    touched = (kernel.output, *kernel.reads)
    return MemberNest(
        kernel=kernel,
        ranges=tuple(AxisRange(a.name, 0, a.extent) for a in kernel.axes),
        outer_axes=outer,
        vector_axis=vector_axis,
        lanes=target.lanes,
        block_axis=block_axis,
        block_rows=block_rows,
        block_vectors=block_vectors,
        views=tuple(views[name] for name in touched),
        parallel=work >= PARALLEL_MIN_WORK,
        fold_lanes=fold_lanes,
        fold_accumulators=4 if fold_lanes else 1,
        transpose_fold=transpose_fold,
        reciprocal_divisors=target.contract == "inference" and lane_invariant_divisor(kernel.body, vector_axis),
        packed=packed,
        staged=staged_loads(kernel, views, target.lanes, outer) if fold_lanes and not fold_chunk else (),
        fold_chunk=fold_chunk,
        # a chunked fold reads each row in a few long runs (one per work item)
        blocks_per_item=(-(-_blocks(kernel, vector_axis, block_vectors * target.lanes) // 4) if fold_chunk
                         else _blocks_per_item(kernel, vector_axis, block_vectors * target.lanes, outer_points)),
    )


# A panel is worth packing when at least this many row blocks reuse it, and small
# enough to stay in L2 while they do.
PACK_MIN_REUSE = 4
PACK_MAX_BYTES = 512 * 1024


def _packable(kernel: Kernel, views: dict[str, BufferView], vector_axis: str | None, block_axis: str | None,
              block_rows: int, span: int, max_bytes: int = PACK_MAX_BYTES) -> tuple[Load, ...]:
    """Loads to copy into a per-work-item panel: independent of the block axis, moving with the lanes."""
    if kernel.fold is None or vector_axis is None or block_axis is None:
        return ()
    if _extent(kernel, block_axis) < PACK_MIN_REUSE * block_rows:
        return ()
    fold_points = 1
    for axis in kernel.fold.axes:
        fold_points *= axis.extent
    if fold_points * span * 4 > max_bytes:
        return ()
    chosen = []
    for load in dict.fromkeys(expr_loads(kernel.body)):
        view = views[load.buffer]
        if view.dtype is not DType.FLOAT32 or load.padding is not None:
            continue
        if address_step(load, view.strides, block_axis) != 0:
            continue
        if load_access(load, view.strides, vector_axis) is Access.BROADCAST:
            continue
        chosen.append(load)
    return tuple(chosen)


# A packed contraction's register block is BLOCK_ROWS x PACKED_BLOCK_VECTORS vector
# accumulators: 6 x 4 = 24 of AVX-512's 32 registers, so each broadcast of a[i, k] feeds
# four multiplies and each panel load six (measured at 1024^3, Strict, 1 thread, on the
# 16-lane EPYC: 6x2 74 GFLOP/s, 6x4 88, 5x4 87, 8x3 81, NumPy 98). The wider panel
# (fold x 64 floats) may take up to WIDE_PANEL_MAX_BYTES, about the L2 (4096^3: 6x4 with
# a 1 MiB panel 80 GFLOP/s, 6x2 with 512 KiB 73, unpacked 6x4 50); past that, and for
# narrow or ragged lane extents (a 64-wide block would leave single-vector tails), 2.
PACKED_BLOCK_VECTORS = 4
NARROW_PACKED_BLOCK_VECTORS = 2
WIDE_PANEL_MAX_BYTES = 1024 * 1024


def _packed_block_vectors(kernel: Kernel, views: dict[str, BufferView], vector_axis: str, block_axis: str,
                          block_rows: int, lanes: int) -> int:
    wide = PACKED_BLOCK_VECTORS
    span = wide * lanes
    extent = _extent(kernel, vector_axis)
    fold_points = 1
    for axis in kernel.fold.axes:
        fold_points *= axis.extent
    if (
        lanes >= 16 and wide > NARROW_PACKED_BLOCK_VECTORS and extent >= span
        and (extent % span == 0 or extent >= 8 * span)
        and fold_points * span * 4 <= WIDE_PANEL_MAX_BYTES
        and _packable(kernel, views, vector_axis, block_axis, block_rows, span, WIDE_PANEL_MAX_BYTES)
    ):
        return wide
    return NARROW_PACKED_BLOCK_VECTORS


def _contiguous_loads(loads, views: dict[str, BufferView], axis: str) -> int:
    return sum(
        load_access(load, views[load.buffer].strides, axis) is Access.CONTIGUOUS
        and views[load.buffer].dtype.itemsize == 4
        for load in loads
    )


# About this many work items per nest: enough to balance threads (a guided schedule),
# few enough that decoding an item costs nothing next to its work.
WORK_ITEMS = 256


def _blocks_per_item(kernel: Kernel, vector_axis: str | None, span: int, outer_points: int) -> int:
    """Vector blocks per work item: a whole row of them (0) when the outer axes alone give
    enough items, else as many as keep the item count near WORK_ITEMS."""
    if vector_axis is None or outer_points >= WORK_ITEMS // 4:
        return 0
    blocks = -(-_extent(kernel, vector_axis) // span)
    return max(1, -(-blocks * outer_points // WORK_ITEMS))


FOLD_CHUNK = 128
FOLD_CHUNK_MIN_STRIDE = 256  # elements between consecutive fold steps of some load


def _fold_chunk(kernel: Kernel, views: dict[str, BufferView], vector_axis: str | None, block_axis: str | None,
                special: bool) -> int:
    """Chunk a fold that walks down the rows of a matrix (one-row x @ W, column sums): each
    chunk's rows are then read whole, page by page, across all work items."""
    fold = kernel.fold
    if fold is None or special or block_axis is not None or vector_axis is None or len(fold.axes) != 1:
        return 0
    if fold.axes[0].extent < 2 * FOLD_CHUNK or kernel.axes[-1].name != vector_axis:
        return 0
    strides = [address_step(load, views[load.buffer].strides, fold.axes[0].name) for load in expr_loads(kernel.body)]
    if not any(step is not None and abs(step) >= FOLD_CHUNK_MIN_STRIDE for step in strides):
        return 0
    return FOLD_CHUNK


def _blocks(kernel: Kernel, vector_axis: str, span: int) -> int:
    return -(-_extent(kernel, vector_axis) // span)


def _extent(kernel: Kernel, axis: str) -> int:
    return next(a.extent for a in kernel.axes if a.name == axis)


def lower_unfused(kernel: Kernel, views: dict[str, BufferView], target: Target):
    """A member on its own: a BLAS call where asked for (``use_blas``), else the contraction
    microkernel where it serves, else ``lower_member``."""
    if target.use_blas and target.contract == "inference":
        gemm = match_gemm(kernel, views)
        if gemm is not None:
            return gemm
    if target.microkernel:
        nest = lower_contraction(kernel, views, target.lanes, target.contract, PARALLEL_MIN_WORK)
        if nest is not None:
            return nest
    return lower_member(kernel, views, target)


def _function_name(members: tuple[str, ...], taken: set[str]) -> str:
    return "k" + storage_name("_".join(members)[:48], taken)[1:]


def lower_group(
    plan: Plan, group: tuple[str, ...], views: dict[str, BufferView], target: Target, taken: set[str]
) -> LoweredFunction:
    """Members of one group, run one after another inside one C function (no tile loop)."""
    kernels = [plan.kernel(name) for name in group]
    nests = tuple(lower_unfused(kernel, views, target) for kernel in kernels)
    params: dict[str, BufferView] = {}
    for nest in nests:
        touched = (nest.a, nest.b, nest.c) if isinstance(nest, GemmCall) else nest.views
        for view in touched:
            params.setdefault(view.buffer, view)
    return LoweredFunction(
        name=_function_name(group, taken), members=group, nests=nests, params=tuple(params.values())
    )


def lower_plan(plan: Plan, groups: tuple[tuple[str, ...], ...] | None, target: Target) -> LoweredPlan:
    """The seam between composition and code generation.

    ``groups`` lists member names lowered together into one C function, in
    execution order; ``None`` means unfused (one member per group).
    """
    if groups is None:
        groups = tuple((kernel.output,) for kernel in plan.kernels)
    views = default_views(plan)
    taken: set[str] = set()
    shared = SharedLowering(views)  # identical groups (every layer's) share one function
    functions = tuple(
        shared.lower(canonical_group(plan, tuple(group)), tuple(group), (),
                     lambda group=group: lower_group(plan, tuple(group), views, target, taken))
        for group in groups
    )
    return LoweredPlan(functions=functions, buffers=plan.buffers, lanes=target.lanes, contract=target.contract)


def plan_buffers(plan: Plan) -> dict[str, Buffer]:
    return plan.buffer_map()


def lane_invariant_divisor(body, vector_axis: str | None) -> bool:
    """Whether ``body`` divides float lanes by a value that does not move with ``vector_axis``
    (softmax's normalise by its row sum): under Inference a multiply by one reciprocal."""
    if vector_axis is None:
        return False
    return any(isinstance(node, Binary) and node.op is BinaryOp.DIV and vector_axis in expr_axes(node.left)
               and vector_axis not in expr_axes(node.right) for node in walk_expr(body))
