"""The microkernel's packing of a convolution's patch view (``weft.lower.contraction.ColumnSplit``)
and the nest that runs it (``split_blocking``): mixed into the contraction writer
(``weft.codegen.contraction``), whose helpers (``emit``, ``fold_env``, ``pack_x``,
``micro_tile``...) it calls::

    x (weights) packed whole, once per call                       (omp for, one barrier)
    for (batch point, band of micro-panels) (omp for dynamic):
        pack the band of y: per fold step, pieces of one output row  (or one copy: flat)
        for row block, fold block, micro-panel of the band, mr rows: the micro-tile
"""

from __future__ import annotations

from weft.codegen.body import BodyRenderer, c_literal
from weft.ir import DType, Load, expr_axes
from weft.ir.verify import index_range
from weft.lower.access import flat_address
from weft.lower.contraction import SPLIT_QUOTIENT, SPLIT_REMAINDER, plain_index, remainder_step

MASKED_SPLIT = True  # pack_y_split_masked where it applies (a switch for side-by-side runs)
# output rows narrower than this are packed a vector at a time (pack_y_split_masked): measured
# side by side, cnn-conv2 (rows of 8) 0.59x the time of runs, resnet3x3-s2 (rows of 28) 1.025x
MASKED_SPLIT_WIDTH = 16


class PatchViewWriter:
    """Methods of ``weft.codegen.contraction._ContractionWriter`` for a split y."""

    def flat_load(self, factor) -> tuple[str, object] | None:
        """(pointer, address) of a plain float load whose reshape divisions cancel in its
        address (``weft.lower.access.flat_address``: a convolution's weight read by tap)."""
        if not isinstance(factor, Load) or factor.padding is not None or not all(plain_index(i) for i in factor.index):
            return None
        view = self.views[factor.buffer]
        if view.dtype is not DType.FLOAT32 or any(offset != 0 for offset in view.offsets):
            return None
        address = flat_address(factor.index, view.strides)
        return None if address is None else (view.pointer, address)

    def pack_y_split(self, depth: int, band: int) -> None:
        """A patch view (``ColumnSplit``): ``band`` micro-panels at once (one input row is read
        along, not one short piece of each of K rows per panel), per fold step the columns as
        pieces of one quotient ``q`` (an output row) inside one micro-panel, each piece a zero
        fill, a strided copy of the in-range remainders (bounds solved once per piece, not
        checked per element) and a zero fill; zeros past the columns."""
        nest, b = self.nest, self.nest.blocking
        nr, n, k_total = b.nr, nest.columns, nest.fold_points
        split = nest.y_split
        width, load = split.width, split.load
        view = self.views[load.buffer]
        self.emit(depth, f"const long wf_nv = wfc_minl({band * nr}, wfc_minl({n}, wf_jc + {b.nc}) - wf_nb);")
        step = sum(remainder_step(index) * stride for index, stride in zip(load.index, view.strides, strict=True))
        masked = MASKED_SPLIT and nest.lanes == 16 and nr % 16 == 0 and step in (1, 2) and width < MASKED_SPLIT_WIDTH
        if masked:
            self.emit(0, "#if defined(__AVX512F__)")
            self.pack_y_split_masked(depth, step)
            self.emit(0, "#else")
        self.emit(depth, f"for (long wf_kk = 0; wf_kk < {k_total}; wf_kk++) {{")
        d = depth + 1
        env = {**self.batch_env(), **self.fold_env(d, "wf_kk"), SPLIT_QUOTIENT: "wf_q", SPLIT_REMAINDER: "0"}
        extents = {**self.extents, SPLIT_QUOTIENT: -(-n // width), SPLIT_REMAINDER: width}
        self.emit(d, "long wf_cc = 0;")
        self.emit(d, f"for (long wf_q = wf_nb / {width}, wf_r0 = wf_nb % {width}; wf_cc < wf_nv; ) {{")
        d += 1
        self.emit(d, f"float *wf_row = wf_dst + (wf_cc / {nr}) * {nr * k_total} + wf_kk * {nr} + wf_cc % {nr} - wf_r0;")
        self.emit(d, f"const long wf_r1 = wf_r0 + wfc_minl(wfc_minl({width} - wf_r0, wf_nv - wf_cc), {nr} - wf_cc % {nr});")
        self.emit(d, "long wf_lo = wf_r0, wf_hi = wf_r1;")
        renderer = BodyRenderer(self.views, extents, nest.lanes, self.lines, "    " * d, self.counter, env)
        base = self.split_bounds(d, renderer, extents)
        if load.padding is not None:  # a run wholly in the halo: pad exactly its columns
            self.emit(d, "if (wf_lo > wf_r1) wf_lo = wf_r1;")
            self.emit(d, "if (wf_hi < wf_lo) wf_hi = wf_lo;")
            pad = c_literal(load.padding, DType.FLOAT32)
        if load.padding is not None:
            self.emit(d, f"wfc_fill_f(wf_row + wf_r0, wf_lo - wf_r0, {pad});")
        self.emit(d, f"wfc_copy_f(wf_row + wf_lo, {view.pointer} + {base} + wf_lo * {step}, wf_hi - wf_lo, {step});")
        if load.padding is not None:
            self.emit(d, f"wfc_fill_f(wf_row + wf_hi, wf_r1 - wf_hi, {pad});")
        self.emit(d, "wf_cc += wf_r1 - wf_r0;")
        self.emit(d, f"if (wf_r1 == {width}) {{ wf_q++; wf_r0 = 0; }} else wf_r0 = wf_r1;")
        d -= 1
        self.emit(d, "}")
        self.emit(d, f"if (wf_cc % {nr}) wfc_fill_f(wf_dst + (wf_cc / {nr}) * {nr * k_total} + wf_kk * {nr} + wf_cc % {nr},"
                     f" {nr} - wf_cc % {nr}, 0.0f);")
        self.emit(depth, "}")
        if masked:
            self.emit(0, "#endif")

    def split_bounds(self, d: int, renderer: BodyRenderer, extents: dict[str, int]) -> str:
        """Narrow ``[wf_lo, wf_hi)`` (remainders of the quotient ``wf_q`` at the fold step
        in ``renderer``'s env) to those whose read is inside the input (``wf_hi = wf_lo``
        for a row outside it); returns the C local holding the address at remainder 0."""
        load = self.nest.y_split.load
        view = self.views[load.buffer]
        for position, index in enumerate(load.index):
            bounds = index_range(index, extents)
            if load.padding is None or (bounds is not None and bounds[0] >= 0 and bounds[1] < view.shape[position]):
                continue
            extent = view.shape[position]
            step = remainder_step(index)
            at_zero = renderer.local(DType.INT64, False, renderer.index(index)).code
            if step == 0:
                self.emit(d, f"if ((uint64_t){at_zero} >= (uint64_t){extent}) wf_hi = wf_lo;")
            else:  # 0 <= at_zero + step * r < extent
                first = renderer.local(DType.INT64, False, f"-wfc_floordiv({at_zero}, {step})").code
                self.emit(d, f"if (wf_lo < {first}) wf_lo = {first};")
                self.emit(d, f"wf_hi = wfc_minl(wf_hi, wfc_floordiv({extent - 1} - {at_zero}, {step}) + 1);")
        flat = flat_address(load.index, view.strides) if all(offset == 0 for offset in view.offsets) else None
        address = renderer.index(flat) if flat is not None else renderer.address(view, load.index)
        return renderer.local(DType.INT64, False, address).code

    def pack_y_split_masked(self, depth: int, step: int) -> None:
        """``pack_y_split`` with AVX-512 masks, for an element step of 1 or 2: per fold step
        and 16 columns one store, filled by one masked load (a step of 2: two loads and a
        permute) per output row those columns cross, its lanes the in-range remainders (a
        range of lanes: a mask from two shifts), the padding elsewhere, zero past the
        columns. Per vector, not per run: no fill or copy call, no scalar tail."""
        nest, b = self.nest, self.nest.blocking
        nr, n, k_total = b.nr, nest.columns, nest.fold_points
        width, load = nest.y_split.width, nest.y_split.load
        pointer = self.views[load.buffer].pointer
        pad = c_literal(load.padding or 0.0, DType.FLOAT32)
        self.emit(depth, "{")
        d = depth + 1
        self.emit(d, f"const __m512 wf_vpad = _mm512_set1_ps({pad});")
        if step == 2:
            self.emit(d, "const __m512i wf_even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);")
        self.emit(d, f"for (long wf_kk = 0; wf_kk < {k_total}; wf_kk++) {{")
        d += 1
        env = {**self.batch_env(), **self.fold_env(d, "wf_kk"), SPLIT_QUOTIENT: "wf_q", SPLIT_REMAINDER: "0"}
        extents = {**self.extents, SPLIT_QUOTIENT: -(-n // width), SPLIT_REMAINDER: width}
        self.emit(d, "for (long wf_j = 0; wf_j < wf_nv; wf_j += 16) {")
        d += 1
        self.emit(d, "const long wf_lanes = wfc_minl(16, wf_nv - wf_j);")
        self.emit(d, f"long wf_q = (wf_nb + wf_j) / {width}, wf_rs = (wf_nb + wf_j) % {width}, wf_l0 = 0;")
        self.emit(d, "__m512 wf_val = wf_vpad;")
        self.emit(d, "while (wf_l0 < wf_lanes) {")
        d += 1
        self.emit(d, f"const long wf_len = wfc_minl(wf_lanes - wf_l0, {width} - wf_rs);")
        self.emit(d, "long wf_lo = wf_rs, wf_hi = wf_rs + wf_len;")
        renderer = BodyRenderer(self.views, extents, nest.lanes, self.lines, "    " * d, self.counter, env)
        base = self.split_bounds(d, renderer, extents)
        self.emit(d, "if (wf_hi > wf_lo) {")
        self.emit(d + 1, "const __mmask16 wf_m = (__mmask16)((((1u << (wf_hi - wf_rs)) - 1u) & ~((1u << (wf_lo - wf_rs)) - 1u))"
                         " << wf_l0);")
        self.emit(d + 1, f"const float *wf_src = {pointer} + {base} + (wf_rs - wf_l0) * {step};")
        if step == 1:
            self.emit(d + 1, "wf_val = _mm512_mask_loadu_ps(wf_val, wf_m, wf_src);")
        else:  # source element 2l feeds lane l: the lane mask spread to every other bit
            self.emit(d + 1, "const uint32_t wf_s = _pdep_u32((uint32_t)wf_m, 0x55555555u);")
            self.emit(d + 1, "wf_val = _mm512_mask_mov_ps(wf_val, wf_m, _mm512_permutex2var_ps("
                             "_mm512_maskz_loadu_ps((__mmask16)wf_s, wf_src), wf_even,"
                             " _mm512_maskz_loadu_ps((__mmask16)(wf_s >> 16), wf_src + 16)));")
        self.emit(d, "}")
        self.emit(d, "wf_l0 += wf_len; wf_q++; wf_rs = 0;")
        d -= 1
        self.emit(d, "}")
        self.emit(d, "if (wf_lanes < 16) wf_val = _mm512_maskz_mov_ps((__mmask16)((1u << wf_lanes) - 1u), wf_val);")
        self.emit(d, f"_mm512_storeu_ps(wf_dst + (wf_j / {nr}) * {nr * k_total} + wf_kk * {nr} + wf_j % {nr}, wf_val);")
        d -= 1
        self.emit(d, "}")
        self.emit(d, "const long wf_e = (wf_nv + 15) / 16 * 16;")
        self.emit(d, f"if (wf_e % {nr}) wfc_fill_f(wf_dst + (wf_e / {nr}) * {nr * k_total} + wf_kk * {nr} + wf_e % {nr},"
                     f" {nr} - wf_e % {nr}, 0.0f);")
        d -= 1
        self.emit(d, "}")
        self.emit(depth, "}")

    def pack_y_flat(self, depth: int, band: int) -> None:
        """A flat patch view (``ColumnSplit.flat``: address ``A + p * step``): per fold step
        and micro-panel one copy of the columns whose row is inside the input, the padding
        around it, then the padding over the halo columns of each output row in it."""
        nest, b = self.nest, self.nest.blocking
        nr, n, k_total = b.nr, nest.columns, nest.fold_points
        width, load = nest.y_split.width, nest.y_split.load
        view = self.views[load.buffer]
        pad = c_literal(load.padding or 0.0, DType.FLOAT32)
        step = sum(remainder_step(index) * stride for index, stride in zip(load.index, view.strides, strict=True))
        self.emit(depth, f"const long wf_nv = wfc_minl({band * nr}, wfc_minl({n}, wf_jc + {b.nc}) - wf_nb);")
        self.emit(depth, f"for (long wf_kk = 0; wf_kk < {k_total}; wf_kk++) {{")
        d = depth + 1
        env = {**self.batch_env(), **self.fold_env(d, "wf_kk"), SPLIT_QUOTIENT: "0", SPLIT_REMAINDER: "0"}
        extents = {**self.extents, SPLIT_QUOTIENT: -(-n // width), SPLIT_REMAINDER: width}
        renderer = BodyRenderer(self.views, extents, nest.lanes, self.lines, "    " * d, self.counter, env)
        flat = flat_address(load.index, view.strides)
        address = renderer.index(flat) if flat is not None else renderer.address(view, load.index)
        base = renderer.local(DType.INT64, False, address).code
        self.emit(d, f"long wf_plo = wf_nb, wf_phi = wf_nb + wf_nv, wf_rlo = 0, wf_rhi = {width};")
        halo = False
        for position, index in enumerate(load.index):
            bounds = index_range(index, extents)
            if load.padding is None or (bounds is not None and bounds[0] >= 0 and bounds[1] < view.shape[position]):
                continue
            extent = view.shape[position]
            along_q, along_r = remainder_step(index, SPLIT_QUOTIENT), remainder_step(index)
            at_zero = renderer.local(DType.INT64, False, renderer.index(index)).code
            if not along_q and not along_r:
                self.emit(d, f"if ((uint64_t){at_zero} >= (uint64_t){extent}) wf_phi = wf_plo;")
                continue
            low, high, a = ("wf_plo", "wf_phi", along_q) if along_q else ("wf_rlo", "wf_rhi", along_r)
            scale = f" * {width}" if along_q else ""
            first = renderer.local(DType.INT64, False, f"-wfc_floordiv({at_zero}, {a}){scale}").code
            last = renderer.local(DType.INT64, False, f"(wfc_floordiv({extent - 1} - {at_zero}, {a}) + 1){scale}").code
            self.emit(d, f"if ({low} < {first}) {low} = {first};")
            self.emit(d, f"if ({high} > {last}) {high} = {last};")
            halo = halo or bool(along_r)
        if load.padding is not None:  # the copy stays inside the buffer (the halo lanes are padded after)
            size = 1 + sum((extent - 1) * stride for extent, stride in zip(view.shape, view.strides, strict=True))
            first = renderer.local(DType.INT64, False, f"-wfc_floordiv({base}, {step})").code
            last = renderer.local(DType.INT64, False, f"wfc_floordiv({size - 1} - {base}, {step}) + 1").code
            self.emit(d, f"if (wf_plo < {first}) wf_plo = {first};")
            self.emit(d, f"if (wf_phi > {last}) wf_phi = {last};")
            self.emit(d, "if (wf_phi < wf_plo) wf_phi = wf_plo;")
        masked = nest.lanes == 16 and step == 1 and nr % 16 == 0 and (not halo or width >= 16)
        if masked:
            self.emit(0, "#if defined(__AVX512F__)")
            self.flat_panels_masked(d, view.pointer, base, pad, halo)
            self.emit(0, "#else")
        self.flat_panels(d, view.pointer, base, pad, step, halo)
        if masked:
            self.emit(0, "#endif")
        self.emit(depth, "}")

    def flat_panels(self, d: int, pointer: str, base: str, pad: str, step: int, halo: bool) -> None:
        """One fold step of a flat patch view, per micro-panel: the padding before the rows
        inside the input, one copy, the padding after, zeros past the columns, then the
        padding over the halo columns of each output row in it."""
        nr, k_total, width = self.nest.blocking.nr, self.nest.fold_points, self.nest.y_split.width
        self.emit(d, f"for (long wf_j = 0; wf_j * {nr} < wf_nv; wf_j++) {{")
        d += 1
        self.emit(d, f"const long wf_c0 = wf_nb + wf_j * {nr}, wf_c1 = wfc_minl(wf_c0 + {nr}, wf_nb + wf_nv);")
        self.emit(d, f"float *wf_row = wf_dst + wf_j * {nr * k_total} + wf_kk * {nr};")
        self.emit(d, "const long wf_lo = wf_plo < wf_c0 ? wf_c0 : wf_plo > wf_c1 ? wf_c1 : wf_plo;")
        self.emit(d, "const long wf_hi = wf_phi < wf_lo ? wf_lo : wf_phi > wf_c1 ? wf_c1 : wf_phi;")
        self.emit(d, f"wfc_fill_f(wf_row, wf_lo - wf_c0, {pad});")
        self.emit(d, f"wfc_copy_f(wf_row + (wf_lo - wf_c0), {pointer} + {base} + wf_lo * {step}, wf_hi - wf_lo, {step});")
        self.emit(d, f"wfc_fill_f(wf_row + (wf_hi - wf_c0), wf_c1 - wf_hi, {pad});")
        self.emit(d, f"wfc_fill_f(wf_row + (wf_c1 - wf_c0), wf_c0 + {nr} - wf_c1, 0.0f);")
        if halo:
            self.emit(d, f"if (wf_rlo > 0 || wf_rhi < {width}) {{")
            self.emit(d + 1, f"for (long wf_s = wf_lo / {width} * {width}; wf_s < wf_hi; wf_s += {width}) {{")
            for start, end in (("wf_s", "wf_s + wf_rlo"), ("wf_s + wf_rhi", f"wf_s + {width}")):
                self.emit(d + 2, f"{{ const long wf_f0 = ({start}) > wf_lo ? ({start}) : wf_lo;"
                                 f" wfc_fill_f(wf_row + (wf_f0 - wf_c0), wfc_minl({end}, wf_hi) - wf_f0, {pad}); }}")
            self.emit(d + 1, "}")
            self.emit(d, "}")
        d -= 1
        self.emit(d, "}")

    def flat_panels_masked(self, d: int, pointer: str, base: str, pad: str, halo: bool) -> None:
        """``flat_panels`` with AVX-512 masks (a step of one element): per 16 columns one
        masked load, whose lanes are the columns inside ``[wf_plo, wf_phi)`` whose output
        column (remainder) is inside ``[wf_rlo, wf_rhi)``, the padding elsewhere (zero past
        the columns), and one store; no run is split and no lane outside the input is read.
        A remainder is the first lane's plus the lane, less ``width`` once (``width >= 16``)."""
        nr, k_total, width = self.nest.blocking.nr, self.nest.fold_points, self.nest.y_split.width
        self.emit(d, "{")
        d += 1
        self.emit(d, "const __m512i wf_iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);")
        self.emit(d, "const __m512i wf_vplo = _mm512_set1_epi32((int)wf_plo), wf_vphi = _mm512_set1_epi32((int)wf_phi);")
        self.emit(d, f"const __m512 wf_vpad = _mm512_set1_ps({pad});")
        if halo:
            self.emit(d, f"const int wf_halo = wf_rlo > 0 || wf_rhi < {width};")
            self.emit(d, "const __m512i wf_vrlo = _mm512_set1_epi32((int)wf_rlo), wf_vrhi = _mm512_set1_epi32((int)wf_rhi);")
            self.emit(d, f"const __m512i wf_vw = _mm512_set1_epi32({width});")
        if pad != "0.0f":
            self.emit(d, "const __m512i wf_vend = _mm512_set1_epi32((int)(wf_nb + wf_nv));")
        self.emit(d, f"for (long wf_j = 0; wf_j * {nr} < wf_nv; wf_j++) {{")
        d += 1
        self.emit(d, f"float *wf_row = wf_dst + wf_j * {nr * k_total} + wf_kk * {nr};")
        self.emit(d, f"for (long wf_v = 0; wf_v < {nr}; wf_v += 16) {{")
        d += 1
        self.emit(d, f"const long wf_c = wf_nb + wf_j * {nr} + wf_v;")
        self.emit(d, "const __m512i wf_cols = _mm512_add_epi32(_mm512_set1_epi32((int)wf_c), wf_iota);")
        self.emit(d, "__mmask16 wf_m = _mm512_cmpge_epi32_mask(wf_cols, wf_vplo) & _mm512_cmplt_epi32_mask(wf_cols, wf_vphi);")
        if halo:
            self.emit(d, "if (wf_halo) {")
            self.emit(d + 1, f"__m512i wf_rem = _mm512_add_epi32(_mm512_set1_epi32((int)(wf_c % {width})), wf_iota);")
            self.emit(d + 1, "wf_rem = _mm512_mask_sub_epi32(wf_rem, _mm512_cmpge_epi32_mask(wf_rem, wf_vw), wf_rem, wf_vw);")
            self.emit(d + 1, "wf_m &= _mm512_cmpge_epi32_mask(wf_rem, wf_vrlo) & _mm512_cmplt_epi32_mask(wf_rem, wf_vrhi);")
            self.emit(d, "}")
        self.emit(d, f"__m512 wf_val = _mm512_mask_loadu_ps(wf_vpad, wf_m, {pointer} + {base} + wf_c);")
        if pad != "0.0f":
            self.emit(d, "wf_val = _mm512_maskz_mov_ps(_mm512_cmplt_epi32_mask(wf_cols, wf_vend), wf_val);")
        self.emit(d, "_mm512_storeu_ps(wf_row + wf_v, wf_val);")
        d -= 1
        self.emit(d, "}")
        d -= 1
        self.emit(d, "}")
        d -= 1
        self.emit(d, "}")

    def write_split(self, indent: int) -> None:
        """A patch view's nest (``weft.lower.contraction.split_blocking``): x packed whole,
        once per call (every x batch point, row block and fold block, then a barrier); then
        each thread takes (batch point, band) items: packs the band of y into its own
        buffer and runs every row block and fold block over it."""
        nest, b = self.nest, self.nest.blocking
        n, k_total, m, nr = nest.columns, nest.fold_points, nest.rows, b.nr
        band = nest.y_split.band
        row_blocks, k_blocks, panels = -(-m // b.mc), -(-k_total // b.kc), -(-n // nr)
        bands = -(-panels // band)
        x_axes = expr_axes(nest.x_factor)
        x_batch = tuple(axis for axis in nest.batch_axes if axis in x_axes)
        x_points = 1
        for axis in x_batch:
            x_points *= self.extents[axis]
        block = b.mc * b.kc
        blocks = x_points * row_blocks * k_blocks
        d = indent
        self.emit(d, f"{{ /* member {nest.name}: {nest.describe()} */")
        d += 1
        self.emit(d, f"float *wf_xall = (float *)aligned_alloc(64, {-(-blocks * block * 4 // 64) * 64});")
        if nest.parallel:
            self.emit(d, "#pragma omp parallel")
        self.emit(d, "{")
        d += 1
        self.emit(d, f"float *wf_yp = (float *)aligned_alloc(64, {band * nr * k_total * 4});")
        if nest.parallel:
            self.emit(d, "#pragma omp for schedule(static)")
        self.emit(d, f"for (long wf_xi = 0; wf_xi < {blocks}; wf_xi++) {{")
        self.emit(d + 1, f"const long wf_xt = wf_xi / {row_blocks * k_blocks}, wf_xb = wf_xi % {row_blocks * k_blocks};")
        self.emit(d + 1, "(void)wf_xt;")
        if x_batch:
            self.decode(d + 1, "wf_xt", x_batch, {axis: self.var[axis] for axis in x_batch})
        self.emit(d + 1, f"const long wf_ic = (wf_xb / {k_blocks}) * {b.mc}, wf_pc = (wf_xb % {k_blocks}) * {b.kc};")
        self.emit(d + 1, f"const long wf_mc = wfc_minl({b.mc}, {m} - wf_ic), wf_kc = wfc_minl({b.kc}, {k_total} - wf_pc);")
        self.emit(d + 1, f"float *wf_xp = wf_xall + wf_xi * {block}L;")
        self.pack_x(d + 1)
        self.emit(d, "}")
        if nest.parallel:
            self.emit(d, "#pragma omp for schedule(dynamic, 1)")
        self.emit(d, f"for (long wf_item = 0; wf_item < {nest.batch_points * bands}; wf_item++) {{")
        d += 1
        self.emit(d, f"const long wf_bt = wf_item / {bands}, wf_jp = (wf_item % {bands}) * {band}, wf_jc = 0;")
        if nest.batch_axes:
            self.decode(d, "wf_bt", nest.batch_axes, self.batch_env())
        x_point = "0"
        for axis in x_batch:
            x_point = f"({x_point}) * {self.extents[axis]} + {self.var[axis]}"
        self.emit(d, f"const long wf_xt = {x_point};")
        self.pack_y(d, band, "wf_yp")
        self.emit(d, f"for (long wf_ic = 0; wf_ic < {m}; wf_ic += {b.mc}) {{")
        self.emit(d + 1, f"const long wf_mc = wfc_minl({b.mc}, {m} - wf_ic);")
        self.emit(d + 1, f"for (long wf_pc = 0; wf_pc < {k_total}; wf_pc += {b.kc}) {{")
        inner = d + 2
        self.emit(inner, f"const long wf_kc = wfc_minl({b.kc}, {k_total} - wf_pc);")
        self.emit(inner, f"const float *wf_xp = wf_xall + ((wf_xt * {row_blocks} + wf_ic / {b.mc}) * {k_blocks}"
                         f" + wf_pc / {b.kc}) * {block}L;")
        self.emit(inner, f"for (long wf_jq = wf_jp; wf_jq < wfc_minl(wf_jp + {band}, {panels}); wf_jq++) {{")
        self.panel_tiles(inner + 1, "(wf_jq - wf_jp)", "wf_jq", edges=True)
        self.emit(inner, "}")
        self.emit(d + 1, "}")
        self.emit(d, "}")
        d -= 1
        self.emit(d, "}")
        if nest.stream_output:
            guard = "__AVX512F__" if nest.lanes == 16 else "__AVX__"
            self.emit(0, f"#if defined({guard})")
            self.emit(d, "_mm_sfence();")
            self.emit(0, "#endif")
        self.emit(d, "free(wf_yp);")
        d -= 1
        self.emit(d, "}")
        self.emit(d, "free(wf_xall);")
        d -= 1
        self.emit(d, "}")
