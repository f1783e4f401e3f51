"""An independent float64 evaluator of plans (for Inference tolerance checks), shared by
the runtime and composition tests.

Written for tests, apart from the oracle: every member is evaluated over the full
grid of its output and fold axes at once, in float64, and folded with NumPy's own
(pairwise) reductions, so it shares neither order nor precision with the code
under test. Transcendentals are float64 NumPy/SciPy.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Cast,
    Combiner,
    Const,
    DType,
    IndexAdd,
    IndexConst,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    IndexValue,
    Load,
    Plan,
    Unary,
    UnaryOp,
    Where,
)


def _divide(a, b):
    """Float division, or integer division truncating toward zero with a / 0 = 0 and
    INT_MIN / -1 = INT_MIN (the contract), via fmod so it shares no code with the oracle."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "i" or b.dtype.kind != "i":
        return np.divide(a, b)
    dtype = np.result_type(a, b)
    a, b = a.astype(dtype), b.astype(dtype)
    ordinary = (b != 0) & (b != -1)
    divisor = np.where(ordinary, b, 1).astype(dtype)
    quotient = (a - np.fmod(a, divisor)) // divisor  # an exact multiple: floor is truncation
    return np.where(b == 0, 0, np.where(b == -1, np.negative(a), quotient)).astype(dtype)


def _cast(value, dtype: DType):
    """Casts; float to int truncates and saturates, NaN -> 0 (the contract)."""
    value = np.asarray(value)
    if dtype is DType.FLOAT32:
        return value.astype(np.float64)
    target = np.dtype(dtype.value)
    if value.dtype.kind == "f" and target.kind == "i":
        info = np.iinfo(target)
        clipped = np.clip(np.nan_to_num(value, nan=0.0), float(info.min), float(info.max))
        high = value >= 2.0 ** (info.bits - 1)
        return np.where(high, info.max, np.trunc(clipped).astype(target)).astype(target)
    return value.astype(target)


UNARY = {
    UnaryOp.NEG: np.negative, UnaryOp.ABS: np.abs, UnaryOp.EXP: np.exp, UnaryOp.LOG: np.log,
    UnaryOp.SQRT: np.sqrt, UnaryOp.RSQRT: lambda x: 1.0 / np.sqrt(x), UnaryOp.TANH: np.tanh,
    UnaryOp.ERF: special.erf, UnaryOp.SIGMOID: lambda x: 1.0 / (1.0 + np.exp(-x)), UnaryOp.NOT: np.logical_not,
}
BINARY = {
    BinaryOp.ADD: np.add, BinaryOp.SUB: np.subtract, BinaryOp.MUL: np.multiply, BinaryOp.DIV: _divide,
    BinaryOp.FMOD: np.fmod,
    BinaryOp.MAX: np.maximum, BinaryOp.MIN: np.minimum, BinaryOp.LT: np.less, BinaryOp.LE: np.less_equal,
    BinaryOp.GT: np.greater, BinaryOp.GE: np.greater_equal, BinaryOp.EQ: np.equal, BinaryOp.NE: np.not_equal,
    BinaryOp.AND: np.logical_and, BinaryOp.OR: np.logical_or,
}


FOLD = {Combiner.SUM: np.sum, Combiner.MAX: np.max, Combiner.MIN: np.min}


class _Member:
    """One member's body evaluated over the grid of all its axes."""

    def __init__(self, values, grid):
        self.values, self.grid = values, grid

    def index(self, node):
        match node:
            case AxisIndex(axis):
                return self.grid[axis]
            case IndexConst(value):
                return value
            case IndexAdd(left, right):
                return self.index(left) + self.index(right)
            case IndexMul(operand, factor):
                return self.index(operand) * factor
            case IndexFloorDiv(operand, divisor):
                return np.floor_divide(self.index(operand), divisor)
            case IndexMod(operand, divisor):
                return np.mod(self.index(operand), divisor)
            case IndexOf(value):
                return np.asarray(self.expr(value)).astype(np.int64)
        raise TypeError(node)

    def expr(self, node):
        match node:
            case Load(buffer, idx, padding):
                array = self.values[buffer]
                positions = [np.asarray(self.index(i)) for i in idx]
                if not positions:
                    return array[()]
                inside = np.ones((), bool)
                for p, extent in zip(positions, array.shape, strict=True):
                    inside = inside & (p >= 0) & (p < extent)
                clipped = tuple(np.clip(p, 0, e - 1) for p, e in zip(positions, array.shape, strict=True))
                return np.where(inside, array[clipped], padding) if padding is not None else array[clipped]
            case Const(value, dtype):
                return np.float64(value) if dtype is DType.FLOAT32 else value
            case IndexValue(idx, _):
                return np.asarray(self.index(idx))
            case Unary(op, operand):
                return UNARY[op](self.expr(operand))
            case Binary(op, left, right):
                return BINARY[op](self.expr(left), self.expr(right))
            case Where(condition, a, b):
                return np.where(self.expr(condition), self.expr(a), self.expr(b))
            case Cast(operand, dtype):
                return _cast(self.expr(operand), dtype)
        raise TypeError(node)


def values64(plan: Plan, *arrays: np.ndarray) -> dict[str, np.ndarray]:
    """Every buffer's value in float64 (float buffers only; ints and bools stay exact)."""
    values = {
        n: (a.astype(np.float64) if a.dtype.kind == "f" else a) for n, a in zip(plan.inputs, arrays, strict=True)
    }
    for kernel in plan.kernels:
        axes = kernel.all_axes
        grid = {
            axis.name: np.arange(axis.extent).reshape([-1 if n == p else 1 for p in range(len(axes))])
            for n, axis in enumerate(axes)
        }
        with np.errstate(all="ignore"):
            full = np.broadcast_to(_Member(values, grid).expr(kernel.body), tuple(a.extent for a in axes))
            if kernel.fold is not None:
                full = FOLD[kernel.fold.combiner](full, axis=tuple(range(len(kernel.axes), len(axes))))
        values[kernel.output] = np.array(full).reshape(kernel.shape)
    return values


def outputs64(plan: Plan, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The plan's outputs in float64."""
    values = values64(plan, *arrays)
    return tuple(values[name] for name in plan.outputs)
