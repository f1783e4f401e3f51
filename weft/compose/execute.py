"""Run a partition region by region, tile by tile: the executable meaning of fusion.

This is the reference schedule that the C lowering of a fused region must match,
written over the oracle's own member evaluator so that it can be trusted:

* one outer loop over the region's tile axis; in each tile, members run in
  dependency order, each restricted to the tile (``i -> i + tile_start``);
* private intermediates live only in tile-local scratch sized by the tile (their
  tile dimension is indexed tile-relative); only the anchor reaches full size;
* every member keeps its fold order, so under Strict every output element is
  computed by exactly the oracle's operations: the result is bit-identical;
* under Inference a region with an ``OnlineFold`` runs its folds as one pass over
  the shared axis in blocks, with a running reference and rescaled accumulators.
  Streamed members (scores ``S[i, j]``) are computed per block, and dissolved
  members (``E``, ``P``) never exist: no intermediate of size T×T is allocated.

``peak_scratch_bytes`` in the returned report counts the bytes of tile-local
scratch alive at once (what the memory-scaling test inspects).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from weft.compose.partition import Partition
from weft.compose.regions import Region
from weft.compose.rescale import OnlineFold, derive_online_fold, pass_schedule, streamed_members
from weft.ir import Axis, AxisIndex, Combiner, Expr, Kernel, Load, Plan, expr_loads
from weft.ir.substitute import map_loads, substitute_axes
from weft.oracle.interpreter import NUMPY_DTYPE, check_inputs, run_kernel, weft_max, weft_min


@dataclass
class ExecutionReport:
    """What a run did: the tile size, the online passes taken, the scratch high-water mark."""

    tile: int
    online_regions: list[str] = field(default_factory=list)
    peak_scratch_bytes: int = 0


def _local(name: str) -> str:
    return f"{name}__local"


def restrict_expr(expr: Expr, ranges: dict[str, tuple[int, int]], local_dims: dict[str, dict[int, str]]) -> Expr:
    """Shift axes in ``ranges`` by their start; loads of buffers in ``local_dims`` keep the
    named axis tile-relative in the listed dimensions (they address tile-local scratch)."""

    def on_load(load: Load) -> Expr:
        dims = local_dims.get(load.buffer)
        if not dims:
            return load
        index = list(load.index)
        for position, axis in dims.items():
            if index[position] != AxisIndex(axis):
                raise ValueError(f"load of {load.buffer} does not index dimension {position} by {axis}")
            index[position] = AxisIndex(_local(axis))
        return Load(load.buffer, tuple(index), load.padding)

    relabelled = map_loads(expr, on_load)
    mapping = {axis: AxisIndex(axis) + start for axis, (start, _) in ranges.items() if start}
    mapping.update({_local(axis): AxisIndex(axis) for axis in ranges})
    return substitute_axes(relabelled, mapping)


def restrict_kernel(
    kernel: Kernel, ranges: dict[str, tuple[int, int]], local_dims: dict[str, dict[int, str]]
) -> Kernel:
    """``kernel`` over the sub-ranges ``ranges`` (axis -> (start, size)) of its output axes."""
    axes = tuple(Axis(axis.name, ranges[axis.name][1]) if axis.name in ranges else axis for axis in kernel.axes)
    return Kernel(kernel.output, axes, restrict_expr(kernel.body, ranges, local_dims), kernel.fold)


def _private_dims(kernel: Kernel, tile_axis: str, private: set[str]) -> dict[str, dict[int, str]]:
    """For each private buffer ``kernel`` reads: the dimension indexed by its tile axis."""
    dims: dict[str, dict[int, str]] = {}
    for load in expr_loads(kernel.body):
        if load.buffer in private:
            for position, index in enumerate(load.index):
                if index == AxisIndex(tile_axis):
                    dims[load.buffer] = {position: tile_axis}
    return dims


def run_partition(
    plan: Plan,
    partition: Partition,
    *arrays: np.ndarray,
    tile: int = 16,
    block: int = 16,
    report: ExecutionReport | None = None,
) -> dict[str, np.ndarray]:
    """Every non-private buffer's value after running ``partition``'s regions in order."""
    values: dict[str, np.ndarray] = dict(zip(plan.inputs, check_inputs(plan, arrays), strict=False))
    report = report if report is not None else ExecutionReport(tile)
    with np.errstate(all="ignore"):
        for region in partition.regions:
            online = derive_online_fold(plan, region, partition.contract) if region.is_fused else None
            if not isinstance(online, OnlineFold) or pass_schedule(plan, region, online) is None:
                online = None
            else:
                report.online_regions.append(region.anchor)
            _run_region(plan, region, values, tile, block, online, report)
    return values


def run_partition_outputs(plan: Plan, partition: Partition, *arrays: np.ndarray, **options):
    values = run_partition(plan, partition, *arrays, **options)
    outputs = tuple(values[name] for name in plan.outputs)
    return outputs[0] if len(outputs) == 1 else outputs


def _run_region(plan, region: Region, values, tile, block, online: OnlineFold | None, report) -> None:
    kernels = {kernel.output: kernel for kernel in plan.kernels}
    buffers = plan.buffer_map()
    anchor = kernels[region.anchor]
    if region.tile_axis is None:  # untileable (e.g. a scalar): the member runs whole
        for name in region.members:
            values[name] = run_kernel(kernels[name], values, buffers[name].dtype)
        return
    private = set(region.members)  # every member's tile lives in scratch; outputs are also copied out
    tile_of = dict(region.tile_axes)
    extent = next(axis.extent for axis in anchor.axes if axis.name == tile_of[anchor.output])
    outputs = {name: np.empty(buffers[name].shape, NUMPY_DTYPE[buffers[name].dtype]) for name in region.outputs}
    skipped = _skipped_members(plan, region, online)
    sequence = region.members
    if online is not None:  # what the pass reads first, then the pass, then what reads it
        before, after = pass_schedule(plan, region, online)
        sequence = before + tuple(name for name in region.members if name in online.members) + after
    for start in range(0, extent, tile):
        size = min(tile, extent - start)
        scratch: dict[str, np.ndarray] = {}
        local_values = _Overlay(values, scratch)
        online_done = False
        for name in sequence:
            if name in skipped:
                continue
            if online is not None and name in online.members:
                if not online_done:
                    _run_online(plan, region, online, local_values, scratch, start, size, block, report)
                    online_done = True
                result = scratch[name]
            else:
                kernel = kernels[name]
                axis = tile_of[name]
                restricted = restrict_kernel(kernel, {axis: (start, size)}, _private_dims(kernel, axis, private))
                result = run_kernel(restricted, local_values, buffers[name].dtype)
                scratch[name] = result
            report.peak_scratch_bytes = max(report.peak_scratch_bytes, sum(a.nbytes for a in scratch.values()))
            if name in outputs:
                where = [slice(None)] * result.ndim
                where[[axis.name for axis in kernels[name].axes].index(tile_of[name])] = slice(start, start + size)
                outputs[name][tuple(where)] = result
    values.update(outputs)


class _Overlay(dict):
    """Full-size values with tile-local scratch laid over them (scratch wins)."""

    def __init__(self, base: dict, scratch: dict):
        super().__init__()
        self.base, self.scratch = base, scratch

    def __getitem__(self, key):
        if key in self.scratch:
            return self.scratch[key]
        return self.base[key]


def _skipped_members(plan: Plan, region: Region, online: OnlineFold | None) -> set[str]:
    """Members the online pass makes unnecessary: dissolved ones and streamed ones."""
    if online is None:
        return set()
    return set(online.dissolved) | set(streamed_members(plan, region, online))


def _run_online(plan, region: Region, online: OnlineFold, values, scratch, start, size, block, report) -> None:
    """One blocked pass over the shared fold axis for the tile ``[start, start + size)``."""
    kernels = {kernel.output: kernel for kernel in plan.kernels}
    buffers = plan.buffer_map()
    tile_of = dict(region.tile_axes)
    private = set(region.members)
    streamed = streamed_members(plan, region, online)
    reference = kernels[online.reference]
    dtype = NUMPY_DTYPE[buffers[online.reference].dtype]
    combine, reduce_block = _COMBINE[online.reference_combiner]
    identity = {Combiner.SUM: 0.0, Combiner.MAX: -np.inf, Combiner.MIN: np.inf}[online.reference_combiner]
    running = np.full(_tile_shape(reference, tile_of, size), identity, dtype)
    accumulators = {}
    for dependent in online.dependents:
        kernel = kernels[dependent.member]
        identity = {Combiner.SUM: 0.0, Combiner.MAX: -np.inf, Combiner.MIN: np.inf}[dependent.combiner]
        accumulators[dependent.member] = np.full(_tile_shape(kernel, tile_of, size), identity, dtype)

    def evaluate(member: str, expr: Expr, fold_axis: str | None, j_start: int, j_size: int) -> np.ndarray:
        """``expr`` over the member's tile (and the block of the fold axis, as a last axis)."""
        kernel = kernels[member]
        tile_axis = tile_of[member]
        ranges = {tile_axis: (start, size)}
        local = {}
        for load in expr_loads(expr):
            if load.buffer in private or load.buffer in online.members:
                dims = {p: tile_axis for p, index in enumerate(load.index) if index == AxisIndex(tile_axis)}
                if load.buffer in streamed and fold_axis is not None:
                    dims[streamed[load.buffer]] = fold_axis
                local[load.buffer] = dims
        axes = kernel.axes
        if fold_axis is not None:
            ranges[fold_axis] = (j_start, j_size)
            axes = axes + (Axis(fold_axis, j_size),)
        body = restrict_expr(expr, ranges, local)
        kernel_tile = Kernel(member, tuple(Axis(a.name, ranges[a.name][1]) if a.name in ranges else a for a in axes), body)
        return run_kernel(kernel_tile, values, buffers[member].dtype)

    for j_start in range(0, online.extent, block):
        j_size = min(block, online.extent - j_start)
        for name, position in streamed.items():
            kernel = kernels[name]
            ranges = {tile_of[name]: (start, size), kernel.axes[position].name: (j_start, j_size)}
            restricted = restrict_kernel(kernel, ranges, _private_dims(kernel, tile_of[name], private))
            scratch[name] = run_kernel(restricted, values, buffers[name].dtype)
        block_terms = evaluate(online.reference, online.reference_term, online.reference_axis, j_start, j_size)
        previous = running
        running = combine(previous, reduce_block(block_terms, axis=-1, dtype=dtype)).astype(dtype)
        for dependent in online.dependents:
            accumulator = accumulators[dependent.member]
            if dependent.exponent is not None:
                accumulator = _rescaled(accumulator, dependent, online, previous, running, scratch, evaluate, dtype)
            scratch[online.reference] = _running_reference(running, online.reference_combiner, dtype)
            terms = evaluate(dependent.member, dependent.term, dependent.fold_axis, j_start, j_size)
            if dependent.combiner is Combiner.SUM:
                accumulator = accumulator + terms.sum(axis=-1, dtype=dtype)
            elif dependent.combiner is Combiner.MAX:
                accumulator = weft_max(accumulator, terms.max(axis=-1))
            else:
                accumulator = weft_min(accumulator, terms.min(axis=-1))
            accumulators[dependent.member] = accumulator.astype(dtype)
        report.peak_scratch_bytes = max(
            report.peak_scratch_bytes,
            sum(a.nbytes for a in scratch.values()) + sum(a.nbytes for a in accumulators.values()) + block_terms.nbytes,
        )
    for name in streamed:
        scratch.pop(name, None)
    scratch[online.reference] = running
    for dependent in online.dependents:
        result = accumulators[dependent.member]
        if dependent.exponent is not None:  # a row masked to the end: the oracle's exp(-inf - -inf)
            reference_load = next(load for load in expr_loads(dependent.exponent) if load.buffer == online.reference)
            final = evaluate(dependent.member, reference_load, None, 0, 0)
            result = np.where(final == _IDENTITY[online.reference_combiner], dtype.type(np.nan), result)
        for expr in dependent.scale_by:
            result = result * evaluate(dependent.member, expr, None, 0, 0)
        for expr in dependent.divide_by:
            result = result / evaluate(dependent.member, expr, None, 0, 0)
        for sign, expr in dependent.offsets:
            result = result + sign * evaluate(dependent.member, expr, None, 0, 0)
        scratch[dependent.member] = result.astype(dtype)


def _running_reference(running, combiner: Combiner, dtype):
    """The reference the terms fold against: ``running``, or 0 where it is still the fold's
    identity (every term so far -inf: a masked prefix). Each factor ``exp(t - R)`` (the only
    form the rewrite admits) is then ``exp(-inf) = 0`` there, as against the final reference,
    so the prefix folds exactly ``0 * g``: 0, or NaN where ``g`` (a masked key's V row) is NaN
    or inf, as in the oracle (against the identity itself it would be ``exp(-inf - -inf)``)."""
    return np.where(running == _IDENTITY[combiner], dtype.type(0), running).astype(dtype)


def _rescaled(accumulator, dependent, online: OnlineFold, previous, running, scratch, evaluate, dtype):
    """``accumulator`` carried from reference ``previous`` to ``running``: times
    ``exp(b(running) - b(previous))``, except where ``previous`` was still the fold's identity
    (every term so far masked, -inf for a max): there the terms were folded against 0
    (``_running_reference``), each exactly what it is against a finite reference, so the
    accumulator is kept as it is. A row whose reference never moves keeps its terms exactly
    as the oracle folds them; a row still at the identity at the end is NaN (``_run_online``)."""
    reference_load = next(load for load in expr_loads(dependent.exponent) if load.buffer == online.reference)
    scratch[online.reference] = previous
    old = evaluate(dependent.member, dependent.exponent, None, 0, 0)
    was = evaluate(dependent.member, reference_load, None, 0, 0)
    scratch[online.reference] = running
    new = evaluate(dependent.member, dependent.exponent, None, 0, 0)
    now = evaluate(dependent.member, reference_load, None, 0, 0)
    identity = _IDENTITY[online.reference_combiner]
    restart = (was == identity) & (now != identity)
    correction = np.where(new == old, dtype.type(1), np.exp(new - old)).astype(dtype)
    return np.where(restart, accumulator, accumulator * correction)


_IDENTITY = {Combiner.SUM: 0.0, Combiner.MAX: -np.inf, Combiner.MIN: np.inf}

_COMBINE = {
    Combiner.SUM: (np.add, np.sum),
    Combiner.MAX: (weft_max, lambda a, axis, dtype: np.max(a, axis=axis)),
    Combiner.MIN: (weft_min, lambda a, axis, dtype: np.min(a, axis=axis)),
}


def _tile_shape(kernel: Kernel, tile_of: dict[str, str], size: int) -> tuple[int, ...]:
    return tuple(size if axis.name == tile_of[kernel.output] else axis.extent for axis in kernel.axes)


__all__ = ["ExecutionReport", "restrict_expr", "restrict_kernel", "run_partition", "run_partition_outputs"]
