"""The loop-nest IR: how a member (later a fused region) is executed.

A ``Kernel`` says *what* is computed; a ``MemberNest`` says *how*: which output
axis carries the vector lanes, which axis is register-blocked, which ranges of
the output axes this nest covers, and how each buffer is addressed. Renderers
(``weft.codegen`` for C) turn these values into code; they never decide.

Three hooks exist for fusion (``weft.compose``), all unused by the unfused path:

* ``AxisRange``: a nest may cover a sub-range ``[start, stop)`` of an output axis,
  where ``start``/``stop`` are loop values (``weft.lower.values``: e.g.
  ``Product(Var("wf_tile"), 32)`` and ``Sum(that, 32)``), so a member can run on one tile.
* ``BufferView``: a buffer may be re-mapped to tile-local scratch, a base pointer
  with per-dimension offsets (subtracted from each index) and strides.
* ``LoweredFunction.tile_loop``: a sequence of member nests may sit inside one
  outer tile loop; each nest then restricts its ranges using the tile variable.

Before/after, for ``y[i:4, j:10] = exp(x[i, j])`` with 16 lanes::

    Kernel(y, axes=(i:4, j:10), body=exp(x[i, j]))
    MemberNest(vector_axis=None, ...)   # j has 10 < 16 points: scalar columns
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.ir import Buffer, DType, Kernel, Load
from weft.lower.values import LoopValue


@dataclass(frozen=True, slots=True)
class AxisRange:
    """The points ``[start, stop)`` of one output axis that a nest covers (loop values)."""

    axis: str
    start: LoopValue
    stop: LoopValue


@dataclass(frozen=True, slots=True)
class BufferView:
    """How a nest addresses one buffer: ``pointer[sum((index_d - offsets_d) * strides_d)]``.

    ``pointer`` names the storage (a function parameter or a tile-local scratch array;
    an identifier chosen by the lowering, unique in its function); strides are in
    elements; ``offsets`` are loop values (``weft.lower.values``).
    """

    buffer: str
    pointer: str
    dtype: DType
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offsets: tuple[LoopValue, ...]


@dataclass(frozen=True, slots=True)
class Prefetch:
    """A software prefetch riding on a member's vector loop (``weft.lower.row_prefetch``): at
    each whole vector of ``axis`` (position ``p``, ``0 <= p < extent``) the lines of
    ``pointer[start + p + m * extent]`` for every ``m`` with ``m * extent < elements``, for
    reading. It changes no value. ``row_axis`` (a tile of several rows) names the member's
    own axis that ``start`` reads as ``Var(row_axis)``: the renderer puts the nest's loop
    variable of that axis there, and the lines go to L2, not L1 (a tile of rows does not
    fit L1 beside the tile being computed)."""

    pointer: str
    start: LoopValue
    axis: str
    extent: int
    elements: int
    row_axis: str | None = None


@dataclass(frozen=True, slots=True)
class MemberNest:
    """One member's loop nest.

    Work is split into *work items* (one per point of the outer axes times one per
    group of ``blocks_per_item`` blocks of ``block_vectors * lanes`` points of
    ``vector_axis``); the work-item loop is the parallel loop. Inside an item, ``block_axis`` (if any) advances
    ``block_rows`` at a time, and a fold runs innermost, ascending, with one
    accumulator per output point (per lane).
    """

    kernel: Kernel
    ranges: tuple[AxisRange, ...]
    outer_axes: tuple[str, ...]
    vector_axis: str | None
    lanes: int
    block_axis: str | None
    block_rows: int
    block_vectors: int
    views: tuple[BufferView, ...]
    parallel: bool
    fold_lanes: bool = False  # Inference: lanes along the innermost fold axis, reassociated
    fold_accumulators: int = 1  # with fold_lanes: independent vector accumulators per output
    packed: tuple[Load, ...] = ()  # loads copied per work item into a contiguous panel
    # (fold points x block of lanes): values independent of the block axis, reused by every row block
    blocks_per_item: int = 1  # vector blocks per work item (0: a whole row of them)
    fold_chunk: int = 0  # >0: the (single) fold axis runs in chunks of this many steps, outermost,
    # each chunk over every work item; accumulators wait in the output between chunks
    # (a float32 stored and reloaded is exact, so Strict order and bits are kept)
    transpose_fold: bool = False  # Strict-safe: loads strided along the lanes but unit-stride
    # along the innermost fold axis are read as lanes x lanes tiles and transposed in registers
    reciprocal_divisors: bool = False  # Inference: a float division by a value that does not move
    # with the lanes (a row's sum) multiplies by its reciprocal, one division per vector block
    staged: tuple[Load, ...] = ()  # fold lanes: loads copied once per thread into a buffer whose
    # lines meet the peeled weight stream's (the x of a matrix-vector product; weft.lower.fold_stream)
    prefetch: tuple[Prefetch, ...] = ()  # the next tile's streams, one prefetch per vector (weft.lower.row_prefetch)
    l1_reads: bool = False  # its reads are in L1 (an earlier member of the tile read them): a vector
    # is one unaligned load, not a whole-line read (two loads and a permute, which pay off only
    # against memory; weft.lower.row_prefetch)
    plain_max: bool = False  # Inference: its max's vector steps by compare-select (one max instruction),
    # where a NaN it may drop is NaN in every output anyway (weft.lower.row_max)

    @property
    def name(self) -> str:
        return self.kernel.output

    def describe(self) -> str:
        """One line: how this member runs (for reports and ``CompiledPlan.describe``)."""
        parts = []
        if self.fold_lanes:
            inner = self.kernel.fold.axes[-1].name
            parts.append(f"fold lanes along {inner} x{self.lanes}, {self.fold_accumulators} accumulators")
        elif self.vector_axis:
            parts.append(f"lanes along {self.vector_axis} x{self.lanes}, {self.block_vectors} vectors")
        else:
            parts.append("scalar")
        if self.block_axis:
            parts.append(f"rows of {self.block_axis} x{self.block_rows}")
        if self.transpose_fold:
            parts.append("transposed tiles")
        if self.reciprocal_divisors:
            parts.append("divides by a reciprocal")
        if self.packed:
            parts.append("packed " + ", ".join(load.buffer for load in self.packed))
        if self.staged:
            parts.append("staged " + ", ".join(load.buffer for load in self.staged))
        if self.fold_chunk:
            parts.append(f"fold in chunks of {self.fold_chunk}")
        if self.prefetch:
            parts.append("prefetches the next tile's " + ", ".join(p.pointer for p in self.prefetch))
        if self.l1_reads:
            parts.append("reads from L1")
        if self.plain_max:
            parts.append("compare-select max")
        parts.append("parallel" if self.parallel else "serial")
        return f"{self.kernel.output}: " + "; ".join(parts)

    def view(self, buffer: str) -> BufferView:
        for view in self.views:
            if view.buffer == buffer:
                return view
        raise KeyError(buffer)

    def axis_range(self, axis: str) -> AxisRange:
        for axis_range in self.ranges:
            if axis_range.axis == axis:
                return axis_range
        raise KeyError(axis)


@dataclass(frozen=True, slots=True)
class GemmCall:
    """A library body: ``C[m, n] = A[m, k] @ B[k, n]`` by SciPy's BLAS sgemm (Inference only).

    Row-major operands are passed to column-major sgemm as the transposed
    product (C^T = B^T A^T), the usual trick; ``batch`` repeats it over a leading
    axis with the given per-batch element strides.
    """

    kernel: Kernel
    a: BufferView
    b: BufferView
    c: BufferView
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    trans_a: bool
    trans_b: bool
    batch: int = 1
    batch_strides: tuple[int, int, int] = (0, 0, 0)

    @property
    def name(self) -> str:
        return self.kernel.output

    def describe(self) -> str:
        batch = f" x{self.batch} batches" if self.batch > 1 else ""
        return f"{self.kernel.output}: BLAS sgemm {self.m}x{self.n}x{self.k}{batch}"


@dataclass(frozen=True, slots=True)
class TileLoop:
    """An outer loop over tiles: ``for (tile = 0; tile < extent; tile += size)``.

    ``tiles`` records the tiling it enumerates: (anchor axis, extent, tile size) per
    axis, outermost first (``explain`` and the cost model read it; empty for a loop
    built by hand)."""

    variable: str
    extent: int
    size: int
    parallel: bool
    tiles: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Scratch:
    """A tile-local array declared inside a lowered function (fusion's private intermediates)."""

    pointer: str
    dtype: DType
    elements: int


@dataclass(frozen=True, slots=True)
class LoweredFunction:
    """One C function: the nests of a group of members, optionally inside a tile loop."""

    name: str
    members: tuple[str, ...]
    nests: tuple[MemberNest | GemmCall, ...]
    params: tuple[BufferView, ...]
    tile_loop: TileLoop | None = None
    scratch: tuple[Scratch, ...] = ()
    private: tuple[str, ...] = ()  # members whose output lives only in ``scratch`` (no arena space)
    # positions in ``params`` that may share memory (an output written over an input,
    # ``weft.lower.in_place``): those pointers are not ``restrict``
    aliased: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class LoweredPlan:
    """Every lowered function of a plan, in execution order, with the buffers they touch."""

    functions: tuple[LoweredFunction, ...]
    buffers: tuple[Buffer, ...]
    lanes: int
    contract: str
