"""The contraction microkernel: one packed, register-blocked design for every contraction.

A member ``c[o...] = sum_k F(x(m..., k), y(n, k))`` whose body multiplies one
factor ``x`` that does not depend on the column axis ``n`` by one factor ``y``
that does not depend on the row axes ``m...`` is a contraction, whatever views
its operands are read through (window partitions, ``(out, in)`` weights,
permuted heads, grouped-query broadcast, padded or gathered reads): packing
evaluates each factor once per element into a contiguous panel, so the index map
costs one pass over the operand, never one per multiply. The description is data
(``ContractionNest``); ``weft.codegen.contraction`` writes its C.

Axes of the output, before/after (vit-block's fc1 over a (1, 72, 72, 1024) input)::

    mlp_linear[b0, b1, i, j] = sum_k norm2[b0, b1, i, k] * fc1_weight[j, k]
    ContractionNest(row_axes=(b0, b1, i) -> M = 5184, column_axis=j (N = 4096),
                    batch_axes=(), K = 1024, register tile 6 x 64, kc 256, mc 252, nc 1024)

so a linear over (B, T, C) is one GEMM over all leading axes, not B GEMMs; axes
both factors depend on (attention's batch and heads) are batch axes, iterated.

Loop structure (BLIS's loops; the parallel loop is over row blocks, or over
batch points when there are many)::

    for batch point:  for jc in N by nc:
        pack y[jc:jc+nc, all k] into nr-wide micro-panels                (threads share it)
        for row block ic in M by mc (parallel):  for pc in K by kc:
            pack x[ic:ic+mc, pc:pc+kc] into mr-row micro-panels
            for jr in nc by nr:  for ir in mc by mr:  mr x nr accumulators over kc steps

Strict: one accumulator per output, terms added in the oracle's order (``k``
ascending, the body's own operations per term, no FMA); between ``kc`` blocks
the partial sums wait in the output buffer (a float32 stored and reloaded is
exact), so the bytes equal the oracle's. Inference: a body that is a product of
the two factors and constants becomes one FMA per term, the constants multiplied
once into the result.

An **epilogue** (fusion's elementwise tail: bias, activation, residual, scale)
is an expression over ``acc_at(kernel)`` (the finished sum of one output point) and loads
at the output point; it runs on the register tile before the store, and the
nest then writes ``output`` (the tail's last member) instead of the contraction.
A **prologue** (elementwise producers of a factor: a norm's scale and shift, an
activation) is inlined into the factor, so packing evaluates it
(``weft.lower.contraction_prologue``). A y that reads only weights bound with
``params=`` is packed once at load into ``packed_y`` (``weft.lower.contraction_prepack``).
A large output written in one pass (``kc`` = K) is stored non-temporally.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from weft.cpu_caches import cache_sizes
from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Combiner,
    Const,
    DType,
    Expr,
    IndexAdd,
    IndexConst,
    IndexExpr,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    Kernel,
    Load,
    Unary,
    UnaryOp,
    expr_axes,
    expr_loads,
    index_axes,
)
from weft.ir.nodes import index_add, index_mul
from weft.lower.access import Access, address_step, load_access, unwrapped_step
from weft.lower.nest import AxisRange, BufferView

# Placeholders inside ``term`` and ``epilogue``: the packed factor values and the sum.
X_SLOT = Load("wf.x", ())
Y_SLOT = Load("wf.y", ())
ACC_BUFFER = "wf.acc"


def acc_at(kernel: Kernel) -> Load:
    """The finished sum at the output point, as the epilogue reads it (it varies with
    every output axis, so renderers treat it as a vector along the columns)."""
    return Load(ACC_BUFFER, tuple(AxisIndex(axis.name) for axis in kernel.axes))

# Axis names of a split column (``ColumnSplit``): which run of ``width`` columns, and where in it.
SPLIT_QUOTIENT, SPLIT_REMAINDER = "wf.q", "wf.r"


@dataclass(frozen=True, slots=True)
class ColumnSplit:
    """y reads the column axis ``p`` only as ``p // width`` and ``p % width``: a
    convolution's patch view of its input, whose columns are output pixels, ``width`` to
    an output row. ``load`` is y with those two replaced by ``SPLIT_QUOTIENT`` and
    ``SPLIT_REMAINDER`` (affine in the remainder, with a positive step where it moves).
    Packing walks a panel's columns as runs of one quotient: in each run the zero-padded
    halo is two zero fills and the rest one strided copy (no division per element)::

        patch[t, p] = x[c(t), (p // 56) + ky(t) - 1, (p % 56) + kx(t) - 1]   (padded)
        ColumnSplit(width=56, load=x[c(t), wf.q + ky(t) - 1, wf.r + kx(t) - 1])
    """

    width: int
    load: Load
    band: int = 1  # micro-panels a thread packs and multiplies at once (split_blocking)
    flat: bool = False  # the address is affine in the column itself (see below)

    # ``flat``: one quotient step moves the address as far as ``width`` remainder steps
    # (a stride-1 convolution whose padded width is the input's, a 1x1 one): then the
    # address is ``A + p * step`` over the whole panel, every dimension moves with only one
    # of quotient and remainder, and packing is one copy per micro-panel plus zeros where a
    # row (quotient) or a column (remainder) of the halo falls outside the input.


def split_blocking(split: ColumnSplit, blocking: Blocking, rows: int, columns: int, fold: int,
                   l2: int, batches: int) -> tuple[ColumnSplit, Blocking]:
    """A patch view's nest runs column bands, not row blocks: x (the weights, few rows) is
    packed once per call, whole, and each thread takes bands of ``band`` micro-panels of
    output pixels, packs that band of y into its own buffer (at most half of L2, so the
    band is still there for every row block) and multiplies every row over it: no barrier
    but the one after packing x, no y panel read back from L3. At least ``TARGET_ITEMS``
    bands and batch points together when the columns allow it."""
    panels = -(-columns // blocking.nr)
    fits = max(1, (l2 // 2) // (blocking.nr * fold * 4))
    balanced = max(1, -(-panels * batches // TARGET_ITEMS)) if panels * batches >= TARGET_ITEMS else 1
    band = max(1, min(fits, balanced, panels))
    mc = min(_row_block_cap(blocking, l2), -(-rows // blocking.mr) * blocking.mr)
    return dataclasses.replace(split, band=band), dataclasses.replace(
        blocking, mc=mc, nc=panels * blocking.nr, column_groups=1)


def _row_block_cap(blocking: Blocking, l2: int) -> int:
    """Rows of one packed x block (``mc x kc``) that take at most a quarter of L2."""
    return max(blocking.mr, (l2 // 4 // (blocking.kc * 4)) // blocking.mr * blocking.mr)


def _split_index(index: IndexExpr, column: str, width: list[int]) -> IndexExpr | None:
    """``index`` with ``column // w`` and ``column % w`` replaced by the split axes (one ``w``
    for the whole load, kept in ``width``); None if the column appears any other way."""
    match index:
        case IndexFloorDiv(AxisIndex(name), divisor) | IndexMod(AxisIndex(name), divisor) if name == column:
            if width and width[0] != divisor:
                return None
            width[:] = [divisor]
            return AxisIndex(SPLIT_QUOTIENT if isinstance(index, IndexFloorDiv) else SPLIT_REMAINDER)
        case AxisIndex(name):
            return None if name == column else index
        case IndexConst():
            return index
        case IndexAdd(left, right):
            a, b = _split_index(left, column, width), _split_index(right, column, width)
            return None if a is None or b is None else index_add(a, b)
        case IndexMul(operand, factor):
            inner = _split_index(operand, column, width)
            return None if inner is None else index_mul(inner, factor)
        case IndexFloorDiv(operand, divisor) | IndexMod(operand, divisor):
            inner = _split_index(operand, column, width)
            if inner is None or SPLIT_REMAINDER in index_axes(inner) or SPLIT_QUOTIENT in index_axes(inner):
                return None  # a division of the split axes: not affine in the remainder
            return index
    return None


def remainder_step(index: IndexExpr, axis: str = SPLIT_REMAINDER) -> int | None:
    """How much a split index moves per remainder (or quotient) step (None: not affine in it)."""
    analysed = unwrapped_step(index, axis)
    return None if analysed is None or analysed[1] else analysed[0]


def _flat(split: ColumnSplit, view: BufferView) -> bool:
    if any(offset != 0 for offset in view.offsets):
        return False
    along_r = [remainder_step(index) for index in split.load.index]
    along_q = [remainder_step(index, SPLIT_QUOTIENT) for index in split.load.index]
    if any(step is None or step < 0 for step in along_q) or any(r and q for r, q in zip(along_r, along_q, strict=True)):
        return False
    step_r = sum(r * stride for r, stride in zip(along_r, view.strides, strict=True))
    step_q = sum(q * stride for q, stride in zip(along_q, view.strides, strict=True))
    return step_r > 0 and step_q == split.width * step_r


def column_split(y: Expr, column: str) -> ColumnSplit | None:
    """The ``ColumnSplit`` of a y that is one plain (possibly padded) load reading ``column``
    only through one ``// width`` and ``% width`` pair, or None."""
    if not isinstance(y, Load) or not all(plain_index(index) for index in y.index):
        return None
    width: list[int] = []
    index = tuple(_split_index(position, column, width) for position in y.index)
    if not width or any(position is None for position in index):
        return None
    steps = [remainder_step(position) for position in index]
    if any(step is None or step < 0 for step in steps) or not any(steps):
        return None
    return ColumnSplit(width[0], Load(y.buffer, index, y.padding))


# Register tile: MICRO_ROWS rows x (MICRO_VECTORS x lanes) columns of accumulators,
# 6 x 4 = 24 of AVX-512's 32 registers, so each broadcast of x feeds four FMAs and each
# load of a y vector six (measured at M=1176, N=4096, K=1024, 1 thread, quiet machine:
# 222 GFLOP/s, against 192-266 GFLOP/s of independent FMA chains; see benchmarks/backend.py).
MICRO_ROWS = 6
MICRO_VECTORS = {16: 4, 8: 2, 4: 2}

# Smallest extents served (smaller shapes keep the plain nest: a matrix-vector
# product reads each weight once and has no reuse for a register tile to exploit).
MIN_ROWS = 2
MIN_COLUMNS_VECTORS = 1
MIN_FOLD = 4

# Up to this many nr-wide column panels, x is read in place when it can be (one load,
# unit-stride along the single fold axis): packing it would cost a pass over x per use
# that only this many micro-panels share (attention's probabilities x V has one panel).
DIRECT_X_MAX_PANELS = 4

# An output at least this large (a multiple of L3), written once (a single fold block: no
# partial sums reloaded), is stored with non-temporal stores: no read-for-ownership of
# lines that will never be read back from cache (attention's unfused q k^T: 144 x 576 x 576
# floats, 191 MB, written at up to the memory bandwidth at two threads).
STREAM_OUTPUT_L3_MULTIPLE = 2

# Batch points at which threads take whole batch points (attention's heads): no barrier at all.
BATCH_PARALLEL_MIN = 8

# Row blocks handed out per batch point and column block: enough that two threads
# (or a thread sharing its core) balance.
TARGET_ITEMS = 8


@functools.lru_cache(maxsize=1)
def _cache_sizes() -> tuple[int, int, int]:
    sizes = cache_sizes()
    return sizes.get("l1d") or 48 * 1024, sizes.get("l2") or 1024 * 1024, sizes.get("l3") or 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Blocking:
    """Panel sizes: ``kc`` fold steps per packed block of x, ``mc`` rows per packed row block
    (a multiple of ``mr``), ``nc`` columns per packed panel of y (a multiple of ``nr``, all
    fold steps), ``column_groups`` splits of a column panel among work items when rows are few."""

    mr: int
    nr: int
    kc: int
    mc: int
    nc: int
    column_groups: int
    parallel_batches: bool = False  # threads take whole batch points, each with its own panels


def choose_blocking(rows: int, columns: int, fold: int, lanes: int, l1d: int, l2: int, l3: int,
                    batches: int = 1) -> Blocking:
    """From the cache sizes (BLIS's analytic rules, simplified):

    - kc: an ``mr x kc`` micro-panel of x takes at most an eighth of L1 (it is read once
      per micro-tile while y's micro-panel streams);
    - mc: the packed ``mc x kc`` row block of x takes at most a quarter of L2, and at
      least TARGET_ITEMS row blocks exist when the rows allow it; their count is even (so
      two threads finish together: 5184 rows are 22 blocks of 240, not 21 of 252);
    - nc: y is packed for the whole fold at once (``fold x nc``: one barrier per column
      panel, not one per fold block: a thread that shares its core with another process
      stalls every barrier); the panel takes at most half of L3, or, when batch points
      run in parallel (each thread packs its own), at most L2.
    """
    mr, nr = MICRO_ROWS, MICRO_VECTORS.get(lanes, 2) * lanes
    kc = max(16, (l1d // (mr * 4 * 8)) // 16 * 16)
    kc = min(kc, fold)
    mc_cache = max(mr, (l2 // 4 // (kc * 4)) // mr * mr)
    all_columns = -(-columns // nr) * nr
    parallel_batches = batches >= BATCH_PARALLEL_MIN and fold * all_columns * 4 <= l2
    if parallel_batches:
        return Blocking(mr, nr, kc, min(mc_cache, -(-rows // mr) * mr), all_columns, 1, True)
    per_item = -(-rows // TARGET_ITEMS)
    mc = min(mc_cache, -(-per_item // mr) * mr)
    blocks = -(-rows // mc)
    if blocks > 1 and blocks % 2:  # an even count of near-equal row blocks: two threads (or four)
        blocks += 1                 # end together instead of one running the odd block alone
        per_block = -(-rows // blocks)
        mc = max(mr, -(-per_block // mr) * mr)
    nc = min(all_columns, max(nr, (l3 // 2 // (fold * 4)) // nr * nr))
    row_blocks = -(-rows // mc)
    panels = -(-nc // nr)
    column_groups = 1 if row_blocks >= TARGET_ITEMS else min(panels, -(-TARGET_ITEMS // row_blocks))
    return Blocking(mr, nr, kc, mc, nc, column_groups)


@dataclass(frozen=True, slots=True)
class ContractionNest:
    """A contraction run by the packed microkernel (module docstring).

    ``term`` is the body with the two factors replaced by ``X_SLOT`` / ``Y_SLOT``;
    ``fma`` (Inference only) says it is their product, times ``scale`` (the product of the
    body's constant factors, applied once per output). ``epilogue`` is None or an
    expression over ``acc_at(kernel)`` and loads at the output point; ``output`` is the buffer the
    nest writes (the contraction's own, or the epilogue's last member's).
    """

    kernel: Kernel
    x_factor: Expr
    y_factor: Expr
    term: Expr
    row_axes: tuple[str, ...]
    column_axis: str
    batch_axes: tuple[str, ...]
    blocking: Blocking
    views: tuple[BufferView, ...]
    contract: str
    lanes: int
    parallel: bool
    fma: bool = False
    scale: float = 1.0
    pack_x: bool = True  # False: x is one unit-stride load along the fold, read in place (few column panels)
    epilogue: Expr | None = None
    packed_y: BufferView | None = None  # y packed once at bind (weft.lower.contraction_prepack), read here
    stream_output: bool = False  # full tiles stored with non-temporal stores (see STREAM_OUTPUT_L3_MULTIPLE)
    output: str = ""
    members: tuple[str, ...] = ()  # every member this nest computes (the contraction first)
    prologue: tuple[str, ...] = ()  # fused producers of a factor, evaluated while packing it
    ranges: tuple[AxisRange, ...] = ()
    y_split: ColumnSplit | None = None  # y is a patch view: packed by runs of columns (ColumnSplit)

    @property
    def name(self) -> str:
        return self.output or self.kernel.output

    @property
    def output_buffer(self) -> str:
        return self.output or self.kernel.output

    def extent(self, axis: str) -> int:
        return next(a.extent for a in self.kernel.all_axes if a.name == axis)

    @property
    def rows(self) -> int:
        return math.prod(self.extent(a) for a in self.row_axes)

    @property
    def columns(self) -> int:
        return self.extent(self.column_axis)

    @property
    def fold_points(self) -> int:
        return math.prod(a.extent for a in self.kernel.fold_axes)

    @property
    def batch_points(self) -> int:
        return math.prod(self.extent(a) for a in self.batch_axes)

    def view(self, buffer: str) -> BufferView:
        for view in self.views:
            if view.buffer == buffer:
                return view
        raise KeyError(buffer)

    def describe(self) -> str:
        b = self.blocking
        batch = f"{self.batch_points} x " if self.batch_axes else ""
        kind = "FMA" if self.fma else "oracle order" if self.contract == "strict" else "terms"
        tail = f"; epilogue {' '.join(self.members[1:])}" if self.epilogue is not None else ""
        if self.prologue:
            tail = f"; prologue {' '.join(self.prologue)} while packing" + tail
        packing = "x, y packed" if self.pack_x else "y packed, x in place"
        if self.y_split is not None:
            runs = "one run" if self.y_split.flat else f"runs of {self.y_split.width} columns"
            packing = packing.replace("y packed", f"y packed by {runs}, bands of {self.y_split.band} panels")
        if self.packed_y is not None:
            packing = packing.replace("y packed", "y packed at bind")
        if self.stream_output:
            packing += "; streaming stores"
        text = (f"{self.name}: contraction microkernel {batch}{self.rows}x{self.columns}x{self.fold_points} "
                f"(rows {'*'.join(self.row_axes)}, columns {self.column_axis}); tile {b.mr}x{b.nr}, {kind}; {packing}; "
                f"kc {b.kc}, mc {b.mc}, nc {b.nc}{tail}; {'parallel' if self.parallel else 'serial'}")
        return text.replace("*/", "* /")


def _product_leaves(expr: Expr) -> list[Expr]:
    """Operands of a tree of multiplications, left to right."""
    if isinstance(expr, Binary) and expr.op is BinaryOp.MUL:
        return _product_leaves(expr.left) + _product_leaves(expr.right)
    return [expr]


def _replace(expr: Expr, old: Expr, new: Expr) -> Expr:
    if expr is old:
        return new
    if isinstance(expr, Binary):
        return Binary(expr.op, _replace(expr.left, old, new), _replace(expr.right, old, new))
    if isinstance(expr, Unary):
        return Unary(expr.op, _replace(expr.operand, old, new))
    return expr


def _term_ops_only(expr: Expr) -> bool:
    """The term (body over the two slots) uses float arithmetic the microkernel renders."""
    if expr is X_SLOT or expr is Y_SLOT:
        return True
    if isinstance(expr, Const):
        return expr.dtype is DType.FLOAT32
    if isinstance(expr, Binary):
        return expr.op in (BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL, BinaryOp.DIV) and \
            _term_ops_only(expr.left) and _term_ops_only(expr.right)
    if isinstance(expr, Unary):
        return expr.op is UnaryOp.NEG and _term_ops_only(expr.operand)
    return False


def _float_loads(expr: Expr, views: dict[str, BufferView]) -> bool:
    return all(views[load.buffer].dtype is DType.FLOAT32 for load in expr_loads(expr))


def split_contraction(kernel: Kernel, views: dict[str, BufferView]):
    """(x factor, y factor, term, row axes, column axis, batch axes) of a contraction, or None.

    The body's product operands must hold exactly two non-constant factors; the
    output's innermost axis must be read by exactly one of them (the column factor y).
    """
    fold = kernel.fold
    if fold is None or fold.combiner is not Combiner.SUM or views[kernel.output].dtype is not DType.FLOAT32:
        return None
    leaves = _product_leaves(kernel.body)
    factors = [leaf for leaf in leaves if not isinstance(leaf, Const)]
    if len(factors) != 2 or any(isinstance(leaf, Const) and leaf.dtype is not DType.FLOAT32 for leaf in leaves):
        return None
    output_axes = [a.name for a in kernel.axes]
    if not output_axes:
        return None
    column = output_axes[-1]
    first, second = factors
    uses = [expr_axes(f) & set(output_axes) for f in factors]
    if column in uses[0] and column not in uses[1]:
        y, x = first, second
    elif column in uses[1] and column not in uses[0]:
        x, y = first, second
    else:
        return None
    x_axes, y_axes = expr_axes(x), expr_axes(y)
    rows = tuple(a for a in output_axes if a in x_axes and a not in y_axes)
    if not rows or not _float_loads(x, views) or not _float_loads(y, views):
        return None
    batch = tuple(a for a in output_axes if a not in rows and a != column)
    term = _replace(_replace(kernel.body, x, X_SLOT), y, Y_SLOT)
    if not _term_ops_only(term):
        return None
    return x, y, term, rows, column, batch


def plain_index(index) -> bool:
    """No gather (``IndexOf``) anywhere in an index expression."""
    if isinstance(index, IndexOf):
        return False
    return all(plain_index(getattr(index, f)) for f in ("left", "right", "operand") if hasattr(index, f))


def _in_place_along_fold(kernel: Kernel, x: Expr, views: dict[str, BufferView]) -> bool:
    """x is a single plain load whose address steps by one element per fold step."""
    if not isinstance(x, Load) or x.padding is not None or len(kernel.fold_axes) != 1:
        return False
    if not all(plain_index(index) for index in x.index):
        return False
    return address_step(x, views[x.buffer].strides, kernel.fold_axes[0].name) == 1


def lower_contraction(kernel: Kernel, views: dict[str, BufferView], lanes: int, contract: str,
                      parallel_min_work: int, rewrite_factor=None) -> ContractionNest | None:
    """The microkernel nest for ``kernel``, or None when it is not a contraction it serves.
    ``rewrite_factor`` (a fused prologue, ``weft.lower.contraction_prologue``) maps each factor
    to what packing evaluates instead (None: refused)."""
    split = split_contraction(kernel, views)
    if split is None:
        return None
    x, y, term, rows, column, batch = split
    if rewrite_factor is not None:
        x, y = rewrite_factor(x), rewrite_factor(y)
        if x is None or y is None or not _float_loads(x, views) or not _float_loads(y, views):
            return None
    # the nest's kernel reads what the nest reads (the cost model and explain count its loads);
    # the body's own constant factors (Inference's scale) are still taken from ``kernel``
    nest_kernel = kernel if rewrite_factor is None else \
        dataclasses.replace(kernel, body=_replace(_replace(term, X_SLOT, x), Y_SLOT, y))
    output = views[kernel.output]
    if output.strides[[a.name for a in kernel.axes].index(column)] != 1:
        return None
    extents = {a.name: a.extent for a in kernel.all_axes}
    m = math.prod(extents[a] for a in rows)
    n, k = extents[column], math.prod(a.extent for a in kernel.fold_axes)
    if m < MIN_ROWS or n < MIN_COLUMNS_VECTORS * lanes or k < MIN_FOLD:
        return None
    batches = math.prod(extents[a] for a in batch)
    blocking = choose_blocking(m, n, k, lanes, *_cache_sizes(), batches=batches)
    fma = contract == "inference"  # the body is a product of the factors and constants
    scale = 1.0
    if fma:
        for leaf in _product_leaves(kernel.body):
            if isinstance(leaf, Const):
                scale *= float(leaf.value)
    # a patch view's nest packs x (its weights) once per call, whatever the columns (write_split)
    split = column_split(y, column) if not _column_contiguous(y, column, views) else None
    pack_x = split is not None or not (n <= DIRECT_X_MAX_PANELS * blocking.nr and _in_place_along_fold(kernel, x, views))
    if not pack_x:  # y is packed for the whole fold and x read in place: nothing to block k for,
        blocking = dataclasses.replace(blocking, kc=k)  # so the sums never leave the registers
    if split is not None:
        split = dataclasses.replace(split, flat=_flat(split, views[split.load.buffer]))
        split, blocking = split_blocking(split, blocking, m, n, k, _cache_sizes()[1], batches)
    touched = dict.fromkeys((kernel.output, *(load.buffer for load in expr_loads(x) + expr_loads(y))))
    work = m * n * k * batches
    output_bytes = m * n * batches * 4
    stream = blocking.kc >= k and lanes in (8, 16) and \
        output_bytes >= STREAM_OUTPUT_L3_MULTIPLE * _cache_sizes()[2]
    return ContractionNest(
        kernel=nest_kernel, x_factor=x, y_factor=y, term=term, row_axes=rows, column_axis=column, batch_axes=batch,
        blocking=blocking, views=tuple(views[name] for name in touched), contract=contract, lanes=lanes,
        parallel=work >= parallel_min_work, fma=fma, scale=scale, pack_x=pack_x, stream_output=stream, output=kernel.output, members=(kernel.output,),
        ranges=tuple(AxisRange(a.name, 0, a.extent) for a in kernel.axes),
        y_split=split,
    )


def _column_contiguous(y: Expr, column: str, views: dict[str, BufferView]) -> bool:
    """Some load of y steps by one element along the columns (packed by vector loads)."""
    return any(load_access(load, views[load.buffer].strides, column) is Access.CONTIGUOUS for load in expr_loads(y))

