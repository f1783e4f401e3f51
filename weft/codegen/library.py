"""C for the library bodies (``weft.lower.library.LibraryCall``): hand-written, one writer
per body, reading only the call's data (views, constants, sizes).

Fused Adam, per element, the members' operations in the members' order (so Strict, where
no FMA contraction is allowed, gives the oracle's bytes)::

    m' = b1 * m + c1 * g;   v' = b2 * v + (c2 * g) * g;   p' = p - s * (m' / (sqrt(v') / q + eps))

The element loop is ``omp simd`` (GCC vectorises ``__builtin_sqrtf`` under
``-fno-math-errno``), inside a parallel loop over chunks of ``call.chunk`` elements.
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
    return [
        f"{pad}    long wf_end = wf_start + {call.chunk} < {call.elements} ? wf_start + {call.chunk} : {call.elements};",
        f"{pad}    #pragma omp simd",
        f"{pad}    for (long wf_i = wf_start; wf_i < wf_end; wf_i++) {{",
        f"{pad}        float wf_g = {g}[wf_i];",
        f"{pad}        float wf_m = {c['b1']} * {m}[wf_i] + {c['c1']} * wf_g;",
        f"{pad}        float wf_v = {c['b2']} * {v}[wf_i] + ({c['c2']} * wf_g) * wf_g;",
        f"{pad}        {new_m}[wf_i] = wf_m;",
        f"{pad}        {new_v}[wf_i] = wf_v;",
        f"{pad}        {new_p}[wf_i] = {p}[wf_i] - {c['step']} * (wf_m / (__builtin_sqrtf(wf_v) / {c['root']}"
        f" + {c['eps']}));",
        f"{pad}    }}",
    ]


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
