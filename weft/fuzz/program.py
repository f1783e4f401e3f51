"""A fuzz program as data: named extents, inputs, a list of ``weft.nn`` calls, outputs.

A program is plain data so it can be generated, shrunk, sent to a worker process as
JSON, traced with ``weft.trace`` and printed as the Python a user pastes into a bug
report. Extents are *named* (``"a"``, ``"b"``) and shapes are tuples of extent
expressions, so the shrinker can make every axis that shares an extent smaller at
once and the program stays well-formed::

    dims   a=37 b=5
    inputs in0 float32 (a, 2*b) normal;  in1 float32 (2*b,) normal
    ops    v0 = add(in0, in1);  v1 = softmax(v0, axis=0)
    output v1

An extent expression is a product of factors; a factor is an int, a name, or
``name/k`` (the name's extent divided by the int ``k``, rounded up: a window grid).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from weft.errors import InputError

# ----------------------------------------------------------------------------- extents


def extent(expression: str, dims: Mapping[str, int]) -> int:
    """The value of an extent expression (``"2*a"``, ``"b/4*c"``, ``"7"``) under ``dims``."""
    if str(expression) == "-1":  # reshape's "the rest"
        return -1
    value = 1
    for factor in str(expression).split("*"):
        if factor.isdigit():
            value *= int(factor)
        elif "/" in factor:
            name, divisor = factor.split("/")
            value *= -(-(int(name) if name.isdigit() else dims[name]) // int(divisor))
        else:
            value *= dims[factor]
    return value


def shape_of(shape: tuple[str, ...], dims: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(extent(e, dims) for e in shape)


# ----------------------------------------------------------------------------- nodes


@dataclass(frozen=True)
class Ref:
    """An argument that is an earlier value (an input or an op's result)."""

    name: str


@dataclass(frozen=True)
class Refs:
    """A list of earlier values (``concat``'s first argument)."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class Dims:
    """A shape argument (``reshape``, ``expand``), as extent expressions."""

    exprs: tuple[str, ...]


@dataclass(frozen=True)
class Dim:
    """An int argument that is an extent (``window_unpartition``'s height)."""

    expr: str


@dataclass(frozen=True)
class Index:
    """``getitem``'s key: items are ints, ``None``, ``"..."`` or ``(start, stop, step)`` slices."""

    items: tuple


@dataclass(frozen=True)
class InputDef:
    """One traced input: name, shape (extent expressions), dtype and how to fill it."""

    name: str
    shape: tuple[str, ...]
    dtype: str
    fill: str
    param: bool = False


@dataclass(frozen=True)
class Op:
    """``outs = weft.nn.<fn>(*args, **kwargs)``; several outs unpack a tuple result."""

    outs: tuple[str, ...]
    fn: str
    args: tuple = ()
    kwargs: tuple[tuple[str, object], ...] = ()
    shapes: tuple[tuple[str, ...], ...] = ()  # each out's shape as the generator derived it
    dtypes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Program:
    """Everything needed to trace, run and print one fuzz case."""

    seed: int
    dims: tuple[tuple[str, int], ...]
    inputs: tuple[InputDef, ...]
    ops: tuple[Op, ...]
    outputs: tuple[str, ...]

    @property
    def dim_map(self) -> dict[str, int]:
        return dict(self.dims)

    def input_shapes(self) -> list[tuple[int, ...]]:
        dims = self.dim_map
        return [shape_of(item.shape, dims) for item in self.inputs]

    def functions(self) -> tuple[str, ...]:
        return tuple(op.fn for op in self.ops)


# ----------------------------------------------------------------------------- inputs

INT_EXTREMES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
SPECIAL_FLOATS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e-45, 1e30, -1e30, 2.5e9, -2.5e9],
                          dtype=np.float32)


def make_input(fill: str, shape: tuple[int, ...], dtype: str, seed: tuple[int, int]) -> np.ndarray:
    """One input array (see ``_fill``); the same fill, shape, dtype and seed give the same array."""
    return np.asarray(_fill(fill, tuple(shape), dtype, seed), dtype=np.dtype(dtype))


def _fill(fill: str, shape: tuple[int, ...], dtype: str, seed: tuple[int, int]) -> np.ndarray:
    """One input array. ``fill`` is ``kind[:arg[:arg]]``:

    normal[:scale], uniform:lo:hi, special (normal with NaN, +-inf, -0, huge and tiny
    values), ones, zeros, small (integers -3..3), ints:lo:hi, int_extremes (with INT_MIN,
    INT_MAX, -1, 0), ids:n (integers in [0, n)), bool:p (True with probability p),
    keymask:pattern and addmask:pattern (last axis: lead / trail / alternate / one /
    random blocks of 64 keys hidden; keymask is bool, addmask is 0 or -inf).
    """
    rng = np.random.default_rng(list(seed))
    kind, *args = fill.split(":")
    np_dtype = np.dtype(dtype)
    if kind == "normal":
        scale = float(args[0]) if args else 1.0
        return (rng.standard_normal(shape) * scale).astype(np_dtype)
    if kind == "uniform":
        return rng.uniform(float(args[0]), float(args[1]), shape).astype(np_dtype)
    if kind == "special":
        values = rng.standard_normal(shape).astype(np.float32)
        picks = rng.random(shape) < 0.15
        values[picks] = rng.choice(SPECIAL_FLOATS, size=int(picks.sum()))
        return values.astype(np_dtype)
    if kind == "ones":
        return np.ones(shape, np_dtype)
    if kind == "zeros":
        return np.zeros(shape, np_dtype)
    if kind == "small":
        return rng.integers(-3, 4, shape).astype(np_dtype)
    if kind == "ints":
        return rng.integers(int(args[0]), int(args[1]), shape).astype(np_dtype)
    if kind == "int_extremes":
        low, high = INT_EXTREMES[dtype]
        values = rng.integers(-9, 10, shape).astype(np_dtype)
        picks = rng.random(shape) < 0.3
        values[picks] = rng.choice(np.array([low, high, -1, 0, 1, low + 1], dtype=np_dtype), size=int(picks.sum()))
        return values
    if kind == "ids":
        return rng.integers(0, int(args[0]), shape).astype(np_dtype)
    if kind == "bool":
        return rng.random(shape) < float(args[0])
    if kind in ("keymask", "addmask"):
        keep = _key_pattern(args[0], shape, rng)
        if kind == "keymask":
            return keep
        return np.where(keep, 0.0, -np.inf).astype(np_dtype)
    raise InputError(f"make_input: unknown fill {fill!r}")


def _key_pattern(pattern: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Which keys (last axis) stay visible; whole blocks of 64 hidden, as padding and windows do."""
    keys = shape[-1] if shape else 1
    j = np.arange(keys)
    if pattern == "lead":  # left padding: leading blocks hidden; every fifth row sees nothing at all
        rows = np.arange(int(np.prod(shape[:-1], dtype=np.int64))).reshape(shape[:-1] + (1,))
        first = np.minimum(64 * (1 + rows % 3), keys - 1 - rows % 2)
        visible = j >= np.where(rows % 5 == 4, keys, first)
    elif pattern == "trail":
        visible = j < max(1, keys - 64)
    elif pattern == "alternate":
        visible = (j // 64) % 2 == 1
    elif pattern == "one":
        visible = j == keys // 2
    else:
        visible = rng.random(shape) < 0.7
    return np.broadcast_to(visible, shape).copy()


def resolved_fill(item: InputDef, dims: Mapping[str, int]) -> str:
    """The fill with extent expressions evaluated (``ids:v`` -> ``ids:37``)."""
    kind, *args = item.fill.split(":")
    if kind == "ids":
        args = [str(extent(args[0], dims))]
    return ":".join([kind, *args])


def input_arrays(program: Program) -> list[np.ndarray]:
    dims = program.dim_map
    return [make_input(resolved_fill(item, dims), shape_of(item.shape, dims), item.dtype, input_seed(program, item))
            for item in program.inputs]


def input_seed(program: Program, item: InputDef) -> tuple[int, int]:
    """Each input's own seed, so dropping another input leaves this one's values alone."""
    return (program.seed, int("".join(c for c in item.name if c.isdigit()) or 0))


# ----------------------------------------------------------------------------- tracing


def _argument(value: object, env: Mapping[str, object], dims: Mapping[str, int]) -> object:
    match value:
        case Ref(name):
            return env[name]
        case Refs(names):
            return [env[n] for n in names]
        case Dims(exprs):
            return tuple(extent(e, dims) for e in exprs)
        case Dim(expr):
            return extent(expr, dims)
        case Index(items):
            return tuple(_index_item(i) for i in items)
    return value


def _index_item(item: object) -> object:
    if item == "...":
        return Ellipsis
    if isinstance(item, tuple | list):
        return slice(*item)
    return item


def program_function(program: Program, prefix: str = "") -> Callable:
    """A function of the program's inputs that calls ``weft.nn`` op by op (for ``weft.trace``)."""
    from weft import nn

    dims = program.dim_map

    def run(*tensors):
        env: dict[str, object] = {item.name: t for item, t in zip(program.inputs, tensors, strict=True)}
        for op in program.ops:
            function = getattr(nn, op.fn)
            args = [_argument(a, env, dims) for a in op.args]
            kwargs = {k: _argument(v, env, dims) for k, v in op.kwargs}
            result = function(*args, **kwargs)
            results = result if len(op.outs) > 1 else (result,)
            env.update(zip(op.outs, results, strict=True))
        return tuple(env[name] for name in program.outputs)

    names = [prefix + item.name for item in program.inputs]
    run.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    run.__name__ = prefix.rstrip("_") or "program"
    return run


def specs(program: Program):
    from weft import nn

    return [nn.spec(shape, item.dtype, param=item.param)
            for item, shape in zip(program.inputs, program.input_shapes(), strict=True)]


def trace_program(program: Program):
    """The program's Plan (raises the ``WeftError`` that tracing raises)."""
    from weft import nn

    return nn.trace(program_function(program), *specs(program), name="fuzz")


def trace_batch(programs: list[Program]):
    """Several programs as one Plan (one compile: the C compiler's start-up dominates
    small plans). Inputs and members are prefixed ``p<n>_``; returns the plan and, per
    program, the positions of its outputs among the plan's outputs."""
    from weft import nn

    functions = [program_function(p, f"p{n}_") for n, p in enumerate(programs)]
    counts = [len(p.inputs) for p in programs]
    names = [name for f in functions for name in inspect.signature(f).parameters]

    def run_all(*tensors):
        results, start = [], 0
        for n, (function, count) in enumerate(zip(functions, counts, strict=True)):
            with nn.name_scope(f"p{n}"):
                results.extend(function(*tensors[start:start + count]))
            start += count
        return tuple(results)

    run_all.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    plan = nn.trace(run_all, *[s for p in programs for s in specs(p)], name="fuzz_batch")
    positions, start = [], 0
    for program in programs:
        positions.append(tuple(range(start, start + len(program.outputs))))
        start += len(program.outputs)
    return plan, positions


# ----------------------------------------------------------------------------- JSON


def to_json(program: Program) -> str:
    return json.dumps(_encode(program))


def _encode(value: object) -> object:
    if dataclasses.is_dataclass(value):
        return {"__": type(value).__name__, **{f.name: _encode(getattr(value, f.name))
                                               for f in dataclasses.fields(value)}}
    if isinstance(value, tuple | list):
        return {"__": "tuple", "items": [_encode(v) for v in value]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"__": "float", "repr": repr(value)}
    return value


_NODES = {cls.__name__: cls for cls in (Ref, Refs, Dims, Dim, Index, InputDef, Op, Program)}


def from_json(text: str) -> Program:
    return _decode(json.loads(text))


def _decode(value: object) -> object:
    if isinstance(value, dict):
        kind = value["__"]
        if kind == "tuple":
            return tuple(_decode(v) for v in value["items"])
        if kind == "float":
            return float(value["repr"])
        return _NODES[kind](**{k: _decode(v) for k, v in value.items() if k != "__"})
    return value
