"""A row chain's max folded by compare-select where a NaN it drops still reaches every output
(Inference; softmax's ``max_j x[r, j]``).

The oracle's max propagates NaN (``a > b or a is NaN ? a : b``): per vector two compares, a
mask or and a select, on the accumulator's dependency chain. The compare-select ``a > b ? a : b``
is one max instruction (``wfc_pmax_f``) and gives the same bits wherever no term is NaN; a NaN
term it may drop. In softmax that cannot be seen::

    m[r] = max_j x[r, j]                 /* private: read only by the exps */
    e[r, j] = exp(x[r, j] - m[r])        /* private: a NaN x[r, j] is a NaN e[r, j] */
    s[r] = sum_j e[r, j]                 /* private: over the max's whole row: then NaN */
    out[r, j] = e[r, j] / s[r]           /* NaN in every point of the row, as the oracle's */

so the row's outputs are the oracle's wherever a term is NaN too (all NaN), and the same bits
otherwise. The rule admits exactly that form, rows along the last axis, every read at the
reader's own point (``x[i, j]`` in the exps, ``m[i]``, ``e[i, r]`` in the sum, ``e[i, j]`` and
``s[i]`` in the divide): a max over the last axis of a plain load, private, whose every reader
is ``exp(that buffer - max)``, private, whose every reader is either a sum of it over the row,
private and read only by divides, or ``exps / sum`` (or ``*``).

Softmax 8192 x 1024 generated C, hand-edited, 1 thread, side by side in one process (inputs
at +16 B): the max pass was a third of the row's in-core time (a row in L2: 0.656 of the
chain's time without it); compare-select: 0.822 in L2, 0.842 from memory, and 0.80 with the
plain loads of ``with_plain_max`` (README, h28-rows1).
"""

from __future__ import annotations

import dataclasses

from weft.ir import AxisIndex, Binary, BinaryOp, Combiner, Load, Unary, UnaryOp
from weft.lower.nest import MemberNest


def _at(expr, buffer: str, axes) -> bool:
    """``expr`` reads ``buffer`` at exactly the point ``axes`` (one axis per dimension, in order)."""
    return (isinstance(expr, Load) and expr.padding is None and expr.buffer == buffer
            and expr.index == tuple(AxisIndex(axis.name) for axis in axes))


def _extents(axes) -> tuple[int, ...]:
    return tuple(axis.extent for axis in axes)


def _row_fold(kernel, combiner: Combiner) -> bool:
    """A fold of ``combiner`` over one axis, its body read at (output axes, fold axis)."""
    fold = kernel.fold
    return (fold is not None and fold.combiner is combiner and len(kernel.fold_axes) == 1
            and isinstance(kernel.body, Load) and _at(kernel.body, kernel.body.buffer, kernel.all_axes))


def _exp_of_shift(kernel, source: str, maximum) -> bool:
    """``exp(source[i, j] - maximum[i])`` over (i, j) = the max's (output axes, fold axis)."""
    body, axes = kernel.body, kernel.axes
    return (kernel.fold is None and isinstance(body, Unary) and body.op is UnaryOp.EXP
            and isinstance(body.operand, Binary) and body.operand.op is BinaryOp.SUB
            and _extents(axes) == _extents(maximum.all_axes)
            and _at(body.operand.left, source, axes) and _at(body.operand.right, maximum.output, axes[:-1]))


def plain_max_members(nests: tuple[MemberNest, ...], private: tuple[str, ...]) -> set[str]:
    """Members of a row chain whose max may fold by compare-select (module doc)."""
    kernels = {nest.name: nest.kernel for nest in nests}
    readers: dict[str, list] = {name: [] for name in kernels}
    for kernel in kernels.values():
        for buffer in {load.buffer for load in kernel.loads}:
            if buffer in readers:
                readers[buffer].append(kernel)
    chosen = set()
    for name, kernel in kernels.items():
        if not _row_fold(kernel, Combiner.MAX) or name not in private:
            continue
        exps = readers[name]
        if exps and all(_exp_of_shift(e, kernel.body.buffer, kernel) and e.output in private
                        and _reaches_every_output(e, readers, private) for e in exps):
            chosen.add(name)
    return chosen


def _reaches_every_output(exps, readers, private: tuple[str, ...]) -> bool:
    """Every reader of ``exps`` is a sum of it over its rows (private, read only by divides) or
    ``exps[i, j] / sum[i]``: a NaN anywhere in a row of ``exps`` is NaN in each output point."""
    sums = [k for k in readers[exps.output] if k.fold is not None]
    outputs = [k for k in readers[exps.output] if k.fold is None]
    if not sums or not outputs:
        return False
    for total in sums:
        if (not _row_fold(total, Combiner.SUM) or total.body.buffer != exps.output or total.output not in private
                or _extents(total.all_axes) != _extents(exps.axes)
                or not all(k in outputs for k in readers[total.output])):
            return False
    for kernel in outputs:
        body, axes = kernel.body, kernel.axes
        if not (isinstance(body, Binary) and body.op in (BinaryOp.DIV, BinaryOp.MUL)
                and _extents(axes) == _extents(exps.axes) and _at(body.left, exps.output, axes)
                and any(_at(body.right, total.output, axes[:-1]) for total in sums)):
            return False
    return True


def with_plain_max(nests: tuple, private: tuple[str, ...], contract: str) -> tuple:
    """``nests`` with each such max marked ``plain_max`` (Inference; fold lanes, float32). A max
    whose row the previous tile prefetched (``weft.lower.row_prefetch``) finds it in L1 and
    reads plain vectors (``l1_reads``): with the compare-select, the line loads' two loads and a
    permute per vector were the loop's cost (0.80 of main with plain loads, 0.91 without)."""
    if contract != "inference" or not all(isinstance(nest, MemberNest) for nest in nests):
        return nests
    chosen = plain_max_members(nests, private)
    prefetched = {prefetch.pointer for nest in nests for prefetch in nest.prefetch if prefetch.row_axis is None}
    out = []
    for nest in nests:
        if nest.name in chosen and nest.fold_lanes and nest.view(nest.name).dtype.is_float:
            source = nest.view(nest.kernel.body.buffer).pointer
            nest = dataclasses.replace(nest, plain_max=True, l1_reads=nest.l1_reads or source in prefetched)
        out.append(nest)
    return tuple(out)
