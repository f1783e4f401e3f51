"""C for the library bodies (``weft.lower.library.LibraryCall``): hand-written, one writer
per body, reading only the call's data (views, constants, sizes).

Fused Adam, per element, the members' operations in the members' order (so Strict, where
no FMA contraction is allowed, gives the oracle's bytes)::

    m' = b1 * m + c1 * g;   v' = b2 * v + (c2 * g) * g;   p' = p - s * (m' / (sqrt(v') / q + eps))

The element loop is ``omp simd`` (GCC vectorises ``__builtin_sqrtf`` under
``-fno-math-errno``), inside a parallel loop over chunks of ``call.chunk`` elements. A
call marked ``streaming`` (outputs far larger than the caches) stores with AVX-512
non-temporal stores, when the CPU has them and the outputs share one alignment.
"""

from __future__ import annotations

from collections.abc import Callable

from weft.codegen.body import c_literal
from weft.ir import DType
from weft.lower.library import LibraryCall


def _float(value: float) -> str:
    return c_literal(value, DType.FLOAT32)


def _adam(call: LibraryCall, pad: str) -> list[str]:
    p, g, m, v = (call.view(role).pointer for role in ("param", "grad", "m", "v"))
    new_p, new_m, new_v = (call.view(role).pointer for role in ("new_param", "new_m", "new_v"))
    c = {name: _float(call.constant(name)) for name in ("b1", "c1", "b2", "c2", "step", "root", "eps")}

    def scalar_loop(start: str, end: str) -> list[str]:
        return [
            f"{pad}    #pragma omp simd",
            f"{pad}    for (long wf_i = {start}; wf_i < {end}; wf_i++) {{",
            f"{pad}        float wf_g = {g}[wf_i];",
            f"{pad}        float wf_m = {c['b1']} * {m}[wf_i] + {c['c1']} * wf_g;",
            f"{pad}        float wf_v = {c['b2']} * {v}[wf_i] + ({c['c2']} * wf_g) * wf_g;",
            f"{pad}        {new_m}[wf_i] = wf_m;",
            f"{pad}        {new_v}[wf_i] = wf_v;",
            f"{pad}        {new_p}[wf_i] = {p}[wf_i] - {c['step']} * (wf_m / (__builtin_sqrtf(wf_v) / {c['root']}"
            f" + {c['eps']}));",
            f"{pad}    }}",
        ]

    lines = [f"{pad}    long wf_end = wf_start + {call.chunk} < {call.elements} ? wf_start + {call.chunk} : {call.elements};"]
    if not call.streaming:
        return lines + scalar_loop("wf_start", "wf_end")
    # streaming stores (the outputs bypass the caches: no read for ownership of lines wholly
    # overwritten), when the three outputs share one alignment; each vector operation is the
    # scalar one per lane, in the same order (no FMA), so the bytes are the scalar loop's
    splat = {name: f"_mm512_set1_ps({value})" for name, value in c.items()}
    lines += [
        "#ifdef __AVX512F__",
        f"{pad}    long wf_head = wf_start;",
        f"{pad}    int wf_aligned = ((uintptr_t){new_p} & 63) == ((uintptr_t){new_m} & 63)"
        f" && ((uintptr_t){new_p} & 63) == ((uintptr_t){new_v} & 63) && ((uintptr_t){new_p} & 3) == 0;",
        f"{pad}    if (wf_aligned) {{",
        f"{pad}        while (wf_head < wf_end && ((uintptr_t)({new_p} + wf_head) & 63)) wf_head++;",
        f"{pad}    }} else {{",
        f"{pad}        wf_head = wf_end;",
        f"{pad}    }}",
        f"{pad}    long wf_body = wf_head + (wf_end - wf_head) / 16 * 16;",
        *scalar_loop("wf_start", "wf_head"),
        f"{pad}    for (long wf_i = wf_head; wf_i < wf_body; wf_i += 16) {{",
        f"{pad}        __m512 wf_g = _mm512_loadu_ps({g} + wf_i);",
        f"{pad}        __m512 wf_m = _mm512_add_ps(_mm512_mul_ps({splat['b1']}, _mm512_loadu_ps({m} + wf_i)),"
        f" _mm512_mul_ps({splat['c1']}, wf_g));",
        f"{pad}        __m512 wf_v = _mm512_add_ps(_mm512_mul_ps({splat['b2']}, _mm512_loadu_ps({v} + wf_i)),"
        f" _mm512_mul_ps(_mm512_mul_ps({splat['c2']}, wf_g), wf_g));",
        f"{pad}        __m512 wf_d = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(wf_v), {splat['root']}), {splat['eps']});",
        f"{pad}        __m512 wf_p = _mm512_sub_ps(_mm512_loadu_ps({p} + wf_i),"
        f" _mm512_mul_ps({splat['step']}, _mm512_div_ps(wf_m, wf_d)));",
        f"{pad}        _mm512_stream_ps({new_m} + wf_i, wf_m);",
        f"{pad}        _mm512_stream_ps({new_v} + wf_i, wf_v);",
        f"{pad}        _mm512_stream_ps({new_p} + wf_i, wf_p);",
        f"{pad}    }}",
        f"{pad}    _mm_sfence();",
        *scalar_loop("wf_body", "wf_end"),
        "#else",
        *scalar_loop("wf_start", "wf_end"),
        "#endif",
    ]
    return lines


WRITERS: dict[str, Callable[[LibraryCall, str], list[str]]] = {"fused adam": _adam}


def render_library(call: LibraryCall, lines: list[str], indent: int) -> None:
    """The body's C: a (parallel) loop over work items of ``call.chunk`` elements."""
    writer = WRITERS.get(call.body)
    if writer is None:
        raise TypeError(f"no C writer for library body {call.body!r}")
    pad = "    " * indent
    lines.append(f"{pad}/* member {call.kernel.output}: library body {call.body} */")
    if call.parallel:
        lines.append(f"{pad}#pragma omp parallel for schedule(static)")
    lines.append(f"{pad}for (long wf_start = 0; wf_start < {call.elements}; wf_start += {call.chunk}) {{")
    lines += writer(call, pad)
    lines.append(f"{pad}}}")
