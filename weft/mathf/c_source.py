"""``Ops`` rendered as C: the math header the code generator pastes into kernels.

``c_math_source(lanes)`` runs every definition in ``weft.mathf.definitions``
twice through ``COps``: once in the vector dialect (GCC vector extensions,
``wf_vf`` with ``lanes`` floats) and once in the scalar dialect (``float``, for
loop tails). Each ``Ops`` call becomes one C statement in the same order as the
NumPy evaluation performs it, so compiled code (``-ffp-contract=off``, no
``-ffast-math``) and the oracle agree bit for bit.

Example (vector dialect, first lines of ``wf_exp``)::

    static inline wf_vf wf_exp(wf_vf x) {
      const wf_vi m0 = x > WF_F(0x1.64p+6f);
      const wf_vf f1 = wf_select(m0, WF_F(0x1.64p+6f), x);
      const wf_vi m2 = f1 < WF_F(-0x1.ap+6f);
      ...
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from weft.errors import ConfigError
from weft.mathf import definitions

C_UNARY_NAMES = {name: f"wf_{name}" for name in (*definitions.UNARY, "sqrt", "rsqrt")}
C_BINARY_NAMES = {name: f"wf_{name}" for name in definitions.BINARY}
SUPPORTED_LANES = (1, 2, 4, 8, 16)


@dataclass(frozen=True, slots=True)
class CValue:
    """A C expression and its kind: 'f' float lanes, 'u' uint32 lanes, 'm' mask."""

    text: str
    kind: str


def _float_literal(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise ValueError("use from_bits for non-finite constants")
    if float(np.float32(value)) != value:
        raise ValueError(f"constant {value!r} is not exactly representable in float32")
    mantissa, exponent = value.hex().split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}f"


class COps:
    """Records each ``Ops`` call as one C statement (``vector`` or scalar dialect)."""

    def __init__(self, vector: bool) -> None:
        self.vector = vector
        self.lines: list[str] = []
        self._count = 0
        self._types = (
            {"f": "wf_vf", "u": "wf_vu", "m": "wf_vi"}
            if vector
            else {"f": "float", "u": "uint32_t", "m": "int32_t"}
        )

    def parameter(self, name: str) -> CValue:
        return CValue(name, "f")

    def _emit(self, kind: str, expression: str) -> CValue:
        name = f"{kind}{self._count}"
        self._count += 1
        self.lines.append(f"  const {self._types[kind]} {name} = {expression};")
        return CValue(name, kind)

    def raw(self, kind: str, expression: str) -> CValue:
        """One statement of C written by the caller (a target's intrinsic)."""
        return self._emit(kind, expression)

    def _splat(self, literal: str, kind: str) -> str:
        return f"WF_{kind.upper()}({literal})" if self.vector else literal

    def const(self, value: float) -> CValue:
        return CValue(self._splat(_float_literal(value), "f"), "f")

    def uconst(self, value: int) -> CValue:
        if not 0 <= value < 2**32:
            raise ValueError(f"uint32 constant out of range: {value}")
        return CValue(self._splat(f"0x{value:08x}u", "u"), "u")

    def _binary(self, kind: str, operator: str, a: CValue, b: CValue) -> CValue:
        return self._emit(kind, f"{a.text} {operator} {b.text}")

    def add(self, a: CValue, b: CValue) -> CValue:
        return self._binary("f", "+", a, b)

    def sub(self, a: CValue, b: CValue) -> CValue:
        return self._binary("f", "-", a, b)

    def mul(self, a: CValue, b: CValue) -> CValue:
        return self._binary("f", "*", a, b)

    def div(self, a: CValue, b: CValue) -> CValue:
        return self._binary("f", "/", a, b)

    def neg(self, a: CValue) -> CValue:
        return self.from_bits(self.ixor(self.bits(a), self.uconst(0x80000000)))

    def _compare(self, operator: str, a: CValue, b: CValue) -> CValue:
        if self.vector:  # GCC vector comparisons give -1 / 0 per lane
            return self._emit("m", f"{a.text} {operator} {b.text}")
        return self._emit("m", f"-(int32_t)({a.text} {operator} {b.text})")

    def lt(self, a: CValue, b: CValue) -> CValue:
        return self._compare("<", a, b)

    def gt(self, a: CValue, b: CValue) -> CValue:
        return self._compare(">", a, b)

    def eq(self, a: CValue, b: CValue) -> CValue:
        return self._compare("==", a, b)

    def ne(self, a: CValue, b: CValue) -> CValue:
        return self._compare("!=", a, b)

    def mask_or(self, a: CValue, b: CValue) -> CValue:
        return self._binary("m", "|", a, b)

    def select(self, mask: CValue, a: CValue, b: CValue) -> CValue:
        helper = "wf_select" if self.vector else "wf_select_s"
        return self._emit("f", f"{helper}({mask.text}, {a.text}, {b.text})")

    def select_u(self, mask: CValue, a: CValue, b: CValue) -> CValue:
        helper = "wf_select_u" if self.vector else "wf_select_u_s"
        return self._emit("u", f"{helper}({mask.text}, {a.text}, {b.text})")

    def bits(self, a: CValue) -> CValue:
        return self._emit("u", f"(wf_vu)({a.text})" if self.vector else f"wf_bits_s({a.text})")

    def from_bits(self, a: CValue) -> CValue:
        return self._emit("f", f"(wf_vf)({a.text})" if self.vector else f"wf_float_s({a.text})")

    def iadd(self, a: CValue, b: CValue) -> CValue:
        return self._binary("u", "+", a, b)

    def isub(self, a: CValue, b: CValue) -> CValue:
        return self._binary("u", "-", a, b)

    def iand(self, a: CValue, b: CValue) -> CValue:
        return self._binary("u", "&", a, b)

    def ior(self, a: CValue, b: CValue) -> CValue:
        return self._binary("u", "|", a, b)

    def ixor(self, a: CValue, b: CValue) -> CValue:
        return self._binary("u", "^", a, b)

    def shl(self, a: CValue, count: int) -> CValue:
        return self._emit("u", f"{a.text} << {int(count)}")

    def shr(self, a: CValue, count: int) -> CValue:
        return self._emit("u", f"{a.text} >> {int(count)}")

    def sar(self, a: CValue, count: int) -> CValue:
        signed = "wf_vi" if self.vector else "int32_t"
        unsigned = "wf_vu" if self.vector else "uint32_t"
        return self._emit("u", f"({unsigned})(({signed})({a.text}) >> {int(count)})")

    def to_float(self, a: CValue) -> CValue:
        if self.vector:
            return self._emit("f", f"__builtin_convertvector((wf_vi)({a.text}), wf_vf)")
        return self._emit("f", f"(float)(int32_t)({a.text})")


def render_function(name: str, definition: Callable, arity: int, vector: bool) -> str:
    """One ``static inline`` C function whose body is ``definition``'s op sequence."""
    ops = COps(vector)
    parameters = ("x",) if arity == 1 else ("a", "b")
    result = definition(ops, *(ops.parameter(p) for p in parameters))
    value_type = "wf_vf" if vector else "float"
    suffix = "" if vector else "_s"
    signature = ", ".join(f"{value_type} {p}" for p in parameters)
    body = "\n".join(ops.lines)
    return (
        f"static inline {value_type} wf_{name}{suffix}({signature}) {{\n{body}\n  return {result.text};\n}}\n"
    )


def render_exp_avx512() -> str:
    """``wf_exp`` for 16 lanes: on AVX-512 the same operations with the clamps as one
    ``vminps``/``vmaxps`` each and the two-half scaling as one ``vscalefps`` (which rounds
    once, into denormals too), about half the instructions; elsewhere the rendered
    sequence. Both are compiled into every 16-lane header (``wf_exp_generic`` is the
    rendered one), and ``tests/mathf/test_exp_avx512.py`` walks float32 bit patterns
    under both contracts' flags to check they agree bit for bit.

    The clamps keep the selects' semantics: ``x > MAX ? MAX : x`` is ``vminps(MAX, x)``
    and ``c < MIN ? MIN : c`` is ``vmaxps(MIN, c)`` (both answer their second operand on
    a NaN lane, as the select does)."""
    generic = render_function("exp", definitions.exp, 1, vector=True).replace("wf_exp(", "wf_exp_generic(", 1)
    ops = COps(vector=True)
    low, high = _float_literal(definitions.EXP_INPUT_MIN), _float_literal(definitions.EXP_INPUT_MAX)
    clamped = ops.raw("f", f"(wf_vf)_mm512_max_ps(_mm512_set1_ps({low}), "
                           f"_mm512_min_ps(_mm512_set1_ps({high}), (__m512)x))")
    mantissa, k, _ = definitions.exp_reduced(ops, clamped)
    scaled = ops.raw("f", f"(wf_vf)_mm512_scalef_ps((__m512){mantissa.text}, (__m512){k.text})")
    result = ("(wf_vf)_mm512_mask_add_ps((__m512)" + scaled.text
              + ", _mm512_cmp_ps_mask((__m512)x, (__m512)x, _CMP_UNORD_Q), (__m512)x, (__m512)x)")
    body = "\n".join(ops.lines)
    fast = f"static inline wf_vf wf_exp(wf_vf x) {{\n{body}\n  return {result};\n}}\n"
    return (f"{generic}#if defined(__AVX512F__)\n#include <immintrin.h>\n/* NaN lanes answer x + x */\n{fast}"
            "#else\nstatic inline wf_vf wf_exp(wf_vf x) { return wf_exp_generic(x); }\n#endif\n")


_PRELUDE = """\
/* Weft math for {lanes} lane(s): generated by weft.mathf.c_math_source({lanes}); do not edit.
 * Bit-identical to weft.mathf (the oracle) when compiled with -ffp-contract=off and
 * without -ffast-math, with denormals enabled (no FTZ/DAZ). */
#ifndef WEFT_MATH_H
#define WEFT_MATH_H
#include <stdint.h>
/* With -fno-math-errno the sqrt lane loop vectorises by itself; otherwise use
 * intrinsics (the headers cost ~0.1 s of compile time, so only then). */
#if !defined(__NO_MATH_ERRNO__) && (defined(__SSE__) || defined(__AVX__) || defined(__AVX512F__))
#include <immintrin.h>
#define WF_SQRT_X86 1
#endif
#if !defined(__NO_MATH_ERRNO__) && defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define WF_SQRT_NEON 1
#endif

#define WF_LANES {lanes}
typedef float wf_vf __attribute__((vector_size({size})));
typedef int32_t wf_vi __attribute__((vector_size({size})));
typedef uint32_t wf_vu __attribute__((vector_size({size})));
#define WF_F(c) ((wf_vf){{{float_splat}}})
#define WF_U(c) ((wf_vu){{{uint_splat}}})

/* Per lane: bits of a where mask is -1, bits of b where it is 0. */
static inline wf_vf wf_select(wf_vi mask, wf_vf a, wf_vf b) {{
  return (wf_vf)(((wf_vu)a & (wf_vu)mask) | ((wf_vu)b & ~(wf_vu)mask));
}}
static inline wf_vu wf_select_u(wf_vi mask, wf_vu a, wf_vu b) {{
  return (a & (wf_vu)mask) | (b & ~(wf_vu)mask);
}}
static inline uint32_t wf_bits_s(float x) {{
  uint32_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
}}
static inline float wf_float_s(uint32_t u) {{
  float x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
}}
static inline float wf_select_s(int32_t mask, float a, float b) {{
  return wf_float_s((wf_bits_s(a) & (uint32_t)mask) | (wf_bits_s(b) & ~(uint32_t)mask));
}}
static inline uint32_t wf_select_u_s(int32_t mask, uint32_t a, uint32_t b) {{
  return (a & (uint32_t)mask) | (b & ~(uint32_t)mask);
}}

/* IEEE square root per lane (correctly rounded, as numpy.sqrt). */
static inline float wf_sqrt_s(float x) {{ return __builtin_sqrtf(x); }}
static inline wf_vf wf_sqrt(wf_vf x) {{
{sqrt_body}
}}
static inline float wf_rsqrt_s(float x) {{ return 1.0f / __builtin_sqrtf(x); }}
static inline wf_vf wf_rsqrt(wf_vf x) {{ return WF_F(1.0f) / wf_sqrt(x); }}

"""

_SQRT_LANE_LOOP = """\
  wf_vf r;
  for (int i = 0; i < WF_LANES; i++) r[i] = __builtin_sqrtf(x[i]);
  return r;"""

_SQRT_INTRINSIC = {
    16: ("__AVX512F__", "return (wf_vf)_mm512_sqrt_ps((__m512)x);"),
    8: ("__AVX__", "return (wf_vf)_mm256_sqrt_ps((__m256)x);"),
    4: ("__SSE__", "return (wf_vf)_mm_sqrt_ps((__m128)x);"),
}


def _sqrt_body(lanes: int) -> str:
    """A lane loop (vectorised under -fno-math-errno), else an intrinsic where the ISA has one."""
    guards = []
    if lanes in _SQRT_INTRINSIC:
        macro, statement = _SQRT_INTRINSIC[lanes]
        guards.append((f"defined(WF_SQRT_X86) && defined({macro})", statement))
    if lanes == 4:
        guards.append(
            ("defined(__ARM_NEON) && defined(__aarch64__)", "return (wf_vf)vsqrtq_f32((float32x4_t)x);")
        )
    if not guards:
        return _SQRT_LANE_LOOP
    text = ""
    for index, (condition, statement) in enumerate(guards):
        text += f"#{'if' if index == 0 else 'elif'} {condition}\n  {statement}\n"
    return text + f"#else\n{_SQRT_LANE_LOOP}\n#endif"


def c_math_source(lanes: int) -> str:
    """C source defining ``wf_vf``/``wf_vi``/``wf_vu`` for ``lanes`` lanes and the math functions.

    Defines, vector and scalar (``_s``): ``wf_exp``, ``wf_log``, ``wf_tanh``,
    ``wf_erf``, ``wf_sigmoid``, ``wf_sqrt``, ``wf_rsqrt``, ``wf_max``, ``wf_min``,
    plus ``wf_select(mask, a, b)``. ``lanes = 1`` gives one-lane vector types.
    """
    if lanes not in SUPPORTED_LANES:
        raise ConfigError(
            f"c_math_source: lanes={lanes!r} is not supported; use one of {SUPPORTED_LANES}"
            " (16 for AVX-512, 8 for AVX2, 4 for SSE/NEON, 1 for scalar)"
        )
    parts = [
        _PRELUDE.format(
            lanes=lanes,
            size=4 * lanes,
            float_splat=", ".join(["c"] * lanes),
            uint_splat=", ".join(["c"] * lanes),
            sqrt_body=_sqrt_body(lanes),
        )
    ]
    functions = [(name, fn, 2) for name, fn in definitions.BINARY.items()]
    functions += [(name, fn, 1) for name, fn in definitions.UNARY.items()]
    for name, definition, arity in functions:
        if name == "exp" and lanes == 16:
            parts.append(render_exp_avx512())
        else:
            parts.append(render_function(name, definition, arity, vector=True))
        parts.append(render_function(name, definition, arity, vector=False))
    parts.append("#endif /* WEFT_MATH_H */\n")
    return "\n".join(parts)
