"""Weft's float32 transcendentals, each written once against ``weft.mathf.ops.Ops``.

Every function is branch-free (both sides of a piecewise definition are computed
and a select picks per lane), uses only IEEE-exact or correctly rounded basic
operations and never relies on which NaN payload an operation propagates: any
NaN input is answered by an explicit final select (``x + x``, the input quieted).
That makes the NumPy evaluation and the C rendering agree bit for bit.

Sources of the algorithms (coefficients rounded to float32 once, here):
- exp: Cody-Waite reduction by ln 2 into [-ln2/2, ln2/2], Cephes ``expf``
  polynomial, result scaled by 2^k in two halves so gradual underflow rounds once.
- log: FreeBSD ``e_logf.c`` (mantissa in [sqrt(2)/2, sqrt(2)), s = f/(2+f),
  degree-4 polynomial in s^2), denormal inputs rescaled by 2^25 first.
- tanh: Cephes ``tanhf`` odd polynomial for |x| < 0.625, else (1-e)/(1+e) with
  e = exp(-2|x|).
- erf: own fits (Lawson-weighted least squares, see docs/math.md): |x| < 1:
  x + x*P(x^2); 1 <= |x| < 4: 1 - exp(-x^2) * R(|x| - 2); |x| >= 4: 1.
- sigmoid: e = exp(-|x|), then 1/(1+e) for x >= 0 and e/(1+e) for x < 0, so no
  overflow and large negative inputs keep their tiny (denormal) values.
"""

from __future__ import annotations

import numpy as np

from weft.mathf.ops import F, M, Ops


def f32(value: float) -> float:
    """``value`` rounded to the nearest float32, as a Python float (exact)."""
    return float(np.float32(value))


def f32_bits(bits: int) -> float:
    """The float32 whose bit pattern is ``bits``."""
    return float(np.array(bits, np.uint32).view(np.float32))


SIGN_BIT = 0x80000000
ABS_MASK = 0x7FFFFFFF
QUIET_NAN = 0x7FC00000
POSITIVE_INF = 0x7F800000

# fmt: off
# exp
ROUND_MAGIC = 12582912.0  # 1.5 * 2^23: adding it rounds to an integer in the low bits
LOG2E = f32(1.44269504088896341)
EXP_LN2_HI = 0.693359375  # 9 significant bits: k * EXP_LN2_HI is exact for |k| < 2^15
EXP_LN2_LO = f32(-2.12194440e-4)
EXP_POLY = tuple(f32(c) for c in (
    1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1,
))
EXP_INPUT_MAX = 89.0  # exp(89) overflows; clamping keeps 2^k within the two-half scaling
EXP_INPUT_MIN = -104.0  # exp(-104) < 2^-150 rounds to 0

# log
TWO_25 = 33554432.0
FLT_MIN_NORMAL = f32_bits(0x00800000)
LOG_LN2_HI = f32_bits(0x3F317180)
LOG_LN2_LO = f32_bits(0x3717F7D1)
LOG_LG1 = 0xAAAAAA / 2.0**24
LOG_LG2 = 0xCCCE13 / 2.0**25
LOG_LG3 = 0x91E9EE / 2.0**25
LOG_LG4 = 0xF89E26 / 2.0**26

# tanh
TANH_SMALL = 0.625
TANH_POLY = tuple(f32(c) for c in (
    -5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1,
))

# erf (fitted, see docs/math.md); highest degree first
ERF_SMALL = 1.0
ERF_CLAMP = 4.0
ERF_SMALL_POLY = (  # erf(x)/x - 1 as a polynomial in x^2 on [0, 1], max abs error 1.2e-9 before rounding
    7.889047265052795e-05, -0.0008020821842364967, 0.005189533345401287, -0.026854444295167923,
    0.11283600330352783, -0.3761262595653534, 0.12837916612625122,
)
ERF_LARGE_SHIFT = 2.0
ERF_LARGE_POLY = (  # erfc(x)*exp(x^2) in (x - 2) on [1, 4], max error of erfc 2.4e-9 before rounding
    0.00010684720473363996, -0.00020230580412317067, 0.0005034966161474586, -0.0018574112327769399,
    0.00547554437071085, -0.015443007461726665, 0.041801568120718, -0.10679778456687927,
    0.2553955912590027,
)
# fmt: on


def horner(ops: Ops, x: F, coefficients: tuple[float, ...]) -> F:
    """c[0]*x^(n-1) + ... + c[n-1], by Horner's rule (highest degree first)."""
    result = ops.const(coefficients[0])
    for coefficient in coefficients[1:]:
        result = ops.add(ops.mul(result, x), ops.const(coefficient))
    return result


def is_nan(ops: Ops, x: F) -> M:
    return ops.ne(x, x)


def nan_passthrough(ops: Ops, x: F, result: F) -> F:
    """NaN lanes of ``x`` answer ``x + x`` (x quieted), whatever ``result`` holds."""
    return ops.select(is_nan(ops, x), ops.add(x, x), result)


def absolute(ops: Ops, x: F) -> F:
    return ops.from_bits(ops.iand(ops.bits(x), ops.uconst(ABS_MASK)))


def with_sign_of(ops: Ops, magnitude: F, sign_source: F) -> F:
    """``magnitude`` (sign bit clear) with the sign bit of ``sign_source``."""
    sign = ops.iand(ops.bits(sign_source), ops.uconst(SIGN_BIT))
    return ops.from_bits(ops.ior(ops.bits(magnitude), sign))


def maximum(ops: Ops, a: F, b: F) -> F:
    """The oracle's max: a if a > b or a is NaN, else b."""
    return ops.select(ops.mask_or(ops.gt(a, b), is_nan(ops, a)), a, b)


def minimum(ops: Ops, a: F, b: F) -> F:
    """The oracle's min: a if a < b or a is NaN, else b."""
    return ops.select(ops.mask_or(ops.lt(a, b), is_nan(ops, a)), a, b)


def exp_finite(ops: Ops, x: F) -> F:
    """exp for non-NaN x (NaN lanes give an unspecified NaN or number)."""
    clamped = ops.select(ops.gt(x, ops.const(EXP_INPUT_MAX)), ops.const(EXP_INPUT_MAX), x)
    clamped = ops.select(ops.lt(clamped, ops.const(EXP_INPUT_MIN)), ops.const(EXP_INPUT_MIN), clamped)
    # k = round(x * log2(e)); the magic sum holds k in its low mantissa bits.
    magic_sum = ops.add(ops.mul(clamped, ops.const(LOG2E)), ops.const(ROUND_MAGIC))
    k = ops.sub(magic_sum, ops.const(ROUND_MAGIC))
    r = ops.sub(clamped, ops.mul(k, ops.const(EXP_LN2_HI)))  # exact (Sterbenz)
    r = ops.sub(r, ops.mul(k, ops.const(EXP_LN2_LO)))
    r_squared = ops.mul(r, r)
    poly = ops.mul(horner(ops, r, EXP_POLY), r_squared)
    mantissa = ops.add(ops.add(poly, r), ops.const(1.0))  # e^r in [0.7, 1.42]
    # 2^k in two halves (k in [-150, 128]): each half is a normal float and
    # mantissa * 2^k1 is exact, so the final product rounds once, also into denormals.
    k_int = ops.isub(ops.bits(magic_sum), ops.bits(ops.const(ROUND_MAGIC)))
    k_first = ops.sar(k_int, 1)
    k_second = ops.isub(k_int, k_first)
    scale_first = ops.from_bits(ops.shl(ops.iadd(k_first, ops.uconst(127)), 23))
    scale_second = ops.from_bits(ops.shl(ops.iadd(k_second, ops.uconst(127)), 23))
    return ops.mul(ops.mul(mantissa, scale_first), scale_second)


def exp(ops: Ops, x: F) -> F:
    """e^x: overflow gives +inf, underflow is gradual then 0, exp(-inf) = 0."""
    return nan_passthrough(ops, x, exp_finite(ops, x))


def log(ops: Ops, x: F) -> F:
    """Natural log: log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf, denormals exact-ish."""
    tiny = ops.lt(x, ops.const(FLT_MIN_NORMAL))
    scaled = ops.select(tiny, ops.mul(x, ops.const(TWO_25)), x)
    exponent_bias = ops.select_u(tiny, ops.uconst(127 + 25), ops.uconst(127))
    bits = ops.bits(scaled)
    k = ops.isub(ops.shr(bits, 23), exponent_bias)
    mantissa_bits = ops.iand(bits, ops.uconst(0x007FFFFF))
    # Pick m or m/2 so that the normalised mantissa lies in [sqrt(2)/2, sqrt(2)).
    half_step = ops.iand(ops.iadd(mantissa_bits, ops.uconst(0x95F64 << 3)), ops.uconst(0x00800000))
    normalised = ops.from_bits(ops.ior(mantissa_bits, ops.ixor(half_step, ops.uconst(0x3F800000))))
    k = ops.iadd(k, ops.shr(half_step, 23))
    f = ops.sub(normalised, ops.const(1.0))
    s = ops.div(f, ops.add(ops.const(2.0), f))
    z = ops.mul(s, s)
    w = ops.mul(z, z)
    t1 = ops.mul(w, ops.add(ops.const(LOG_LG2), ops.mul(w, ops.const(LOG_LG4))))
    t2 = ops.mul(z, ops.add(ops.const(LOG_LG1), ops.mul(w, ops.const(LOG_LG3))))
    r = ops.add(t2, t1)
    half_f_squared = ops.mul(ops.mul(ops.const(0.5), f), f)
    dk = ops.to_float(k)
    inner = ops.add(ops.mul(s, ops.add(half_f_squared, r)), ops.mul(dk, ops.const(LOG_LN2_LO)))
    result = ops.sub(ops.mul(dk, ops.const(LOG_LN2_HI)), ops.sub(ops.sub(half_f_squared, inner), f))
    result = ops.select(ops.eq(x, ops.const(0.0)), ops.from_bits(ops.uconst(SIGN_BIT | POSITIVE_INF)), result)
    result = ops.select(ops.lt(x, ops.const(0.0)), ops.from_bits(ops.uconst(QUIET_NAN)), result)
    result = ops.select(ops.eq(x, ops.from_bits(ops.uconst(POSITIVE_INF))), x, result)
    return nan_passthrough(ops, x, result)


def tanh(ops: Ops, x: F) -> F:
    """Hyperbolic tangent: odd, tanh(+-inf) = +-1, tanh(-0) = -0."""
    a = absolute(ops, x)
    z = ops.mul(a, a)
    small = ops.add(ops.mul(ops.mul(horner(ops, z, TANH_POLY), z), a), a)
    e = exp_finite(ops, ops.mul(a, ops.const(-2.0)))
    large = ops.div(ops.sub(ops.const(1.0), e), ops.add(ops.const(1.0), e))
    magnitude = ops.select(ops.lt(a, ops.const(TANH_SMALL)), small, large)
    return nan_passthrough(ops, x, with_sign_of(ops, magnitude, x))


def erf(ops: Ops, x: F) -> F:
    """Error function: odd, erf(+-inf) = +-1, erf(-0) = -0."""
    a = absolute(ops, x)
    z = ops.mul(a, a)
    small = ops.add(a, ops.mul(a, horner(ops, z, ERF_SMALL_POLY)))
    clamped = ops.select(ops.gt(a, ops.const(ERF_CLAMP)), ops.const(ERF_CLAMP), a)
    tail = horner(ops, ops.sub(clamped, ops.const(ERF_LARGE_SHIFT)), ERF_LARGE_POLY)
    gauss = exp_finite(ops, ops.neg(ops.mul(clamped, clamped)))
    large = ops.sub(ops.const(1.0), ops.mul(gauss, tail))
    magnitude = ops.select(ops.lt(a, ops.const(ERF_SMALL)), small, large)
    return nan_passthrough(ops, x, with_sign_of(ops, magnitude, x))


def sigmoid(ops: Ops, x: F) -> F:
    """1 / (1 + e^-x): sigmoid(inf) = 1, sigmoid(-inf) = 0, tiny values kept for x << 0."""
    e = exp_finite(ops, ops.neg(absolute(ops, x)))
    numerator = ops.select(ops.lt(x, ops.const(0.0)), e, ops.const(1.0))
    return nan_passthrough(ops, x, ops.div(numerator, ops.add(ops.const(1.0), e)))


UNARY = {"exp": exp, "log": log, "tanh": tanh, "erf": erf, "sigmoid": sigmoid}
BINARY = {"max": maximum, "min": minimum}
