"""Elementwise members with NumPy broadcasting, and the activations built from them.

Each public function emits exactly one member whose body reads its operands
through their (broadcast) index maps. Compound activations (GELU, SiLU) are one
member each: their body is the whole formula, not a chain of members.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from weft.errors import DTypeError, ShapeError
from weft.ir import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    DType,
    Expr,
    IndexConst,
    IndexExpr,
    Unary,
    UnaryOp,
    Where,
)
from weft.nn.tensor import Tensor, as_dtype, axes_for, axis_index, current_tracer

Operand = Tensor | float | int | bool


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast rule; ``ShapeError`` naming the op and the shapes otherwise."""
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for position in range(rank):
        extents = {s[position - rank + len(s)] for s in shapes if position - rank + len(s) >= 0}
        extents.discard(1)
        if len(extents) > 1:
            listed = " and ".join(str(tuple(s)) for s in shapes)
            raise ShapeError(
                f"{op}: shapes {listed} do not broadcast (dimension {position - rank} has extents"
                f" {sorted(extents)}); reshape or expand one operand so each dimension matches or is 1"
            )
        result.append(extents.pop() if extents else 1)
    return tuple(result)


def broadcast_read(tensor: Tensor, shape: tuple[int, ...], index: tuple[IndexExpr, ...]) -> Expr:
    """Read ``tensor`` broadcast to ``shape`` at ``index`` (size-1 dims read position 0)."""
    offset = len(shape) - tensor.ndim
    own = tuple(
        IndexConst(0) if extent == 1 and shape[offset + d] != 1 else index[offset + d]
        for d, extent in enumerate(tensor.shape)
    )
    return tensor.read(own)


def scalar_const(value: float | int | bool, like: DType, op: str) -> Const:
    """A Python scalar as a constant of ``like`` (the promoted dtype of the operation)."""
    if isinstance(value, bool | np.bool_):
        if like is DType.BOOL:
            return Const(bool(value), DType.BOOL)
        return Const(float(value) if like.is_float else int(value), like)
    if isinstance(value, int | np.integer):
        if like is DType.BOOL:
            raise DTypeError(f"{op}: cannot combine bool tensor with the number {value}; cast to float32 first")
        return Const(float(value) if like.is_float else int(value), like)
    if isinstance(value, float | np.floating):
        if not like.is_float:
            raise DTypeError(
                f"{op}: cannot combine a {like.value} tensor with the float {value}; cast the tensor"
                " with weft.nn.cast(x, 'float32') first"
            )
        return Const(float(value), DType.FLOAT32)
    raise DTypeError(f"{op}: operands must be Tensors or Python numbers, got {type(value).__name__}")


_CATEGORY = {DType.BOOL: 0, DType.INT32: 1, DType.INT64: 1, DType.FLOAT32: 2}
_WIDTH = {DType.BOOL: 0, DType.INT32: 1, DType.INT64: 2, DType.FLOAT32: 3}


def _highest(dtypes: Sequence[DType]) -> DType | None:
    return max(dtypes, key=_WIDTH.__getitem__) if dtypes else None


def _scalar_dtype(value: object, op: str) -> DType:
    if isinstance(value, bool | np.bool_):
        return DType.BOOL
    if isinstance(value, int | np.integer):
        return DType.INT64
    if isinstance(value, float | np.floating):
        return DType.FLOAT32
    raise DTypeError(f"{op}: operands must be Tensors or Python numbers, got {type(value).__name__}")


def result_type(op: str, operands: Sequence[Operand]) -> DType:
    """PyTorch's type promotion (``torch.result_type``) over Weft's dtypes.

    Three tiers, highest first: tensors with dimensions, 0-d tensors, Python numbers.
    The dimensioned tensors decide the dtype (bool < int32 < int64 < float32); a lower
    tier changes it only when it is of a higher *category* (bool < integer < float):
    then the result is that tier's own promoted dtype, for a Python number the default
    of its category (int64 for an int, float32 for a float). So ``int32 + 2`` stays
    int32, ``int32 + 2.5`` is float32, ``bool + 1`` is int64, ``int32 + int64`` int64.
    """
    dimensioned = [o.dtype for o in operands if isinstance(o, Tensor) and o.ndim > 0]
    zero_dim = [o.dtype for o in operands if isinstance(o, Tensor) and o.ndim == 0]
    numbers = [_scalar_dtype(o, op) for o in operands if not isinstance(o, Tensor)]
    result: DType | None = None
    for tier in (dimensioned, zero_dim, numbers):
        candidate = _highest(tier)
        if candidate is None:
            continue
        if result is None or _CATEGORY[candidate] > _CATEGORY[result]:
            result = candidate
    if result is None:
        raise DTypeError(f"{op}: needs at least one operand")
    return result


def promoted_read(operand: Operand, target: DType, shape: tuple[int, ...], index: tuple[IndexExpr, ...],
                  op: str) -> Expr:
    """``operand`` read at ``index`` (broadcast to ``shape``) as ``target``: a tensor of
    another dtype is converted inside the body (no member of its own)."""
    if not isinstance(operand, Tensor):
        return scalar_const(operand, target, op)
    value = broadcast_read(operand, shape, index)
    return value if operand.dtype is target else Cast(value, target)


def elementwise(
    op: str,
    operands: Sequence[Operand],
    body: Callable[..., Expr],
    dtype: DType | None = None,
    label: str | None = None,
) -> Tensor:
    """Emit one member: ``out[...] = body(*operand reads)`` over the broadcast shape.

    Operands are promoted to one dtype by PyTorch's rules (``result_type``) and read
    as it; ``dtype`` is the result dtype (default: the promoted one)."""
    tensors = [o for o in operands if isinstance(o, Tensor)]
    if not tensors:
        raise DTypeError(f"{op}: needs at least one Tensor operand")
    tracer = current_tracer(*tensors)
    like = result_type(op, operands)
    shape = broadcast_shapes(op, *(t.shape for t in tensors))
    axes = axes_for(shape)
    index = axis_index(axes)
    reads = [promoted_read(o, like, shape, index, op) for o in operands]
    return tracer.emit(label or op, axes, body(*reads), dtype or like)


def _need_float(op: str, *operands: Operand) -> None:
    for operand in operands:
        if isinstance(operand, Tensor) and not operand.dtype.is_float:
            raise DTypeError(
                f"{op}: needs float32 input, got {operand.dtype.value} of shape {operand.shape};"
                " cast with weft.nn.cast(x, 'float32')"
            )


def _need_number(op: str, *operands: Operand) -> None:
    for operand in operands:
        if isinstance(operand, Tensor) and operand.dtype is DType.BOOL:
            raise DTypeError(f"{op}: needs numbers, got bool of shape {operand.shape}; cast first")


def _binary(op: BinaryOp, name: str, a: Operand, b: Operand, result: DType | None = None) -> Tensor:
    if result_type(name, (a, b)) is DType.BOOL:
        raise DTypeError(f"{name}: needs numbers, got two bool operands; cast one with weft.nn.cast(x, 'int32')"
                         " or use logical_and / logical_or")
    return elementwise(name, (a, b), lambda x, y: Binary(op, x, y), result)


def add(a: Operand, b: Operand) -> Tensor:
    return _binary(BinaryOp.ADD, "add", a, b)


def sub(a: Operand, b: Operand) -> Tensor:
    return _binary(BinaryOp.SUB, "sub", a, b)


def mul(a: Operand, b: Operand) -> Tensor:
    return _binary(BinaryOp.MUL, "mul", a, b)


def div(a: Operand, b: Operand) -> Tensor:
    """True division for float32; integer operands divide truncating toward zero (C), defined
    for every pair: ``a / 0 = 0`` and ``INT_MIN / -1 = INT_MIN`` (wraps, never traps)."""
    return _binary(BinaryOp.DIV, "div", a, b)


def fmod(a: Operand, b: Operand) -> Tensor:
    """The remainder of ``div``: ``a - div(a, b) * b``, with the sign of ``a`` (C's ``%``,
    ``numpy.fmod``, ``torch.fmod``). Integers: ``a fmod 0 = a``, ``INT_MIN fmod -1 = 0``;
    float32: IEEE ``fmodf`` (exact; NaN for a zero divisor)."""
    return _binary(BinaryOp.FMOD, "fmod", a, b)


def maximum(a: Operand, b: Operand) -> Tensor:
    return _binary(BinaryOp.MAX, "maximum", a, b)


def minimum(a: Operand, b: Operand) -> Tensor:
    return _binary(BinaryOp.MIN, "minimum", a, b)


def pow(a: Operand, b: Operand) -> Tensor:  # noqa: A001 (mirrors the ** operator)
    """``a ** b`` as PyTorch's ``pow``: any float exponent, a tensor exponent, or a Python
    number base (``2 ** x``); one member (``weft/nn/power.py`` defines the body and its accuracy).
    Integer tensors take non-negative integer exponents (repeated multiplication)."""
    from weft.nn.power import general_power, scalar_power

    if isinstance(a, Tensor) and isinstance(b, int | float | np.integer | np.floating) and not isinstance(b, bool):
        _need_number("pow", a)
        exponent = float(b)
        return elementwise("pow", (a,), lambda x: scalar_power(x, exponent, a.dtype))
    if isinstance(a, bool) or isinstance(b, bool):
        raise DTypeError("pow: a bool base or exponent is not supported; cast to float32 first")
    for operand in (a, b):
        if isinstance(operand, Tensor) and not operand.dtype.is_float:
            raise DTypeError(f"pow: a tensor exponent or a number base needs float32 tensors, got "
                             f"{operand.dtype.value} of shape {operand.shape}; cast with weft.nn.cast(x, 'float32')")
    if isinstance(a, int | np.integer):
        a = float(a)
    if isinstance(b, int | np.integer):
        b = float(b)
    return elementwise("pow", (a, b), general_power)


def square(x: Tensor) -> Tensor:
    return pow(x, 2)


def _compare(op: BinaryOp, name: str, a: Operand, b: Operand) -> Tensor:
    return elementwise(name, (a, b), lambda x, y: Binary(op, x, y), DType.BOOL)


def less(a: Operand, b: Operand) -> Tensor:
    return _compare(BinaryOp.LT, "less", a, b)


def less_equal(a: Operand, b: Operand) -> Tensor:
    return _compare(BinaryOp.LE, "less_equal", a, b)


def greater(a: Operand, b: Operand) -> Tensor:
    return _compare(BinaryOp.GT, "greater", a, b)


def greater_equal(a: Operand, b: Operand) -> Tensor:
    return _compare(BinaryOp.GE, "greater_equal", a, b)


def equal(a: Operand, b: Operand) -> Tensor:
    return _compare(BinaryOp.EQ, "equal", a, b)


def not_equal(a: Operand, b: Operand) -> Tensor:
    return _compare(BinaryOp.NE, "not_equal", a, b)


def _need_bool(op: str, *operands: Operand) -> None:
    for operand in operands:
        if isinstance(operand, Tensor) and operand.dtype is not DType.BOOL:
            raise DTypeError(f"{op}: needs bool tensors, got {operand.dtype.value} of shape {operand.shape}")


def _truth(v: Expr, dtype: DType) -> Expr:
    """A value as bool the way PyTorch's logical ops read it: nonzero is True."""
    if dtype is DType.BOOL:
        return v
    return Binary(BinaryOp.NE, v, Const(0.0 if dtype.is_float else 0, dtype))


def _logical(op: BinaryOp, name: str, a: Operand, b: Operand) -> Tensor:
    """PyTorch's logical ops: any dtypes, nonzero is True, a bool result."""
    kinds = [o.dtype if isinstance(o, Tensor) else _scalar_dtype(o, name) for o in (a, b)]
    tensors = [o for o in (a, b) if isinstance(o, Tensor)]
    if not tensors:
        raise DTypeError(f"{name}: needs at least one Tensor operand")
    tracer = current_tracer(*tensors)
    shape = broadcast_shapes(name, *(t.shape for t in tensors))
    axes = axes_for(shape)
    index = axis_index(axes)
    reads = [_truth(promoted_read(o, kind, shape, index, name), kind) for o, kind in zip((a, b), kinds, strict=True)]
    return tracer.emit(name, axes, Binary(op, *reads), DType.BOOL)


def logical_and(a: Operand, b: Operand) -> Tensor:
    return _logical(BinaryOp.AND, "logical_and", a, b)


def logical_or(a: Operand, b: Operand) -> Tensor:
    return _logical(BinaryOp.OR, "logical_or", a, b)


def logical_not(x: Tensor) -> Tensor:
    if not isinstance(x, Tensor):
        raise DTypeError(f"logical_not: needs a Tensor, got {type(x).__name__}")
    return elementwise("logical_not", (x,), lambda v: Unary(UnaryOp.NOT, _truth(v, x.dtype)), DType.BOOL)


def where(condition: Tensor, a: Operand, b: Operand) -> Tensor:
    """``a`` where ``condition`` holds, else ``b`` (all three broadcast; the branches
    promoted to one dtype by PyTorch's rules, ``result_type``)."""
    if not isinstance(condition, Tensor) or condition.dtype is not DType.BOOL:
        raise DTypeError("where: the condition must be a bool Tensor (e.g. x > 0)")
    values = [o for o in (a, b) if isinstance(o, Tensor)]
    like = result_type("where", (a, b)) if values else DType.FLOAT32
    tracer = current_tracer(condition, *values)
    shape = broadcast_shapes("where", condition.shape, *(v.shape for v in values))
    axes = axes_for(shape)
    index = axis_index(axes)
    body = Where(broadcast_read(condition, shape, index), promoted_read(a, like, shape, index, "where"),
                 promoted_read(b, like, shape, index, "where"))
    return tracer.emit("where", axes, body, like)


def cast(x: Tensor, dtype: object) -> Tensor:
    """Convert to ``dtype``. Float to int truncates toward zero and saturates: NaN -> 0,
    values at or beyond the integer range (and infinities) -> its minimum or maximum."""
    target = as_dtype(dtype, "cast")
    if target is x.dtype:
        return x
    return elementwise("cast", (x,), lambda v: Cast(v, target), target)


def _unary(op: UnaryOp, x: Tensor, float_only: bool = True) -> Tensor:
    """One member applying ``op``. A float-only op (exp, log, sqrt, ...) reads an integer or
    bool tensor as float32 and returns float32, as PyTorch's unary float ops do."""
    if not isinstance(x, Tensor):
        raise DTypeError(f"{op.value}: needs a Tensor, got {type(x).__name__}")
    if float_only:
        if not x.dtype.is_float:
            return elementwise(op.value, (x,), lambda v: Unary(op, Cast(v, DType.FLOAT32)), DType.FLOAT32)
    else:
        _need_number(op.value, x)
    return elementwise(op.value, (x,), lambda v: Unary(op, v))


def neg(x: Tensor) -> Tensor:
    return _unary(UnaryOp.NEG, x, float_only=False)


def abs(x: Tensor) -> Tensor:  # noqa: A001
    return _unary(UnaryOp.ABS, x, float_only=False)


def exp(x: Tensor) -> Tensor:
    return _unary(UnaryOp.EXP, x)


def log(x: Tensor) -> Tensor:
    return _unary(UnaryOp.LOG, x)


def sqrt(x: Tensor) -> Tensor:
    return _unary(UnaryOp.SQRT, x)


def rsqrt(x: Tensor) -> Tensor:
    return _unary(UnaryOp.RSQRT, x)


def tanh(x: Tensor) -> Tensor:
    return _unary(UnaryOp.TANH, x)


def erf(x: Tensor) -> Tensor:
    return _unary(UnaryOp.ERF, x)


def sigmoid(x: Tensor) -> Tensor:
    return _unary(UnaryOp.SIGMOID, x)


def sin(x: Tensor) -> Tensor:
    """Sine (Weft's float32 ``sin``, within 1 ulp for |x| <= 2^22; NaN beyond, see docs/math.md)."""
    return _unary(UnaryOp.SIN, x)


def cos(x: Tensor) -> Tensor:
    """Cosine (Weft's float32 ``cos``, within 1 ulp for |x| <= 2^22; NaN beyond, see docs/math.md)."""
    return _unary(UnaryOp.COS, x)


def _f(value: float) -> Const:
    return Const(float(value))


def mul_expr(*factors: Expr) -> Expr:
    result = factors[0]
    for factor in factors[1:]:
        result = Binary(BinaryOp.MUL, result, factor)
    return result


def relu(x: Tensor) -> Tensor:
    _need_float("relu", x)
    return elementwise("relu", (x,), lambda v: Binary(BinaryOp.MAX, v, _f(0.0)))


def silu(x: Tensor) -> Tensor:
    """x * sigmoid(x), one member."""
    _need_float("silu", x)
    return elementwise("silu", (x,), lambda v: Binary(BinaryOp.MUL, v, Unary(UnaryOp.SIGMOID, v)))


def gelu_expr(v: Expr, approximate: str = "none") -> Expr:
    """GELU's body: erf form ``0.5x(1+erf(x/sqrt 2))`` or tanh form (PyTorch's 'tanh')."""
    if approximate == "tanh":
        cube = mul_expr(v, v, v)
        inner = mul_expr(_f(math.sqrt(2.0 / math.pi)), Binary(BinaryOp.ADD, v, mul_expr(_f(0.044715), cube)))
        return mul_expr(_f(0.5), v, Binary(BinaryOp.ADD, _f(1.0), Unary(UnaryOp.TANH, inner)))
    if approximate == "none":
        scaled = Binary(BinaryOp.MUL, v, _f(1.0 / math.sqrt(2.0)))
        return mul_expr(_f(0.5), v, Binary(BinaryOp.ADD, _f(1.0), Unary(UnaryOp.ERF, scaled)))
    raise DTypeError(f"gelu: approximate must be 'none' (erf) or 'tanh', got {approximate!r}")


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU as one member, erf form by default, tanh form with ``approximate='tanh'``."""
    _need_float("gelu", x)
    gelu_expr(_f(0.0), approximate)  # validate before emitting
    return elementwise("gelu", (x,), lambda v: gelu_expr(v, approximate))
