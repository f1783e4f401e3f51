"""Symbolic sizes padded into buckets: one Weft compile serves every length of a bucket.

Dynamo hands over a graph with symbolic sizes (``dynamic=True``, or its automatic
dynamic graph after a second length); every node's ``meta["val"]`` says which axis of
each tensor is symbolic. ``analyze`` proves, op by op over the ATen nodes, that padding
every symbolic axis at its end changes no real position of any value:

- an op that acts position-wise along a padded axis (pointwise ops and broadcasts,
  views that keep the padded axis, contractions and reductions over *other* axes,
  ``arange(s)``, a slice of a static table up to ``s``) is safe as it is;
- an op that reads across a padded axis is rewritten to read only the real positions:
  a reduction (sum, amax, amin, any, softmax, log_softmax) and a contraction over it (mm,
  addmm, bmm) read ``where(index < L, x, identity)`` (0, -inf, +inf, False: a select, so a
  padded inf or NaN never reaches a real position); a mean becomes that masked sum
  divided by the real count; the indices of a gather (embedding, index, gather) along a
  padded axis read 0 at padded positions so they stay in bounds;
- anything else that moves data across positions of a padded axis (a cat, a split or a
  slice with an offset along it, a reshape that regroups it with another axis out of
  order, a layer norm over it, a symbolic size used as a tensor value, an op whose
  meaning along the axis is unknown) makes the graph not bucketable: ``analyze``
  returns the reason, and the graph is specialized per exact length as before.

``L`` enters the graph as one extra 0-d int64 input per symbol, so the bucket's plans
serve every length that pads to it. ``Buckets.pad`` pads the inputs (with zeros: token
ids stay in bounds), ``Buckets.crop`` cuts the outputs back to the real lengths.

    before:  _softmax(scores, -1)                       scores: (s0, s1, s1)
    after:   keep = lt(arange(sym_size(scores, 2)), L_s1)
             _softmax(where(view(keep, [1, 1, n]), scores, -inf), -1)
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import sympy
import torch
import torch.fx as fx

from weft.torch.padded_axes import (
    Analysis,
    NotBucketable,
    State,
    argument_of,
    extent_of,
    factors_of,
    is_static,
    structures_of,
    symbols_of,
)

aten = torch.ops.aten
MINIMUM_BUCKET = 16


def bucket_of(value: int, upper: int | None = None) -> int:
    """The padded extent of a length: the next power of two, at least ``MINIMUM_BUCKET``,
    never past the symbol's upper bound (a guard dynamo took, e.g. a 512-row position table)."""
    size = max(MINIMUM_BUCKET, 1 << max(value - 1, 0).bit_length())
    return max(value, min(size, upper)) if upper is not None else size


@dataclass
class Buckets:
    """A bucketable graph: ``gm`` (masks inserted, one length input per symbol appended)."""

    gm: fx.GraphModule
    symbols: tuple[sympy.Symbol, ...]
    sources: dict[sympy.Symbol, tuple[int, int | None]]
    input_axes: list[tuple[tuple[int, sympy.Symbol], ...]]
    output_axes: list[tuple[tuple[int, sympy.Symbol], ...] | None]
    masked: tuple[str, ...]  # the ops that read through a mask, for the report
    size_inputs: dict[int, sympy.Symbol]
    shape_env: object = None
    guards_hold: dict[tuple, bool] = field(default_factory=dict)  # per bucket: do dynamo's guards hold?

    def lengths(self, args: Sequence[object]) -> dict[sympy.Symbol, int]:
        found = {}
        for symbol, (position, axis) in self.sources.items():
            arg = args[position]
            found[symbol] = int(arg) if axis is None else int(arg.shape[axis])
        return found

    def sizes(self, lengths: dict[sympy.Symbol, int]) -> dict[sympy.Symbol, int] | None:
        """Each symbol's bucket, or None where the buckets break a guard dynamo took."""
        sizes = {s: bucket_of(v, self._upper(s)) for s, v in lengths.items()}
        key = tuple(sorted((str(s), v) for s, v in sizes.items()))
        if key not in self.guards_hold:
            self.guards_hold[key] = self._guards_hold(sizes)
        return sizes if self.guards_hold[key] else None

    def _guards_hold(self, sizes: dict[sympy.Symbol, int]) -> bool:
        if self.shape_env is not None:
            for guard in getattr(self.shape_env, "guards", ()):
                expr = getattr(guard, "expr", None)
                if expr is None or not expr.free_symbols <= set(sizes):
                    continue
                holds = expr.xreplace({s: sympy.Integer(v) for s, v in sizes.items()})
                if holds is not sympy.true and holds is not True:
                    return False
        return True

    def _upper(self, symbol: sympy.Symbol) -> int | None:
        ranges = getattr(self.shape_env, "var_to_range", {}).get(symbol)
        upper = getattr(ranges, "upper", None)
        try:
            return int(upper) if upper is not None and upper.is_finite else None
        except (TypeError, AttributeError):
            return None

    def pad(self, args: Sequence[object], sizes: dict[sympy.Symbol, int],
            lengths: dict[sympy.Symbol, int]) -> list[object]:
        padded = []
        for arg, axes in zip(args, self.input_axes, strict=True):
            if isinstance(arg, torch.Tensor) and axes:
                shape = list(arg.shape)
                for axis, symbol in axes:
                    shape[axis] = sizes[symbol]
                if shape != list(arg.shape):
                    bigger = arg.new_zeros(shape)
                    bigger[tuple(slice(0, n) for n in arg.shape)] = arg
                    arg = bigger
            elif len(padded) in self.size_inputs:
                arg = sizes[self.size_inputs[len(padded)]]
            padded.append(arg)
        return padded + [torch.tensor(lengths[s], dtype=torch.int64) for s in self.symbols]

    def crop(self, results: object, lengths: dict[sympy.Symbol, int]) -> object:
        items = list(results)
        for position, axes in enumerate(self.output_axes):
            if not axes or not isinstance(items[position], torch.Tensor):
                continue
            value = items[position]
            for axis, symbol in axes:
                if value.shape[axis] != lengths[symbol]:
                    value = value.narrow(axis, 0, lengths[symbol])
            items[position] = value.contiguous() if value is not items[position] else value
        return type(results)(items) if isinstance(results, tuple) else items


def analyze(gm: fx.GraphModule) -> tuple[Buckets | None, str]:
    """The bucketed form of ``gm``, or (None, why not); (None, "") for a graph without symbols."""
    analysis = Analysis(gm)
    try:
        analysis.run()
    except NotBucketable as problem:
        return None, str(problem)
    except Exception as problem:  # noqa: BLE001 - a graph the analysis cannot follow is not padded
        symbolic = any(isinstance(s, torch.SymInt) for n in gm.graph.nodes if n.op == "placeholder"
                       for s in getattr(n.meta.get("val"), "shape", ()))
        return None, f"the padding analysis could not follow the graph ({type(problem).__name__}: {problem})" \
            if symbolic else ""
    if not analysis.sources:
        return None, ""
    missing = set()
    for structure in analysis.state.structure.values():
        for axes in structures_of(structure):
            for axis in axes:
                missing |= set(symbols_of(axis)) - set(analysis.sources)
    if missing:
        return None, f"lengths {sorted(map(str, missing))} are not the extent of any input axis"
    symbols = tuple(sorted(analysis.sources, key=str))
    rewritten = copy.deepcopy(gm)
    masked = _rewrite(rewritten, analysis.state, symbols, analysis.sources)
    return Buckets(rewritten, symbols, analysis.sources, analysis.input_axes, analysis.output_axes, masked,
                   analysis.size_inputs, analysis.shape_env), ""


def _rewrite(gm: fx.GraphModule, state: State, symbols: tuple[sympy.Symbol, ...],
             sources: dict[sympy.Symbol, tuple[int, int | None]]) -> tuple[str, ...]:
    graph = gm.graph
    nodes = {n.name: n for n in graph.nodes}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    lengths = {}
    with graph.inserting_after(placeholders[-1]):
        for symbol in reversed(symbols):
            lengths[symbol] = graph.placeholder(f"weft_length_{symbol}")
    sizes = {}  # each symbol's padded extent, read from an input (no cycle through a partition)
    with graph.inserting_after(lengths[symbols[-1]]):
        for symbol in symbols:
            position, axis = sources[symbol]
            sizes[symbol] = (placeholders[position] if axis is None
                             else graph.call_function(aten.sym_size.int, (placeholders[position], axis)))
    masked = []
    for mask in state.masks:
        node = nodes[mask.node]
        source = node.args[mask.position] if mask.item is None else node.args[mask.position][mask.item]
        rank = len(source.meta["val"].shape)
        size = sizes[mask.symbol]
        with graph.inserting_before(node):
            iota = graph.call_function(aten.arange.default, (size,), {"dtype": torch.int64,
                                                                       "device": source.meta["val"].device})
            keep = graph.call_function(aten.lt.Tensor, (iota, lengths[mask.symbol]))
            shape = [1] * rank
            shape[mask.axis] = size
            keep = graph.call_function(aten.view.default, (keep, shape))
            chosen = graph.call_function(aten.where.ScalarOther, (keep, source, mask.fill))
            chosen.meta["val"] = source.meta["val"]  # same shape and dtype: a later mask or mean reads it
        if mask.item is None:
            node.update_arg(mask.position, chosen)
        else:
            listed = list(node.args[mask.position])
            listed[mask.item] = chosen
            node.update_arg(mask.position, listed)
        masked.append(str(node.target))
    for name in state.means:
        _mean_to_masked_sum(graph, nodes[name], lengths)
        masked.append(f"{nodes[name].target} (divided by the real count)")
    graph.lint()
    gm.recompile()
    return tuple(sorted(set(masked)))


def _mean_to_masked_sum(graph: fx.Graph, node: fx.Node, lengths: dict[sympy.Symbol, fx.Node]) -> None:
    """``mean(x, dims)`` over padded axes: ``sum(masked x, dims) / (static count * L...)``."""
    x = node.args[0]
    shape = x.meta["val"].shape
    if node.target is aten.mean.default:
        dims, keepdim = list(range(len(shape))), False
    else:
        dims = argument_of(node, 1, "dim", None)
        dims = [dims] if isinstance(dims, int) else list(dims or range(len(shape)))
        keepdim = argument_of(node, 2, "keepdim", False)
    dims = [d % max(len(shape), 1) for d in dims]
    static, counts = 1, []
    for d in dims:
        axis = factors_of(extent_of(shape[d]))
        if is_static(axis):
            static *= axis[0]
        else:
            counts.append(lengths[axis[0]])
    with graph.inserting_before(node):
        total = graph.call_function(aten.sum.dim_IntList, (x, dims, keepdim))
        count = graph.call_function(torch.ops.prims.convert_element_type.default, (counts[0], torch.float32))
        for other in counts[1:]:
            other = graph.call_function(torch.ops.prims.convert_element_type.default, (other, torch.float32))
            count = graph.call_function(aten.mul.Tensor, (count, other))
        if static != 1:
            count = graph.call_function(aten.mul.Tensor, (count, float(static)))
        mean = graph.call_function(aten.div.Tensor, (total, count))
    node.replace_all_uses_with(mean)
    graph.erase_node(node)
