"""An independent float64 evaluator of plans, with a first-order error magnitude.

Written apart from the oracle: every member is evaluated over the full grid of its
output and fold axes at once, in float64, and folded with NumPy's own (pairwise)
reductions, so it shares neither order nor precision with the code under test.
Transcendentals are float64 NumPy/SciPy. Integers are exact (wrapping as the
fixed-width types do); integer division truncates toward zero with ``a / 0 = 0``
and float-to-int casts truncate and saturate (NaN -> 0), as the contract defines.

Alongside each float value it carries a **magnitude** ``m >= |value|``: the scale on
which rounding errors of that value are measured (a first-order forward error
analysis, in units of one relative rounding)::

    input, const      m = |x|                    (exact; non-finite values are exact too)
    a + b, a - b      m = m_a + m_b + |a +- b|
    a * b             m = m_a |b| + |a| m_b + |ab|   (inf for 0 times a factor with m past float32)
    a / b             m = m_a / |b| + |a/b| m_b / |b| + |a/b|
                      (inf where 16 * 2**-24 * m_b >= |b|: b may round to 0 or flip sign)
    f(a)              m = |f'(a)| m_a + |f(a)|   (exp, log, sqrt, rsqrt, tanh, erf, sigmoid, sin, cos)
    max, min, where   m of the operand chosen
    sum over n terms  m = sum m_t + (n - 1) sum |t|   (the worst case of any order of the n terms)
    max/min fold      m = the largest m_t

A value computed with every rounding at most ``e`` relative (``e = k * 2**-24`` for
``k`` ulps) is then within ``e * m`` of float64 to first order: cancellation
(``x - mean``), long folds and ill-conditioned functions (``exp`` of a large argument)
widen the bound exactly as far as they amplify an error, and no further.
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
from weft.mathf.definitions import TRIG_INPUT_MAX
from weft.testing import FLOAT32_UNIT, INFERENCE_ULPS

_INT = {DType.INT32: np.int32, DType.INT64: np.int64}
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _trig_in_range(function, a):
    """Weft's sin / cos are NaN for |x| > 2^22 by definition (weft.mathf.definitions)."""
    return np.where(np.abs(a) <= TRIG_INPUT_MAX, function(a), np.nan)


def _times(a, b):
    """``a * b`` with ``0 * inf = 0``: an exact zero carries no error, whatever it multiplies."""
    with np.errstate(all="ignore"):
        return np.where((np.asarray(a) == 0) | (np.asarray(b) == 0), 0.0, np.asarray(a, np.float64) * b)


def _finite_or_zero(m, value):
    """Non-finite values (inf, NaN) are exact under IEEE arithmetic: magnitude 0."""
    return np.where(np.isfinite(value), m, 0.0)


def _int_div(a, b):
    """Truncating division of fixed-width ints, ``a / 0 = 0``, ``INT_MIN / -1`` wraps."""
    dtype = np.result_type(a, b)
    wide_a, wide_b = np.asarray(a).astype(object), np.asarray(b).astype(object)
    quotient = np.vectorize(lambda x, y: 0 if y == 0 else (abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1),
                            otypes=[object])(wide_a, wide_b)
    return _wrap(quotient, dtype)


def _int_fmod(a, b):
    dtype = np.result_type(a, b)
    wide_a, wide_b = np.asarray(a).astype(object), np.asarray(b).astype(object)
    rest = np.vectorize(lambda x, y: x if y == 0 else (abs(x) % abs(y)) * (1 if x >= 0 else -1),
                        otypes=[object])(wide_a, wide_b)
    return _wrap(rest, dtype)


def _wrap(values, dtype):
    bits = np.iinfo(dtype).bits
    wrapped = np.vectorize(lambda v: (int(v) + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1), otypes=[object])(values)
    return np.asarray(wrapped, dtype=object).astype(np.int64).astype(dtype)


def float_to_int(values, dtype):
    """Truncate toward zero, saturate at the type's range, NaN -> 0."""
    info = np.iinfo(dtype)
    values = np.asarray(values, np.float64)
    safe = np.where(np.isfinite(values), np.trunc(values), 0.0)
    limit = 2.0 ** (info.bits - 1)
    out = np.where(safe >= limit, 0, np.where(safe < -limit, 0, safe)).astype(dtype)
    out = np.where(values >= limit, info.max, out)
    out = np.where(values < -limit, info.min, out)
    return np.asarray(out, dtype)


class _Member:
    """One member's body evaluated over the grid of all its axes: (value, magnitude)."""

    def __init__(self, values, magnitudes, grid):
        self.values, self.magnitudes, self.grid = values, magnitudes, grid

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
                return np.asarray(self.expr(value)[0]).astype(np.int64)
        raise TypeError(node)

    def expr(self, node):
        """(value, magnitude); magnitude is None for ints and bools (exact)."""
        match node:
            case Load(buffer, idx, padding):
                return self.load(buffer, idx, padding)
            case Const(value, dtype):
                if dtype is DType.FLOAT32:
                    v = np.float64(np.float32(value))  # the constant as the plan stores it
                    return v, _finite_or_zero(np.abs(v), v)
                return (_INT[dtype](value) if dtype in _INT else np.bool_(value)), None
            case IndexValue(idx, _):
                return np.asarray(self.index(idx)), None
            case Unary(op, operand):
                return self.unary(op, *self.expr(operand))
            case Binary(op, left, right):
                return self.binary(op, self.expr(left), self.expr(right))
            case Where(condition, a, b):
                cond = self.expr(condition)[0]
                (va, ma), (vb, mb) = self.expr(a), self.expr(b)
                value = np.where(cond, va, vb)
                return value, (None if ma is None and mb is None else np.where(cond, _m(ma, va), _m(mb, vb)))
            case Cast(operand, dtype):
                value, magnitude = self.expr(operand)
                value = np.asarray(value)
                if dtype is DType.FLOAT32:
                    v = value.astype(np.float64)
                    return v, (magnitude if magnitude is not None else np.abs(v))
                if dtype is DType.BOOL:
                    return value != 0, None
                if value.dtype.kind == "f":
                    return float_to_int(value, _INT[dtype]), None
                return value.astype(_INT[dtype]), None
        raise TypeError(node)

    def load(self, buffer, idx, padding):
        array, magnitude = self.values[buffer], self.magnitudes.get(buffer)
        positions = [np.asarray(self.index(i)) for i in idx]
        if not positions:
            return array[()], (None if magnitude is None else magnitude[()])
        inside = np.ones((), bool)
        for p, extent in zip(positions, array.shape, strict=True):
            inside = inside & (p >= 0) & (p < extent)
        clipped = tuple(np.clip(p, 0, e - 1) for p, e in zip(positions, array.shape, strict=True))
        value = array[clipped] if padding is None else np.where(inside, array[clipped], padding)
        if magnitude is None:
            return value, None
        m = magnitude[clipped] if padding is None else np.where(inside, magnitude[clipped], abs(padding))
        return value, m

    def unary(self, op, a, m):
        if m is None:  # integer or bool
            if op is UnaryOp.NOT:
                return np.logical_not(a), None
            if op is UnaryOp.NEG:
                return np.negative(a), None
            if op is UnaryOp.ABS:
                return np.abs(a), None
        a = np.asarray(a, np.float64)
        derivative = {
            UnaryOp.NEG: lambda: np.ones_like(a),
            UnaryOp.ABS: lambda: np.ones_like(a),
            UnaryOp.EXP: lambda: np.exp(a),
            UnaryOp.LOG: lambda: 1.0 / np.abs(a),
            UnaryOp.SQRT: lambda: 0.5 / np.sqrt(a),
            UnaryOp.RSQRT: lambda: 0.5 / np.abs(a) ** 1.5,
            UnaryOp.TANH: lambda: 1.0 - np.tanh(a) ** 2,
            UnaryOp.ERF: lambda: 2.0 / np.sqrt(np.pi) * np.exp(-a * a),
            UnaryOp.SIGMOID: lambda: special.expit(a) * (1.0 - special.expit(a)),
            UnaryOp.SIN: lambda: np.cos(a),
            UnaryOp.COS: lambda: np.sin(a),
        }
        value = {
            UnaryOp.NEG: np.negative, UnaryOp.ABS: np.abs, UnaryOp.EXP: np.exp, UnaryOp.LOG: np.log,
            UnaryOp.SQRT: np.sqrt, UnaryOp.RSQRT: lambda x: 1.0 / np.sqrt(x), UnaryOp.TANH: np.tanh,
            UnaryOp.ERF: special.erf, UnaryOp.SIGMOID: special.expit,
            UnaryOp.SIN: lambda x: _trig_in_range(np.sin, x), UnaryOp.COS: lambda x: _trig_in_range(np.cos, x),
        }[op](a)
        if op in (UnaryOp.NEG, UnaryOp.ABS):
            return value, m
        magnitude = _times(np.abs(derivative[op]()), m) + np.abs(value)
        return value, _finite_or_zero(magnitude, value)

    def binary(self, op, left, right):
        (a, ma), (b, mb) = left, right
        if op in (BinaryOp.LT, BinaryOp.LE, BinaryOp.GT, BinaryOp.GE, BinaryOp.EQ, BinaryOp.NE):
            compare = {BinaryOp.LT: np.less, BinaryOp.LE: np.less_equal, BinaryOp.GT: np.greater,
                       BinaryOp.GE: np.greater_equal, BinaryOp.EQ: np.equal, BinaryOp.NE: np.not_equal}[op]
            return compare(a, b), None
        if op is BinaryOp.AND:
            return np.logical_and(a, b), None
        if op is BinaryOp.OR:
            return np.logical_or(a, b), None
        if ma is None and mb is None:
            return self.integer(op, a, b), None
        ma, mb = _m(ma, a), _m(mb, b)
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if op in (BinaryOp.MAX, BinaryOp.MIN):
            pick_a = (a > b if op is BinaryOp.MAX else a < b) | np.isnan(a)
            return np.where(pick_a, a, b), np.where(pick_a, ma, mb)
        if op is BinaryOp.ADD:
            value = a + b
            magnitude = ma + mb + np.abs(value)
        elif op is BinaryOp.SUB:
            value = a - b
            magnitude = ma + mb + np.abs(value)
        elif op is BinaryOp.MUL:
            value = a * b
            magnitude = _times(ma, np.abs(b)) + _times(np.abs(a), mb) + np.abs(value)
            # an exact zero times a factor float32 may not hold (its magnitude is past float32's
            # range: it may overflow, or be inf - inf, in some legal order) may be 0 * inf = NaN
            magnitude = np.where(((a == 0) & (mb > _FLOAT32_MAX)) | ((b == 0) & (ma > _FLOAT32_MAX)), np.inf, magnitude)
        elif op is BinaryOp.DIV:
            value = a / b
            magnitude = (ma + _times(np.abs(value), mb)) / np.abs(b) + np.abs(value)
            # a denominator whose allowed error reaches its value may round to 0 or to the other
            # sign in a legal order (a normalised value of an ill-conditioned row): the quotient
            # is then any size and either sign, beyond a first-order bound: unchecked
            magnitude = np.where((mb > 0) & (INFERENCE_ULPS * FLOAT32_UNIT * mb >= np.abs(b)), np.inf, magnitude)
        elif getattr(BinaryOp, "FMOD", None) is op:
            value = np.fmod(a, b)  # exact in any precision; the quotient's error is what moves it
            magnitude = ma + _times(np.abs(np.trunc(a / b)), mb) + np.abs(value)
        else:
            raise TypeError(op)
        return value, _finite_or_zero(magnitude, value)

    @staticmethod
    def integer(op, a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind == "b":
            a = a.astype(np.int64)
        dtype = np.result_type(a, b)
        a, b = a.astype(dtype), b.astype(dtype)
        if op is BinaryOp.DIV:
            return _int_div(a, b)
        if getattr(BinaryOp, "FMOD", None) is op:
            return _int_fmod(a, b)
        if op is BinaryOp.MAX:
            return np.maximum(a, b)
        if op is BinaryOp.MIN:
            return np.minimum(a, b)
        with np.errstate(all="ignore"):
            return {BinaryOp.ADD: np.add, BinaryOp.SUB: np.subtract, BinaryOp.MUL: np.multiply}[op](a, b)


def _m(magnitude, value):
    """A magnitude for an operand that has none (ints and bools mixed into floats: exact)."""
    if magnitude is not None:
        return magnitude
    return np.abs(np.asarray(value, np.float64))


def bounds64(plan: Plan, *arrays: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every buffer's float64 value and (float buffers only) its error magnitude."""
    values: dict[str, np.ndarray] = {}
    magnitudes: dict[str, np.ndarray] = {}
    buffers = plan.buffer_map()
    for name, array in zip(plan.inputs, arrays, strict=True):
        if array.dtype.kind == "f":
            values[name] = array.astype(np.float64)
            magnitudes[name] = _finite_or_zero(np.abs(values[name]), values[name])
        else:
            values[name] = array
    for kernel in plan.kernels:
        axes = kernel.all_axes
        grid = {
            axis.name: np.arange(axis.extent).reshape([-1 if n == p else 1 for p in range(len(axes))])
            for n, axis in enumerate(axes)
        }
        full_shape = tuple(a.extent for a in axes)
        with np.errstate(all="ignore"):
            value, magnitude = _Member(values, magnitudes, grid).expr(kernel.body)
            value = np.broadcast_to(value, full_shape)
            is_float = buffers[kernel.output].dtype is DType.FLOAT32
            if is_float:
                value = np.asarray(value, np.float64)
                magnitude = np.broadcast_to(_m(magnitude, value), full_shape)
            if kernel.fold is not None:
                fold_axes = tuple(range(len(kernel.axes), len(axes)))
                count = int(np.prod([a.extent for a in kernel.fold.axes]))
                value, magnitude = _fold(kernel.fold.combiner, value, magnitude if is_float else None,
                                         fold_axes, count)
            if not is_float:
                value = np.asarray(value).astype(np.dtype(buffers[kernel.output].dtype.value))
        values[kernel.output] = np.array(value).reshape(kernel.shape)
        if is_float:
            magnitudes[kernel.output] = np.array(magnitude).reshape(kernel.shape)
    return values, magnitudes


def _fold(combiner, value, magnitude, axes, count):
    if magnitude is None:  # integers: exact, wrapping like the fixed-width type
        if combiner is Combiner.SUM:
            return np.sum(value, axis=axes, dtype=value.dtype), None
        return (np.max if combiner is Combiner.MAX else np.min)(value, axis=axes), None
    if combiner is Combiner.SUM:
        total = np.sum(value, axis=axes)
        absolute = np.sum(np.where(np.isfinite(value), np.abs(value), 0.0), axis=axes)
        reassociated = np.sum(magnitude, axis=axes) + (count - 1) * absolute
        # a non-finite total is exact, unless its finite terms may overflow float32 in a legal
        # order: then a partial sum is the opposite infinity (inf - inf = NaN). The bound is the
        # finite terms' magnitude under reassociation, which also covers a fold rescaled against a
        # running reference (the one pass sums e_j v_j, e_j <= 1, before dividing by sum e_j <= n);
        # an infinite magnitude marks it (the comparison leaves it unchecked)
        overflows = ~np.isfinite(total) & (reassociated > np.finfo(np.float32).max)
        return total, np.where(overflows, np.inf, _finite_or_zero(reassociated, total))
    # max / min: NaN propagates, as weft's max does
    reduce = np.max if combiner is Combiner.MAX else np.min
    return reduce(value, axis=axes), np.max(magnitude, axis=axes)


def values64(plan: Plan, *arrays: np.ndarray) -> dict[str, np.ndarray]:
    """Every buffer's value in float64 (float buffers only; ints and bools stay exact)."""
    return bounds64(plan, *arrays)[0]


def outputs64(plan: Plan, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The plan's outputs in float64."""
    values = values64(plan, *arrays)
    return tuple(values[name] for name in plan.outputs)


def attention64(q, k, v, keep=None, additive=None, scale=None):
    """softmax(q kᵀ · scale + additive, masked by ``keep``) v in float64 over the last two axes
    (scale: 1/sqrt(head dim); grouped-query K/V heads repeated), independent of Weft."""
    q64, k64, v64 = (np.asarray(a, np.float64) for a in (q, k, v))
    if q64.ndim == 3 and k64.shape[0] != q64.shape[0]:  # grouped-query: K/V head h // group
        group = q64.shape[0] // k64.shape[0]
        k64, v64 = np.repeat(k64, group, axis=0), np.repeat(v64, group, axis=0)
    scale = 1.0 / np.sqrt(q64.shape[-1]) if scale is None else scale
    s = np.einsum("...id,...jd->...ij", q64, k64) * scale
    if additive is not None:
        s = s + additive
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("...ij,...je->...ie", p, v64)
