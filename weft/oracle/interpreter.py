"""The oracle: a NumPy interpreter of the IR, member by member.

It defines correct output. Every fold is an explicit loop over the fold axes in
ascending row-major order with one float32 accumulator per output (vectorised over
the output axes), so the order of every sum is the defined one. Transcendentals
come from ``weft.mathf``, the float32 operation sequences that the C renderer
mirrors op for op. Slow is fine; wrong is not.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from weft import mathf
from weft.errors import InputError
from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Cast,
    Combiner,
    Const,
    DType,
    Expr,
    IndexAdd,
    IndexConst,
    IndexExpr,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    IndexValue,
    Kernel,
    Load,
    Plan,
    Unary,
    UnaryOp,
    Where,
    verify,
)

NUMPY_DTYPE = {
    DType.FLOAT32: np.dtype(np.float32),
    DType.INT32: np.dtype(np.int32),
    DType.INT64: np.dtype(np.int64),
    DType.BOOL: np.dtype(np.bool_),
}


def weft_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """max(a, b) = a if a > b or a is NaN, else b (NaN propagates; the C side matches)."""
    return np.where((a > b) | (a != a), a, b)


def weft_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min(a, b) = a if a < b or a is NaN, else b."""
    return np.where((a < b) | (a != a), a, b)


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero, defined for every pair (the C side matches):
    ``a / 0 = 0`` and ``INT_MIN / -1 = INT_MIN`` (two's-complement wrap, no trap)."""
    dtype = np.result_type(a, b)
    a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    ordinary = (b != 0) & (b != -1)
    divisor = np.where(ordinary, b, 1).astype(dtype)
    floor = np.floor_divide(a, divisor)
    # floor and truncation differ by one where the division is inexact and the signs differ
    inexact = (floor * divisor) != a
    truncated = np.where(inexact & ((a < 0) != (divisor < 0)), floor + dtype.type(1), floor)
    negated = np.negative(a)  # wraps: -INT_MIN == INT_MIN
    return np.where(b == 0, dtype.type(0), np.where(b == -1, negated, truncated)).astype(dtype)


def _int_fmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The remainder of ``_int_div``: ``a - (a / b) * b`` (wrapping), so ``a % 0 = a`` and
    ``INT_MIN % -1 = 0``; it has the sign of ``a`` (C's ``%``)."""
    dtype = np.result_type(a, b)
    a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    return (a - _int_div(a, b) * b).astype(dtype)


def _divide(a, b):
    return _int_div(a, b) if np.asarray(a).dtype.kind == "i" else np.divide(a, b)


def _fmod(a, b):
    return _int_fmod(a, b) if np.asarray(a).dtype.kind == "i" else np.fmod(a, b)


def _float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float to int truncating toward zero and saturating, defined for every input (C matches):
    NaN -> 0; +inf and values >= 2**(bits-1) -> the maximum; -inf and values below
    -2**(bits-1) -> the minimum."""
    info = np.iinfo(dtype)
    x = np.asarray(x)
    limit = x.dtype.type(2.0 ** (info.bits - 1))  # exactly representable; the max is not
    high, low = x >= limit, x < -limit
    safe = np.where(high | low | (x != x), x.dtype.type(0), x)
    converted = safe.astype(dtype)
    return np.where(high, dtype.type(info.max), np.where(low, dtype.type(info.min), converted))


def cast(value, dtype: np.dtype) -> np.ndarray:
    """``Cast`` in the oracle: NumPy's conversion except float to int (``_float_to_int``)."""
    value = np.asarray(value)
    if value.dtype.kind == "f" and dtype.kind == "i":
        return _float_to_int(value, dtype)
    return value.astype(dtype)


NUMPY_UNARY = {
    UnaryOp.NEG: np.negative,
    UnaryOp.ABS: np.abs,
    UnaryOp.EXP: mathf.exp,
    UnaryOp.LOG: mathf.log,
    UnaryOp.SQRT: np.sqrt,
    UnaryOp.RSQRT: lambda x: np.float32(1.0) / np.sqrt(x),
    UnaryOp.TANH: mathf.tanh,
    UnaryOp.ERF: mathf.erf,
    UnaryOp.SIGMOID: mathf.sigmoid,
    UnaryOp.SIN: mathf.sin,
    UnaryOp.COS: mathf.cos,
    UnaryOp.NOT: np.logical_not,
}

NUMPY_BINARY = {
    BinaryOp.ADD: np.add,
    BinaryOp.SUB: np.subtract,
    BinaryOp.MUL: np.multiply,
    BinaryOp.DIV: _divide,
    BinaryOp.FMOD: _fmod,
    BinaryOp.MAX: weft_max,
    BinaryOp.MIN: weft_min,
    BinaryOp.LT: np.less,
    BinaryOp.LE: np.less_equal,
    BinaryOp.GT: np.greater,
    BinaryOp.GE: np.greater_equal,
    BinaryOp.EQ: np.equal,
    BinaryOp.NE: np.not_equal,
    BinaryOp.AND: np.logical_and,
    BinaryOp.OR: np.logical_or,
}

FOLD_INIT = {Combiner.SUM: 0.0, Combiner.MAX: -np.inf, Combiner.MIN: np.inf}
FOLD_INIT_INT = {Combiner.SUM: 0, Combiner.MAX: None, Combiner.MIN: None}
FOLD_COMBINE = {Combiner.SUM: np.add, Combiner.MAX: weft_max, Combiner.MIN: weft_min}


def fold_identity(combiner: Combiner, dtype: DType):
    if dtype.is_float:
        return np.float32(FOLD_INIT[combiner])
    info = np.iinfo(NUMPY_DTYPE[dtype])
    identity = {Combiner.SUM: 0, Combiner.MAX: info.min, Combiner.MIN: info.max}[combiner]
    return NUMPY_DTYPE[dtype].type(identity)


class _Evaluator:
    """Evaluates one member's body at a grid of points given by ``env``."""

    def __init__(self, values: Mapping[str, np.ndarray], env: Mapping[str, np.ndarray | int], member: str):
        self.values = values
        self.env = env
        self.member = member

    def index(self, index: IndexExpr):
        match index:
            case AxisIndex(axis):
                return self.env[axis]
            case IndexConst(value):
                return np.int64(value)
            case IndexAdd(left, right):
                return self.index(left) + self.index(right)
            case IndexMul(operand, factor):
                return self.index(operand) * np.int64(factor)
            case IndexFloorDiv(operand, divisor):
                return np.floor_divide(self.index(operand), np.int64(divisor))
            case IndexMod(operand, divisor):
                return np.mod(self.index(operand), np.int64(divisor))
            case IndexOf(value):
                return np.asarray(self.expr(value)).astype(np.int64)
        raise TypeError(f"not an index expression: {index!r}")

    def expr(self, expr: Expr):
        match expr:
            case Load(buffer, index, padding):
                return self.load(buffer, index, padding)
            case Const(value, dtype):
                return NUMPY_DTYPE[dtype].type(value)
            case IndexValue(index, dtype):
                return np.asarray(self.index(index)).astype(NUMPY_DTYPE[dtype])
            case Unary(op, operand):
                return NUMPY_UNARY[op](self.expr(operand))
            case Binary(op, left, right):
                return NUMPY_BINARY[op](self.expr(left), self.expr(right))
            case Where(condition, if_true, if_false):
                return np.where(self.expr(condition), self.expr(if_true), self.expr(if_false))
            case Cast(operand, dtype):
                return cast(self.expr(operand), NUMPY_DTYPE[dtype])
        raise TypeError(f"not an expression: {expr!r}")

    def load(self, buffer: str, index: tuple[IndexExpr, ...], padding: float | None):
        array = self.values[buffer]
        positions = [self.index(i) for i in index]
        if not positions:
            return array[()]
        inside = np.bool_(True)
        clipped = []
        for position, extent in zip(positions, array.shape, strict=True):
            ok = (position >= 0) & (position < extent)
            inside = inside & ok
            clipped.append(np.clip(position, 0, extent - 1))
        if padding is None:
            if not np.all(inside):
                raise InputError(
                    f"member {self.member}: an index into {buffer} (shape {array.shape}) is out of range;"
                    " a gather index (e.g. a token id or target) lies outside the table"
                )
            return array[tuple(clipped)]
        gathered = array[tuple(clipped)]
        return np.where(inside, gathered, array.dtype.type(padding))


def _axis_grid(kernel: Kernel) -> dict[str, np.ndarray]:
    rank = len(kernel.axes)
    env = {}
    for position, axis in enumerate(kernel.axes):
        shape = [1] * rank
        shape[position] = axis.extent
        env[axis.name] = np.arange(axis.extent, dtype=np.int64).reshape(shape)
    return env


def run_kernel(kernel: Kernel, values: Mapping[str, np.ndarray], dtype: DType) -> np.ndarray:
    """Evaluate one member over its whole output; folds loop in ascending order."""
    env = _axis_grid(kernel)
    shape = kernel.shape
    np_dtype = NUMPY_DTYPE[dtype]
    if 0 in shape:  # an empty member: nothing to evaluate (its reads may name no element)
        return np.empty(shape, np_dtype)
    if kernel.fold is None:
        result = _Evaluator(values, env, kernel.output).expr(kernel.body)
        return np.array(np.broadcast_to(np.asarray(result, dtype=np_dtype), shape), order="C")  # keeps 0-d
    combine = FOLD_COMBINE[kernel.fold.combiner]
    accumulator = np.full(shape, fold_identity(kernel.fold.combiner, dtype), dtype=np_dtype)
    fold_ranges = [range(axis.extent) for axis in kernel.fold.axes]
    fold_names = [axis.name for axis in kernel.fold.axes]
    for point in itertools.product(*fold_ranges):
        local = dict(env)
        local.update({name: np.int64(value) for name, value in zip(fold_names, point, strict=True)})
        term = np.asarray(_Evaluator(values, local, kernel.output).expr(kernel.body), dtype=np_dtype)
        accumulator = np.asarray(combine(accumulator, term), dtype=np_dtype)
    return np.array(np.broadcast_to(accumulator, shape), order="C")  # keeps 0-d


def check_inputs(plan: Plan, arrays) -> list[np.ndarray]:
    """Validate arrays against the plan's inputs; return them as NumPy arrays."""
    if len(arrays) != len(plan.inputs):
        names = ", ".join(plan.inputs)
        raise InputError(f"plan {plan.name} takes {len(plan.inputs)} inputs ({names}) but got {len(arrays)}")
    checked = []
    for name, array in zip(plan.inputs, arrays, strict=True):
        buffer = plan.buffer(name)
        if not isinstance(array, np.ndarray):
            raise InputError(
                f"plan {plan.name}: input {name} must be a numpy.ndarray, got {type(array).__name__}"
            )
        expected = NUMPY_DTYPE[buffer.dtype]
        if array.shape != buffer.shape:
            raise InputError(f"plan {plan.name}: input {name} has shape {array.shape}, expected {buffer.shape}")
        if array.dtype != expected:
            raise InputError(
                f"plan {plan.name}: input {name} has dtype {array.dtype}, expected {expected};"
                f" pass array.astype(numpy.{expected})"
            )
        checked.append(array)
    return checked


def run_all(plan: Plan, *arrays: np.ndarray) -> dict[str, np.ndarray]:
    """Every buffer's value (inputs and all members), by name."""
    verify(plan)
    values: dict[str, np.ndarray] = dict(zip(plan.inputs, check_inputs(plan, arrays), strict=True))
    buffers = plan.buffer_map()
    with np.errstate(all="ignore"):
        for kernel in plan.kernels:
            values[kernel.output] = run_kernel(kernel, values, buffers[kernel.output].dtype)
    return values


def run(plan: Plan, *arrays: np.ndarray, **named: np.ndarray):
    """The plan's outputs: one array, or a tuple when the plan has several.

    Inputs as a compiled plan takes them: positionally in the plan's order, or by
    name (``x=x, weights={"wq": wq}``; see ``weft.arguments``)."""
    if named or any(not isinstance(array, np.ndarray) for array in arrays):
        from weft.arguments import arrange_inputs

        arrays = tuple(arrange_inputs(plan.name, plan.inputs, arrays, named))
    values = run_all(plan, *arrays)
    outputs = tuple(values[name] for name in plan.outputs)
    return outputs[0] if len(outputs) == 1 else outputs
