"""``pow``: any float exponent, a tensor exponent, a scalar base; one member each.

Integer exponents known at trace time multiply (``x**3`` is ``x*x*x``; beyond 8,
squaring; a negative one divides 1 by the positive power); 0.5 and -0.5 are sqrt
and rsqrt (as PyTorch's scalar fast paths: ``(-inf) ** 0.5`` is NaN). Everything else is C's ``pow`` written with Weft's own exp and log::

    pow(x, y) = 1                    where y == 0 or x == 1
              = NaN                  where -inf < x < 0 and y is not an integer
              = -|x|**y              where x < 0 and y is an odd integer
              = exp(y * log(|x|))    otherwise (|x| == 1 gives 1, also for y = ±inf)

so 0**y is 0 for y > 0 and inf for y < 0, as in C and PyTorch. Its error grows with
|y log x| (the product is rounded to float32 before exp): about |y log x| x 2^-24
relative, plus exp's and log's ulp. Strict stays bit-identical to the oracle (both
evaluate the same body with the mirrored exp and log). ``-0.0`` is treated as ``+0.0``.
"""

from __future__ import annotations

import math

from weft.errors import DTypeError
from weft.ir import Binary, BinaryOp, Cast, Const, DType, Expr, Unary, UnaryOp, Where

INTEGER_LIMIT = 2.0**24  # float32 values this large are all integers (and even)
MULTIPLY_LIMIT = 64      # integer exponents up to this multiply instead of exp/log


def _f(value: float) -> Const:
    return Const(float(value), DType.FLOAT32)


def _b(op: BinaryOp, a: Expr, b: Expr) -> Expr:
    return Binary(op, a, b)


def integer_power(x: Expr, exponent: int, one: Const) -> Expr:
    """``x ** exponent`` for an integer ``exponent >= 0`` by multiplication (left to right up
    to 8, the oracle's and C's order alike; by squaring beyond)."""
    if exponent == 0:
        return one
    if exponent <= 8:
        result = x
        for _ in range(exponent - 1):
            result = _b(BinaryOp.MUL, result, x)
        return result
    half = integer_power(x, exponent // 2, one)
    square = _b(BinaryOp.MUL, half, half)
    return _b(BinaryOp.MUL, square, x) if exponent % 2 else square


def _is_integer(y: Expr) -> Expr:
    """y has an integer value: huge (>= 2^24) or equal to its truncation to int32."""
    huge = _b(BinaryOp.GE, Unary(UnaryOp.ABS, y), _f(INTEGER_LIMIT))
    truncated = Cast(Cast(y, DType.INT32), DType.FLOAT32)
    return _b(BinaryOp.OR, huge, _b(BinaryOp.EQ, truncated, y))


def _is_odd(y: Expr) -> Expr:
    """y is an odd integer (below 2^24; every larger float32 is even)."""
    small = _b(BinaryOp.LT, Unary(UnaryOp.ABS, y), _f(INTEGER_LIMIT))
    whole = Cast(y, DType.INT32)
    halved = Cast(_b(BinaryOp.MUL, y, _f(0.5)), DType.INT32)
    doubled = _b(BinaryOp.MUL, halved, Const(2, DType.INT32))
    return _b(BinaryOp.AND, small, _b(BinaryOp.AND, _is_integer(y), _b(BinaryOp.NE, whole, doubled)))


def general_power(x: Expr, y: Expr) -> Expr:
    """C's ``powf(x, y)`` as a body over float32 ``x`` and ``y`` (module docstring)."""
    magnitude_of_x = Unary(UnaryOp.ABS, x)
    exponential = Unary(UnaryOp.EXP, _b(BinaryOp.MUL, y, Unary(UnaryOp.LOG, magnitude_of_x)))
    magnitude = Where(_b(BinaryOp.EQ, magnitude_of_x, _f(1.0)), _f(1.0), exponential)
    negative = _b(BinaryOp.LT, x, _f(0.0))
    signed = Where(_b(BinaryOp.AND, negative, _is_odd(y)), Unary(UnaryOp.NEG, magnitude), magnitude)
    not_integer = Unary(UnaryOp.NOT, _is_integer(y))
    finite_negative = _b(BinaryOp.AND, negative, _b(BinaryOp.GT, x, _f(-math.inf)))
    real = Where(_b(BinaryOp.AND, finite_negative, not_integer), _f(math.nan), signed)
    trivial = _b(BinaryOp.OR, _b(BinaryOp.EQ, y, _f(0.0)), _b(BinaryOp.EQ, x, _f(1.0)))
    return Where(trivial, _f(1.0), real)


def scalar_power(x: Expr, exponent: float, dtype: DType) -> Expr:
    """``x ** exponent`` for a Python number ``exponent`` (known at trace time)."""
    one = Const(1.0 if dtype.is_float else 1, dtype)
    if float(exponent).is_integer() and abs(exponent) <= MULTIPLY_LIMIT:
        count = int(exponent)
        if count >= 0:
            return integer_power(x, count, one)
        if not dtype.is_float:
            raise DTypeError(f"pow: an integer tensor to the negative power {exponent} is not an integer; "
                             "cast it with weft.nn.cast(x, 'float32') first")
        return _b(BinaryOp.DIV, one, integer_power(x, -count, one))
    if not dtype.is_float:
        raise DTypeError(f"pow: an {dtype.value} tensor to the power {exponent} needs float32; "
                         "cast it with weft.nn.cast(x, 'float32') first")
    if exponent == 0.5:
        return Unary(UnaryOp.SQRT, x)
    if exponent == -0.5:
        return Unary(UnaryOp.RSQRT, x)
    # the exponent's integer-ness and parity are known now: only x's cases stay in the body
    magnitude_of_x = Unary(UnaryOp.ABS, x)
    exponential = Unary(UnaryOp.EXP, _b(BinaryOp.MUL, _f(exponent), Unary(UnaryOp.LOG, magnitude_of_x)))
    magnitude = Where(_b(BinaryOp.EQ, magnitude_of_x, _f(1.0)), _f(1.0), exponential)
    negative = _b(BinaryOp.LT, x, _f(0.0))
    if not float(exponent).is_integer():  # NaN too; pow(1, NaN) is 1; pow(-inf, y) is inf or 0
        finite_negative = _b(BinaryOp.AND, negative, _b(BinaryOp.GT, x, _f(-math.inf)))
        return Where(_b(BinaryOp.EQ, x, _f(1.0)), _f(1.0), Where(finite_negative, _f(math.nan), magnitude))
    odd = abs(exponent) < INTEGER_LIMIT and int(exponent) % 2 == 1
    return Where(negative, Unary(UnaryOp.NEG, magnitude), magnitude) if odd else magnitude


__all__ = ["general_power", "integer_power", "scalar_power"]
