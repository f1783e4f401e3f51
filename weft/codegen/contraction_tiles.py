"""The micro-tile's epilogue written once and the shared micro-kernel: mixed into the
contraction writer (``weft.codegen.contraction``), whose helpers (``emit``, ``decode``,
``row_env``, ``tile_prologue``, ``epilogue_value``) it calls.

- A transcendental epilogue (GELU's erf) runs in one loop over the stored tile after the last
  fold block (``looped_epilogue``), its C written once instead of once per accumulator.
- Every FMA nest over packed x calls one ``noinline`` micro-kernel per translation unit
  (``microkernel_source``; ``microkernels`` lists the ones a unit's chunks call), so the C
  compiler sees one copy of the fold loop per unit, not one per nest.

The same operations per element either way: Strict keeps its bytes.
"""

from __future__ import annotations

import re

from weft.codegen.body import c_literal
from weft.ir import TRANSCENDENTAL, DType, Unary, walk_expr


class TileEpilogueWriter:
    """Methods of ``weft.codegen.contraction._ContractionWriter`` for the tile's epilogue and stores."""

    def looped_epilogue(self) -> bool:
        """Whether the epilogue runs in a loop over the stored tile (its C written once) rather
        than on each accumulator in registers (written once per accumulator): when it calls a
        transcendental function, whose inlined body is then most of the C compiler's work on the
        nest (GELU's erf on a 6 x 4-vector tile: 24 copies, ~0.2 s of gcc -O3 per nest), while
        the loop costs one round trip of the tile through L1 (2 x 24 vector accesses against the
        tile's 24 x kc FMAs). The same operations per element either way (Strict: same bytes)."""
        nest = self.nest
        return nest.epilogue is not None and not nest.stream_output and any(
            isinstance(node, Unary) and node.op in TRANSCENDENTAL for node in walk_expr(nest.epilogue))

    def looped_stores(self, depth: int, acc: list[list[str]], mr: int, nr: int) -> None:
        """The tile's stores with the epilogue in one loop over its rows and vectors (``looped_epilogue``):
        a full tile before the last fold block is stored as it is."""
        lanes = self.nest.lanes
        self.emit(depth, "if (wf_full && !wf_last) {")
        for r in range(mr):
            self.emit(depth + 1, " ".join(f"wfc_store_f(wf_o{r} + {v * lanes}, {a});" for v, a in enumerate(acc[r])))
        self.emit(depth, "} else {")
        self.emit(depth + 1, f"float wf_t[{mr}][{nr}] __attribute__((aligned(64)));")
        for r in range(mr):
            self.emit(depth + 1, " ".join(f"wfc_store_f(&wf_t[{r}][{v * lanes}], {a});" for v, a in enumerate(acc[r])))
        self.epilogue_rows(depth + 1, "wf_nrows", "wf_t[wf_rr]")
        self.emit(depth, "}")

    def epilogue_rows(self, depth: int, rows: str, source: str) -> None:
        """For each of the tile's first ``rows`` rows, its ``wf_ncols`` values at ``source`` (C of
        the row ``wf_rr``: the stored tile's row, or the output row itself) through the epilogue
        (when ``wf_last``; else copied as they are) into the output row
        ``wf_orow[wf_rr]``: vectors, then a scalar tail (the same operations, the same bytes)."""
        nest, lanes = self.nest, self.nest.lanes
        self.emit(depth, f"for (long wf_rr = 0; wf_rr < {rows}; wf_rr++) {{")
        row = depth + 1
        self.emit(row, f"const float *wf_se = {source}; float *wf_oe = wf_orow[wf_rr];")
        copy = "for (long wf_cc = 0; wf_cc < wf_ncols; wf_cc++) wf_oe[wf_cc] = wf_se[wf_cc];"
        if nest.epilogue is None:
            self.emit(row, copy)
            self.emit(depth, "}")
            return
        self.decode(row, f"wfc_minl(wf_ic + wf_ir + wf_rr, {nest.rows - 1})", nest.row_axes, self.row_env("e"))
        inner = row + 1
        self.emit(row, "if (wf_last) {")
        self.emit(inner, f"const long wf_vend = wf_ncols / {lanes} * {lanes};")
        self.emit(inner, f"for (long wf_cc = 0; wf_cc < wf_vend; wf_cc += {lanes}) {{")
        self.emit(inner + 1, "const wf_vf wf_v = wfc_load_f(wf_se + wf_cc);")
        value = self.epilogue_value(inner + 1, "e", "wf_n0 + wf_cc", "wf_v", True)
        self.emit(inner + 1, f"wfc_store_f(wf_oe + wf_cc, {value});")
        self.emit(inner, "}")
        self.emit(inner, "for (long wf_cc = wf_vend; wf_cc < wf_ncols; wf_cc++) {")
        self.emit(inner + 1, "const float wf_s = wf_se[wf_cc];")
        value = self.epilogue_value(inner + 1, "e", "wf_n0 + wf_cc", "wf_s", False)
        self.emit(inner + 1, f"wf_oe[wf_cc] = {value};")
        self.emit(inner, "}")
        self.emit(row, "} else {")
        self.emit(row + 1, copy)
        self.emit(row, "}")
        self.emit(depth, "}")

    def shared_kernel(self) -> bool:
        """Whether the micro-tile calls the translation unit's shared micro-kernel
        (``microkernel_source``) instead of writing its own: every FMA nest over packed x
        without non-temporal stores. One copy of the fold loop per unit, not per nest: the
        C compiler's work on a contraction nest halves, while the call is one per micro-tile
        and fold block (kc steps of mr x nr/lanes FMAs each)."""
        nest = self.nest
        return nest.fma and nest.pack_x and not nest.stream_output

    def micro_tile_call(self, depth: int) -> None:
        """The default-shaped micro-tile through the shared micro-kernel: a full tile folds into
        the output rows in place (then, after the last fold block, the epilogue runs over them
        while they are in L1); a partial tile folds into a stored tile, copied out after. The
        epilogue's C is written once for both."""
        nest, b = self.nest, self.nest.blocking
        mr, vectors = b.mr, b.nr // nest.lanes
        kernel = microkernel_name(mr, vectors)
        scale = "1.0f" if nest.scale == 1.0 else f"(wf_last ? {c_literal(nest.scale, DType.FLOAT32)} : 1.0f)"
        self.tile_prologue(depth, mr, b.nr)
        self.emit(depth, f"float wf_t[{mr}][{b.nr}] __attribute__((aligned(64)));")
        self.emit(depth, f"float *wf_trow[{mr}] = {{{', '.join(f'wf_t[{r}]' for r in range(mr))}}};")
        self.emit(depth, "float *const *wf_dest = wf_full ? wf_orow : wf_trow;")
        self.emit(depth, "if (!wf_full && wf_pc > 0) {  /* resume from the partial sums; the rest of the tile zero */")
        self.emit(depth + 1, "memset(wf_t, 0, sizeof wf_t);")
        self.emit(depth + 1, "for (long wf_rr = 0; wf_rr < wf_nrows; wf_rr++)")
        self.emit(depth + 2, "for (long wf_cc = 0; wf_cc < wf_ncols; wf_cc++) wf_t[wf_rr][wf_cc] = wf_orow[wf_rr][wf_cc];")
        self.emit(depth, "}")
        self.emit(depth, f"{kernel}(wf_kc, wf_xpp, wf_ypp, wf_dest, wf_pc > 0, {scale});")
        self.emit(depth, f"if (!wf_full{' || wf_last' if nest.epilogue is not None else ''}) {{")
        self.epilogue_rows(depth + 1, "wf_nrows", "wf_dest[wf_rr]")
        self.emit(depth, "}")


def microkernel_name(mr: int, vectors: int) -> str:
    return f"wf_mk{mr}x{vectors}"


_MICROKERNEL_CALL = re.compile(r"\bwf_mk(\d+)x(\d+)\(")


def microkernels(chunks: list[str], lanes: int) -> list[str]:
    """The shared micro-kernels (``microkernel_source``) the rendered ``chunks`` call, each once."""
    shapes = sorted({(int(m), int(v)) for chunk in chunks for m, v in _MICROKERNEL_CALL.findall(chunk)})
    return [microkernel_source(mr, vectors, lanes) for mr, vectors in shapes]


def microkernel_source(mr: int, vectors: int, lanes: int) -> str:
    """The micro-kernel every FMA contraction nest of a translation unit calls: ``kc`` steps of
    an ``mr``-row packed x panel (``mr`` floats a step) times an ``nr``-column packed y panel
    (``nr = vectors * lanes`` floats a step) into ``mr x vectors`` vector accumulators, started
    from ``rows`` (``resume``) or zero, scaled by ``scale`` (1: not at all), stored to ``rows``.
    Not inlined: its one copy is the unit's, whichever nests call it."""
    nr = vectors * lanes
    acc = [[f"a{r}_{v}" for v in range(vectors)] for r in range(mr)]
    lines = [f"static __attribute__((noinline)) void {microkernel_name(mr, vectors)}(long kc, const float *restrict xp,"
             " const float *restrict yp, float *const *rows, int resume, float scale) {"]
    lines += [f"    float *o{r} = rows[{r}];" for r in range(mr)]
    lines += ["    wf_vf " + ", ".join(f"{a} = wfc_splat_f(0.0f)" for a in acc[r]) + ";" for r in range(mr)]
    lines.append("    if (resume) {")
    lines += ["        " + " ".join(f"{a} = wfc_load_f(o{r} + {v * lanes});" for v, a in enumerate(acc[r]))
              for r in range(mr)]
    lines.append("    }")
    lines.append("    for (long k = 0; k < kc; k++) {")
    lines.append(f"        const float *yk = yp + k * {nr}, *xk = xp + k * {mr};")
    lines += [f"        const wf_vf y{v} = wfc_load_f(yk + {v * lanes});" for v in range(vectors)]
    for r in range(mr):
        lines.append(f"        const wf_vf x{r} = wfc_splat_f(xk[{r}]);")
        lines += [f"        {acc[r][v]} = {acc[r][v]} + x{r} * y{v};" for v in range(vectors)]
    lines.append("    }")
    lines.append("    if (scale != 1.0f) {")
    lines += ["        " + " ".join(f"{a} = {a} * wfc_splat_f(scale);" for a in acc[r]) for r in range(mr)]
    lines.append("    }")
    lines += ["    " + " ".join(f"wfc_store_f(o{r} + {v * lanes}, {a});" for v, a in enumerate(acc[r])) for r in range(mr)]
    lines.append("}")
    return "\n".join(lines)
