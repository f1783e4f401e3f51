"""The C text every generated file starts with: includes, vector types, helpers.

Weft's transcendentals come from ``weft.mathf.c_math_source(lanes)`` (the same
float32 operation sequences as the NumPy oracle). Until that function exists, a
stand-in computes them in double and rounds, which matches the stand-in oracle.
The helpers here (select, max/min with the oracle's NaN rule, floor division,
unaligned loads) are Weft's own and do not depend on the math source.
"""

from __future__ import annotations

from weft import mathf

HEADER_TEXT = """\
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
"""

_FALLBACK_MATH = """\
/* stand-in for weft.mathf.c_math_source: double-precision libm, rounded once */
typedef float wf_vf __attribute__((vector_size({bytes})));
typedef int32_t wf_vi __attribute__((vector_size({bytes})));
static inline float wf_exp_s(float x) {{ return (float)exp((double)x); }}
static inline float wf_log_s(float x) {{ return (float)log((double)x); }}
static inline float wf_tanh_s(float x) {{ return (float)tanh((double)x); }}
static inline float wf_erf_s(float x) {{ return (float)erf((double)x); }}
static inline float wf_sigmoid_s(float x) {{ return (float)(1.0 / (1.0 + exp(-(double)x))); }}
static inline float wf_sin_s(float x) {{ return (float)sin((double)x); }}
static inline float wf_cos_s(float x) {{ return (float)cos((double)x); }}
static inline float wf_sqrt_s(float x) {{ return __builtin_sqrtf(x); }}
#define WF_LANEWISE(fn) static inline wf_vf fn(wf_vf x) {{ \\
    wf_vf r; for (int l = 0; l < {lanes}; l++) r[l] = fn##_s(x[l]); return r; }}
WF_LANEWISE(wf_exp) WF_LANEWISE(wf_log) WF_LANEWISE(wf_tanh) WF_LANEWISE(wf_erf) WF_LANEWISE(wf_sigmoid) WF_LANEWISE(wf_sqrt)
WF_LANEWISE(wf_sin) WF_LANEWISE(wf_cos)
"""

_HELPERS = """\
typedef int64_t wf_vl __attribute__((vector_size({long_bytes})));
#define WFC_LOADSTORE(sfx, vt, st) \\
    static inline vt wfc_load_##sfx(const st *p) {{ vt r; memcpy(&r, p, sizeof r); return r; }} \\
    static inline void wfc_store_##sfx(st *p, vt v) {{ memcpy(p, &v, sizeof v); }} \\
    static inline vt wfc_splat_##sfx(st s) {{ return (vt){{{splat}}}; }}
WFC_LOADSTORE(f, wf_vf, float)
WFC_LOADSTORE(i, wf_vi, int32_t)
WFC_LOADSTORE(l, wf_vl, int64_t)
/* A float vector read from whole 64-byte lines: NumPy's large arrays sit 16 bytes in, and on
 * AVX-512 a load split across two lines costs several times an aligned one. Two aligned loads
 * and one vpermt2ps give exactly the plain load's lanes; the second line holds a float of the
 * vector, so no load leaves the vector's pages. */
static inline wf_vf wfc_load_lines_f(const float *p) {{
#if defined(__AVX512F__) && {lanes} == 16
    const uintptr_t a = (uintptr_t)p;
    if ((a & 63) == 0) return (wf_vf)_mm512_load_ps(p);
    if (a & 3) return wfc_load_f(p);
    const float *b = (const float *)(a & ~(uintptr_t)63);
    const __m512i idx = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                         _mm512_set1_epi32((int)((a & 63) >> 2)));
    return (wf_vf)_mm512_permutex2var_ps(_mm512_load_ps(b), idx, _mm512_load_ps(b + 16));
#else
    return wfc_load_f(p);
#endif
}}
static inline wf_vf wfc_sel_f(wf_vi m, wf_vf a, wf_vf b) {{ return (wf_vf)(((wf_vi)a & m) | ((wf_vi)b & ~m)); }}
static inline wf_vi wfc_sel_i(wf_vi m, wf_vi a, wf_vi b) {{ return (a & m) | (b & ~m); }}
static inline wf_vl wfc_sel_l(wf_vl m, wf_vl a, wf_vl b) {{ return (a & m) | (b & ~m); }}
/* max(a, b) = a if a > b or a is NaN, else b: the oracle's rule (NaN propagates) */
static inline wf_vf wfc_max_f(wf_vf a, wf_vf b) {{ return wfc_sel_f((a > b) | (a != a), a, b); }}
static inline wf_vf wfc_min_f(wf_vf a, wf_vf b) {{ return wfc_sel_f((a < b) | (a != a), a, b); }}
static inline wf_vi wfc_max_i(wf_vi a, wf_vi b) {{ return wfc_sel_i(a > b, a, b); }}
static inline wf_vi wfc_min_i(wf_vi a, wf_vi b) {{ return wfc_sel_i(a < b, a, b); }}
static inline wf_vl wfc_max_l(wf_vl a, wf_vl b) {{ return wfc_sel_l(a > b, a, b); }}
static inline wf_vl wfc_min_l(wf_vl a, wf_vl b) {{ return wfc_sel_l(a < b, a, b); }}
static inline float wfc_smax_f(float a, float b) {{ return (a > b || a != a) ? a : b; }}
/* a > b ? a : b, the ordered compare-select (NaN in either, or a == b, gives b): exactly what
   x86's max instruction computes, so one vmaxps where there is one (a select took three) */
static inline wf_vf wfc_pmax_f(wf_vf a, wf_vf b) {{
#if defined(__AVX512F__) && {lanes} == 16
    return (wf_vf)_mm512_max_ps((__m512)a, (__m512)b);
#elif defined(__AVX2__) && {lanes} == 8
    return (wf_vf)_mm256_max_ps((__m256)a, (__m256)b);
#else
    return wfc_sel_f(a > b, a, b);
#endif
}}
/* 1 / d is a normal float (and so x * (1 / d) a faithful x / d): false for 0, denormals, |d| > 2^126, inf, NaN */
static inline int wfc_recip_ok_f(float d) {{ float m = __builtin_fabsf(d); return m >= 0x1p-126f && m <= 0x1p126f; }}
static inline float wfc_smin_f(float a, float b) {{ return (a < b || a != a) ? a : b; }}
static inline int32_t wfc_smax_i(int32_t a, int32_t b) {{ return a > b ? a : b; }}
static inline int32_t wfc_smin_i(int32_t a, int32_t b) {{ return a < b ? a : b; }}
static inline int64_t wfc_smax_l(int64_t a, int64_t b) {{ return a > b ? a : b; }}
static inline int64_t wfc_smin_l(int64_t a, int64_t b) {{ return a < b ? a : b; }}
static inline wf_vf wfc_abs_f(wf_vf x) {{ return (wf_vf)((wf_vi)x & wfc_splat_i(0x7fffffff)); }}
static inline wf_vi wfc_abs_i(wf_vi x) {{ return wfc_sel_i(x < wfc_splat_i(0), -x, x); }}
static inline wf_vl wfc_abs_l(wf_vl x) {{ return wfc_sel_l(x < wfc_splat_l(0), -x, x); }}
/* index floor division and modulo (Python semantics; C's / and % truncate) */
static inline int64_t wfc_floordiv(int64_t a, int64_t b) {{ int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }}
static inline int64_t wfc_floormod(int64_t a, int64_t b) {{ int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }}
/* float -> int, defined for every input as in the oracle: truncation toward zero,
   saturating at the type's range, NaN -> 0 (C leaves out-of-range conversions undefined) */
static inline int32_t wfc_f2i_s(float x) {{
    return x != x ? 0 : x >= 0x1p31f ? INT32_MAX : x < -0x1p31f ? INT32_MIN : (int32_t)x; }}
static inline int64_t wfc_f2l_s(float x) {{
    return x != x ? 0 : x >= 0x1p63f ? INT64_MAX : x < -0x1p63f ? INT64_MIN : (int64_t)x; }}
static inline wf_vi wfc_f2i(wf_vf x) {{
    wf_vi high = x >= wfc_splat_f(0x1p31f), low = x < wfc_splat_f(-0x1p31f);
    wf_vf safe = wfc_sel_f(high | low | (x != x), wfc_splat_f(0.0f), x);
    wf_vi r = __builtin_convertvector(safe, wf_vi);
    return wfc_sel_i(high, wfc_splat_i(INT32_MAX), wfc_sel_i(low, wfc_splat_i(INT32_MIN), r)); }}
static inline wf_vl wfc_f2l(wf_vf x) {{
    wf_vl high = __builtin_convertvector(x >= wfc_splat_f(0x1p63f), wf_vl);
    wf_vl low = __builtin_convertvector(x < wfc_splat_f(-0x1p63f), wf_vl);
    wf_vf safe = wfc_sel_f((x >= wfc_splat_f(0x1p63f)) | (x < wfc_splat_f(-0x1p63f)) | (x != x), wfc_splat_f(0.0f), x);
    wf_vl r = __builtin_convertvector(safe, wf_vl);
    return wfc_sel_l(high, wfc_splat_l(INT64_MAX), wfc_sel_l(low, wfc_splat_l(INT64_MIN), r)); }}
static inline long wfc_minl(long a, long b) {{ return a < b ? a : b; }}
static inline wf_vl wfc_iota_l(void) {{ return (wf_vl){{{iota}}}; }}
static inline wf_vi wfc_iota_i(void) {{ return (wf_vi){{{iota}}}; }}
/* A fold-laned contraction's reads where its peel put them (weft.codegen.fold_lanes): a vector
 * known to start on a 64-byte line; only lanes [first, first + count) of a vector, the others 0
 * and never read (a row's head and tail: one masked load, not a lane loop through the stack);
 * and those lanes of a, the others of b. */
static inline wf_vf wfc_load_a_f(const float *p) {{
#if defined(__AVX512F__) && {lanes} == 16
    return (wf_vf)_mm512_load_ps(p);
#else
    return wfc_load_f(p);
#endif
}}
/* a staged x (line-aligned, re-read every row) held in a register by an empty asm, so that the
 * stream's load is the one folded into the multiply-add: decode's 896-wide rows at a 16-byte
 * offset measured 38 GB/s with the weight loaded apart and x folded, 41 GB/s this way */
static inline wf_vf wfc_load_held_f(const float *p) {{
#if defined(__AVX512F__) && {lanes} == 16
    wf_vf v = (wf_vf)_mm512_load_ps(p);
    __asm__("" : "+v"(v));
    return v;
#else
    return wfc_load_f(p);
#endif
}}
static inline wf_vf wfc_load_span_f(const float *p, long first, long count) {{
#if defined(__AVX512F__) && {lanes} == 16
    return (wf_vf)_mm512_maskz_loadu_ps((__mmask16)(((1u << count) - 1u) << first), p);
#else
    wf_vf r = wfc_splat_f(0.0f);
    for (long l = first; l < first + count; l++) r[l] = p[l];
    return r;
#endif
}}
static inline wf_vf wfc_span_sel_f(long first, long count, wf_vf a, wf_vf b) {{
#if defined(__AVX512F__) && {lanes} == 16
    return (wf_vf)_mm512_mask_mov_ps((__m512)b, (__mmask16)(((1u << count) - 1u) << first), (__m512)a);
#else
    const wf_vi lane = wfc_iota_i();
    return wfc_sel_f((lane >= (int32_t)first) & (lane < (int32_t)(first + count)), a, b);
#endif
}}
/* lanes at a constant element stride (a row reduction with lanes along rows, a
   transpose): a hardware gather where there is one, never a store-forwarding stall */
static inline wf_vf wfc_gather_f(const float *p, long stride) {{
#if defined(__AVX512F__) && {lanes} == 16
    __m512i idx = _mm512_mullo_epi32(_mm512_set1_epi32((int)stride),
                                     _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    return (wf_vf)_mm512_i32gather_ps(idx, p, 4);
#elif defined(__AVX2__) && {lanes} == 8
    __m256i idx = _mm256_mullo_epi32(_mm256_set1_epi32((int)stride), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return (wf_vf)_mm256_i32gather_ps(p, idx, 4);
#else
    wf_vf r; for (int l = 0; l < {lanes}; l++) r[l] = p[l * stride]; return r;
#endif
}}
static inline wf_vi wfc_gather_i(const int32_t *p, long stride) {{
#if defined(__AVX512F__) && {lanes} == 16
    __m512i idx = _mm512_mullo_epi32(_mm512_set1_epi32((int)stride),
                                     _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    return (wf_vi)_mm512_i32gather_epi32(idx, p, 4);
#else
    wf_vi r; for (int l = 0; l < {lanes}; l++) r[l] = p[l * stride]; return r;
#endif
}}
/* a short run (a patch view's packing: a piece of one output row, a micro-panel's
   columns): n floats read at a constant element step, or n copies of one value. With
   AVX-512, whole vectors then one masked vector (a step of 2 is two loads and a permute):
   no scalar tail and no library call per run; the masked lanes are never touched */
static inline void wfc_copy_f(float *restrict dst, const float *restrict src, long n, long step) {{
#if defined(__AVX512F__)
    if (step == 1) {{
        for (; n >= 16; n -= 16, dst += 16, src += 16)  /* masked: not turned into a memcpy call */
            _mm512_mask_storeu_ps(dst, (__mmask16)0xffffu, _mm512_maskz_loadu_ps((__mmask16)0xffffu, src));
        if (n > 0) {{
            const __mmask16 m = (__mmask16)((1u << n) - 1u);
            _mm512_mask_storeu_ps(dst, m, _mm512_maskz_loadu_ps(m, src));
        }}
        return;
    }}
    if (step == 2) {{
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        for (; n > 0; n -= 16, dst += 16, src += 32) {{
            const long last = n >= 16 ? 31 : 2 * n - 1;  /* elements read: src[0 .. last - 1] */
            const __mmask16 low = (__mmask16)(last >= 16 ? 0xffffu : (1u << last) - 1u);
            const __mmask16 high = (__mmask16)(last > 16 ? (1u << (last - 16)) - 1u : 0u);
            const __m512 v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(low, src), even,
                                                    _mm512_maskz_loadu_ps(high, src + 16));
            if (n >= 16) _mm512_storeu_ps(dst, v);
            else _mm512_mask_storeu_ps(dst, (__mmask16)((1u << n) - 1u), v);
        }}
        return;
    }}
#endif
    for (long i = 0; i < n; i++) dst[i] = src[i * step];
}}
static inline void wfc_fill_f(float *dst, long n, float value) {{
#if defined(__AVX512F__)
    const __m512 v = _mm512_set1_ps(value);
    for (; n >= 16; n -= 16, dst += 16) _mm512_storeu_ps(dst, v);
    if (n > 0) _mm512_mask_storeu_ps(dst, (__mmask16)((1u << n) - 1u), v);
#else
    for (long i = 0; i < n; i++) dst[i] = value;
#endif
}}
"""


def transpose_source(lanes: int) -> str:
    """``wfc_transpose_f``: a lanes x lanes tile transposed in registers by log2(lanes)
    rounds of interleaves (row r of the result holds column r of the input)."""
    half = lanes // 2
    lo = ", ".join(f"{i}, {i + lanes}" for i in range(half))
    hi = ", ".join(f"{i + half}, {i + half + lanes}" for i in range(half))
    rounds = lanes.bit_length() - 1
    return f"""\
#if defined(__clang__) || __GNUC__ >= 12
#define WFC_SHUFFLE2(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define WFC_SHUFFLE2(a, b, ...) __builtin_shuffle(a, b, (wf_vi){{__VA_ARGS__}})
#endif
static inline void wfc_transpose_f(wf_vf *rows) {{
    for (int round = 0; round < {rounds}; round++) {{
        wf_vf next[{lanes}];
        for (int m = 0; m < {half}; m++) {{
            next[2 * m] = WFC_SHUFFLE2(rows[m], rows[m + {half}], {lo});
            next[2 * m + 1] = WFC_SHUFFLE2(rows[m], rows[m + {half}], {hi});
        }}
        for (int m = 0; m < {lanes}; m++) rows[m] = next[m];
    }}
}}
"""


def math_source(lanes: int) -> str:
    """Weft's vector math in C for ``lanes`` float32 lanes."""
    provider = getattr(mathf, "c_math_source", None)
    if provider is not None:
        return provider(lanes)
    return _FALLBACK_MATH.format(bytes=4 * lanes, lanes=lanes)


def uses_reference_math() -> bool:
    """True when the math source is the real one (bit-identical transcendentals)."""
    return getattr(mathf, "c_math_source", None) is not None


def prelude(lanes: int) -> str:
    return HEADER_TEXT + math_source(lanes) + _HELPERS.format(lanes=lanes, long_bytes=8 * lanes, splat=', '.join(['s'] * lanes), iota=', '.join(str(n) for n in range(lanes))) + transpose_source(lanes)
