"""The streams of a fold-laned contraction (decode's matrix-vector products, Inference).

``y[i, j] = sum_k x[i, k] * w[j, k]`` with lanes along ``k``: the weight ``w`` is the
*stream* (read once, from memory), ``x`` is re-read for every row ``j``. The renderer
peels each row to the first 64-byte line of the stream (``weft.codegen.fold_lanes``);
``x`` then starts at another point of its line, and every vector of it is split across
two lines. A *staged* load is copied, once per thread (again only when the outer axes it
reads change), into a buffer shifted so that its vectors start on a line wherever the
stream's do::

    stage[(lanes - k0) % lanes + k] = x[i, k]      k0: the stream's peel (the same every row)
    y[i, j] = sum_k stage[... + k] * w[j, k]       both read as whole lines

Measured on the 16-lane EPYC (4864 x 896 weights from memory, 1 thread, 16-byte-offset
NumPy weights): split x vectors 34-35 GB/s, staged x 40-41 GB/s, a plain read stream 40 GB/s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from weft.ir import DType, Kernel, Load, expr_loads, index_axes
from weft.lower.access import address_step, has_index_of
from weft.lower.nest import BufferView

# A fold-laned contraction peels to a 64-byte line only over folds of at least this many
# vectors (4864 x 896 from L3, 1 thread, 16-byte-offset weights: 245 us unaligned, 151 us
# aligned, on the 16-lane EPYC). Row reductions streaming from memory (softmax's max,
# layer norm's mean) do not peel: there the peel measured 10-15% slower.
FOLD_LANE_PEEL_MIN_VECTORS = 8


def _unit_stride_reads(kernel: Kernel, views: Mapping[str, BufferView], fold_axis: str,
                       exclude=()) -> list[Load]:
    reads = []
    for load in dict.fromkeys(expr_loads(kernel.body)):
        view = views[load.buffer]
        if view.dtype is not DType.FLOAT32 or load.padding is not None or load in exclude:
            continue
        if address_step(load, view.strides, fold_axis) == 1:
            reads.append(load)
    return reads


def peeled_stream(kernel: Kernel, views: Mapping[str, BufferView], lanes: int, exclude=()) -> Load | None:
    """The load a fold-laned contraction's peel aligns: the largest float32 buffer read
    unit-stride along the innermost fold axis; None when the member is no contraction or
    its fold is too short for the peel to pay."""
    fold_axis = kernel.fold_axes[-1]
    if not kernel.is_contraction or fold_axis.extent < FOLD_LANE_PEEL_MIN_VECTORS * lanes:
        return None
    reads = _unit_stride_reads(kernel, views, fold_axis.name, exclude)
    if not reads:
        return None
    return max(reads, key=lambda load: math.prod(views[load.buffer].shape))  # the first of the largest


def _gathers(load: Load) -> bool:
    return any(map(has_index_of, load.index))


def staged_loads(kernel: Kernel, views: Mapping[str, BufferView], lanes: int,
                 outer_axes: tuple[str, ...]) -> tuple[Load, ...]:
    """Loads of a fold-laned contraction worth staging (module docstring): float32, moving
    with the one fold axis, not reading the work items' fastest axis (the rows of the stream),
    where the stream's rows all start at the same point of a line (its row step a multiple of
    the lanes), so one staged copy serves every row. The copy is made element by element, so
    any index map of x (a reshape of attention's heads, a slice) is staged as one contiguous
    run: the vector loops then read it as whole lines."""
    if kernel.fold is None or len(kernel.fold_axes) != 1 or not outer_axes:
        return ()
    if views[kernel.output].dtype is not DType.FLOAT32:
        return ()
    stream = peeled_stream(kernel, views, lanes)
    if stream is None or _gathers(stream):
        return ()
    rows = outer_axes[-1]
    step = address_step(stream, views[stream.buffer].strides, rows)
    if not step or step % lanes:
        return ()
    fold_axis = kernel.fold_axes[0].name
    staged = []
    for load in dict.fromkeys(expr_loads(kernel.body)):
        axes = set().union(*map(index_axes, load.index))
        if (load != stream and views[load.buffer].dtype is DType.FLOAT32 and fold_axis in axes
                and rows not in axes and not _gathers(load)):
            staged.append(load)
    return tuple(staged)
