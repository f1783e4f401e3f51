"""Reductions and the normalisations built from them, as plain members.

A reduction is one member with a fold. ``mean`` folds ``x * (1/N)`` (the scale is
carried by each term) so it stays one member instead of a sum plus a divide; the
rounding differs from sum-then-divide by about one ulp per term, and not at all
when N is a power of two.

Member shapes (what the composition engine sees), for rows r and reduced axis j::

    softmax:     max[r] = max_j x;  exp[r,j] = exp(x - max);  sum[r] = sum_j exp;  out = exp / sum
    layer_norm:  mean[r] = sum_j x*(1/N);  centered = x - mean;
                 var[r] = sum_j centered*centered*(1/N);  out = centered * rsqrt(var + eps) * w + b
    rms_norm:    ms[r] = sum_j x*x*(1/N);  out = x * rsqrt(ms + eps) * w

Cross-entropy is in ``weft.nn.losses``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from weft.errors import DTypeError, ShapeError
from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Cast,
    Combiner,
    Const,
    DType,
    Expr,
    Fold,
    IndexExpr,
    Unary,
    UnaryOp,
)
from weft.nn.elementwise import mul_expr
from weft.nn.tensor import Tensor, axis_index, current_tracer
from weft.nn.views import normalize_axes, reshape


def _sub(a: Expr, b: Expr) -> Expr:
    return Binary(BinaryOp.SUB, a, b)


def _need_float(op: str, x: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise DTypeError(f"{op}: needs a Tensor, got {type(x).__name__}")
    if not x.dtype.is_float:
        raise DTypeError(f"{op}: needs float32 input, got {x.dtype.value} of shape {x.shape}; cast first")


def _zero_d_axes(op: str, axes: int | Sequence[int] | None) -> None:
    """PyTorch lets a 0-d tensor take dim 0 or -1 (and ``()``/``None``): it has one element."""
    listed = () if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
    if any(a not in (0, -1) for a in listed):
        raise ShapeError(f"{op}: dim {listed} is out of range for a 0-d tensor (shape ()); use 0 or -1")


def reduce(
    op: str,
    x: Tensor,
    axes: int | Sequence[int] | None,
    combiner: Combiner,
    keepdims: bool = False,
    term: Callable[[Expr], Expr] = lambda value: value,
    label: str | None = None,
    dtype: DType | None = None,
) -> Tensor:
    """One member folding ``term(x)`` over ``axes`` with ``combiner`` (``axes=()`` or None:
    every axis, as PyTorch's ``dim=()``; a 0-d ``x`` takes dim 0 or -1); result ``dtype``
    (default ``x``'s)."""
    if not isinstance(x, Tensor):
        raise DTypeError(f"{op}: needs a Tensor, got {type(x).__name__}")
    if x.dtype is DType.BOOL and dtype is None:
        raise DTypeError(f"{op}: cannot reduce bool values of shape {x.shape}; cast to float32 or int first")
    if x.ndim == 0:
        _zero_d_axes(op, axes)
        axes = ()
    elif axes is not None and not isinstance(axes, int) and len(tuple(axes)) == 0:
        axes = None
    reduced = normalize_axes(op, axes, x.shape)
    tracer = current_tracer(x)
    out_axes: list[Axis] = []
    fold_axes: list[Axis] = []
    index: list[IndexExpr] = []
    for d, extent in enumerate(x.shape):
        if d in reduced:
            fold_axes.append(Axis(f"r{d}", extent))
            index.append(AxisIndex(f"r{d}"))
            if keepdims:
                out_axes.append(Axis(f"i{d}", 1))
        else:
            out_axes.append(Axis(f"i{d}", extent))
            index.append(AxisIndex(f"i{d}"))
    value = x.read(tuple(index))
    if dtype is not None and dtype is not x.dtype:
        value = Cast(value, dtype)
    body = term(value)
    fold = Fold(tuple(fold_axes), combiner) if fold_axes else None
    return tracer.emit(label or op, out_axes, body, dtype or x.dtype, fold)


def sum(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """PyTorch's ``sum``: integer and bool inputs accumulate and return int64 (an int32
    sum does not wrap at 2**31); ``axis=()`` or None reduces every axis (``dim=()``)."""
    if not isinstance(x, Tensor):
        raise DTypeError(f"sum: needs a Tensor, got {type(x).__name__}")
    dtype = DType.FLOAT32 if x.dtype.is_float else DType.INT64
    return reduce("sum", x, axis, Combiner.SUM, keepdims, dtype=dtype)


def _need_elements(op: str, x: Tensor, axis: int | Sequence[int] | None) -> None:
    """max and min of nothing have no value: refused, as PyTorch does (sum and mean are 0 and NaN)."""
    if not isinstance(x, Tensor) or 0 not in x.shape:
        return  # reduce() names a wrong type
    if _count(op, x, axis) == 0:
        raise ShapeError(f"{op}: reduces an axis of extent 0 (input {x.shape}, axis {axis}); {op} of no elements has"
                         " no value (PyTorch refuses it too): check the shape, or mask with where() and use sum")


def _reciprocal(count: int) -> float:
    """1/count for a mean; NaN over no elements (0/0, as PyTorch's mean of an empty axis)."""
    return 1.0 / count if count else math.nan


def max(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    _need_elements("max", x, axis)
    return reduce("max", x, axis, Combiner.MAX, keepdims)


def min(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    _need_elements("min", x, axis)
    return reduce("min", x, axis, Combiner.MIN, keepdims)


def _count(op: str, x: Tensor, axis: int | Sequence[int] | None) -> int:
    if x.ndim == 0:
        return 1
    if axis is not None and not isinstance(axis, int) and len(tuple(axis)) == 0:
        axis = None
    count = 1
    for d in normalize_axes(op, axis, x.shape):
        count *= x.shape[d]
    return count


def mean(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """One member: ``sum_axes x * (1/N)``."""
    _need_float("mean", x)
    count = _count("mean", x, axis)
    if count == 0:  # the term is never evaluated over no elements: 0/0 is applied to the (zero) sum
        from weft.nn.elementwise import mul

        return mul(reduce("mean_sum", x, axis, Combiner.SUM, keepdims), math.nan)
    return reduce("mean", x, axis, Combiner.SUM, keepdims, lambda v: Binary(BinaryOp.MUL, v, Const(1.0 / count)))


class _Rows:
    """Helpers for ops that fold ``reduced`` dims of ``x`` (each "row" is the rest).

    Output axes keep ``x``'s dim order, so softmax over a middle axis needs no
    transpose and no copy."""

    def __init__(self, x: Tensor, reduced: Sequence[int]):
        self.x = x
        self.reduced = tuple(reduced)
        self.tail = tuple(x.shape[d] for d in self.reduced)
        self.count = 1
        for extent in self.tail:
            self.count *= extent
        self.full_axes = tuple(Axis(f"i{d}", n) for d, n in enumerate(x.shape))
        self.row_axes = tuple(a for d, a in enumerate(self.full_axes) if d not in self.reduced)
        self.fold_axes = tuple(Axis(f"r{d}", x.shape[d]) for d in self.reduced)

    def full_index(self, over_fold: bool) -> tuple[IndexExpr, ...]:
        return tuple(
            AxisIndex(f"r{d}" if over_fold and d in self.reduced else f"i{d}") for d in range(self.x.ndim)
        )

    def column_index(self) -> tuple[IndexExpr, ...]:
        return tuple(AxisIndex(f"i{d}") for d in self.reduced)

    def emit_row(self, label: str, body: Expr, combiner: Combiner) -> Tensor:
        fold = Fold(self.fold_axes, combiner)
        return self.x.tracer.emit(label, self.row_axes, body, self.x.dtype, fold)

    def emit_full(self, label: str, body: Expr) -> Tensor:
        return self.x.tracer.emit(label, self.full_axes, body, self.x.dtype)

    def row(self, tensor: Tensor) -> Expr:
        return tensor.read(axis_index(self.row_axes))


def _trailing(x: Tensor, k: int) -> tuple[int, ...]:
    return tuple(range(x.ndim - k, x.ndim))


def _zero_d_through_one_element(op: str, function, x: Tensor, axis: int) -> Tensor | None:
    """A 0-d ``x``: ``function`` over it as one element (after the float and axis checks)."""
    _need_float(op, x)
    if x.ndim != 0:
        return None
    _zero_d_axes(op, axis)
    return reshape(function(reshape(x, (1,)), 0), ())


def _rows_and_max(op: str, member: str, x: Tensor, axis: int) -> tuple[_Rows, Tensor]:
    """The rows along ``axis`` and the member ``member`` holding each row's max."""
    rows = _Rows(x, normalize_axes(op, axis, x.shape))
    return rows, rows.emit_row(member, x.read(rows.full_index(True)), Combiner.MAX)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """Four members: row max, exp(x - max), row sum, divide."""
    scalar = _zero_d_through_one_element("softmax", softmax, x, axis)
    if scalar is not None:
        return scalar
    rows, row_max = _rows_and_max("softmax", "softmax_max", x, axis)
    shifted = _sub(x.read(rows.full_index(False)), rows.row(row_max))
    exps = rows.emit_full("softmax_exp", Unary(UnaryOp.EXP, shifted))
    total = rows.emit_row("softmax_sum", exps.read(rows.full_index(True)), Combiner.SUM)
    out = rows.emit_full("softmax", Binary(BinaryOp.DIV, exps.read(rows.full_index(False)), rows.row(total)))
    return out


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """Three members: row max, row sum of exp(x - max), (x - max) - log(sum)."""
    scalar = _zero_d_through_one_element("log_softmax", log_softmax, x, axis)
    if scalar is not None:
        return scalar
    rows, row_max = _rows_and_max("log_softmax", "logsoftmax_max", x, axis)
    terms = Unary(UnaryOp.EXP, _sub(x.read(rows.full_index(True)), rows.row(row_max)))
    total = rows.emit_row("logsoftmax_sumexp", terms, Combiner.SUM)
    shifted = _sub(x.read(rows.full_index(False)), rows.row(row_max))
    out = rows.emit_full("log_softmax", _sub(shifted, Unary(UnaryOp.LOG, rows.row(total))))
    return out


def _normalized_dims(op: str, x: Tensor, normalized_shape: int | Sequence[int] | None) -> int:
    if normalized_shape is None:
        return 1
    if isinstance(normalized_shape, Tensor):
        raise ShapeError(f"{op}: normalized_shape must be ints (as in PyTorch), got {normalized_shape!r}; pass the"
                         f" weight by name: {op}(x, weight=w, bias=b) or {op}(x, {x.shape[-1]}, w, b)")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) > x.ndim or tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ShapeError(f"{op}: normalized_shape {shape} does not match the trailing dims of input {x.shape}")
    return len(shape)


def _affine_params(op: str, rows: _Rows, value: Expr, weight: Tensor | None, bias: Tensor | None) -> Expr:
    """``value * weight + bias`` with weight and bias broadcast over the normalised dims."""
    for name, param in (("weight", weight), ("bias", bias)):
        if param is None:
            continue
        if not isinstance(param, Tensor) or param.shape != rows.tail:
            shape = getattr(param, "shape", type(param).__name__)
            raise ShapeError(f"{op}: {name} has shape {shape} but the normalised dims of the input are {rows.tail}")
        _need_float(op, param)
    columns = rows.column_index()
    if weight is not None:
        value = Binary(BinaryOp.MUL, value, weight.read(columns))
    if bias is not None:
        value = Binary(BinaryOp.ADD, value, bias.read(columns))
    return value


def layer_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int] | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Layer norm over the trailing dims (default: the last). Four members:
    mean, centered, variance, normalised output (see the module docstring)."""
    _need_float("layer_norm", x)
    if normalized_shape is None and weight is not None:
        normalized_shape = weight.shape
    rows = _Rows(x, _trailing(x, _normalized_dims("layer_norm", x, normalized_shape)))
    scale = Const(_reciprocal(rows.count))
    mean_ = rows.emit_row("ln_mean", Binary(BinaryOp.MUL, x.read(rows.full_index(True)), scale), Combiner.SUM)
    centered = rows.emit_full("ln_centered", _sub(x.read(rows.full_index(False)), rows.row(mean_)))
    shrink = Const(_SHRINK)
    deviation = Binary(BinaryOp.MUL, centered.read(rows.full_index(True)), shrink)
    var = rows.emit_row("ln_var", mul_expr(deviation, deviation, scale), Combiner.SUM)
    epsilon = Const(float(eps) * _SHRINK * _SHRINK)
    inverse = Unary(UnaryOp.RSQRT, Binary(BinaryOp.ADD, rows.row(var), epsilon))
    normalised = Binary(BinaryOp.MUL, Binary(BinaryOp.MUL, centered.read(rows.full_index(False)), shrink), inverse)
    return rows.emit_full("layer_norm", _affine_params("layer_norm", rows, normalised, weight, bias))


# The deviations are scaled by 2**-32 before squaring (and eps by 2**-64): a power of two,
# so the normalised value is the same, but the variance of values up to ~7e28 (near 1e20
# it overflowed to inf and the output was the bias) stays finite. The scaling is exact
# except where a squared term c*c/N falls below 2**-62 (|c| < ~5e-10): such terms were
# already far below eps's share of the variance.
_SHRINK = 2.0**-32


def rms_norm_shift(eps: float) -> int:
    """The power of two ``k`` rms_norm scales ``x`` by (``2**-k``) before squaring.

    Squares span twice float32's exponent range, so no one scale keeps every row: ``x * x``
    overflows for an rms above ~1.8e19 (PyTorch's output there is 0) and, scaled by
    ``2**-k``, a square of ``|x| < 2**(k - 63)`` falls below float32's normal range. Such
    a square only matters next to eps when it is at least ``eps * 2**-30`` (a millionth of
    a float32 rounding of eps), so ``k`` is the largest with ``eps * 2**-30 * 2**-2k >=
    2**-126``: 38 for eps = 1e-6 (rows up to an rms of 2**102 ~ 5e30), 39 for 1e-5, and 0
    for eps = 0 (PyTorch's range exactly). A power of two leaves every other bit as it was.
    """
    if not eps > 0 or not math.isfinite(eps):
        return 0
    shift = math.floor((96 + math.log2(eps)) / 2)
    return 0 if shift < 0 else _MAX_SHIFT if shift > _MAX_SHIFT else shift


_MAX_SHIFT = 48


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """RMSNorm over the last dim. Two members: mean square of ``x * 2**-k`` and
    ``x * (rsqrt(ms + eps * 2**-2k) * 2**-k) * w`` (``k = rms_norm_shift(eps)``: the
    same value, the mean square finite for rows up to an rms of ``2**(64 + k)``)."""
    _need_float("rms_norm", x)
    rows = _Rows(x, _trailing(x, 1 if weight is None else _normalized_dims("rms_norm", x, weight.shape)))
    shift = rms_norm_shift(float(eps))
    value = x.read(rows.full_index(True))
    if shift:
        value = Binary(BinaryOp.MUL, value, Const(2.0**-shift))
    mean_square = rows.emit_row("rms_meansq", mul_expr(value, value, Const(_reciprocal(rows.count))), Combiner.SUM)
    inverse = Unary(UnaryOp.RSQRT, Binary(BinaryOp.ADD, rows.row(mean_square), Const(float(eps) * 4.0**-shift)))
    if shift:
        inverse = Binary(BinaryOp.MUL, inverse, Const(2.0**-shift))
    normalised = Binary(BinaryOp.MUL, x.read(rows.full_index(False)), inverse)
    return rows.emit_full("rms_norm", _affine_params("rms_norm", rows, normalised, weight, None))
