"""Random programs over the whole ``weft.nn`` surface.

``generate(seed, index, options)`` (in ``weft.fuzz.makers``, beside the makers it draws from) is deterministic: a program is named by its seed
and index, so a worker process rebuilds it from two ints and a failure is
reproducible by ``python -m weft.fuzz --seed S --start I --programs 1``.

Each ``weft.nn`` function has a *maker* (``weft.fuzz.makers``, ``weft.fuzz.views``) that picks operands
from the values built so far (or makes new inputs of fitting shapes) and appends one
call. ``COVERAGE`` maps every public ``weft.nn`` function to its maker; ``EXCLUDED``
lists, with the reason, the public names that are not tensor operations. A test
fails when ``weft.nn`` grows a function that is in neither.

Sizes run from 1 to a few hundred per axis, with the extents that stress vector
code (15, 16, 17, 63, 64, 65, 129...), while every value stays under ``Budget``
elements and every fold under ``Budget.fold`` terms, so a few hundred programs run
in minutes (the oracle loops over fold terms in Python).

Under the Inference contract a result may differ from float64 by the tolerance, so
discontinuous operations (comparisons, float-to-int or float-to-bool casts) are
applied only to *exact* values (inputs, and what neg, abs, max, min, where, views
and integer arithmetic make of them); a comparison of two rounded values could flip
under any correct reassociation and is no evidence of a bug.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from weft.fuzz.program import InputDef, Op, Program, shape_of

FLOAT, INT32, INT64, BOOL = "float32", "int32", "int64", "bool"

# Issue 8's open defects. With ``avoid_known_bugs`` the generator steers around each,
# so a run checks everything else; by default it aims at them.
KNOWN_BUGS = {
    "masked-attention-nan": "issue 8 item 1: Inference+greedy attention, rows whose first 64+ keys are masked -> NaN",
    "int-min-div": "issue 8 item 2: INT_MIN / -1 traps (SIGFPE); the oracle's division by or of INT_MIN is wrong",
    "float-int-cast": "issue 8 item 2: float->int cast of NaN/inf/out-of-range is undefined in C",
    "huge-score-nan": "issue 8 item 5: Inference+greedy attention with |score| > ~1.5e9 -> NaN",
    "value-dim-1": "issue 8 item 6: Inference+greedy attention with value head dim 1 and 16+ keys -> KeyError 'e'",
}


# how often a function is drawn, relative to 1: the members the composition engine
# rewrites most (attention's one pass, normalisations, contractions) get more programs
WEIGHTS = {"attention": 10, "softmax": 2, "log_softmax": 2, "layer_norm": 2, "rms_norm": 2, "matmul": 2,
           "linear": 2, "cross_entropy": 2, "div": 2, "cast": 2, "conv2d": 2}


@dataclass(frozen=True)
class Budget:
    elements: int = 24_576  # per value
    fold: int = 2_048  # terms per fold (the oracle loops over them)
    work: int = 2_000_000  # output elements x fold terms of one member


@dataclass(frozen=True)
class Options:
    contract: str = "strict"
    avoid_known_bugs: frozenset[str] = frozenset()
    budget: Budget = field(default_factory=Budget)
    max_ops: int = 6


@dataclass(frozen=True)
class Value:
    name: str
    shape: tuple[str, ...]
    dtype: str
    exact: bool


class Builder:
    """The program under construction: extents, inputs, ops and the values they name."""

    def __init__(self, rng: random.Random, options: Options, seed: int) -> None:
        self.rng = rng
        self.options = options
        self.seed = seed
        self.dims: dict[str, int] = {}
        self.inputs: list[InputDef] = []
        self.ops: list[Op] = []
        self.values: list[Value] = []
        self.budget = options.budget

    # -------------------------------------------------------------- policy

    @property
    def inference(self) -> bool:
        return self.options.contract == "inference"

    def allows(self, bug: str) -> bool:
        return bug not in self.options.avoid_known_bugs

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # -------------------------------------------------------------- extents

    def pick_extent(self, high: int = 300) -> int:
        """1 to a few hundred, weighted to the edges of vector widths."""
        high = max(1, high)
        roll = self.rng.random()
        if roll < 0.12:
            choice = 1
        elif roll < 0.4:
            choice = self.rng.randint(2, 8)
        elif roll < 0.6:
            choice = self.rng.choice([15, 16, 17, 31, 32, 33, 63, 64, 65])
        elif roll < 0.8:
            choice = self.rng.randint(9, 48)
        else:
            choice = self.rng.choice([96, 127, 128, 129, 150, 200, 255, 257, 300])
        return max(1, min(choice, high))

    def new_dim(self, high: int = 300, low: int = 1) -> str:
        """A named extent in [low, high]; reuses an existing name a third of the time."""
        fitting = [n for n, e in self.dims.items() if low <= e <= high]
        if fitting and self.chance(0.33):
            return self.rng.choice(fitting)
        name = f"d{len(self.dims)}"
        value = self.pick_extent(high)
        self.dims[name] = value if value >= low else self.rng.randint(low, max(low, high))
        return name

    def size(self, shape: tuple[str, ...]) -> int:
        total = 1
        for e in shape_of(shape, self.dims):
            total *= e
        return total

    def new_shape(self, rank: int, limit: int | None = None) -> tuple[str, ...]:
        """A shape of ``rank`` named extents whose size stays within ``limit``."""
        room = limit or self.budget.elements
        shape = []
        for _ in range(rank):
            name = self.new_dim(high=min(300, max(1, room)))
            room = max(1, room // self.dims[name])
            shape.append(name)
        self.rng.shuffle(shape)
        return tuple(shape)

    # -------------------------------------------------------------- inputs and values

    def float_fill(self) -> str:
        roll = self.rng.random()
        special = 0.06 if self.inference else 0.12
        if roll < special:
            return "special"
        return self.rng.choice(["normal", "normal", "normal", "normal:8", "uniform:0.05:3", "small", "normal:0.01"])

    def int_fill(self) -> str:
        return "int_extremes" if self.chance(0.2) else self.rng.choice(["ints:-20:21", "ints:-3:4", "ints:0:100"])

    def new_input(self, shape: tuple[str, ...], dtype: str = FLOAT, fill: str | None = None,
                  param: bool = False) -> Value:
        name = f"in{len(self.inputs)}"
        if fill is None:
            fill = {FLOAT: self.float_fill, BOOL: lambda: f"bool:{self.rng.choice([0.1, 0.5, 0.9])}"}.get(
                dtype, self.int_fill)()
        self.inputs.append(InputDef(name, tuple(shape), dtype, fill, param))
        value = Value(name, tuple(shape), dtype, True)
        self.values.append(value)
        return value

    def emit(self, fn: str, args: tuple, kwargs: dict, shape: tuple[str, ...], dtype: str, exact: bool) -> Value:
        name = f"v{len(self.ops)}"
        self.ops.append(Op((name,), fn, tuple(args), tuple(kwargs.items()), (tuple(shape),), (dtype,)))
        value = Value(name, tuple(shape), dtype, exact)
        self.values.append(value)
        return value

    def emit_many(self, fn: str, args: tuple, kwargs: dict, shapes, dtype: str) -> tuple[Value, ...]:
        names = tuple(f"v{len(self.ops)}_{n}" for n in range(len(shapes)))
        self.ops.append(Op(names, fn, tuple(args), tuple(kwargs.items()), tuple(map(tuple, shapes)),
                           (dtype,) * len(shapes)))
        values = tuple(Value(n, tuple(s), dtype, False) for n, s in zip(names, shapes, strict=True))
        self.values.extend(values)
        return values

    def existing(self, dtypes=(FLOAT,), min_rank: int = 0, max_rank: int = 6, exact: bool = False,
                 limit: int | None = None) -> Value | None:
        """A value built so far (recent ones first) that fits, or None."""
        fitting = [v for v in self.values if v.dtype in dtypes and min_rank <= len(v.shape) <= max_rank
                   and (v.exact or not exact) and self.size(v.shape) <= (limit or self.budget.elements)]
        if not fitting:
            return None
        if self.chance(0.6):
            return fitting[-1]
        return self.rng.choice(fitting)

    def operand(self, dtype: str = FLOAT, min_rank: int = 0, max_rank: int = 4, exact: bool = False,
                limit: int | None = None, reuse: float = 0.7) -> Value:
        """An existing value (probability ``reuse``) or a new input of a fresh shape."""
        if self.chance(reuse):
            found = self.existing((dtype,), min_rank, max_rank, exact, limit)
            if found is not None:
                return found
        rank = self.rng.randint(min_rank, max(min_rank, min(max_rank, 3)))
        return self.new_input(self.new_shape(rank, limit), dtype)

    def partner_shape(self, shape: tuple[str, ...]) -> tuple[str, ...]:
        """A shape that broadcasts against ``shape``: some extents 1, some leading ones dropped,
        now and then a new leading extent."""
        result = [e if self.chance(0.7) else "1" for e in shape]
        drop = self.rng.randint(0, len(result)) if self.chance(0.3) else 0
        result = result[drop:]
        if not drop and self.chance(0.15) and self.size(shape) * 4 <= self.budget.elements:
            result.insert(0, self.new_dim(high=4))
        return tuple(result)

    def partner(self, value: Value, exact: bool = False) -> Value:
        """A second operand for an elementwise op on ``value`` (same shape or broadcasting)."""
        same = [v for v in self.values if v.shape == value.shape and v.dtype == value.dtype
                and v is not value and (v.exact or not exact)]
        if same and self.chance(0.4):
            return self.rng.choice(same)
        return self.new_input(self.partner_shape(value.shape), value.dtype)

    def scalar(self, dtype: str) -> object:
        if dtype == FLOAT:
            return self.rng.choice([0.0, 1.0, -1.0, 0.5, 2.0, -3.25, 1e-3, 100.0])
        return self.rng.choice([0, 1, -1, 2, 3, -7])


def broadcast(*shapes: tuple[str, ...]) -> tuple[str, ...]:
    """NumPy broadcasting over extent expressions (equal expressions, or one is "1")."""
    rank = max(len(s) for s in shapes)
    result = []
    for position in range(rank):
        extents = {s[position - rank + len(s)] for s in shapes if position - rank + len(s) >= 0}
        extents.discard("1")
        if len(extents) > 1:
            raise AssertionError(f"generator bug: {shapes} do not broadcast")
        result.append(extents.pop() if extents else "1")
    return tuple(result)


def prune(program: Program) -> Program:
    """Drop ops no output needs and inputs no op reads."""
    from weft.fuzz.program import Ref, Refs

    needed = set(program.outputs)
    kept = []
    for op in reversed(program.ops):
        if needed.intersection(op.outs):
            kept.append(op)
            for arg in list(op.args) + [v for _, v in op.kwargs]:
                if isinstance(arg, Ref):
                    needed.add(arg.name)
                elif isinstance(arg, Refs):
                    needed.update(arg.names)
    kept.reverse()
    inputs = tuple(i for i in program.inputs if i.name in needed)
    used = set()
    for item in inputs:
        used.update(_names_in(item.shape) | _names_in((item.fill.split(":")[1],) if item.fill.startswith("ids") else ()))
    for op in kept:
        for shape in op.shapes:
            used.update(_names_in(shape))
        for arg in list(op.args) + [v for _, v in op.kwargs]:
            used.update(_arg_dims(arg))
    dims = tuple((n, e) for n, e in program.dims if n in used)
    return Program(program.seed, dims, inputs, tuple(kept), program.outputs)


def _names_in(shape) -> set[str]:
    names = set()
    for expr in shape:
        for factor in str(expr).split("*"):
            factor = factor.split("/")[0]
            if factor and not factor.lstrip("-").isdigit():
                names.add(factor)
    return names


def _arg_dims(arg) -> set[str]:
    from weft.fuzz.program import Dim, Dims

    if isinstance(arg, Dims):
        return _names_in(arg.exprs)
    if isinstance(arg, Dim):
        return _names_in((arg.expr,))
    return set()
