"""Which axes of an ATen graph may be padded: the soundness analysis behind ``weft.torch.buckets``.

Each tensor axis has a *structure*, its extent as an ordered product of factors: ``(384,)``
static, ``(s1,)`` one length (its real positions are the prefix ``[0, L)``), ``(s0, s1)`` or
``(s0, 12)`` lengths merged by a reshape, in order (a mixed radix: real positions are those
whose every digit is below its length). ``Analysis`` walks the graph once, giving every node
its structure from dynamo's symbolic ``meta["val"]`` and the op's meaning, and records the
masks the rewrite must insert; an op it cannot prove raises ``NotBucketable`` with the reason.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import sympy
import torch
import torch.fx as fx

aten = torch.ops.aten

Factor = int | sympy.Symbol
Axis = tuple[Factor, ...]  # the extent as an ordered product: (384,), (s1,), (s0, s1), (s0, 12)


class NotBucketable(Exception):
    """Why a graph cannot be padded soundly (the message is the reason reported)."""


def extent_of(size: object) -> sympy.Expr:
    if isinstance(size, torch.SymInt):
        return size.node.expr
    return sympy.Integer(int(size))


def factors_of(expr: sympy.Expr) -> Axis | None:
    """(n,) for a static extent, (s,) for a symbol, None for a product of symbols (the
    order of its factors comes from where it was made); anything else is refused."""
    expr = sympy.expand(expr)
    if expr.is_Integer:
        return (int(expr),)
    if expr.is_Symbol:
        return (expr,)
    if expr.is_Mul and all(f.is_Integer or f.is_Symbol or (f.is_Pow and f.base.is_Symbol and f.exp.is_Integer
                                                           and f.exp > 0) for f in expr.args):
        return None
    raise NotBucketable(f"an extent {expr} that is not a product of lengths (an offset or a division along a "
                        "symbolic axis)")


def _product(axis: Axis) -> sympy.Expr:
    return sympy.Mul(*[sympy.Integer(f) if isinstance(f, int) else f for f in axis])


def symbols_of(axis: Axis) -> list[sympy.Symbol]:
    return [f for f in axis if not isinstance(f, int)]


def is_static(axis: Axis) -> bool:
    return not symbols_of(axis)


def is_clean(axis: Axis) -> bool:
    """One symbol alone: the real positions are the prefix ``[0, L)``."""
    return len(axis) == 1 and not isinstance(axis[0], int)


def _shape(value: object) -> tuple[sympy.Expr, ...]:
    return tuple(extent_of(s) for s in value.shape)


def _tensors(value: object) -> list[torch.Tensor]:
    items = value if isinstance(value, tuple | list) else (value,)
    return [item for item in items if isinstance(item, torch.Tensor)]


# ---------------------------------------------------------------- the analysis


@dataclass(frozen=True)
class Mask:
    """Read ``node.args[position]`` (or ``[position][item]`` for a list) through
    ``where(index < L, x, fill)`` along ``axis``."""

    node: str
    position: int
    item: int | None
    axis: int
    symbol: sympy.Symbol
    fill: object


@dataclass
class State:
    structure: dict[fx.Node, object] = field(default_factory=dict)  # tuple[Axis] or a tuple of them
    masks: list[Mask] = field(default_factory=list)
    means: list[str] = field(default_factory=list)
    symbolic: set[fx.Node] = field(default_factory=set)  # nodes whose value is a SymInt
    views_of_inputs: set[fx.Node] = field(default_factory=set)  # views of a padded input
    iotas: dict[fx.Node, tuple[int, sympy.Symbol]] = field(default_factory=dict)  # value = index along an axis


POINTWISE_EXTRA = frozenset({
    aten._to_copy.default, aten.to.dtype, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default,
    aten.contiguous.default, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar,
    aten.full_like.default, aten.zeros_like.default, aten.ones_like.default, aten.masked_fill.Tensor,
})
VIEW_LIKE = frozenset({
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default,
    aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default, aten.permute.default,
    aten.transpose.int, aten.t.default, aten.expand.default, aten.select.int, aten.slice.Tensor,
    aten.alias.default, aten.detach.default,
})
RESHAPES = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default,
                      aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default})
SIZE_ARGUMENTS = {  # op -> the argument positions that may hold a symbolic size
    aten.view.default: (1,), aten._unsafe_view.default: (1,), aten.reshape.default: (1,),
    aten.view_copy.default: (1,), aten.expand.default: (1,), aten.full.default: (0,),
    aten.slice.Tensor: (2, 3), aten.arange.default: (0,), aten.arange.start: (0, 1),
    aten.arange.start_step: (0, 1),
}
REDUCTIONS = {  # op -> the fill a padded position takes so it changes nothing
    aten.sum.dim_IntList: "zero", aten.sum.default: "zero", aten.mean.dim: "zero", aten.mean.default: "zero",
    aten.amax.default: "low", aten.amin.default: "high", aten.any.dim: "zero", aten.any.dims: "zero",
    aten.any.default: "zero", aten.prod.default: "one", aten.prod.dim_int: "one",
    aten._softmax.default: "low", aten._log_softmax.default: "low",
}
CONTRACTIONS = {aten.mm.default: (0, 1, 0), aten.addmm.default: (1, 1, 0), aten.bmm.default: (0, 2, 1)}
GATHERS = frozenset({aten.embedding.default, aten.index.Tensor, aten.gather.default})


def _fill(kind: str, dtype: torch.dtype) -> object:
    if dtype is torch.bool:
        return kind in ("high", "one")
    if kind == "zero":
        return 0.0 if dtype.is_floating_point else 0
    if kind == "one":
        return 1.0 if dtype.is_floating_point else 1
    if dtype.is_floating_point:
        return -math.inf if kind == "low" else math.inf
    info = torch.iinfo(dtype)
    return info.min if kind == "low" else info.max


def argument_of(node: fx.Node, position: int, name: str, default: object = None) -> object:
    if len(node.args) > position:
        return node.args[position]
    return node.kwargs.get(name, default)


def _flat(argument: object) -> list[object]:
    if isinstance(argument, tuple | list):
        return [leaf for item in argument for leaf in _flat(item)]
    if isinstance(argument, dict):
        return [leaf for item in argument.values() for leaf in _flat(item)]
    return [argument]


def _check_symbolic_arguments(node: fx.Node, state: State) -> None:
    """A symbolic size may be a size (a view's shape, a slice's end), never a tensor value."""
    allowed = SIZE_ARGUMENTS.get(node.target, ())
    arguments = list(node.args) + list(node.kwargs.values())
    for position, argument in enumerate(arguments):
        if position in allowed:
            continue
        if any(isinstance(leaf, fx.Node) and leaf in state.symbolic for leaf in _flat(argument)):
            raise NotBucketable(f"{node.target} uses a symbolic size as a value ({node.name})")


def _inherit(node: fx.Node, state: State, value: torch.Tensor) -> tuple[Axis, ...]:
    """Each output axis's structure: static, a lone symbol, or the one ordered product an
    input axis of the same extent already has (two different orders are refused)."""
    candidates: dict[sympy.Expr, set[Axis]] = {}
    for source in node.all_input_nodes:
        for structure in structures_of(state.structure.get(source)):
            for axis in structure:
                candidates.setdefault(sympy.expand(_product(axis)), set()).add(axis)
    result = []
    for expr in _shape(value):
        axis = factors_of(expr)
        if axis is None:
            found = candidates.get(sympy.expand(expr), set())
            if len(found) != 1:
                raise NotBucketable(f"{node.target} makes an axis {expr} whose order of lengths is "
                                    f"{'ambiguous' if found else 'unknown'} ({node.name})")
            axis = next(iter(found))
        result.append(axis)
    return tuple(result)


def structures_of(structure: object) -> list[tuple[Axis, ...]]:
    if structure is None:
        return []
    if structure and isinstance(structure[0], tuple) and structure[0] and isinstance(structure[0][0], tuple):
        return list(structure)
    return [structure]


def _regroup(source: tuple[Axis, ...], target: tuple[sympy.Expr, ...], node: fx.Node) -> tuple[Axis, ...]:
    """A reshape as a regrouping of the source's ordered factors (mixed radix): sound only
    when every output axis is a run of consecutive factors (a static factor may split)."""
    atoms: list[Factor] = [f for axis in source for f in axis if f != 1]
    result = []
    for expr in target:
        remaining = sympy.expand(expr)
        axis: list[Factor] = []
        while remaining != 1:
            if not atoms:
                raise NotBucketable(f"{node.target} regroups a padded axis ({node.name})")
            atom = atoms[0]
            if not isinstance(atom, int):
                quotient = sympy.expand(remaining / atom)
                if not _divides(quotient):
                    raise NotBucketable(f"{node.target} regroups a padded axis out of order ({node.name})")
                axis.append(atoms.pop(0))
                remaining = quotient
                continue
            coefficient = int(sympy.Poly(remaining).coeffs()[0]) if not remaining.is_Integer else int(remaining)
            share = math.gcd(atom, coefficient)
            if share == 1:
                raise NotBucketable(f"{node.target} regroups a padded axis out of order ({node.name})")
            axis.append(share)
            remaining = sympy.expand(remaining / share)
            atoms[0] = atom // share
            if atoms[0] == 1:
                atoms.pop(0)
        result.append(tuple(axis) if axis else (1,))
    if atoms:
        raise NotBucketable(f"{node.target}: sizes do not match ({node.name})")
    for axis in result:
        if symbols_of(axis) and len(axis) > 1 and len(set(symbols_of(axis))) != len(symbols_of(axis)):
            raise NotBucketable(f"{node.target} merges a length with itself ({node.name})")
    return tuple(tuple(f for f in axis if f != 1) or (1,) for axis in result)


def _divides(quotient: sympy.Expr) -> bool:
    """``quotient`` is still a monomial with positive powers (the factor really was in it)."""
    numerator, denominator = sympy.fraction(sympy.together(quotient))
    return denominator == 1


class Analysis:
    def __init__(self, gm: fx.GraphModule) -> None:
        self.gm = gm
        self.state = State()
        self.placeholders: list[fx.Node] = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.sources: dict[sympy.Symbol, tuple[int, int | None]] = {}
        self.input_axes: list[tuple[tuple[int, sympy.Symbol], ...]] = []
        self.size_inputs: dict[int, sympy.Symbol] = {}  # positions of the symbolic int inputs
        self.output_axes: list[tuple[tuple[int, sympy.Symbol], ...] | None] = []
        self.shape_env = None

    def run(self) -> None:
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.placeholder(node)
            elif node.op == "get_attr":
                value = getattr(self.gm, node.target, None)
                if isinstance(value, torch.Tensor):
                    self.state.structure[node] = tuple((int(s),) for s in value.shape)
            elif node.op == "call_function":
                self.call(node)
            elif node.op == "output":
                self.output(node)
            else:
                raise NotBucketable(f"a {node.op} node ({node.name})")

    def placeholder(self, node: fx.Node) -> None:
        value = node.meta.get("val")
        position = len(self.input_axes)
        padded: list[tuple[int, sympy.Symbol]] = []
        if isinstance(value, torch.SymInt):
            expr = value.node.expr
            self._note_env(value)
            if expr.is_Symbol:
                self.sources.setdefault(expr, (position, None))
                self.size_inputs[position] = expr
                self.state.symbolic.add(node)
            elif not expr.is_Integer:
                raise NotBucketable(f"input {node.name} is the size {expr}")
        elif isinstance(value, torch.Tensor):
            structure = []
            for axis_number, size in enumerate(value.shape):
                if isinstance(size, torch.SymInt):
                    self._note_env(size)
                axis = factors_of(extent_of(size))
                if axis is None:
                    raise NotBucketable(f"input {node.name} has an axis {extent_of(size)} (a product of lengths)")
                if is_clean(axis):
                    padded.append((axis_number, axis[0]))
                    self.sources.setdefault(axis[0], (position, axis_number))
                    self.state.views_of_inputs.add(node)
                structure.append(axis)
            self.state.structure[node] = tuple(structure)
        elif isinstance(value, torch.SymFloat | torch.SymBool):
            raise NotBucketable(f"input {node.name} is a symbolic {type(value).__name__}")
        self.input_axes.append(tuple(padded))

    def _note_env(self, size: torch.SymInt) -> None:
        self.shape_env = self.shape_env or size.node.shape_env

    def call(self, node: fx.Node) -> None:
        value = node.meta.get("val")
        if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
            self.state.symbolic.add(node)
            return
        if not _tensors(value):
            if node.target is operator.getitem:
                return
            if any(isinstance(a, fx.Node) and a in self.state.structure for a in node.all_input_nodes):
                raise NotBucketable(f"{node.target} turns a tensor into a number ({node.name})")
            return
        if node.target is operator.getitem:
            source, item = node.args
            structures = structures_of(self.state.structure.get(source))
            self.state.structure[node] = structures[item] if item < len(structures) else _inherit(node, self.state, value)
            if source in self.state.views_of_inputs:
                self.state.views_of_inputs.add(node)
            return
        _check_symbolic_arguments(node, self.state)
        inputs = [n for n in node.all_input_nodes if n in self.state.structure]
        touched = any(not all(is_static(a) for s in structures_of(self.state.structure[n]) for a in s) for n in inputs)
        outputs = _tensors(value)
        touched = touched or any(not all(sympy.expand(e).is_Integer for e in _shape(t)) for t in outputs)
        if not touched:
            self.state.structure[node] = self._static(value)
            return
        self.state.structure[node] = self.rule(node, value)
        iota = self.iota(node, value)
        if iota is not None:
            self.state.iotas[node] = iota
        if node.target in VIEW_LIKE and any(n in self.state.views_of_inputs for n in node.all_input_nodes):
            self.state.views_of_inputs.add(node)

    def iota(self, node: fx.Node, value: object) -> tuple[int, sympy.Symbol] | None:
        """(axis, s) when the value at every position is its index along that padded axis
        (``arange(s)`` and views of it): an index tensor that reads position by position."""
        target, structure = node.target, self.state.structure[node]
        if not isinstance(value, torch.Tensor) or value.dtype.is_floating_point or value.dtype is torch.bool:
            return None
        if target in (aten.arange.default, aten.arange.start, aten.arange.start_step):
            start = node.args[0] if target is not aten.arange.default and len(node.args) > 1 else 0
            step = argument_of(node, 2, "step", 1) if target is aten.arange.start_step else 1
            return (0, structure[0][0]) if start == 0 and step == 1 and is_clean(structure[0]) else None
        sources = [n for n in node.all_input_nodes if n in self.state.iotas]
        if len(sources) != 1 or node.args[0] is not sources[0]:
            return None
        symbol = self.state.iotas[sources[0]][1]
        if target in (aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar):
            if len(node.args) < 2 or node.args[1] != 0 or argument_of(node, 2, "alpha", 1) != 1:
                return None
        elif target not in VIEW_LIKE | {aten._to_copy.default, aten.clone.default} or target is aten.select.int:
            return None
        axes = [n for n, axis in enumerate(structure) if axis == (symbol,)]
        others = [axis for n, axis in enumerate(structure) if axis != (symbol,)]
        if len(axes) != 1 or (target is not aten.expand.default and any(axis != (1,) for axis in others)):
            return None
        return (axes[0], symbol)

    @staticmethod
    def _static(value: object) -> object:
        if isinstance(value, tuple | list):
            return tuple(tuple((int(s),) for s in t.shape) for t in _tensors(value))
        return tuple((int(s),) for s in value.shape)

    def structure_of(self, node: object) -> tuple[Axis, ...]:
        if not isinstance(node, fx.Node) or node not in self.state.structure:
            raise NotBucketable(f"an operand {node} of unknown shape")
        return self.state.structure[node]

    def rule(self, node: fx.Node, value: object) -> object:
        target = node.target
        if isinstance(target, torch._ops.OpOverload) and torch.Tag.pointwise in target.tags or target in POINTWISE_EXTRA:
            return _inherit(node, self.state, value)
        if target in RESHAPES:
            return _regroup(self.structure_of(node.args[0]), _shape(value), node)
        if target in (aten.permute.default, aten.transpose.int, aten.t.default, aten.expand.default,
                      aten.alias.default, aten.detach.default, aten.clone.default):
            return _inherit(node, self.state, value)
        if target is aten.select.int:
            return self.select(node, value)
        if target is aten.slice.Tensor:
            return self.slice(node, value)
        if target in (aten.arange.default, aten.arange.start, aten.arange.start_step):
            start = node.args[0] if target is not aten.arange.default and len(node.args) > 1 else 0
            if not isinstance(start, int) or not is_clean(factors_of(_shape(value)[0]) or ()):
                raise NotBucketable(f"arange from {start} over {_shape(value)[0]} ({node.name})")
            return (factors_of(_shape(value)[0]),)
        if target is aten.full.default:
            return tuple(factors_of(e) or self._refuse(node, "a full tensor with a product of lengths") for e in _shape(value))
        if target in REDUCTIONS:
            return self.reduction(node, value)
        if target in CONTRACTIONS:
            return self.contraction(node, value)
        if target in GATHERS:
            return self.gather(node, value)
        if target is aten.native_layer_norm.default:
            x = self.structure_of(node.args[0])
            count = len(node.args[1])
            if not all(is_static(axis) for axis in x[len(x) - count:]):
                raise NotBucketable(f"native_layer_norm normalizes over a padded axis ({node.name})")
            return tuple(_inherit(node, self.state, t) for t in _tensors(value))
        if target is aten.cat.default:
            dim = argument_of(node, 1, "dim", 0)
            for part in node.args[0]:
                structure = self.structure_of(part)
                if len(structure) > 1 and not is_static(structure[dim % len(structure)]):
                    raise NotBucketable(f"cat along a padded axis ({node.name})")
            return _inherit(node, self.state, value)
        if target in (aten.split_with_sizes.default, aten.split.Tensor):
            x = self.structure_of(node.args[0])
            if not is_static(x[argument_of(node, 2, "dim", 0) % len(x)]):
                raise NotBucketable(f"{target} along a padded axis ({node.name})")
            return tuple(_inherit(node, self.state, t) for t in _tensors(value))
        if target is aten.constant_pad_nd.default:
            x = self.structure_of(node.args[0])
            pad = node.args[1]
            for position in range(len(pad) // 2):
                axis = x[len(x) - 1 - position]
                if not is_static(axis) and (pad[2 * position] or pad[2 * position + 1]):
                    raise NotBucketable(f"constant_pad_nd pads a padded axis ({node.name})")
            return _inherit(node, self.state, value)
        if target is aten.convolution.default:
            x = self.structure_of(node.args[0])
            if not all(is_static(axis) for axis in x[1:]) or not all(is_static(a) for a in self.structure_of(node.args[1])):
                raise NotBucketable(f"convolution along a padded axis ({node.name})")
            return _inherit(node, self.state, value)
        raise NotBucketable(f"{target} is not known to act position by position along a padded axis ({node.name})")

    @staticmethod
    def _refuse(node: fx.Node, what: str):
        raise NotBucketable(f"{node.target}: {what} ({node.name})")

    def select(self, node: fx.Node, value: object) -> tuple[Axis, ...]:
        x = self.structure_of(node.args[0])
        dim, index = node.args[1] % len(x), node.args[2]
        if not is_static(x[dim]) and (not isinstance(index, int) or index < 0 or not is_clean(x[dim])):
            raise NotBucketable(f"select {index} along a padded axis (counts from the padded end) ({node.name})")
        return x[:dim] + x[dim + 1:]

    def slice(self, node: fx.Node, value: object) -> tuple[Axis, ...]:
        x = self.structure_of(node.args[0])
        dim = argument_of(node, 1, "dim", 0) % len(x)
        start, end, step = argument_of(node, 2, "start", None), argument_of(node, 3, "end", None), argument_of(node, 4, "step", 1)
        out = factors_of(_shape(value)[dim])
        start = 0 if start is None else start
        if is_static(x[dim]) and (out is None or is_static(out)):
            return x[:dim] + (out,) + x[dim + 1:]
        if out is not None and is_clean(out) and isinstance(start, int) and step == 1:
            if is_static(x[dim]) and start >= 0:
                return x[:dim] + (out,) + x[dim + 1:]  # a static table up to the length: position i reads start + i
            if x[dim] == out and start == 0:
                return x  # the whole padded axis
        if (out is not None and is_static(out) and isinstance(start, int) and isinstance(end, int) and start >= 0
                and end >= 0 and is_clean(x[dim]) and step == 1):
            return x[:dim] + (out,) + x[dim + 1:]  # a fixed window at the start: real positions only
        if out is not None and x[dim] == out and start == 0 and step == 1:
            return x
        raise NotBucketable(f"slice [{start}:{end}:{step}] along a padded axis ({node.name})")

    def mask(self, node: fx.Node, position: int, axis_number: int, axis: Axis, kind: str,
             dtype: torch.dtype, item: int | None = None) -> None:
        if is_static(axis):
            return
        if not is_clean(axis):
            raise NotBucketable(f"{node.target} reads across an axis {_product(axis)} that merges lengths "
                                f"({node.name})")
        self.state.masks.append(Mask(node.name, position, item, axis_number, axis[0], _fill(kind, dtype)))

    def reduction(self, node: fx.Node, value: object) -> object:
        x_node = node.args[0]
        x = self.structure_of(x_node)
        target = node.target
        if target in (aten._softmax.default, aten._log_softmax.default):
            dims = [node.args[1]]
        elif target in (aten.sum.default, aten.mean.default, aten.any.default, aten.prod.default):
            dims = list(range(len(x)))
        else:
            dims = argument_of(node, 1, "dim", None)
            dims = [dims] if isinstance(dims, int) else list(dims or range(len(x)))
        dims = [d % max(len(x), 1) for d in dims]
        dtype = x_node.meta["val"].dtype
        for d in dims:
            self.mask(node, 0, d, x[d], REDUCTIONS[target], dtype)
        if target in (aten.mean.dim, aten.mean.default) and any(not is_static(x[d]) for d in dims):
            if not dtype.is_floating_point:
                raise NotBucketable(f"mean of {dtype} over a padded axis ({node.name})")
            self.state.means.append(node.name)
        return _inherit(node, self.state, value)

    def contraction(self, node: fx.Node, value: object) -> tuple[Axis, ...]:
        first, a_axis, b_axis = CONTRACTIONS[node.target]
        a, b = self.structure_of(node.args[first]), self.structure_of(node.args[first + 1])
        dtype = node.args[first].meta["val"].dtype
        self.mask(node, first, a_axis, a[a_axis], "zero", dtype)
        self.mask(node, first + 1, b_axis, b[b_axis], "zero", dtype)
        return _inherit(node, self.state, value)

    def gather(self, node: fx.Node, value: object) -> tuple[Axis, ...]:
        if node.target is aten.embedding.default:
            pairs = [(node.args[0], 0, 1, None, node.args[1])]
        elif node.target is aten.gather.default:
            pairs = [(node.args[0], node.args[1], 2, None, node.args[2])]
        else:
            pairs = [(node.args[0], d, 1, d, index) for d, index in enumerate(node.args[1]) if index is not None]
        for source, dim, position, item, index in pairs:
            table = self.structure_of(source)
            along = table[dim % len(table)]
            if not is_static(along):
                iota = self.state.iotas.get(index)
                if not is_clean(along) or iota is None or iota[1] != along[0]:
                    raise NotBucketable(f"{node.target} gathers along a padded axis by computed indices ({node.name})")
                continue  # index i at position i: a read position by position, in bounds
            for axis_number, axis in enumerate(self.structure_of(index)):
                # a padded index reads 0 there (in bounds) instead of whatever was computed
                self.mask(node, position, axis_number, axis, "zero", index.meta["val"].dtype, item)
        return _inherit(node, self.state, value)

    def output(self, node: fx.Node) -> None:
        for result in _flat(node.args[0]):
            if not isinstance(result, fx.Node):
                self.output_axes.append(None)
                continue
            if result in self.state.symbolic:
                raise NotBucketable(f"the graph returns a symbolic size ({result.name})")
            structure = self.state.structure.get(result)
            if structure is None:
                self.output_axes.append(None)
                continue
            if result in self.state.views_of_inputs:
                raise NotBucketable(f"the graph returns a view of a padded input ({result.name})")
            crop = []
            for axis_number, axis in enumerate(structure):
                if is_static(axis):
                    continue
                if not is_clean(axis):
                    raise NotBucketable(f"output {result.name} has an axis {_product(axis)} that merges lengths")
                crop.append((axis_number, axis[0]))
            self.output_axes.append(tuple(crop))


