"""Bodies for ATen functions that Weft's IR has no unary for, composed of IR ops only.

Each function here builds one body expression over a float32 operand ``v`` from the IR's
``+ - * /``, comparisons, selects, ``exp`` and ``log``: the same body is what the oracle and
the compiled C evaluate, so Strict stays byte-identical to the oracle by construction. The
Inference build may contract a product and a sum into an FMA; none of these bodies has a
product feeding a sum whose rounding the formula depends on (``(a + C) - C`` is a sum then a
difference, which GCC keeps as written without ``-fassociative-math``).

- ``log1p_body``: Kahan's (HP-15C) ``log1p``: ``u = 1 + x``; ``x`` where ``u == 1``, else
  ``log(u) * (x / (u - 1))``. ``u - 1`` is exact, so the quotient corrects ``log(u)`` for the
  rounding of ``1 + x``: a few ulp (Weft's ``log`` is within about 1 ulp) for every x, also
  tiny ones, where ``log(1 + x)`` loses every digit. ``x / (u - 1)`` is taken first so large
  x cannot overflow the product; ``log1p(inf) = inf``, ``log1p(-1) = -inf``, NaN below -1
  and for NaN, ``log1p(-0) = -0``.
- ``expm1_body``: Kahan's ``expm1``: ``u = exp(x)``; ``x`` where ``u == 1`` (keeps ``-0``),
  ``-1`` where ``u - 1 == -1`` (x below about -17, and -inf), ``inf`` where ``u`` overflows,
  else ``(u - 1) * (x / log(u))``: the error of ``exp`` itself cancels (``log(u)`` is the
  argument ``u`` really is the exponential of), so the result is as close as ``log`` near 1.
- ``round_body``: round half to even (``torch.round``): ``(|x| + 2^23) - 2^23`` rounds
  ``|x| < 2^23`` to an integer in the default rounding mode (ties to even), the sign put
  back (``round(-0.4) = -0``); |x| >= 2^23 (every such float32 is an integer), ``±0``,
  infinities and NaN are returned as they are.
- ``floor_body``, ``ceil_body``, ``trunc_body``: from ``round_body``: ``r - 1`` where
  ``r > x`` (floor); ceil is ``-floor(-x)``; trunc is floor of ``|x|`` with the sign of x.
  Signed zeros as ATen's (``ceil(-0.7) = -0``, ``trunc(-0.5) = -0``).
"""

from __future__ import annotations

import math

from weft.ir import Binary, BinaryOp, Const, DType, Expr, Unary, UnaryOp, Where

INTEGER_LIMIT = 2.0**23  # every float32 at least this large in magnitude is an integer


def _f(value: float) -> Const:
    return Const(float(value), DType.FLOAT32)


def _b(op: BinaryOp, a: Expr, b: Expr) -> Expr:
    return Binary(op, a, b)


def log1p_body(v: Expr) -> Expr:
    u = _b(BinaryOp.ADD, v, _f(1.0))
    below = _b(BinaryOp.SUB, u, _f(1.0))  # exact: the part of x that 1 + x kept
    main = _b(BinaryOp.MUL, Unary(UnaryOp.LOG, u), _b(BinaryOp.DIV, v, below))
    infinite = _b(BinaryOp.EQ, v, _f(math.inf))
    return Where(_b(BinaryOp.EQ, u, _f(1.0)), v, Where(infinite, v, main))


def expm1_body(v: Expr) -> Expr:
    u = Unary(UnaryOp.EXP, v)
    below = _b(BinaryOp.SUB, u, _f(1.0))
    main = _b(BinaryOp.MUL, below, _b(BinaryOp.DIV, v, Unary(UnaryOp.LOG, u)))
    result = Where(_b(BinaryOp.EQ, u, _f(math.inf)), u, main)
    result = Where(_b(BinaryOp.EQ, below, _f(-1.0)), _f(-1.0), result)
    return Where(_b(BinaryOp.EQ, u, _f(1.0)), v, result)


def round_body(v: Expr) -> Expr:
    magnitude = Unary(UnaryOp.ABS, v)
    rounded = _b(BinaryOp.SUB, _b(BinaryOp.ADD, magnitude, _f(INTEGER_LIMIT)), _f(INTEGER_LIMIT))
    signed = Where(_b(BinaryOp.LT, v, _f(0.0)), Unary(UnaryOp.NEG, rounded), rounded)
    fractional = _b(BinaryOp.AND, _b(BinaryOp.LT, magnitude, _f(INTEGER_LIMIT)), _b(BinaryOp.NE, v, _f(0.0)))
    return Where(fractional, signed, v)  # NaN: |NaN| < 2^23 is false, so NaN itself


def floor_body(v: Expr) -> Expr:
    rounded = round_body(v)
    return Where(_b(BinaryOp.GT, rounded, v), _b(BinaryOp.SUB, rounded, _f(1.0)), rounded)


def ceil_body(v: Expr) -> Expr:
    return Unary(UnaryOp.NEG, floor_body(Unary(UnaryOp.NEG, v)))  # -floor(-x): ceil(-0.7) = -0


def trunc_body(v: Expr) -> Expr:
    down = floor_body(Unary(UnaryOp.ABS, v))
    return Where(_b(BinaryOp.LT, v, _f(0.0)), Unary(UnaryOp.NEG, down), Where(_b(BinaryOp.EQ, v, _f(0.0)), v, down))


__all__ = ["ceil_body", "expm1_body", "floor_body", "log1p_body", "round_body", "trunc_body"]
