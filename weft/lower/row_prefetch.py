"""The next tile's streams prefetched while this tile computes (a row-wise chain).

A fused row chain (softmax, a norm) tiled one row at a time runs its members one after the
other on the row: the first reads the row from memory and computes next to nothing, the
others compute on the row in L1 and touch no memory, the last writes the row out. On one
core the memory then idles while the row computes, and the row's time is the sum of the
two instead of the larger (softmax 8192 x 1024, 1 thread: read and write 1.62 ms at the
copy bandwidth, the exps ~1.1 ms, the fused row loop ~2.9 ms). Two threads hide it by
running out of step; one thread needs the next row's reads issued while this row computes.

So each input the tile walks row by row (the logits, not a norm's weights) gets one software
prefetch per vector of one computing member, for the same position of the *next* tile's row,
data for the codegen to follow::

    for tile (row) r:
        m = max_j x[r, j]                              /* the first member: the read */
        for j: e[j] = exp(x[r, j] - m); prefetch(&x[r + 1, j])        /* the carrier of x */
        s = sum_j e[j]
        out[r, j] = e[j] / s

Carriers are the members after the first with a vector loop along the row's contiguous
axis; inputs go to them in turn, so the prefetches spread over the row's compute instead of
queueing in one phase. The outputs are not prefetched: a prefetch for writing (``prefetchw``)
of the next output row made a hand-written softmax row loop slower (2.44 -> 2.89 ms, 1 thread),
and the generated layer norm too (1.17x against main, loaded machine). Measured on the
generated softmax 8192 x 1024, 1 thread, per-call minimum interleaved with main at load ~3.9:
0.978 (p10 0.909); layer norm 1.002 (already ~94% of its floor at its best call). A prefetch
changes no value: outputs are the same bytes with and without it.

A member after the read that computes a transcendental (softmax's exps: compute-bound) finds
the row in L1 and reads each vector by one unaligned load (``MemberNest.l1_reads``) instead of
as a whole line (two loads and a permute, competing with the exps): softmax, 1 thread, against
main with both, 0.90-0.925 (p10 0.85-0.90). Layer norm's members, which compute little, lost
with plain loads (1.26x, inputs at +16 B), so they keep the line loads.
"""

from __future__ import annotations

import dataclasses
import math

from weft.ir import TRANSCENDENTAL, AxisIndex, Unary, walk_expr
from weft.lower.access import row_major_strides
from weft.lower.nest import BufferView, MemberNest, Prefetch
from weft.lower.values import Minimum, Product, Sum, Var


def carrier_axis(nest: MemberNest) -> tuple[str, int] | None:
    """The axis (and extent) along which ``nest`` runs whole vectors: its fold axis when its
    lanes run along the fold, else its vector axis when it does not fold."""
    kernel = nest.kernel
    if nest.fold_lanes and len(kernel.fold_axes) == 1:
        axis = kernel.fold_axes[0]
    elif kernel.fold is None and nest.vector_axis is not None:
        axis = next(a for a in kernel.axes if a.name == nest.vector_axis)
    else:
        return None
    return axis.name, axis.extent


def _transcendental(nest: MemberNest) -> bool:
    return any(isinstance(node, Unary) and node.op in TRANSCENDENTAL for node in walk_expr(nest.kernel.body))


def _streams(nests: tuple[MemberNest, ...], params: tuple[BufferView, ...], tile_axis: str, member_axes) -> list[tuple[BufferView, int]]:
    """(view, elements per row) of each input the tile walks one leading index at a time."""
    written = {nest.kernel.output for nest in nests}
    streams = []
    for view in params:
        if view.strides != row_major_strides(view.shape) or any(offset != 0 for offset in view.offsets):
            continue
        if len(view.shape) < 2 or view.dtype.itemsize != 4 or view.buffer in written:
            continue
        indexes = []
        for nest in nests:
            kernel = nest.kernel
            indexes += [(kernel.output, load.index) for load in kernel.loads if load.buffer == view.buffer]
        # every access indexes the leading dim by the member's own tiled axis
        if indexes and all(isinstance(index[0], AxisIndex) and member_axes(member).get(index[0].axis) == tile_axis
                           for member, index in indexes):
            streams.append((view, math.prod(view.shape[1:])))
    return streams


def _row_axis(nest: MemberNest, tiling, tile_axis: str) -> str | None:
    """The member's own loop axis that carries the tile's rows, when the nest runs it as an
    outer loop (one row per iteration): the row a carrier of a tile of rows prefetches from."""
    axes = [axis for axis, anchor in tiling.member_axes(nest.kernel.output).items() if anchor == tile_axis]
    return axes[0] if len(axes) == 1 and axes[0] in nest.outer_axes else None


def with_row_prefetch(nests: tuple, params: tuple[BufferView, ...], tiling, tile_variable: str,
                      contract: str) -> tuple:
    """``nests`` with the next tile's streams prefetched (module docstring), or unchanged when
    the region is not a row chain tiled along one leading index.

    A tile of one row prefetches the next row into L1 at the tile variable. A tile of ``S``
    rows (Strict's transposed folds take tiles of 16) has each carrier prefetch, at its own
    row ``r``, the same position of row ``r + S`` (the next tile's), into L2: the tile's first
    member then finds the next tile in L2 instead of waiting for memory while the rest of the
    tile computes (Strict softmax 8192 x 1024 in tiles of 16: 0.932 of the time without, at 1
    and 2 threads; Strict layer norm 0.966; the same bytes). Either contract: a prefetch
    changes no value."""
    if len(tiling.axes) != 1 or tiling.count < 2:
        return nests
    tile_axis, extent, size = tiling.axes[0]
    if not all(isinstance(nest, MemberNest) for nest in nests):
        return nests
    streams = _streams(nests, params, tile_axis, tiling.member_axes)
    carriers = []
    for position, nest in enumerate(nests):
        axis = carrier_axis(nest)
        if position == 0 or axis is None or axis[0] in tiling.member_axes(nest.kernel.output):
            continue
        row_axis = None if size == 1 else _row_axis(nest, tiling, tile_axis)
        if size == 1 or row_axis is not None:
            carriers.append((position, axis, row_axis))
    if not streams or not carriers:
        return nests
    if size == 1 and contract == "inference":  # a transcendental member after the read (compute-bound) loads plain vectors
        nests = [dataclasses.replace(nest, l1_reads=True) if position and _transcendental(nest) else nest
                 for position, nest in enumerate(nests)]
    nests = list(nests)
    for number, (view, row) in enumerate(streams):
        position, (axis, steps), row_axis = carriers[number % len(carriers)]
        if row % steps:
            continue
        following = Minimum(Sum(Var(tile_variable if row_axis is None else row_axis), size), extent - 1)
        prefetch = Prefetch(pointer=view.pointer, start=Product(following, row), axis=axis, extent=steps,
                            elements=row, row_axis=row_axis)
        nests[position] = dataclasses.replace(nests[position], prefetch=(*nests[position].prefetch, prefetch))
    return tuple(nests)
