"""ATen ops to ``weft.nn`` calls: one lowering function per op, in a table.

A lowering gets the node's output description (``out``: a fake tensor with the
shape and dtype ATen computed) and the node's arguments with graph values replaced
by weft Tensors. It returns a weft Tensor (or a tuple for multi-output ops). ATen's
type promotion is applied by casting operands to the dtype ATen reports for the
result, so weft.nn never sees mixed dtypes. Anything outside what a lowering
handles raises ``LoweringError``; the partitioner then leaves that node to eager.

Semantics where weft.nn differs from ATen, handled here (or refused):
- ``pow``: ``weft.nn.pow`` (any exponent of a float tensor, a tensor exponent, a number
  base); an integer tensor takes exponents 0..64 only, integer tensor exponents fall back.
- ``log1p``, ``expm1`` (and ELU/SELU through it), ``round`` (ties to even), ``floor``,
  ``ceil``, ``trunc``: bodies composed of IR ops (``weft.torch.composed``), no new unary.
- ``sign(NaN)`` is 0 and ``sign(-0)`` is +0, as ATen's CPU kernel.
- ``fmod`` and ``index_select`` by an integer 0 divisor / out-of-range index: ATen raises;
  Weft's fmod gives the dividend, its gather raises InputError.
- ``squeeze`` of a dim whose extent is not 1 is a no-op in ATen (weft.nn raises).
- ``index.Tensor`` with a negative index wraps (ATen) before the gather.
- ``bitwise_and``/``or``/``xor`` only on bool (logical and, or, ``!=``); integer bit ops fall back.
- ``any`` folds ``max`` over the values cast to int32 (weft.nn refuses bool folds).
- ``index_put`` by one 1-D integer index, no accumulate (a static KV cache's write); an
  index outside the tensor leaves it unchanged where ATen raises.
- ``convolution``: 2-D (batched or not, any ``groups``) and 1-D (as 2-D of height 1);
  transposed and 3-D convolution fall back.
- batch norm in ``train()`` (``_native_batch_norm_legit_functional``, ``.no_stats``; instance
  norm through them): the running statistics come back as outputs (aot_autograd copies them
  into the buffers); one value per channel and ``training=False`` are refused.
- ``cumsum``: no scan in the IR, an O(n^2) masked sum, up to ``CUMSUM_LIMIT`` (1024) positions.
- ``cos``/``sin`` are Weft's own (NaN for |x| > 2^22, where ATen reduces any argument).
- any op not in ``LOWERINGS`` falls back.
- zero-size tensors, float16/bfloat16/float64 and complex fall back (the partitioner checks).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

import torch

from weft import nn
from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Combiner,
    Const,
    DType,
    Fold,
    IndexConst,
    IndexOf,
    IndexValue,
    Where,
)
from weft.nn.elementwise import broadcast_read, elementwise
from weft.nn.pool import _windows
from weft.nn.tensor import Tensor, axes_for, axis_index
from weft.nn.views import read_padded, view
from weft.torch.composed import ceil_body, expm1_body, floor_body, log1p_body, round_body, trunc_body
from weft.torch.values import EMPTY, LoweringError, arange, constant, python_scalar, weft_dtype

aten = torch.ops.aten
Lowering = Callable[..., object]
LOWERINGS: dict[object, Lowering] = {}


def lowers(*targets: object) -> Callable[[Lowering], Lowering]:
    def register(function: Lowering) -> Lowering:
        for target in targets:
            LOWERINGS[target] = function
        return function

    return register


def _dtype(out: torch.Tensor) -> DType:
    return weft_dtype(out.dtype, "result")


def _as(value: object, dtype: DType) -> object:
    """``value`` (Tensor or Python number) in ``dtype``: ATen's promotion made explicit."""
    if isinstance(value, Tensor):
        return nn.cast(value, dtype) if value.dtype is not dtype else value
    if isinstance(value, bool | int | float):
        return python_scalar(value, dtype)
    raise LoweringError(f"operand {value!r} is neither a tensor nor a number")


def _common(a: object, b: object) -> DType:
    """The dtype a comparison computes in (ATen's promotion of its two operands)."""
    kinds = [v.dtype for v in (a, b) if isinstance(v, Tensor)]
    if any(k.is_float for k in kinds) or any(isinstance(v, float) for v in (a, b)):
        return DType.FLOAT32
    if any(k is DType.INT64 for k in kinds) or (any(isinstance(v, int) and not isinstance(v, bool) for v in (a, b))
                                                and DType.BOOL in kinds and len(kinds) == 1):
        return DType.INT64
    return kinds[0]


# ---------------------------------------------------------------- elementwise


def _binary(function):
    def lower(out, a, b, alpha=1):
        dtype = _dtype(out)
        if dtype is DType.BOOL:
            raise LoweringError("arithmetic on bool tensors")
        if alpha != 1:
            b = nn.mul(_as(b, dtype), python_scalar(alpha, dtype))
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            raise LoweringError("arithmetic on two numbers")
        return function(_as(a, dtype), _as(b, dtype))

    return lower


LOWERINGS.update({
    aten.add.Tensor: _binary(nn.add), aten.add.Scalar: _binary(nn.add),
    aten.sub.Tensor: _binary(nn.sub), aten.sub.Scalar: _binary(nn.sub),
    aten.mul.Tensor: _binary(nn.mul), aten.mul.Scalar: _binary(nn.mul),
    aten.maximum.default: _binary(nn.maximum), aten.minimum.default: _binary(nn.minimum),
})


@lowers(aten.clamp.default, aten.clamp.Tensor)
def _clamp(out, x, min=None, max=None):  # noqa: A002 (ATen's argument names)
    """``min(max(x, lo), hi)``: NaN in ``x`` or in a bound stays NaN (``nn.maximum``'s rule, as
    ATen's), and ``lo > hi`` gives ``hi`` everywhere, as ATen's."""
    if min is None and max is None:
        raise LoweringError("clamp without a bound")
    dtype = _dtype(out)
    result = _as(x, dtype)
    if min is not None:
        result = nn.maximum(result, _as(min, dtype))
    if max is not None:
        result = nn.minimum(result, _as(max, dtype))
    return result


@lowers(aten.hardtanh.default)
def _hardtanh(out, x, min_val=-1.0, max_val=1.0):
    return _clamp(out, x, min_val, max_val)


@lowers(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(out, a, b, alpha=1):
    dtype = _dtype(out)
    scaled = nn.mul(_as(a, dtype), python_scalar(alpha, dtype)) if alpha != 1 else _as(a, dtype)
    return nn.sub(_as(b, dtype), scaled) if isinstance(b, Tensor) else nn.sub(constant(b, (), dtype), scaled)


@lowers(aten.div.Tensor, aten.div.Scalar)
def _div(out, a, b):
    dtype = _dtype(out)
    if not dtype.is_float:
        raise LoweringError("integer true division")
    return nn.div(_as(a, dtype), _as(b, dtype))


@lowers(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(out, a, b, rounding_mode=None):
    dtype = _dtype(out)
    if rounding_mode == "floor" and not dtype.is_float:
        return _floor_divide(out, a, b)
    if rounding_mode is not None and not (rounding_mode == "trunc" and not dtype.is_float):
        raise LoweringError(f"div with rounding_mode={rounding_mode!r} on {dtype.value}")
    return nn.div(_as(a, dtype), _as(b, dtype))


def _sign_differs(remainder: Tensor, divisor: object) -> Tensor:
    """Where truncating and floor division disagree: a non-zero remainder whose sign
    differs from the divisor's."""
    zero = python_scalar(0, remainder.dtype)
    divisor_negative = nn.less(divisor, zero) if isinstance(divisor, Tensor) else bool(divisor < 0)
    remainder_negative = nn.less(remainder, zero)
    if isinstance(divisor_negative, bool):
        differs = nn.logical_not(remainder_negative) if divisor_negative else remainder_negative
    else:
        differs = nn.not_equal(remainder_negative, divisor_negative)
    return nn.logical_and(nn.not_equal(remainder, zero), differs)


@lowers(aten.remainder.Tensor, aten.remainder.Scalar)
def _remainder(out, a, b):
    """Python's (and ATen's) modulo: the sign of the divisor, from weft's truncating fmod."""
    dtype = _dtype(out)
    a, b = _as(a, dtype), _as(b, dtype)
    if not isinstance(a, Tensor):
        a = constant(a, (), dtype)
    remainder = nn.fmod(a, b)
    return nn.where(_sign_differs(remainder, b), nn.add(remainder, b), remainder)


@lowers(aten.floor_divide.default)
def _floor_divide(out, a, b):
    dtype = _dtype(out)
    if dtype.is_float:
        raise LoweringError("floor_divide of floats (Weft has no floor)")
    a, b = _as(a, dtype), _as(b, dtype)
    if not isinstance(a, Tensor):
        a = constant(a, (), dtype)
    quotient = nn.div(a, b)
    return nn.where(_sign_differs(nn.fmod(a, b), b), nn.sub(quotient, python_scalar(1, dtype)), quotient)


@lowers(aten.neg.default)
def _neg(out, x):
    return nn.neg(_as(x, _dtype(out)))


def _float_unary(function):
    def lower(out, x):
        dtype = _dtype(out)
        if not dtype.is_float:
            raise LoweringError("a float function of a non-float result")
        return function(_as(x, dtype))

    return lower


for _target, _function in {
    aten.rsqrt.default: nn.rsqrt, aten.sqrt.default: nn.sqrt, aten.exp.default: nn.exp,
    aten.log.default: nn.log, aten.tanh.default: nn.tanh, aten.sigmoid.default: nn.sigmoid,
    aten.silu.default: nn.silu, aten.erf.default: nn.erf, aten.relu.default: nn.relu,
    aten.sin.default: nn.sin, aten.cos.default: nn.cos,
    aten.reciprocal.default: lambda x: nn.div(1.0, x),
}.items():
    LOWERINGS[_target] = _float_unary(_function)


def _float_body(name: str, body):
    """A float32 result ``body(x)`` (``weft.torch.composed``) as one member; an integer or bool
    input is read as float32 first (ATen's promotion for its float functions)."""
    def lower(out, x):
        if not _dtype(out).is_float:
            raise LoweringError(f"{name} of a non-float result")
        return elementwise(name, (_as(x, DType.FLOAT32),), body)

    return lower


LOWERINGS[aten.log1p.default] = _float_body("log1p", log1p_body)
LOWERINGS[aten.expm1.default] = _float_body("expm1", expm1_body)


def _rounding(name: str, body):
    """floor/ceil/round/trunc: float32 by ``body``; an integer tensor is its own result (ATen)."""
    def lower(out, x):
        dtype = _dtype(out)
        if dtype is DType.BOOL:
            raise LoweringError(f"{name} of a bool tensor")
        if not dtype.is_float:
            return _as(x, dtype)
        return elementwise(name, (_as(x, dtype),), body)

    return lower


LOWERINGS.update({
    aten.floor.default: _rounding("floor", floor_body), aten.ceil.default: _rounding("ceil", ceil_body),
    aten.round.default: _rounding("round", round_body), aten.trunc.default: _rounding("trunc", trunc_body),
})


@lowers(aten.elu.default)
def _elu(out, x, alpha=1, scale=1, input_scale=1):
    """``scale * x`` where ``x > 0``, else ``alpha * scale * expm1(input_scale * x)`` (ELU, SELU;
    NaN stays NaN); one member."""
    if not _dtype(out).is_float:
        raise LoweringError("elu of a non-float result")
    negative, positive, inner = float(alpha) * float(scale), float(scale), float(input_scale)

    def body(v):
        scaled = Binary(BinaryOp.MUL, v, Const(inner)) if inner != 1.0 else v
        below = Binary(BinaryOp.MUL, expm1_body(scaled), Const(negative)) if negative != 1.0 else expm1_body(scaled)
        above = Binary(BinaryOp.MUL, v, Const(positive)) if positive != 1.0 else v
        return Where(Binary(BinaryOp.GT, v, Const(0.0)), above, below)

    return elementwise("elu", (_as(x, DType.FLOAT32),), body)


@lowers(aten.abs.default)
def _abs(out, x):
    return nn.abs(x)


@lowers(aten.gelu.default)
def _gelu(out, x, approximate="none"):
    return nn.gelu(x, approximate)


@lowers(aten.pow.Tensor_Scalar)
def _pow(out, x, exponent):
    """``weft.nn.pow`` (``weft/nn/power.py``): any exponent of a float tensor (integers by
    multiplication, 0.5 and -0.5 as sqrt and rsqrt, others as ``exp(y log|x|)`` with C's special
    cases); an integer tensor takes exponents 0..64 (ATen raises on negative ones)."""
    dtype = _dtype(out)
    if isinstance(exponent, bool) or not isinstance(exponent, int | float):
        raise LoweringError(f"pow with exponent {exponent!r}")
    x = _as(x, dtype)
    if not dtype.is_float and not (float(exponent).is_integer() and 0 <= exponent <= 64):
        raise LoweringError(f"pow of a {dtype.value} tensor with exponent {exponent!r} (integers: 0..64)")
    return nn.pow(x, int(exponent) if float(exponent).is_integer() and abs(exponent) <= 64 else float(exponent))


@lowers(aten.pow.Tensor_Tensor, aten.pow.Scalar)
def _pow_tensor(out, base, exponent):
    """A tensor exponent, or a number base (``2 ** x``): float32 only (``weft.nn.pow``'s
    ``exp(y log|x|)`` with C's special cases); integer results fall back."""
    dtype = _dtype(out)
    if not dtype.is_float:
        raise LoweringError(f"pow with a tensor exponent on {dtype.value} (float32 only)")
    if not isinstance(exponent, Tensor):
        raise LoweringError("pow of two numbers")
    return nn.pow(_as(base, dtype), _as(exponent, dtype))


@lowers(aten.sign.default)
def _sign(out, x):
    """1, -1 or 0 in ``x``'s dtype; ``sign(NaN) = 0`` and ``sign(-0) = +0``, as ATen's CPU kernel;
    a bool tensor is its own sign."""
    dtype = _dtype(out)
    if dtype is DType.BOOL:
        return x
    zero = python_scalar(0, dtype)
    negative = nn.where(nn.less(x, zero), python_scalar(-1, dtype), constant(0, (), dtype))
    return nn.where(nn.greater(x, zero), python_scalar(1, dtype), negative)


@lowers(aten.isnan.default)
def _isnan(out, x):
    """``x != x``; an integer or bool tensor has no NaN (a constant False, no member)."""
    if not x.dtype.is_float:
        return constant(False, tuple(x.shape), DType.BOOL)
    return nn.not_equal(x, x)


@lowers(aten.fmod.Tensor, aten.fmod.Scalar)
def _fmod(out, a, b):
    """C's ``%`` / ``fmodf`` (the sign of the dividend), as ATen's. An integer divisor of 0 gives
    the dividend where ATen raises."""
    dtype = _dtype(out)
    if dtype is DType.BOOL:
        raise LoweringError("fmod of bool tensors")
    a, b = _as(a, dtype), _as(b, dtype)
    if not isinstance(a, Tensor):
        a = constant(a, (), dtype)
    return nn.fmod(a, b)


def _compare(function):
    def lower(out, a, b):
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            raise LoweringError("a comparison of two numbers")
        common = _common(a, b)
        return function(_as(a, common), _as(b, common))

    return lower


for _names, _function in {
    ("eq",): nn.equal, ("ne",): nn.not_equal, ("lt",): nn.less, ("le",): nn.less_equal,
    ("gt",): nn.greater, ("ge",): nn.greater_equal,
}.items():
    for _overload in ("Tensor", "Scalar"):
        LOWERINGS[getattr(getattr(aten, _names[0]), _overload)] = _compare(_function)


def _truth(value: object) -> object:
    """ATen's logical ops read any dtype as ``value != 0``."""
    if isinstance(value, Tensor) and value.dtype is not DType.BOOL:
        return nn.not_equal(value, python_scalar(0, value.dtype))
    return value


@lowers(aten.logical_and.default)
def _logical_and(out, a, b):
    return nn.logical_and(_truth(a), _truth(b))


@lowers(aten.logical_or.default)
def _logical_or(out, a, b):
    return nn.logical_or(_truth(a), _truth(b))


@lowers(aten.logical_not.default)
def _logical_not(out, x):
    return nn.logical_not(_truth(x))


@lowers(aten.bitwise_and.Tensor)
def _bitwise_and(out, a, b):
    if _dtype(out) is not DType.BOOL:
        raise LoweringError("bitwise_and on integers")
    return nn.logical_and(a, b)


@lowers(aten.bitwise_or.Tensor)
def _bitwise_or(out, a, b):
    if _dtype(out) is not DType.BOOL:
        raise LoweringError("bitwise_or on integers")
    return nn.logical_or(a, b)


@lowers(aten.bitwise_xor.Tensor)
def _bitwise_xor(out, a, b):
    if _dtype(out) is not DType.BOOL or not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise LoweringError("bitwise_xor on integers or with a number")
    return nn.not_equal(a, b)


@lowers(aten.bitwise_not.default)
def _bitwise_not(out, x):
    if _dtype(out) is not DType.BOOL:
        raise LoweringError("bitwise_not on integers")
    return nn.logical_not(x)


@lowers(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(out, condition, a, b):
    dtype = _dtype(out)
    a, b = _as(a, dtype), _as(b, dtype)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = constant(a, (), dtype)
    return nn.where(_truth(condition), a, b)


@lowers(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(out, x, mask, value):
    dtype = _dtype(out)
    if isinstance(value, Tensor):
        value = _as(value, dtype)
    return nn.where(_truth(mask), python_scalar(value, dtype) if not isinstance(value, Tensor) else value, x)


@lowers(aten._to_copy.default, aten.to.dtype, torch.ops.prims.convert_element_type.default)
def _to_copy(out, x, *args, **kwargs):
    if out.device.type != "cpu":
        raise LoweringError(f"_to_copy to device {out.device}")
    return nn.cast(x, _dtype(out))


@lowers(aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default, aten.detach.default,
        aten.contiguous.default)
def _identity(out, x, *args, **kwargs):
    return x


# ---------------------------------------------------------------- creation


@lowers(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(out, *args, **kwargs):
    numbers = [a for a in args if isinstance(a, int | float)]
    start, step = (0, 1) if len(numbers) == 1 else (numbers[0], numbers[2] if len(numbers) > 2 else 1)
    return arange(start, step, out.shape[0], _dtype(out))


@lowers(aten.full.default)
def _full(out, size, value, **kwargs):
    return constant(value, tuple(out.shape), _dtype(out))


@lowers(aten.full_like.default, aten.zeros_like.default, aten.ones_like.default)
def _full_like(out, x, value=None, **kwargs):
    if value is None:
        raise LoweringError("zeros_like/ones_like without a value")
    return constant(value, tuple(out.shape), _dtype(out))


@lowers(aten.scalar_tensor.default)
def _scalar_tensor(out, value, **kwargs):
    return constant(value, (), _dtype(out))


# ---------------------------------------------------------------- reductions


def _dims(x: Tensor, dims: Sequence[int] | int | None) -> tuple[int, ...] | None:
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        return None
    return (dims,) if isinstance(dims, int) else tuple(dims)


@lowers(aten.sum.dim_IntList, aten.sum.default)
def _sum(out, x, dims=None, keepdim=False, dtype=None):
    return nn.sum(_as(x, _dtype(out)), _dims(x, dims), keepdim)


@lowers(aten.mean.dim, aten.mean.default)
def _mean(out, x, dims=None, keepdim=False, dtype=None):
    return nn.mean(_as(x, _dtype(out)), _dims(x, dims), keepdim)


@lowers(aten.amax.default)
def _amax(out, x, dims=(), keepdim=False):
    return nn.max(x, _dims(x, dims), keepdim)


@lowers(aten.amin.default)
def _amin(out, x, dims=(), keepdim=False):
    return nn.min(x, _dims(x, dims), keepdim)


def _foldable(x: Tensor) -> Tensor:
    """``x`` as weft.nn's max/min fold takes it (bool folds are refused: as int32)."""
    return nn.cast(x, DType.INT32) if x.dtype is DType.BOOL else x


def _first_extreme(x: Tensor, dim: int, extreme: Tensor) -> Tensor:
    """The first index along ``dim`` where ``x`` equals its (keepdim) ``extreme``, int64, keepdim:
    a min fold over ``where(x == extreme or x is NaN, i, extent)``. A NaN counts as the extreme
    (ATen's argmax/argmin and max.dim/min.dim return the first NaN's index; the max and min folds
    propagate NaN, so a row with a NaN has NaN for its extreme and only its NaNs match)."""
    extent = x.shape[dim]
    hit = nn.equal(x, extreme)
    if x.dtype.is_float:
        hit = nn.logical_or(hit, nn.not_equal(x, x))
    shape = tuple(extent if d == dim else 1 for d in range(x.ndim))
    positions = nn.reshape(arange(0, 1, extent, DType.INT64), shape)
    return nn.min(nn.where(hit, positions, constant(extent, (), DType.INT64)), (dim,), keepdims=True)


def _value_and_index(x: Tensor, dim: int, keepdim: bool, fold) -> tuple[Tensor, Tensor]:
    dim %= max(x.ndim, 1)
    source = _foldable(x)
    if source.ndim == 0:
        return x, constant(0, (), DType.INT64)
    extreme = fold(source, (dim,), keepdims=True)
    index = _first_extreme(source, dim, extreme)
    if not keepdim:
        extreme, index = nn.squeeze(extreme, dim), nn.squeeze(index, dim)
    return (nn.cast(extreme, x.dtype) if extreme.dtype is not x.dtype else extreme), index


@lowers(aten.max.dim)
def _max_dim(out, x, dim, keepdim=False):
    """``torch.max(x, dim)``: (values, int64 indices of the first maximum; a NaN is the maximum)."""
    return _value_and_index(x, dim, keepdim, nn.max)


@lowers(aten.min.dim)
def _min_dim(out, x, dim, keepdim=False):
    return _value_and_index(x, dim, keepdim, nn.min)


def _arg_extreme(out, x, dim, keepdim, fold):
    if dim is None:  # over the flattened tensor; keepdim keeps every dim as 1
        flat = nn.reshape(x, (math.prod(x.shape),)) if x.ndim != 1 else x
        index = _value_and_index(flat, 0, False, fold)[1]
        return nn.reshape(index, tuple(out.shape))
    return _value_and_index(x, dim, keepdim, fold)[1]


@lowers(aten.argmax.default)
def _argmax(out, x, dim=None, keepdim=False):
    """The int64 index of the first maximum along ``dim`` (of the flattened tensor when None)."""
    return _arg_extreme(out, x, dim, keepdim, nn.max)


@lowers(aten.argmin.default)
def _argmin(out, x, dim=None, keepdim=False):
    return _arg_extreme(out, x, dim, keepdim, nn.min)


@lowers(aten.max.default)
def _max_all(out, x):
    value = nn.max(_foldable(x))
    return nn.cast(value, x.dtype) if value.dtype is not x.dtype else value


@lowers(aten.min.default)
def _min_all(out, x):
    value = nn.min(_foldable(x))
    return nn.cast(value, x.dtype) if value.dtype is not x.dtype else value


@lowers(aten.any.dim, aten.any.dims, aten.any.default)
def _any(out, x, dims=None, keepdim=False):
    as_int = nn.cast(_truth(x), DType.INT32)
    return nn.greater(nn.max(as_int, _dims(x, dims), keepdim), 0)


@lowers(aten._softmax.default)
def _softmax(out, x, dim, half_to_float=False):
    return nn.softmax(x, dim)


@lowers(aten._log_softmax.default)
def _log_softmax(out, x, dim, half_to_float=False):
    return nn.log_softmax(x, dim)


def _per_channel(value: Tensor, like: Tensor) -> Tensor:
    """A per-channel vector (axis 1 of ``like``, NCHW...) shaped to broadcast against ``like``."""
    return nn.reshape(value, (like.shape[1],) + (1,) * (like.ndim - 2))


def _channel_affine(result: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """``result * weight_c + bias_c`` along axis 1, each factor only where given (a norm's affine)."""
    if weight is not None:
        result = nn.mul(result, _per_channel(weight, result))
    if bias is not None:
        result = nn.add(result, _per_channel(bias, result))
    return result


@lowers(aten._native_batch_norm_legit_no_training.default)
def _batch_norm_eval(out, x, weight, bias, running_mean, running_var, momentum, eps):
    """BatchNorm in eval(): ``(x - mean_c) * rsqrt(var_c + eps) * weight_c + bias_c`` along axis 1
    (the running statistics are read, never updated); ATen's two saved statistics are empty."""
    if x.ndim < 2:
        raise LoweringError(f"batch norm of a {x.ndim}-d input")
    result = nn.mul(nn.sub(x, _per_channel(running_mean, x)), _per_channel(nn.rsqrt(nn.add(running_var, float(eps))), x))
    return _channel_affine(result, weight, bias), EMPTY, EMPTY


def _statistics(x: Tensor, axes: tuple[int, ...], eps: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(mean, centred ``x``, biased variance, rstd) over ``axes``, the statistics kept as dims of
    1: two passes (the mean, then the mean of the centred squares), as every norm here takes them."""
    mean = nn.mean(x, axes, keepdims=True)
    centered = nn.sub(x, mean)
    var = nn.mean(nn.mul(centered, centered), axes, keepdims=True)
    return mean, centered, var, nn.rsqrt(nn.add(var, float(eps)))


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LoweringError(f"batch norm with a non-number {what} {value!r}")
    return float(value)


def _batch_norm_train(x: Tensor, weight, bias, eps) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """BatchNorm with the batch's statistics: per channel (axis 1) over the batch and every other
    axis, ``(x - mean_c) * rstd_c`` (the biased variance), then ``weight_c`` and ``bias_c``.
    Returns (output, save_mean, save_rstd of shape (C,), the biased variance (C,), the count)."""
    if x.ndim < 2:
        raise LoweringError(f"batch norm of a {x.ndim}-d input")
    axes = (0,) + tuple(range(2, x.ndim))
    mean, centered, var, rstd = _statistics(x, axes, _number(eps, "eps"))
    channels = (x.shape[1],)
    result = _channel_affine(nn.mul(centered, rstd), weight, bias)
    count = math.prod(x.shape) // x.shape[1]
    return result, nn.reshape(mean, channels), nn.reshape(rstd, channels), nn.reshape(var, channels), count


@lowers(aten._native_batch_norm_legit_functional.default)
def _batch_norm_functional(out, x, weight, bias, running_mean, running_var, training, momentum, eps):
    """BatchNorm in train() as aot_autograd's functional graph has it: (output, save_mean,
    save_rstd, new running_mean, new running_var); aot_autograd copies the last two into the
    module's buffers. ``new_mean = m * mean + (1 - m) * running_mean`` and ``new_var = m *
    var * n / (n - 1) + (1 - m) * running_var``: the unbiased variance for the running statistic,
    the biased one for the normalisation, as ATen's CPU kernel (``n`` values per channel). A
    single value per channel is refused: ``torch.nn.BatchNorm`` raises there, and the op itself fails
    its fake-tensor pass (its decomposition divides by ``n - 1``) before a lowering could see
    it. ``momentum=None`` (a
    cumulative average) arrives as the number ``1 / num_batches_tracked``. ``training=False``
    is refused (eval() graphs have ``_native_batch_norm_legit_no_training``)."""
    if training is not True:
        raise LoweringError("_native_batch_norm_legit_functional with training=False")
    if not isinstance(running_mean, Tensor) or not isinstance(running_var, Tensor):
        raise LoweringError("batch norm with running statistics that are not tensors")
    momentum = _number(momentum, "momentum")
    result, mean, rstd, var, count = _batch_norm_train(x, weight, bias, eps)
    if count < 2:
        raise LoweringError("batch norm in training with one value per channel (no unbiased variance)")
    correction = count / (count - 1)
    keep = 1.0 - momentum
    new_mean = nn.add(nn.mul(mean, momentum), nn.mul(_as(running_mean, mean.dtype), keep))
    new_var = nn.add(nn.mul(nn.mul(var, correction), momentum), nn.mul(_as(running_var, var.dtype), keep))
    return (result, mean, rstd, _as(new_mean, running_mean.dtype), _as(new_var, running_var.dtype))


@lowers(aten._native_batch_norm_legit.no_stats)
def _batch_norm_no_stats(out, x, weight, bias, training, momentum, eps):
    """BatchNorm with the batch's statistics and no running ones (``track_running_stats=False``)
    and InstanceNorm (the core decomposition views (N, C, ...) as (1, N * C, ...), the affine
    weight repeated): (output, save_mean, save_rstd)."""
    if training is not True:
        raise LoweringError("_native_batch_norm_legit.no_stats with training=False (no statistics to use)")
    result, mean, rstd, _, _ = _batch_norm_train(x, weight, bias, eps)
    return result, mean, rstd


@lowers(aten.copy.default)
def _copy(out, target, source, non_blocking=False):
    """``target``'s shape and dtype filled with ``source`` (broadcast, cast): a functionalized
    ``copy_`` (InstanceNorm's running statistics)."""
    if not isinstance(source, Tensor):
        raise LoweringError("copy from a non-tensor")
    return nn.broadcast_to(_as(source, _dtype(out)), tuple(out.shape))


@lowers(aten.native_group_norm.default)
def _group_norm(out, x, weight, bias, n, channels, spatial, groups, eps):
    """GroupNorm: each sample's channels in ``groups`` groups normalised over the group's
    channels and positions (biased variance), then ``weight_c`` and ``bias_c``; with ATen's
    mean and rstd per (sample, group)."""
    grouped = nn.reshape(x, (n, groups, (channels // groups) * spatial))
    mean, centered, _, rstd = _statistics(grouped, (2,), float(eps))
    result = _channel_affine(nn.reshape(nn.mul(centered, rstd), tuple(x.shape)), weight, bias)
    return result, nn.reshape(mean, (n, groups)), nn.reshape(rstd, (n, groups))


CUMSUM_LIMIT = 1024  # the longest axis cumsum's O(n^2) masked sum takes


@lowers(aten.cumsum.default)
def _cumsum(out, x, dim, dtype=None):
    """``out[..., i, ...] = sum_{j <= i} x[..., j, ...]``: Weft's IR has no scan, so one member
    folds ``where(j <= i, x[..., j, ...], 0)`` over all ``j`` (a select, so an inf or NaN past
    ``i`` does not leak), O(n^2) along the axis: taken up to ``CUMSUM_LIMIT`` positions, longer
    axes fall back. Integer and bool inputs sum in int64 (ATen's promotion), or in ``dtype``."""
    result_dtype = _dtype(out)
    if result_dtype is DType.BOOL:
        raise LoweringError("cumsum into bool")
    x = _as(x, result_dtype)
    if x.ndim == 0:
        return x
    dim %= x.ndim
    extent = x.shape[dim]
    if extent > CUMSUM_LIMIT:
        raise LoweringError(f"cumsum along an axis of {extent} > {CUMSUM_LIMIT} positions (Weft's IR has no scan: "
                            "the masked sum is O(n^2))")
    axes = axes_for(tuple(x.shape))
    position = axis_index(axes)
    inner = Axis("cumsum_j", extent)
    j = AxisIndex(inner.name)
    term = x.read(position[:dim] + (j,) + position[dim + 1:])
    kept = Binary(BinaryOp.LE, IndexValue(j), IndexValue(position[dim]))
    body = Where(kept, term, Const(0.0 if result_dtype.is_float else 0, result_dtype))
    return x.tracer.emit("cumsum", axes, body, result_dtype, Fold((inner,), Combiner.SUM))


@lowers(aten.var_mean.correction, aten.var.correction)
def _var_mean(out, x, dims=None, correction=None, keepdim=False):
    """The variance with ``correction`` (default 1: Bessel's), from the centred squares; and the
    mean beside it for ``var_mean``."""
    axes = _dims(x, dims) or tuple(range(x.ndim))
    count = math.prod(x.shape[a] for a in axes)
    correction = 1 if correction is None else correction
    mean = nn.mean(x, axes, keepdims=True)
    centered = nn.sub(x, mean)
    total = nn.sum(nn.mul(centered, centered), axes, keepdims=keepdim)
    var = nn.mul(total, 1.0 / (count - correction)) if count > correction else nn.mul(total, float("inf"))
    if isinstance(out, tuple | list):
        return var, mean if keepdim else nn.reshape(mean, tuple(out[1].shape))
    return var


@lowers(aten.native_layer_norm.default)
def _native_layer_norm(out, x, normalized_shape, weight, bias, eps):
    """(out, mean, rstd) as ATen returns them; unused statistics are dropped by the trace."""
    count = len(normalized_shape)
    axes = tuple(range(x.ndim - count, x.ndim))
    result = nn.layer_norm(x, tuple(normalized_shape), weight, bias, eps)
    mean = nn.mean(x, axes, keepdims=True)
    centered = nn.sub(x, mean)
    rstd = nn.rsqrt(nn.add(nn.mean(nn.mul(centered, centered), axes, keepdims=True), float(eps)))
    return result, mean, rstd


# ---------------------------------------------------------------- contractions and gathers


@lowers(aten.addmm.default)
def _addmm(out, bias, a, b, beta=1, alpha=1):
    """``beta * bias + alpha * (a @ b)``; ``beta == 0`` ignores ``bias`` (NaN in it too), as ATen."""
    dtype = _dtype(out)
    product = nn.matmul(a, b)
    if alpha != 1:
        product = nn.mul(product, _as(alpha, dtype))
    if beta == 0:
        return product
    return nn.add(product, nn.mul(bias, _as(beta, dtype)) if beta != 1 else bias)


@lowers(aten.mm.default, aten.bmm.default, aten.matmul.default)
def _matmul(out, a, b):
    return nn.matmul(a, b)


@lowers(aten.embedding.default)
def _embedding(out, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return nn.embedding(indices, weight)


@lowers(aten.index.Tensor)
def _index(out, x, indices):
    """Advanced indexing by integer tensors (``None`` keeps a dim): one gather member.

    The index tensors broadcast together; their dims replace the indexed dims in place
    when those are adjacent, else they lead (NumPy's and ATen's rule). Negative indices
    wrap first, as in ATen."""
    given = [(d, i) for d, i in enumerate(indices) if i is not None]
    if not given or any(not isinstance(i, Tensor) or not i.dtype.is_int for _, i in given):
        raise LoweringError("index.Tensor with a bool mask or a non-tensor index (only integer index tensors)")
    positions = [d for d, _ in given]
    wrapped = {d: nn.where(nn.less(i, 0), nn.add(i, python_scalar(x.shape[d], i.dtype)), i) for d, i in given}
    shape = tuple(out.shape)
    batch = nn.broadcast_shapes("index", *(i.shape for _, i in given))
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    lead = positions[0] if adjacent else 0
    axes = axes_for(shape)
    index = axis_index(axes)
    batch_index = index[lead:lead + len(batch)]
    rest = iter(index[:lead] + index[lead + len(batch):])
    source = tuple(IndexOf(broadcast_read(wrapped[d], batch, batch_index)) if d in wrapped else next(rest)
                   for d in range(x.ndim))
    return x.tracer.emit("index", axes, x.read(source), x.dtype)


@lowers(aten.index_put.default)
def _index_put(out, x, indices, values, accumulate=False):
    """``x`` with ``x[..., index, ...] = values`` along one dim, by one 1-D integer index tensor:
    the KV-cache write of a static cache (``index_copy_`` at ``cache_position``).

    Two members: ``slot[j]`` = 1 + the last position ``k`` with ``index[k] == j`` (0 where
    none; a max fold over k, so a repeated index keeps its last value, as ATen's CPU kernel
    writes in order), then ``out[..., j, ...] = slot[j] ? values[..., slot[j] - 1, ...] :
    x[..., j, ...]``. Negative indices wrap first; an index outside ``x`` matches no slot
    (ATen raises there: Weft leaves that row unchanged). ``accumulate=True``, several index
    tensors and bool masks are refused."""
    given = [(d, i) for d, i in enumerate(indices) if i is not None]
    if accumulate or len(given) != 1:
        raise LoweringError(f"index_put with accumulate={accumulate} or {len(given)} index tensors (one, no accumulate)")
    dim, index = given[0]
    if not isinstance(index, Tensor) or not index.dtype.is_int or index.ndim != 1 or not isinstance(values, Tensor):
        raise LoweringError("index_put by a bool mask or a non 1-D index (one 1-D integer index tensor)")
    extent, count = x.shape[dim], index.shape[0]
    target = x.shape[:dim] + (count,) + x.shape[dim + 1:]
    values = nn.broadcast_to(_as(values, x.dtype), target)
    kind = index.dtype
    wrapped = nn.where(nn.less(index, 0), nn.add(index, python_scalar(extent, kind)), index)
    rows = nn.reshape(arange(0, 1, extent, kind), (extent, 1))
    hits = nn.where(nn.equal(nn.reshape(wrapped, (1, count)), rows),
                    nn.reshape(arange(1, 1, count, kind), (1, count)), constant(0, (1, count), kind))
    slot = nn.max(hits, axis=1)
    axes = axes_for(tuple(x.shape))
    position = axis_index(axes)
    slot_here = slot.read((position[dim],))
    written = Binary(BinaryOp.GT, slot_here, Const(0, kind))
    source = Where(written, Binary(BinaryOp.SUB, slot_here, Const(1, kind)), Const(0, kind))
    from_values = values.read(position[:dim] + (IndexOf(source),) + position[dim + 1:])
    return x.tracer.emit("index_put", axes, Where(written, from_values, x.read(position)), x.dtype)


@lowers(aten.gather.default)
def _gather(out, x, dim, index, sparse_grad=False):
    """``out[..., i, ...] = x[..., index[..., i, ...], ...]`` along ``dim``. ATen rejects negative
    indices here (unlike ``index.Tensor``); an index outside the table is Weft's gather InputError."""
    if not isinstance(index, Tensor) or not index.dtype.is_int:
        raise LoweringError("gather with a non-integer index")
    dim %= max(x.ndim, 1)
    axes = axes_for(index.shape)
    position = axis_index(axes)
    source = position[:dim] + (IndexOf(index.read(position)),) + position[dim + 1:]
    return x.tracer.emit("gather", axes, x.read(source), x.dtype)


@lowers(aten.index_select.default)
def _index_select(out, x, dim, index):
    """``x`` with ``dim`` replaced by ``x``'s entries at ``index`` (1-D or 0-d integers): one
    gather member. ATen rejects negative indices here; an index outside ``x`` is Weft's gather
    InputError (ATen raises too)."""
    if not isinstance(index, Tensor) or not index.dtype.is_int or index.ndim > 1:
        raise LoweringError("index_select by a non-integer or multi-dimensional index")
    if x.ndim == 0:
        raise LoweringError("index_select of a 0-d tensor")
    dim %= x.ndim
    axes = axes_for(tuple(out.shape))
    position = axis_index(axes)
    picked = index.read((position[dim],) if index.ndim else ())
    source = position[:dim] + (IndexOf(picked),) + position[dim + 1:]
    return x.tracer.emit("index_select", axes, x.read(source), x.dtype)


@lowers(aten.flip.default)
def _flip(out, x, dims):
    """An index map (``n - 1 - i`` along each flipped dim), no member of its own."""
    for dim in {d % max(x.ndim, 1) for d in dims} if x.ndim else ():
        x = nn.slice_axis(x, dim, None, None, -1)
    return x


@lowers(aten.repeat.default)
def _repeat(out, x, repeats):
    """``x`` tiled: leading dims of 1 first (ATen), then ``out[i] = x[i mod n]`` per dim, an index
    map with no member of its own."""
    repeats = [int(r) for r in repeats]
    if len(repeats) < x.ndim:
        raise LoweringError(f"repeat with {len(repeats)} counts for a {x.ndim}-d tensor")
    lead = len(repeats) - x.ndim

    def index_map(index):
        own = zip(index[lead:], x.shape, repeats[lead:], strict=True)
        return tuple(IndexConst(0) if n == 1 else i % n if r != 1 else i for i, n, r in own)

    return view(x, tuple(out.shape), index_map)


@lowers(aten.convolution.default)
def _convolution(out, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """2-D convolution (batched or not, any ``groups``) as ``weft.nn.conv2d``; 1-D as a 2-D one
    of height 1. ATen's ``convolution`` takes explicit per-side padding (``padding="same"`` is
    resolved before it, with a ``constant_pad_nd`` where the two sides differ). Transposed
    convolution and 3-D convolution are refused (the partitioner leaves them to eager)."""
    if transposed:
        raise LoweringError("transposed convolution (Weft has no conv_transpose)")
    if not isinstance(x, Tensor) or not isinstance(weight, Tensor):
        raise LoweringError("convolution of a non-tensor operand")
    spatial = weight.ndim - 2
    if spatial == 2 and x.ndim in (3, 4):
        return nn.conv2d(x, weight, bias, tuple(stride), tuple(padding), tuple(dilation), groups)
    if spatial == 1 and x.ndim in (2, 3):
        batched = x.ndim == 3
        wide = nn.unsqueeze(x, -2)  # (N, C, 1, L) or (C, 1, L)
        kernel = nn.unsqueeze(weight, -2)  # (O, C/groups, 1, K)
        result = nn.conv2d(wide, kernel, bias, (1, stride[0]), (0, padding[0]), (1, dilation[0]), groups)
        return nn.squeeze(result, -2 if batched else 1)
    raise LoweringError(f"convolution over {spatial} spatial dims (input rank {x.ndim}): Weft has conv2d only")


def _batched(x: Tensor, what: str) -> tuple[Tensor, bool]:
    """An NCHW input, or a CHW one as a batch of one (and whether it was)."""
    if x.ndim == 3:
        return nn.unsqueeze(x, 0), True
    if x.ndim != 4:
        raise LoweringError(f"{what} of a {x.ndim}-d input")
    return x, False


@lowers(aten.avg_pool2d.default)
def _avg_pool2d(out, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    """``weft.nn.avg_pool2d`` (ATen's empty ``stride`` is the kernel); ``ceil_mode`` and
    ``divisor_override`` are refused."""
    if ceil_mode or divisor_override is not None:
        raise LoweringError(f"avg_pool2d with ceil_mode={ceil_mode}, divisor_override={divisor_override}")
    batched, single = _batched(x, "avg_pool2d")
    result = nn.avg_pool2d(batched, list(kernel_size), list(stride) or None, list(padding) if not isinstance(
        padding, int) else padding, count_include_pad=count_include_pad)
    return nn.squeeze(result, 0) if single else result


@lowers(aten.max_pool2d_with_indices.default)
def _max_pool2d_with_indices(out, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``weft.nn.max_pool2d`` and, for a training graph's backward, ATen's indices: the flat
    ``row * W + col`` in the input plane of the first window position holding the maximum (a NaN
    is the maximum, as ATen's kernel; padding is never picked). ``ceil_mode`` is refused."""
    if ceil_mode:
        raise LoweringError("max_pool2d with ceil_mode=True")
    batched, single = _batched(x, "max_pool2d")
    stride = list(stride) or None
    values = nn.max_pool2d(batched, list(kernel_size), stride, padding, dilation)
    axes, fold, row, col, _, _ = _windows("max_pool2d", batched, list(kernel_size), stride, padding, dilation)
    height, width = batched.shape[2:]
    position = (AxisIndex("n"), AxisIndex("c"), row, col)
    inside = Binary(BinaryOp.AND, Binary(BinaryOp.AND, Binary(BinaryOp.GE, IndexValue(row), Const(0, DType.INT64)),
                                         Binary(BinaryOp.LT, IndexValue(row), Const(height, DType.INT64))),
                    Binary(BinaryOp.AND, Binary(BinaryOp.GE, IndexValue(col), Const(0, DType.INT64)),
                           Binary(BinaryOp.LT, IndexValue(col), Const(width, DType.INT64))))
    pixel = read_padded(batched, position, float("-inf"))
    best = values.read(tuple(AxisIndex(a.name) for a in axes))
    hit = Binary(BinaryOp.OR, Binary(BinaryOp.EQ, pixel, best), Binary(BinaryOp.NE, pixel, pixel))
    flat = Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, IndexValue(row), Const(width, DType.INT64)), IndexValue(col))
    body = Where(Binary(BinaryOp.AND, inside, hit), flat, Const(height * width, DType.INT64))
    indices = batched.tracer.emit("max_pool2d_indices", axes, body, DType.INT64, Fold(fold.axes, Combiner.MIN))
    if single:
        values, indices = nn.squeeze(values, 0), nn.squeeze(indices, 0)
    return values, indices


@lowers(aten.leaky_relu.default)
def _leaky_relu(out, x, negative_slope=0.01):
    if not x.dtype.is_float:
        raise LoweringError("leaky_relu of a non-float tensor")
    return nn.where(nn.greater(x, 0.0), x, nn.mul(x, float(negative_slope)))


# ---------------------------------------------------------------- views


@lowers(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default)
def _view(out, x, shape):
    return nn.reshape(x, tuple(out.shape))


@lowers(aten.permute.default)
def _permute(out, x, dims):
    return nn.permute(x, tuple(d % max(x.ndim, 1) for d in dims))


@lowers(aten.transpose.int)
def _transpose(out, x, a, b):
    return nn.transpose(x, a, b) if x.ndim >= 2 else x


@lowers(aten.t.default)
def _t(out, x):
    return nn.transpose(x, 0, 1) if x.ndim == 2 else x


@lowers(aten.expand.default)
def _expand(out, x, shape, implicit=False):
    return nn.expand(x, tuple(out.shape))


@lowers(aten.unsqueeze.default)
def _unsqueeze(out, x, dim):
    return nn.unsqueeze(x, dim)


@lowers(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def _squeeze(out, x, dims=None):
    return nn.reshape(x, tuple(out.shape))


@lowers(aten.select.int)
def _select(out, x, dim, index):
    dim %= x.ndim
    index = index % x.shape[dim]
    return nn.squeeze(nn.slice_axis(x, dim, index, index + 1), dim)


@lowers(aten.slice.Tensor)
def _slice(out, x, dim=0, start=None, end=None, step=1):
    return nn.slice_axis(x, dim, start, end, step)


@lowers(aten.constant_pad_nd.default)
def _constant_pad(out, x, pad, value=0):
    """Zero (or ``value``) padding as an index map with a guarded read; no member of its own."""
    if any(p < 0 for p in pad):
        raise LoweringError("constant_pad_nd with a negative (cropping) pad")
    before = [0] * x.ndim
    for position in range(len(pad) // 2):
        before[x.ndim - 1 - position] = pad[2 * position]
    fill = python_scalar(value, x.dtype)

    def read(index):
        return read_padded(x, tuple(i - b if b else i for i, b in zip(index, before, strict=True)), fill)

    return Tensor(tuple(out.shape), x.dtype, x.tracer, read, None)


@lowers(aten.cat.default)
def _cat(out, tensors, dim=0):
    parts = [t for t in tensors if isinstance(t, Tensor)]  # empty parts arrive as EMPTY
    if not parts:
        raise LoweringError("cat of empty tensors only")
    return nn.concat(parts, dim % parts[0].ndim)


@lowers(aten.split_with_sizes.default, aten.split.Tensor)
def _split(out, x, sizes, dim=0):
    dim %= x.ndim
    if isinstance(sizes, int):
        sizes = [min(sizes, x.shape[dim] - start) for start in range(0, x.shape[dim], sizes)]
    parts, start = [], 0
    for size in sizes:
        parts.append(nn.slice_axis(x, dim, start, start + size))
        start += size
    return tuple(parts)


LOWERINGS[operator.getitem] = lambda out, values, position: values[position]
