"""An independent float64 evaluator of weft IR, for Inference checks in tests.

Written separately from the oracle (whole-grid broadcasting, float64 NumPy and
libm functions, folds reduced with NumPy) so that it can catch errors in both the
oracle-based schedule and the rewrite.
"""

from __future__ import annotations

import numpy as np
import scipy.special

from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Cast,
    Combiner,
    Const,
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

UNARY = {
    UnaryOp.NEG: np.negative, UnaryOp.ABS: np.abs, UnaryOp.EXP: np.exp, UnaryOp.LOG: np.log,
    UnaryOp.SQRT: np.sqrt, UnaryOp.RSQRT: lambda x: 1.0 / np.sqrt(x), UnaryOp.TANH: np.tanh,
    UnaryOp.ERF: scipy.special.erf, UnaryOp.SIGMOID: lambda x: 1.0 / (1.0 + np.exp(-x)),
    UnaryOp.NOT: np.logical_not,
}
BINARY = {
    BinaryOp.ADD: np.add, BinaryOp.SUB: np.subtract, BinaryOp.MUL: np.multiply, BinaryOp.DIV: np.divide,
    BinaryOp.MAX: np.maximum, BinaryOp.MIN: np.minimum, BinaryOp.LT: np.less, BinaryOp.LE: np.less_equal,
    BinaryOp.GT: np.greater, BinaryOp.GE: np.greater_equal, BinaryOp.EQ: np.equal, BinaryOp.NE: np.not_equal,
    BinaryOp.AND: np.logical_and, BinaryOp.OR: np.logical_or,
}


def evaluate64(plan: Plan, *arrays: np.ndarray) -> dict[str, np.ndarray]:
    values = {
        name: (a.astype(np.float64) if a.dtype.kind == "f" else a) for name, a in zip(plan.inputs, arrays, strict=False)
    }
    for kernel in plan.kernels:
        values[kernel.output] = _evaluate_kernel(kernel, values)
    return values


def _evaluate_kernel(kernel, values):
    axes = kernel.all_axes
    env = {}
    for position, axis in enumerate(axes):
        shape = [1] * len(axes)
        shape[position] = axis.extent
        env[axis.name] = np.arange(axis.extent).reshape(shape)

    def index(node):
        match node:
            case AxisIndex(a):
                return env[a]
            case IndexConst(v):
                return np.int64(v)
            case IndexAdd(l, r):
                return index(l) + index(r)
            case IndexMul(o, f):
                return index(o) * f
            case IndexFloorDiv(o, d):
                return index(o) // d
            case IndexMod(o, d):
                return index(o) % d
            case IndexOf(v):
                return np.asarray(expr(v)).astype(np.int64)

    def expr(node):
        match node:
            case Load(buffer, idx, padding):
                array = values[buffer]
                if not idx:
                    return array[()]
                pos = [index(i) for i in idx]
                inside = np.bool_(True)
                for p, n in zip(pos, array.shape, strict=False):
                    inside = inside & (p >= 0) & (p < n)
                got = array[tuple(np.clip(p, 0, n - 1) for p, n in zip(pos, array.shape, strict=False))]
                return got if padding is None else np.where(inside, got, padding)
            case Const(v, dtype):
                return np.float64(v) if dtype.is_float else v
            case IndexValue(i, _):
                return index(i)
            case Unary(op, o):
                return UNARY[op](expr(o))
            case Binary(op, l, r):
                return BINARY[op](expr(l), expr(r))
            case Where(c, a, b):
                return np.where(expr(c), expr(a), expr(b))
            case Cast(o, dtype):
                return np.asarray(expr(o)).astype(np.float64 if dtype.is_float else np.int64)

    with np.errstate(all="ignore"):
        grid = np.broadcast_to(expr(kernel.body), tuple(a.extent for a in axes))
        if kernel.fold:
            fold_positions = tuple(range(len(kernel.axes), len(axes)))
            reduce = {Combiner.SUM: np.sum, Combiner.MAX: np.max, Combiner.MIN: np.min}[kernel.fold.combiner]
            grid = reduce(grid, axis=fold_positions)
    return np.array(grid)
