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
- sin, cos: k = round(|x| * 2/pi), r = |x| - k*pi/2 by Cody-Waite with pi/2 in six
  12-bit pieces and k split in two (every product exact), the small terms summed
  error-free into r_hi + r_lo; Cephes ``sinf``/``cosf`` polynomials on
  [-pi/4, pi/4] with r_lo folded in; quadrant k mod 4 picks polynomial and sign.
  Accurate for |x| <= 2^22 (``TRIG_INPUT_MAX``); beyond that (and for +-inf) NaN.
"""

from __future__ import annotations

import numpy as np

from weft.mathf.ops import F, M, Ops, U


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

# sin, cos
TWO_OVER_PI = f32(0.636619772367581343)
TRIG_INPUT_MAX = 4194304.0  # 2^22: k < 2^22, so the magic rounding and the exact products hold
TRIG_K_SPLIT = 4096.0  # k = k_high + k_low, k_high a multiple of 2^12 (< 2^10 of them), |k_low| <= 2^11
PI_OVER_2_PIECES = tuple(float.fromhex(h) for h in (  # pi/2 as a sum of 12-bit floats (round-to-nearest
    "0x1.922p+0", "-0x1.2aep-18", "-0x1.deap-31", "0x1.184p-44", "0x1.a62p-58", "0x1.8ccp-72",  # split);
))  # what is left of pi/2 is 1.6e-26
SIN_POLY = tuple(f32(c) for c in (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1))  # Cephes sinf
COS_POLY = tuple(f32(c) for c in (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2))
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
    clamped = exp_clamp(ops, x)
    mantissa, _, magic_sum = exp_reduced(ops, clamped)
    return exp_scaled(ops, mantissa, magic_sum)


def exp_clamp(ops: Ops, x: F) -> F:
    """x clamped to [EXP_INPUT_MIN, EXP_INPUT_MAX] (a NaN lane stays NaN)."""
    clamped = ops.select(ops.gt(x, ops.const(EXP_INPUT_MAX)), ops.const(EXP_INPUT_MAX), x)
    return ops.select(ops.lt(clamped, ops.const(EXP_INPUT_MIN)), ops.const(EXP_INPUT_MIN), clamped)


def exp_reduced(ops: Ops, clamped: F) -> tuple[F, F, F]:
    """(e^r, k, the magic sum holding k) with clamped = k ln2 + r, |r| <= ln2 / 2."""
    # k = round(x * log2(e)); the magic sum holds k in its low mantissa bits.
    magic_sum = ops.add(ops.mul(clamped, ops.const(LOG2E)), ops.const(ROUND_MAGIC))
    k = ops.sub(magic_sum, ops.const(ROUND_MAGIC))
    r = ops.sub(clamped, ops.mul(k, ops.const(EXP_LN2_HI)))  # exact (Sterbenz)
    r = ops.sub(r, ops.mul(k, ops.const(EXP_LN2_LO)))
    r_squared = ops.mul(r, r)
    poly = ops.mul(horner(ops, r, EXP_POLY), r_squared)
    mantissa = ops.add(ops.add(poly, r), ops.const(1.0))  # e^r in [0.7, 1.42]
    return mantissa, k, magic_sum


def exp_scaled(ops: Ops, mantissa: F, magic_sum: F) -> F:
    """mantissa * 2^k, rounded once (also into denormals)."""
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


def two_sum(ops: Ops, a: F, b: F) -> tuple[F, F]:
    """(s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth; no FMA needed)."""
    total = ops.add(a, b)
    b_virtual = ops.sub(total, a)
    a_virtual = ops.sub(total, b_virtual)
    error = ops.add(ops.sub(a, a_virtual), ops.sub(b, b_virtual))
    return total, error


def round_to_integer(ops: Ops, x: F) -> F:
    """x rounded to the nearest integer (ties to even), exact for |x| < 2^22."""
    return ops.sub(ops.add(x, ops.const(ROUND_MAGIC)), ops.const(ROUND_MAGIC))


def reduce_quarter_pi(ops: Ops, a: F) -> tuple[F, F, U]:
    """For 0 <= a <= 2^22: (r_hi, r_lo, k) with a - k*pi/2 = r_hi + r_lo to ~2^-64 absolute.

    k = round(a * 2/pi) as uint32 bits (only k mod 4 is used). k = k_high + k_low with
    k_high a multiple of 2^12 below 2^22 (at most 10 significant bits) and |k_low| <= 2^11,
    and every piece of pi/2 has 12 significant bits, so every product k_part * piece is
    exact. The two leading subtractions are exact (Sterbenz, or a short multiple of
    ulp(a)); the rest are summed error-free (two_sum) into r_hi, their errors into r_lo.
    """
    magic_sum = ops.add(ops.mul(a, ops.const(TWO_OVER_PI)), ops.const(ROUND_MAGIC))
    k = ops.sub(magic_sum, ops.const(ROUND_MAGIC))
    k_int = ops.isub(ops.bits(magic_sum), ops.bits(ops.const(ROUND_MAGIC)))
    k_high = ops.mul(round_to_integer(ops, ops.mul(k, ops.const(1.0 / TRIG_K_SPLIT))), ops.const(TRIG_K_SPLIT))
    k_low = ops.sub(k, k_high)
    first = PI_OVER_2_PIECES[0]
    r_hi = ops.sub(ops.sub(a, ops.mul(k_high, ops.const(first))), ops.mul(k_low, ops.const(first)))
    r_lo = ops.const(0.0)
    for piece in PI_OVER_2_PIECES[1:]:
        for k_part in (k_high, k_low):
            r_hi, error = two_sum(ops, r_hi, ops.neg(ops.mul(k_part, ops.const(piece))))
            r_lo = ops.add(r_lo, error)
    # fl(a * 2/pi) can be off by up to ~0.25 for a near 2^22, leaving |r| up to ~1.2: one
    # correction step (adj in {-1, 0, 1}) brings r back into [-pi/4, pi/4]. When adj != 0,
    # |r| > pi/4 so r - adj*pi/2 needs no more than three pieces, and the first is exact.
    adjust_sum = ops.add(ops.mul(r_hi, ops.const(TWO_OVER_PI)), ops.const(ROUND_MAGIC))
    adjust = ops.sub(adjust_sum, ops.const(ROUND_MAGIC))
    k_int = ops.iadd(k_int, ops.isub(ops.bits(adjust_sum), ops.bits(ops.const(ROUND_MAGIC))))
    r_hi = ops.sub(r_hi, ops.mul(adjust, ops.const(PI_OVER_2_PIECES[0])))
    r_hi, error = two_sum(ops, r_hi, ops.neg(ops.mul(adjust, ops.const(PI_OVER_2_PIECES[1]))))
    r_lo = ops.add(r_lo, ops.sub(error, ops.mul(adjust, ops.const(PI_OVER_2_PIECES[2]))))
    return r_hi, r_lo, k_int


def sin_kernel(ops: Ops, r_hi: F, r_lo: F) -> F:
    """sin(r_hi + r_lo) for |r_hi| <= ~pi/4, |r_lo| <= ulp(r_hi): r + r^3 P(r^2) + r_lo cos(r)."""
    z = ops.mul(r_hi, r_hi)
    odd = ops.mul(ops.mul(r_hi, z), horner(ops, z, SIN_POLY))
    low = ops.sub(r_lo, ops.mul(ops.mul(ops.const(0.5), z), r_lo))
    return ops.add(r_hi, ops.add(odd, low))


def cos_kernel(ops: Ops, r_hi: F, r_lo: F) -> F:
    """cos(r_hi + r_lo): 1 - z/2 with its rounding error kept, + z^2 Q(z) - r_hi r_lo."""
    z = ops.mul(r_hi, r_hi)
    half_z = ops.mul(ops.const(0.5), z)
    w = ops.sub(ops.const(1.0), half_z)
    w_error = ops.sub(ops.sub(ops.const(1.0), w), half_z)  # exact: 1 - w is exact (Sterbenz)
    tail = ops.sub(ops.mul(ops.mul(z, z), horner(ops, z, COS_POLY)), ops.mul(r_hi, r_lo))
    return ops.add(w, ops.add(w_error, tail))


def _lane_mask(ops: Ops, bit: U) -> M:
    """True where the uint32 ``bit`` (a single small bit) is set."""
    return ops.ne(ops.to_float(bit), ops.const(0.0))


def sin_or_cos(ops: Ops, x: F, cosine: bool) -> F:
    """sin(x) or cos(x): quadrant k mod 4 (k + 1 for cos) picks the kernel and the sign."""
    a = absolute(ops, x)
    r_hi, r_lo, k_int = reduce_quarter_pi(ops, a)
    quadrant = ops.iadd(k_int, ops.uconst(1)) if cosine else k_int
    sine = sin_kernel(ops, r_hi, r_lo)
    cosine_value = cos_kernel(ops, r_hi, r_lo)
    magnitude = ops.select(_lane_mask(ops, ops.iand(quadrant, ops.uconst(1))), cosine_value, sine)
    sign = ops.shl(ops.iand(quadrant, ops.uconst(2)), 30)
    if not cosine:  # sin is odd
        sign = ops.ixor(sign, ops.iand(ops.bits(x), ops.uconst(SIGN_BIT)))
    result = ops.from_bits(ops.ixor(ops.bits(magnitude), sign))
    out_of_range = ops.gt(a, ops.const(TRIG_INPUT_MAX))  # includes +-inf
    result = ops.select(out_of_range, ops.from_bits(ops.uconst(QUIET_NAN)), result)
    return nan_passthrough(ops, x, result)


def sin(ops: Ops, x: F) -> F:
    """Sine: sin(-0) = -0, exact for tiny x; NaN for |x| > 2^22 and +-inf (see TRIG_INPUT_MAX)."""
    return sin_or_cos(ops, x, cosine=False)


def cos(ops: Ops, x: F) -> F:
    """Cosine: cos(+-0) = 1; NaN for |x| > 2^22 and +-inf (see TRIG_INPUT_MAX)."""
    return sin_or_cos(ops, x, cosine=True)


UNARY = {"exp": exp, "log": log, "tanh": tanh, "erf": erf, "sigmoid": sigmoid, "sin": sin, "cos": cos}
BINARY = {"max": maximum, "min": minimum}
