"""C for the library bodies (``weft.lower.library.LibraryCall``): hand-written, one writer
per body, reading only the call's data (views, constants, sizes).

Fused Adam, per element, the members' operations in the members' order (so Strict, where
no FMA contraction is allowed, gives the oracle's bytes)::

    m' = b1 * m + c1 * g;   v' = b2 * v + (c2 * g) * g;   p' = p - s * (m' / (sqrt(v') / q + eps))

The element loop runs in 16-lane AVX-512 vectors where the CPU has them (else ``omp
simd``: GCC vectorises ``__builtin_sqrtf`` under ``-fno-math-errno``), inside a parallel
loop over chunks of ``call.chunk`` elements. A call marked ``streaming`` (outputs far
larger than the caches) stores with non-temporal stores when the outputs share one
alignment; plain stores otherwise (and always for outputs written over their inputs).
"""

from __future__ import annotations

from collections.abc import Callable

from weft.codegen.body import Counter, c_literal
from weft.codegen.contraction import render_contraction
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
    # 16-lane vectors (the compiler's own vectorisation of the scalar loop may pick 8 lanes,
    # and the two divisions and the root per element then cost more than the memory time);
    # each vector operation is the scalar one per lane, in the same order (no FMA), so the
    # bytes are the scalar loop's. Streaming stores (the outputs bypass the caches: no read
    # for ownership of lines wholly overwritten) when the three outputs share one alignment;
    # plain stores otherwise (outputs written over their inputs: the lines were just read)
    splat = {name: f"_mm512_set1_ps({value})" for name, value in c.items()}
    store = "_mm512_stream_ps" if call.streaming else "_mm512_storeu_ps"
    if call.streaming:
        head = [
            f"{pad}    long wf_head = wf_start;",
            f"{pad}    int wf_aligned = ((uintptr_t){new_p} & 63) == ((uintptr_t){new_m} & 63)"
            f" && ((uintptr_t){new_p} & 63) == ((uintptr_t){new_v} & 63) && ((uintptr_t){new_p} & 3) == 0;",
            f"{pad}    if (wf_aligned) {{",
            f"{pad}        while (wf_head < wf_end && ((uintptr_t)({new_p} + wf_head) & 63)) wf_head++;",
            f"{pad}    }} else {{",
            f"{pad}        wf_head = wf_end;",
            f"{pad}    }}",
        ]
    else:  # peel to the first line of new_p (in place, every stream shares its alignment)
        head = [f"{pad}    long wf_head = wf_start;",
                f"{pad}    if (((uintptr_t){new_p} & 3) == 0)",
                f"{pad}        while (wf_head < wf_end && ((uintptr_t)({new_p} + wf_head) & 63)) wf_head++;"]
    lines += [
        "#ifdef __AVX512F__",
        *head,
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
        f"{pad}        {store}({new_m} + wf_i, wf_m);",
        f"{pad}        {store}({new_v} + wf_i, wf_v);",
        f"{pad}        {store}({new_p} + wf_i, wf_p);",
        f"{pad}    }}",
        *([f"{pad}    _mm_sfence();"] if call.streaming else []),
        *scalar_loop("wf_body", "wf_end"),
        "#else",
        *scalar_loop("wf_start", "wf_end"),
        "#endif",
    ]
    return lines


def _cross_entropy(call: LibraryCall, lines: list[str], indent: int, counter) -> None:
    """Per block of rows (the parallel work item): vocabulary chunks of logits into
    ``wf_chunk`` (the packed microkernel, or plain dot products for small chunks), then per
    row an online max and rescaled sum over the chunk and the target's logit if it lies
    there; at the end loss = log(sum) + max - logit[target] (0 for an ignored target, a bad
    gather for one out of range)."""
    from weft.lower.library import CE_CHUNK_POINTER, CE_COLUMN_VARIABLE, CE_ROW_VARIABLE

    pad = "    " * indent
    hidden, weight, targets, loss = (call.view(role) for role in ("hidden", "weight", "targets", "loss"))
    rows, classes, dim = (int(call.constant(name)) for name in ("rows", "classes", "dim"))
    ignore = call.constant("ignore")
    block, chunk = call.row_block, call.vocab_chunk
    h, w, t, out = hidden.pointer, weight.pointer, targets.pointer, loss.pointer
    (hs0, hs1), (ws0, ws1) = hidden.strides, weight.strides
    emit = lines.append
    emit(f"{pad}/* member {call.kernel.output}: library body {call.body} (rows {rows}, vocabulary {classes},"
         f" dim {dim}; blocks of {block} rows, chunks of {chunk}) */")
    if call.parallel:
        emit(f"{pad}#pragma omp parallel for schedule(dynamic, 1)")
    emit(f"{pad}for (long {CE_ROW_VARIABLE} = 0; {CE_ROW_VARIABLE} < {rows}; {CE_ROW_VARIABLE} += {block}) {{")
    inner = pad + "    "
    emit(f"{inner}const long wf_rows = wfc_minl({block}, {rows} - {CE_ROW_VARIABLE});")
    emit(f"{inner}float wf_max[{block}], wf_sum[{block}], wf_pick[{block}];")
    emit(f"{inner}for (long wf_r = 0; wf_r < {block}; wf_r++) {{ wf_max[wf_r] = -__builtin_inff();"
         " wf_sum[wf_r] = 0.0f; wf_pick[wf_r] = 0.0f; }")
    emit(f"{inner}float *{CE_CHUNK_POINTER} = (float *)aligned_alloc(64, {block * chunk * 4});")
    emit(f"{inner}for (long {CE_COLUMN_VARIABLE} = 0; {CE_COLUMN_VARIABLE} < {classes};"
         f" {CE_COLUMN_VARIABLE} += {chunk}) {{")
    body = inner + "    "
    emit(f"{body}const long wf_cols = wfc_minl({chunk}, {classes} - {CE_COLUMN_VARIABLE});")
    for number, (nest_rows, nest_columns, nest) in enumerate(call.chunk_nests):
        keyword = "if" if number == 0 else "} else if"
        emit(f"{body}{keyword} (wf_rows == {nest_rows} && wf_cols == {nest_columns}) {{")
        if nest is not None:
            render_contraction(nest, lines, indent + 3, counter)
        else:
            deep = body + "    "
            emit(f"{deep}for (long wf_r = 0; wf_r < {nest_rows}; wf_r++)")
            emit(f"{deep}    for (long wf_c = 0; wf_c < {nest_columns}; wf_c++) {{")
            emit(f"{deep}        const float *wf_hr = {h} + ({CE_ROW_VARIABLE} + wf_r) * {hs0};")
            emit(f"{deep}        const float *wf_wr = {w} + ({CE_COLUMN_VARIABLE} + wf_c) * {ws0};")
            emit(f"{deep}        float wf_acc = 0.0f;")
            emit(f"{deep}        #pragma omp simd reduction(+:wf_acc)")
            emit(f"{deep}        for (long wf_k = 0; wf_k < {dim}; wf_k++) wf_acc += wf_hr[wf_k * {hs1}]"
                 f" * wf_wr[wf_k * {ws1}];")
            emit(f"{deep}        {CE_CHUNK_POINTER}[wf_r * {nest_columns} + wf_c] = wf_acc;")
            emit(f"{deep}    }}")
    emit(f"{body}}}")
    emit(f"{body}for (long wf_r = 0; wf_r < wf_rows; wf_r++) {{")
    row = body + "    "
    emit(f"{row}const float *wf_row = {CE_CHUNK_POINTER} + wf_r * wf_cols;")
    emit(f"{row}float wf_top = wf_max[wf_r];")
    emit(f"{row}#pragma omp simd reduction(max:wf_top)")
    emit(f"{row}for (long wf_c = 0; wf_c < wf_cols; wf_c++) wf_top = wf_row[wf_c] > wf_top ? wf_row[wf_c] : wf_top;")
    emit(f"{row}float wf_part = 0.0f;")
    emit(f"{row}#pragma omp simd reduction(+:wf_part)")
    emit(f"{row}for (long wf_c = 0; wf_c < wf_cols; wf_c++) wf_part += wf_exp_s(wf_row[wf_c] - wf_top);")
    emit(f"{row}wf_sum[wf_r] = (wf_max[wf_r] == -__builtin_inff() ? 0.0f : wf_sum[wf_r] * wf_exp_s(wf_max[wf_r]"
         " - wf_top)) + wf_part;")
    emit(f"{row}wf_max[wf_r] = wf_top;")
    emit(f"{row}const long wf_target = (long){t}[({CE_ROW_VARIABLE} + wf_r) * {targets.strides[0]}];")
    emit(f"{row}if (wf_target >= {CE_COLUMN_VARIABLE} && wf_target < {CE_COLUMN_VARIABLE} + wf_cols)"
         f" wf_pick[wf_r] = wf_row[wf_target - {CE_COLUMN_VARIABLE}];")
    emit(f"{body}}}")
    emit(f"{inner}}}")
    emit(f"{inner}free({CE_CHUNK_POINTER});")
    emit(f"{inner}for (long wf_r = 0; wf_r < wf_rows; wf_r++) {{")
    emit(f"{inner}    const long wf_target = (long){t}[({CE_ROW_VARIABLE} + wf_r) * {targets.strides[0]}];")
    emit(f"{inner}    float wf_loss = (wf_log_s(wf_sum[wf_r]) + wf_max[wf_r]) - wf_pick[wf_r];")
    if ignore == ignore:  # an ignore index (NaN: none)
        emit(f"{inner}    if (wf_target == {int(ignore)}L) wf_loss = 0.0f;")
        emit(f"{inner}    else if (wf_target < 0 || wf_target >= {classes}) wf_bad_gather = 1;")
    else:
        emit(f"{inner}    if (wf_target < 0 || wf_target >= {classes}) wf_bad_gather = 1;")
    emit(f"{inner}    {out}[({CE_ROW_VARIABLE} + wf_r) * {loss.strides[0]}] = wf_loss;")
    emit(f"{inner}}}")
    emit(f"{pad}}}")


def _aligned_row_setup(pad: str) -> list[str]:
    """AVX-512: the row ``wf_xr`` read from whole 64-byte lines (NumPy's large arrays sit 16
    bytes in, and a vector load across two lines costs about two): ``wf_sh`` floats past a
    line, the lanes of each unaligned vector gathered from two aligned loads by one
    ``vpermt2ps``. The vectors are the unaligned loads' exactly, so the results are too."""
    return [
        "#if defined(__AVX512F__)",
        f"{pad}const long wf_sh = (long)(((uintptr_t)wf_xr & 63) >> 2);",
        f"{pad}const float *wf_xa = wf_xr - wf_sh;",
        f"{pad}const __m512i wf_idx = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, "
        "2, 1, 0), _mm512_set1_epi32((int)wf_sh));",
        f"{pad}__m512 wf_prev = _mm512_load_ps(wf_xa);",
        "#endif",
    ]


def _aligned_row_load(pad: str) -> list[str]:
    """``wf_v`` = the 16 floats at ``wf_xr + wf_j`` (see ``_aligned_row_setup``). The next line
    holds a float of this vector whenever ``wf_sh`` > 0, so no load leaves the row's pages."""
    return [
        "#if defined(__AVX512F__)",
        f"{pad}if (wf_sh) {{",
        f"{pad}    const __m512 wf_next = _mm512_load_ps(wf_xa + wf_j + 16);",
        f"{pad}    wf_v = (wf_v16)_mm512_permutex2var_ps(wf_prev, wf_idx, wf_next);",
        f"{pad}    wf_prev = wf_next;",
        f"{pad}}} else {{",
        f"{pad}    wf_v = (wf_v16)_mm512_load_ps(wf_xr + wf_j);",
        f"{pad}}}",
        "#else",
        f"{pad}__builtin_memcpy(&wf_v, wf_xr + wf_j, 64);",
        "#endif",
    ]


def _layer_norm(call: LibraryCall, pad: str) -> list[str]:
    """One row per iteration of the work-item loop (``call.chunk`` = 1 row per step of
    ``wf_start``): Welford per lane over the full vectors, Chan's merge of the lanes, a
    scalar Welford tail, then the output from the (cached) row."""
    rows, dim = int(call.constant("rows")), int(call.constant("dim"))
    shrink, epsilon = _float(call.constant("shrink")), _float(call.constant("epsilon"))
    x, out = call.view("x").pointer, call.view("out").pointer
    roles = dict(call.views)
    full = dim // 16 * 16
    value = f"((wf_xr[wf_j] - wf_mean) * {shrink}) * wf_inv"
    if "weight" in roles:
        value = f"{value} * {roles['weight'].pointer}[wf_j]"
    if "bias" in roles:
        value = f"{value} + {roles['bias'].pointer}[wf_j]"
    del rows
    return [
        f"{pad}    typedef float wf_v16 __attribute__((vector_size(64)));",
        f"{pad}    const float *wf_xr = {x} + wf_start * {dim};",
        f"{pad}    float *wf_yr = {out} + wf_start * {dim};",
        f"{pad}    float wf_mean = 0.0f, wf_m2 = 0.0f;",
        f"{pad}    long wf_n = 0;",
        f"{pad}    if ({full} > 0) {{",
        f"{pad}        wf_v16 wf_mv = {{0}}, wf_m2v = {{0}};",
        f"{pad}        long wf_k = 0;",
        *_aligned_row_setup(pad + "        "),
        f"{pad}        for (long wf_j = 0; wf_j < {full}; wf_j += 16) {{",
        f"{pad}            wf_v16 wf_v;",
        *_aligned_row_load(pad + "            "),
        f"{pad}            wf_k++;",
        f"{pad}            const float wf_rk = 1.0f / (float)wf_k;",
        f"{pad}            wf_v16 wf_d = wf_v - wf_mv;",
        f"{pad}            wf_mv += wf_d * wf_rk;",
        f"{pad}            wf_m2v += wf_d * (wf_v - wf_mv);",
        f"{pad}        }}",
        f"{pad}        for (int wf_l = 0; wf_l < 16; wf_l++) wf_mean += wf_mv[wf_l];",
        f"{pad}        wf_mean *= 1.0f / 16.0f;",
        f"{pad}        for (int wf_l = 0; wf_l < 16; wf_l++) {{",
        f"{pad}            const float wf_e = wf_mv[wf_l] - wf_mean;",
        f"{pad}            wf_m2 += wf_m2v[wf_l] + (float)wf_k * wf_e * wf_e;",
        f"{pad}        }}",
        f"{pad}        wf_n = {full};",
        f"{pad}    }}",
        f"{pad}    for (long wf_j = {full}; wf_j < {dim}; wf_j++) {{",
        f"{pad}        wf_n++;",
        f"{pad}        const float wf_d = wf_xr[wf_j] - wf_mean;",
        f"{pad}        wf_mean += wf_d / (float)wf_n;",
        f"{pad}        wf_m2 += wf_d * (wf_xr[wf_j] - wf_mean);",
        f"{pad}    }}",
        f"{pad}    const float wf_var = (wf_m2 * (1.0f / {dim}.0f)) * {shrink} * {shrink};",
        f"{pad}    const float wf_inv = 1.0f / __builtin_sqrtf(wf_var + {epsilon});",
        f"{pad}    #pragma omp simd",
        f"{pad}    for (long wf_j = 0; wf_j < {dim}; wf_j++) wf_yr[wf_j] = {value};",
    ]


WRITERS: dict[str, Callable[[LibraryCall, str], list[str]]] = {"fused adam": _adam, "welford layer norm": _layer_norm}


def render_library(call: LibraryCall, lines: list[str], indent: int, counter=None) -> None:
    """The body's C: a (parallel) loop over work items of ``call.chunk`` elements."""
    if call.body == "chunked cross-entropy":
        _cross_entropy(call, lines, indent, counter if counter is not None else Counter())
        return
    writer = WRITERS.get(call.body)
    if writer is None:
        raise TypeError(f"no C writer for library body {call.body!r}")
    pad = "    " * indent
    lines.append(f"{pad}/* member {call.kernel.output}: library body {call.body} */")
    if call.parallel:
        lines.append(f"{pad}#pragma omp parallel for schedule(static)")
    steps = int(call.constant("rows")) if call.body == "welford layer norm" else call.elements
    lines.append(f"{pad}for (long wf_start = 0; wf_start < {steps}; wf_start += {call.chunk}) {{")
    lines += writer(call, pad)
    lines.append(f"{pad}}}")
