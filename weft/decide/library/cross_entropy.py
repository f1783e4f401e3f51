"""Chunked cross-entropy with the vocabulary projection fused: matcher, region and price.

Matches the four members ``weft.nn.cross_entropy(weft.nn.linear(h, W), targets)`` emits
per row (class targets, no label smoothing, with or without ``ignore_index``)::

    logits[i, j] = sum_k h[i, k] * W[j, k]                (a contraction, W is (V, d))
    max[i]       = max_c logits[i, c]
    sumexp[i]    = sum_c exp(logits[i, c] - max[i])
    loss[i]      = where(t[i] == ignore, 0, (log(sumexp[i]) + max[i]) - logits[i, t'[i]])

checked by rebuilding the exact member bodies from the buffers it found and comparing
them with the plan's (nothing is assumed that the IR does not say). The body never
materialises the (N, V) logits: per block of rows, vocabulary chunks of logits in a small
scratch (the packed contraction microkernel), an online max and rescaled sum per row, the
target's logit picked on the way. It reorders the two row folds (online), so it is
Inference-only.

Growth cannot offer this region (the loss reads the logits through a gather, so no common
tile axis holds it), so the body *proposes* it (``propose_cross_entropy``) for the anchor
``loss``; the policy then prices it beside the grown candidates.
"""

from __future__ import annotations

import math

from weft.compose.regions import Region
from weft.decide.library.adam import LibraryMatch
from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Combiner,
    Const,
    DType,
    IndexOf,
    Load,
    Plan,
    Unary,
    UnaryOp,
    Where,
)

ROW_BLOCK = 128
"""Rows per work item: the weight is streamed once per block, the chunk's logits are
ROW_BLOCK x VOCAB_CHUNK floats (128 KiB) per thread."""

VOCAB_CHUNK = 256


def _loss_body(loss_axis: str, logits: str, row_max: str, total: str, targets: str, ignore, target_dtype):
    rows = (AxisIndex(loss_axis),)
    target = Load(targets, rows)
    lse = Binary(BinaryOp.ADD, Unary(UnaryOp.LOG, Load(total, rows)), Load(row_max, rows))
    if ignore is None:
        return Binary(BinaryOp.SUB, lse, Load(logits, rows + (IndexOf(target),)))
    ignored = Binary(BinaryOp.EQ, target, Const(int(ignore), target_dtype))
    safe = Where(ignored, Const(0, target_dtype), target)
    picked = Binary(BinaryOp.SUB, lse, Load(logits, rows + (IndexOf(safe),)))
    return Where(ignored, Const(0.0), picked)


def _ignore_index(body) -> tuple[bool, int | None]:
    """(understood, ignore index) of a loss body: a ``where(t == IGN, 0, ...)`` or a bare difference."""
    if isinstance(body, Where) and isinstance(body.condition, Binary) and body.condition.op is BinaryOp.EQ \
            and isinstance(body.condition.right, Const):
        return True, int(body.condition.right.value)
    return isinstance(body, Binary), None


def match_cross_entropy(plan: Plan, members: tuple[str, ...]) -> LibraryMatch | None:
    """A ``LibraryMatch`` for "chunked cross-entropy" when ``members`` are exactly
    (logits, max, sumexp, loss) as in the module doc, with the logits read by nothing else."""
    if len(members) != 4:
        return None
    logits_name, max_name, total_name, loss_name = members
    logits, row_max, total, loss = (plan.kernel(name) for name in members)
    if not logits.is_contraction or len(logits.axes) != 2 or logits.fold is None or len(logits.fold.axes) != 1:
        return None
    row_axis, column_axis = (axis.name for axis in logits.axes)
    fold_axis = logits.fold.axes[0].name
    body = logits.body
    if not (isinstance(body, Binary) and body.op is BinaryOp.MUL and isinstance(body.left, Load)
            and isinstance(body.right, Load)):
        return None
    hidden, weight = body.left.buffer, body.right.buffer
    if body.left.index != (AxisIndex(row_axis), AxisIndex(fold_axis)) or body.left.padding is not None:
        return None
    if body.right.index != (AxisIndex(column_axis), AxisIndex(fold_axis)) or body.right.padding is not None:
        return None
    if len(loss.axes) != 1 or loss.fold is not None or row_max.fold is None or total.fold is None:
        return None
    (row,), classes = (axis.name for axis in loss.axes), logits.axes[1].extent
    if [a.name for a in row_max.axes] != [row] or [a.name for a in total.axes] != [row]:
        return None
    if row_max.fold.combiner is not Combiner.MAX or total.fold.combiner is not Combiner.SUM:
        return None
    (fold,) = row_max.fold.axes
    if total.fold.axes != (fold,) or fold.extent != classes or loss.axes[0].extent != logits.axes[0].extent:
        return None
    at = (AxisIndex(row), AxisIndex(fold.name))
    if row_max.body != Load(logits_name, at):
        return None
    if total.body != Unary(UnaryOp.EXP, Binary(BinaryOp.SUB, Load(logits_name, at), Load(max_name, (AxisIndex(row),)))):
        return None
    understood, ignore = _ignore_index(loss.body)
    targets = next((load.buffer for load in loss.loads if load.buffer not in members), None)
    if not understood or targets is None:
        return None
    buffers = plan.buffer_map()
    target_dtype = buffers[targets].dtype
    if not target_dtype.is_int or buffers[targets].shape != (loss.axes[0].extent,):
        return None
    if loss.body != _loss_body(row, logits_name, max_name, total_name, targets, ignore, target_dtype):
        return None
    if any(buffers[name].dtype is not DType.FLOAT32 for name in (hidden, weight, *members)):
        return None
    readers = plan.readers()
    if set(readers.get(logits_name, ())) - {max_name, total_name, loss_name} or \
            set(readers.get(max_name, ())) - {total_name, loss_name} or set(readers.get(total_name, ())) - {loss_name}:
        return None
    if {logits_name, max_name, total_name} & set(plan.outputs):
        return None
    rows, dim = logits.axes[0].extent, logits.fold.axes[0].extent
    roles = (("hidden", hidden), ("weight", weight), ("targets", targets), ("loss", loss_name))
    constants = (("rows", float(rows)), ("classes", float(classes)), ("dim", float(dim)),
                 ("row_block", float(min(rows, ROW_BLOCK))), ("vocab_chunk", float(min(classes, VOCAB_CHUNK))),
                 ("ignore", float("nan") if ignore is None else float(ignore)))
    return LibraryMatch("chunked cross-entropy", roles, constants, (rows, classes), members)


def propose_cross_entropy(plan: Plan, anchor: str, available: frozenset[str]) -> Region | None:
    """The region (logits, max, sumexp, loss) for ``anchor`` = loss when it matches and all
    four members are still available; else None."""
    kernel = plan.kernel(anchor)
    if kernel.fold is not None or len(kernel.axes) != 1:
        return None
    reads = [load.buffer for load in kernel.loads]
    producers = [name for name in dict.fromkeys(reads) if name in available and name != anchor]
    logits = next((name for name in producers if plan.kernel(name).is_contraction), None)
    if logits is None:
        return None
    row_max = next((name for name in producers if name != logits and plan.kernel(name).fold is not None
                    and plan.kernel(name).fold.combiner is Combiner.MAX), None)
    total = next((name for name in producers if name not in (logits, row_max) and plan.kernel(name).fold is not None
                  and plan.kernel(name).fold.combiner is Combiner.SUM), None)
    if row_max is None or total is None:
        return None
    members = (logits, row_max, total, anchor)
    match = match_cross_entropy(plan, members)
    if match is None:
        return None
    row = kernel.axes[0].name
    logits_row = plan.kernel(logits).axes[0].name
    tile_axes = ((logits, logits_row), (row_max, row), (total, row), (anchor, row))
    inputs = tuple(dict.fromkeys((match.role("hidden"), match.role("weight"), match.role("targets"))))
    return Region(anchor=anchor, members=members, tile_axes=tile_axes, anchor_axes=(row,),
                  private=(logits, row_max, total), inputs=inputs, outputs=(anchor,),
                  tile_maps=((row, tile_axes),))


def price_cross_entropy(match: LibraryMatch, numbers, homes: dict[str, int] | None = None) -> float:
    """Cycles: the projection's FLOPs at the FMA peak of every thread's core (it runs on the
    contraction microkernel, priced so in ``weft.cost.model.price_contraction``), the weight
    streamed once per block of rows from memory, and one exp per logit (vectorised) for the
    online sum. ``homes`` is not read: the weight is re-streamed per block."""
    del homes
    rows, classes, dim = (int(match.constant(name)) for name in ("rows", "classes", "dim"))
    flops = 2.0 * rows * classes * dim
    compute = flops / max(numbers.fma_flops_per_cycle * numbers.threads, 1e-9)
    passes = math.ceil(rows / match.constant("row_block"))
    weight = passes * classes * dim * 4 / numbers.read_bytes_per_cycle[3]
    exps = rows * classes / max(numbers.lanes, 1) * numbers.exp_cycles / max(numbers.threads, 1)
    return max(compute, weight) + exps
