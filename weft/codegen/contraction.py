"""C for the contraction microkernel (``weft.lower.contraction.ContractionNest``).

The nest's data says what to pack, how big each block is and which terms to add;
this module only writes it out::

    float *wf_yp = aligned_alloc(...);                 /* shared column panel: K x nc */
    #pragma omp parallel
    { float *wf_xp = aligned_alloc(...);               /* this thread's row block: mc x kc */
      for batch point, column panel jc:
        #pragma omp for         pack y (every fold step) into nr-wide micro-panels  (barrier)
        #pragma omp for dynamic for each row block (x column groups), each fold block pc:
            pack x rows into mr-row micro-panels (or read x in place)
            for each nr micro-panel, each mr rows: mr x nr/lanes vector accumulators,
                kc steps of (broadcast x) * (y vectors), epilogue on the tile, store
    }

With many batch points (attention's heads) each thread takes whole batch points
with its own y panel instead: no barrier at all.

Strict renders each term as the body's operations (no FMA: ``-ffp-contract=off``) and
adds it to its own accumulator; partial sums between fold blocks wait in the output.
"""

from __future__ import annotations

from weft.codegen.body import BodyRenderer, Counter, Value, c_literal, c_parameters
from weft.codegen.contraction_patches import PatchViewWriter
from weft.codegen.contraction_tiles import TileEpilogueWriter
from weft.codegen.units import HIDDEN
from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Const,
    DType,
    IndexOf,
    Load,
    Unary,
    UnaryOp,
    expr_loads,
)
from weft.lower.access import Access, address_step, load_access
from weft.lower.contraction import (
    X_SLOT,
    Y_SLOT,
    ContractionNest,
    acc_at,
)
from weft.lower.nest import LoweredFunction

_OPS = {BinaryOp.ADD: "+", BinaryOp.SUB: "-", BinaryOp.MUL: "*", BinaryOp.DIV: "/"}


def _clean(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)


def _plain(index) -> bool:
    """No gather (``IndexOf``) anywhere in an index expression."""
    if isinstance(index, IndexOf):
        return False
    return all(_plain(getattr(index, f)) for f in ("left", "right", "operand") if hasattr(index, f))


def term_code(term, x: str, y: str) -> str:
    """The term as one C vector expression over the broadcast ``x`` and the vector ``y``."""
    if term is X_SLOT:
        return x
    if term is Y_SLOT:
        return y
    if isinstance(term, Const):
        return f"wfc_splat_f({c_literal(term.value, DType.FLOAT32)})"
    if isinstance(term, Binary):
        return f"({term_code(term.left, x, y)} {_OPS[term.op]} {term_code(term.right, x, y)})"
    if isinstance(term, Unary) and term.op is UnaryOp.NEG:
        return f"(-{term_code(term.operand, x, y)})"
    raise TypeError(f"not a contraction term: {term!r}")


class _ContractionWriter(PatchViewWriter, TileEpilogueWriter):
    def __init__(self, nest: ContractionNest, lines: list[str], counter: Counter) -> None:
        self.nest = nest
        self.lines = lines
        self.counter = counter
        self.kernel = nest.kernel
        self.views = {view.buffer: view for view in nest.views}
        self.extents = {a.name: a.extent for a in self.kernel.all_axes}
        tag = counter.fresh("c")
        self.var = {a.name: f"wf_{tag}_{_clean(a.name)}" for a in self.kernel.all_axes}
        self.out_view = self.views[nest.output_buffer]

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def renderer(self, depth: int, env: dict[str, str], vector_axis: str | None = None) -> BodyRenderer:
        return BodyRenderer(self.views, self.extents, self.nest.lanes, self.lines, "    " * depth, self.counter,
                            env, vector_axis)

    # ------------------------------------------------------------------ index decoding

    def decode(self, depth: int, flat: str, axes: tuple[str, ...], names: dict[str, str]) -> None:
        """``const long`` variables (``names[axis]``) for each axis of a row-major flat index."""
        if len(axes) == 1:
            self.emit(depth, f"const long {names[axes[0]]} = {flat};")
            return
        rem = self.counter.fresh("wf_rem")
        self.emit(depth, f"long {rem} = {flat};")
        for axis in reversed(axes):
            self.emit(depth, f"const long {names[axis]} = {rem} % {self.extents[axis]}; {rem} /= {self.extents[axis]};")

    def fold_env(self, depth: int, flat: str) -> dict[str, str]:
        fold = tuple(a.name for a in self.kernel.fold_axes)
        names = {axis: f"{self.var[axis]}_k" for axis in fold}
        self.decode(depth, flat, fold, names)
        return names

    def batch_env(self) -> dict[str, str]:
        return {axis: self.var[axis] for axis in self.nest.batch_axes}

    # ------------------------------------------------------------------ packing

    def column_contiguous(self) -> bool:
        column = self.nest.column_axis
        return any(
            load_access(load, self.views[load.buffer].strides, column) is Access.CONTIGUOUS
            for load in expr_loads(self.nest.y_factor)
        )

    def pack_y(self, depth: int, band: int = 1, dst: str | None = None) -> None:
        """One nr-wide micro-panel ``wf_jp`` of y over every fold step: ``wf_yp[jp][k][nr]``
        (zeros past the columns), at ``dst`` if given; a patch view packs ``band``
        micro-panels from ``wf_jp``."""
        nest, b = self.nest, self.nest.blocking
        lanes, nr, n, k_total = nest.lanes, b.nr, nest.columns, nest.fold_points
        column = nest.column_axis
        self.emit(depth, f"const long wf_nb = wf_jc + wf_jp * {nr};")
        self.emit(depth, f"float *wf_dst = {dst or f'wf_yp + wf_jp * {nr * k_total}'};")
        if nest.y_split is not None and nest.y_split.flat:
            self.pack_y_flat(depth, band)
            return
        if nest.y_split is not None:
            self.pack_y_split(depth, band)
            return
        if not self.column_contiguous() and self.fold_contiguous_y():
            self.pack_y_transposed(depth)
            return
        if self.column_contiguous():
            self.emit(depth, f"if (wf_nb + {nr} <= {n}) {{")
            self.emit(depth + 1, f"for (long wf_kk = 0; wf_kk < {k_total}; wf_kk++) {{")
            env = {**self.batch_env(), **self.fold_env(depth + 2, "wf_kk")}
            renderer = self.renderer(depth + 2, env, column)
            for v in range(nr // lanes):
                renderer.env = {**env, column: f"wf_nb + {v * lanes}"}
                value = renderer.render(nest.y_factor)
                renderer.emit(f"wfc_store_f(wf_dst + wf_kk * {nr} + {v * lanes}, {renderer.splat(value)});")
            self.emit(depth + 1, "}")
            self.emit(depth, "} else {")
            depth += 1
        self.emit(depth, f"for (long wf_cc = 0; wf_cc < {nr}; wf_cc++) {{")
        self.emit(depth + 1, f"if (wf_nb + wf_cc < {n}) {{")
        self.pack_steps(depth + 2, k_total, "wf_kk", {**self.batch_env(), column: "wf_nb + wf_cc"}, nest.y_factor,
                        f"wf_kk * {nr} + wf_cc")
        if self.column_contiguous():
            self.emit(depth - 1, "}")

    def fold_contiguous_y(self) -> bool:
        """y is one plain load whose address steps by one element per fold step (a linear's
        ``(out, in)`` weight): packed by loading vectors along the fold and transposing."""
        y = self.nest.y_factor
        if not isinstance(y, Load) or y.padding is not None or len(self.kernel.fold_axes) != 1:
            return False
        if self.views[y.buffer].dtype is not DType.FLOAT32 or not all(_plain(index) for index in y.index):
            return False
        return address_step(y, self.views[y.buffer].strides, self.kernel.fold_axes[0].name) == 1

    def pack_y_transposed(self, depth: int) -> None:
        """Full panels in lanes x lanes blocks: ``lanes`` columns' vectors along the fold, one
        in-register transpose, ``lanes`` stores of a fold step's columns; the fold's remainder
        and a partial last panel element by element. The values are copied, never computed."""
        nest, b = self.nest, self.nest.blocking
        lanes, nr, n, k_total = nest.lanes, b.nr, nest.columns, nest.fold_points
        y = nest.y_factor
        view = self.views[y.buffer]
        fold = self.kernel.fold_axes[0].name
        column = nest.column_axis
        renderer = self.renderer(depth, {**self.batch_env(), column: f"wf_nb + wf_v * {lanes} + wf_c", fold: "wf_kk"})
        vector_address = renderer.address(view, y.index)
        scalar = self.renderer(depth, {**self.batch_env(), column: "wf_nb + wf_cc", fold: "wf_kk"})
        scalar_address = scalar.address(view, y.index)
        full_k = k_total // lanes * lanes
        self.emit(depth, f"if (wf_nb + {nr} <= {n}) {{")
        self.emit(depth + 1, f"for (long wf_kk = 0; wf_kk < {full_k}; wf_kk += {lanes}) {{")
        self.emit(depth + 2, f"for (long wf_v = 0; wf_v < {nr // lanes}; wf_v++) {{")
        self.emit(depth + 3, f"wf_vf wf_rows[{lanes}];")
        self.emit(depth + 3, f"for (long wf_c = 0; wf_c < {lanes}; wf_c++) "
                             f"wf_rows[wf_c] = wfc_load_f(&{view.pointer}[{vector_address}]);")
        self.emit(depth + 3, "wfc_transpose_f(wf_rows);")
        self.emit(depth + 3, f"for (long wf_l = 0; wf_l < {lanes}; wf_l++) "
                             f"wfc_store_f(wf_dst + (wf_kk + wf_l) * {nr} + wf_v * {lanes}, wf_rows[wf_l]);")
        self.emit(depth + 2, "}")
        self.emit(depth + 1, "}")
        self.emit(depth + 1, f"for (long wf_kk = {full_k}; wf_kk < {k_total}; wf_kk++)")
        self.emit(depth + 2, f"for (long wf_cc = 0; wf_cc < {nr}; wf_cc++) "
                             f"wf_dst[wf_kk * {nr} + wf_cc] = {view.pointer}[{scalar_address}];")
        self.emit(depth, "} else {")
        self.emit(depth + 1, f"for (long wf_cc = 0; wf_cc < {nr}; wf_cc++)")
        self.emit(depth + 2, f"for (long wf_kk = 0; wf_kk < {k_total}; wf_kk++)")
        self.emit(depth + 3, f"wf_dst[wf_kk * {nr} + wf_cc] = wf_nb + wf_cc < {n} ? "
                             f"{view.pointer}[{scalar_address}] : 0.0f;")
        self.emit(depth, "}")

    def pack_x(self, depth: int) -> None:
        """The row block at ``wf_ic``: ``wf_xp[row / mr][kk][row % mr]`` (zeros past the rows)."""
        nest, b = self.nest, self.nest.blocking
        mr = b.mr
        self.emit(depth, f"for (long wf_r = 0; wf_r < (wf_mc + {mr - 1}) / {mr} * {mr}; wf_r++) {{")
        self.emit(depth + 1, f"float *wf_dst = wf_xp + (wf_r / {mr}) * {mr} * wf_kc + wf_r % {mr};")
        self.emit(depth + 1, "if (wf_r < wf_mc) {")
        names = {axis: f"{self.var[axis]}_p" for axis in nest.row_axes}
        self.decode(depth + 2, "wf_ic + wf_r", nest.row_axes, names)
        # (only a patch view's weights so far: other workloads' packing is left as measured)
        flat = self.flat_load(nest.x_factor) if nest.y_split is not None else None
        self.pack_steps(depth + 2, "wf_kc", "wf_pc + wf_kk", {**self.batch_env(), **names}, nest.x_factor,
                        f"wf_kk * {mr}", flat=flat)

    def pack_steps(self, depth: int, steps, fold_point: str, env: dict[str, str], factor, slot: str,
                   flat=None) -> None:
        """One packed row or column, inside its ``if (in range) {`` (opened at ``depth - 1``):
        ``wf_dst[slot] = factor`` at every fold step ``wf_kk < steps`` (``fold_point``: the
        step's point of the fold), zeros out of range; closes the ``if`` and the loop around it.
        ``flat``: ``(pointer, index)`` of a load read at one flat address instead of ``factor``."""
        self.emit(depth, f"for (long wf_kk = 0; wf_kk < {steps}; wf_kk++) {{")
        renderer = self.renderer(depth + 1, {**env, **self.fold_env(depth + 1, fold_point)})
        code = f"{flat[0]}[{renderer.index(flat[1])}]" if flat else renderer.render(factor).code
        renderer.emit(f"wf_dst[{slot}] = {code};")
        self.emit(depth, "}")
        self.emit(depth - 1, "} else {")
        self.emit(depth, f"for (long wf_kk = 0; wf_kk < {steps}; wf_kk++) wf_dst[{slot}] = 0.0f;")
        self.emit(depth - 1, "}")
        self.emit(depth - 2, "}")

    def panel_tiles(self, depth: int, panel: str, column_panel: str, edges: bool = False) -> None:
        """Every micro-tile of one packed micro-panel of y: ``panel`` its index among the packed
        panels, ``column_panel`` the expression whose ``nr`` columns it holds (from ``wf_n0``).
        ``edges``: the last rows and the last panel's columns (``rows % mr``, ``columns % nr``,
        both known here) get micro-tiles of their own shape (``edge_shapes``), which compute
        and store only what is there, not the whole ``mr x nr`` tile through a buffer."""
        b, k_total, n = self.nest.blocking, self.nest.fold_points, self.nest.columns
        self.emit(depth, f"const float *wf_ypp = wf_yp + {panel} * {b.nr * k_total} + wf_pc * {b.nr};")
        self.emit(depth, f"const long wf_n0 = {column_panel} * {b.nr};")
        self.emit(depth, f"const long wf_ncols = wfc_minl({b.nr}, {n} - wf_n0);")
        self.emit(depth, f"for (long wf_ir = 0; wf_ir < wf_mc; wf_ir += {b.mr}) {{")
        shapes = self.edge_shapes() if edges else []
        for number, (rows, vectors) in enumerate(shapes):
            tests = ([f"wf_mc - wf_ir == {rows}"] if rows < b.mr else []) + \
                ([f"wf_ncols <= {vectors * self.nest.lanes}"] if vectors < b.nr // self.nest.lanes else [])
            self.emit(depth + 1, f"{'} else ' if number else ''}if ({' && '.join(tests)}) {{")
            self.micro_tile(depth + 2, rows, vectors)
        if shapes:
            self.emit(depth + 1, "} else {")
            self.micro_tile(depth + 2)
            self.emit(depth + 1, "}")
        else:
            self.micro_tile(depth + 1)
        self.emit(depth, "}")

    def edge_shapes(self) -> list[tuple[int, int]]:
        """(rows, vectors) of the edge micro-tiles, most specific first: the last rows
        (``rows % mr`` of them, in the last row block) times the last panel's vectors."""
        nest, b = self.nest, self.nest.blocking
        lanes, full = nest.lanes, b.nr // nest.lanes
        last_block = nest.rows - (-(-nest.rows // b.mc) - 1) * b.mc
        rows = [last_block % b.mr] if last_block % b.mr else []
        vectors = [-(-(nest.columns % b.nr) // lanes)] if nest.columns % b.nr else []
        shapes = [(r, v) for r in rows for v in vectors] + [(r, full) for r in rows] + [(b.mr, v) for v in vectors]
        return [shape for shape in shapes if shape != (b.mr, full)]

    # ------------------------------------------------------------------ the micro-tile

    def row_env(self, r: int) -> dict[str, str]:
        return {axis: f"{self.var[axis]}_{r}" for axis in self.nest.row_axes}

    def out_address(self, env: dict[str, str]) -> str:
        renderer = self.renderer(0, env)
        positions = tuple(AxisIndex(a.name) for a in self.kernel.axes)
        return renderer.address(self.out_view, positions)

    def epilogue_value(self, depth: int, r: int | str, column: str, acc: str, vector: bool) -> str:
        """The epilogue applied to one accumulator (a vector at ``column``, or one float)."""
        nest = self.nest
        if nest.epilogue is None:
            return acc
        env = {**self.batch_env(), **self.row_env(r), nest.column_axis: column}
        renderer = self.renderer(depth, env, nest.column_axis if vector else None)
        renderer.memo[renderer.memo_key(acc_at(self.kernel), vector)] = Value(acc, DType.FLOAT32, vector)
        value = renderer.render(nest.epilogue)
        return renderer.splat(value) if vector else value.code

    def tile_prologue(self, depth: int, mr: int, nr: int) -> None:
        """A micro-tile's first lines: its rows' and columns' counts (``wf_full``: the whole
        ``mr x nr``), whether this is the last fold block, and each row's output pointer
        (``wf_o{r}``, ``wf_orow``; a row past the last is the last row again)."""
        nest, out = self.nest, self.out_view.pointer
        if nest.pack_x:
            self.emit(depth, "const float *wf_xpp = wf_xp + wf_ir * wf_kc;")
        self.emit(depth, f"const long wf_nrows = wfc_minl({mr}, wf_mc - wf_ir);")
        self.emit(depth, f"const int wf_full = wf_nrows == {mr} && wf_ncols == {nr};")
        self.emit(depth, f"const int wf_last = wf_pc + wf_kc == {nest.fold_points};")
        rows = []
        for r in range(mr):
            names = self.row_env(r)
            self.decode(depth, f"wfc_minl(wf_ic + wf_ir + {r}, {nest.rows - 1})", nest.row_axes, names)
            env = {**self.batch_env(), **names, nest.column_axis: "wf_n0"}
            rows.append(f"wf_o{r}")
            self.emit(depth, f"float *wf_o{r} = (float *)&{out}[{self.out_address(env)}];")
            if not nest.pack_x:  # x read in place: its row r from the fold block's first step
                fold = self.kernel.fold_axes[0].name
                x_view = self.views[nest.x_factor.buffer]
                renderer = self.renderer(depth, {**env, fold: "wf_pc"})
                address = renderer.address(x_view, nest.x_factor.index)
                self.emit(depth, f"const float *wf_xr{r} = (const float *)&{x_view.pointer}[{address}];")
        self.emit(depth, f"float *wf_orow[{mr}] = {{{', '.join(rows)}}}; (void)wf_orow;")

    def micro_tile(self, depth: int, tile_rows: int | None = None, tile_vectors: int | None = None) -> None:
        """One micro-tile: ``tile_rows x tile_vectors`` vectors of accumulators (default the
        whole ``mr x nr``) over the packed panels, whose layout stays ``mr`` and ``nr`` wide."""
        nest, b = self.nest, self.nest.blocking
        if tile_rows in (None, b.mr) and tile_vectors in (None, b.nr // nest.lanes) and self.shared_kernel():
            self.micro_tile_call(depth)
            return
        lanes = nest.lanes
        stride_r, stride_c = b.mr, b.nr  # the packed micro-panels' widths
        mr = b.mr if tile_rows is None else tile_rows
        vectors = b.nr // lanes if tile_vectors is None else tile_vectors
        nr = vectors * lanes
        self.tile_prologue(depth, mr, nr)
        acc = [[f"wf_a{r}_{v}" for v in range(vectors)] for r in range(mr)]
        for r in range(mr):
            self.emit(depth, "wf_vf " + ", ".join(f"{a} = wfc_splat_f(0.0f)" for a in acc[r]) + ";")
        self.emit(depth, "if (wf_pc > 0) {")  # resume from the partial sums of the earlier fold blocks
        self.emit(depth + 1, "if (wf_full) {")
        for r in range(mr):
            for v in range(vectors):
                self.emit(depth + 2, f"{acc[r][v]} = wfc_load_f(wf_o{r} + {v * lanes});")
        self.emit(depth + 1, "} else {")
        self.emit(depth + 2, f"float wf_t[{mr}][{nr}] __attribute__((aligned(64))) = {{{{0}}}};")
        self.emit(depth + 2, "for (long wf_rr = 0; wf_rr < wf_nrows; wf_rr++)")
        self.emit(depth + 3, "for (long wf_cc = 0; wf_cc < wf_ncols; wf_cc++) wf_t[wf_rr][wf_cc] = wf_orow[wf_rr][wf_cc];")
        for r in range(mr):
            for v in range(vectors):
                self.emit(depth + 2, f"{acc[r][v]} = wfc_load_f(&wf_t[{r}][{v * lanes}]);")
        self.emit(depth + 1, "}")
        self.emit(depth, "}")
        self.emit(depth, "for (long wf_kk = 0; wf_kk < wf_kc; wf_kk++) {")
        inner = depth + 1
        self.emit(inner, f"const float *wf_yk = wf_ypp + wf_kk * {stride_c};")
        if nest.pack_x:
            self.emit(inner, f"const float *wf_xk = wf_xpp + wf_kk * {stride_r};")
        ys = [f"wf_y{v}" for v in range(vectors)]
        for v, y in enumerate(ys):
            self.emit(inner, f"const wf_vf {y} = wfc_load_f(wf_yk + {v * lanes});")
        for r in range(mr):
            source = f"wf_xk[{r}]" if nest.pack_x else f"wf_xr{r}[wf_kk]"
            self.emit(inner, f"const wf_vf wf_x{r} = wfc_splat_f({source});")
            for v, y in enumerate(ys):
                if nest.fma:
                    self.emit(inner, f"{acc[r][v]} = {acc[r][v]} + wf_x{r} * {y};")
                else:
                    self.emit(inner, f"{acc[r][v]} = {acc[r][v]} + {term_code(nest.term, f'wf_x{r}', y)};")
        self.emit(depth, "}")
        if nest.fma and nest.scale != 1.0:
            scale = c_literal(nest.scale, DType.FLOAT32)
            self.emit(depth, "if (wf_last) {")
            for r in range(mr):
                self.emit(depth + 1, " ".join(f"{a} = {a} * wfc_splat_f({scale});" for a in acc[r]))
            self.emit(depth, "}")
        if self.looped_epilogue():
            self.looped_stores(depth, acc, mr, nr)
            return
        self.emit(depth, "if (wf_full) {")
        if nest.epilogue is not None:
            self.emit(depth + 1, "if (wf_last) {")
            for r in range(mr):
                for v in range(vectors):
                    value = self.epilogue_value(depth + 2, r, f"wf_n0 + {v * lanes}", acc[r][v], True)
                    self.emit(depth + 2, f"{acc[r][v]} = {value};")
            self.emit(depth + 1, "}")
        if nest.stream_output:
            self.stream_stores(depth + 1, acc, mr)
        else:
            for r in range(mr):
                for v in range(vectors):
                    self.emit(depth + 1, f"wfc_store_f(wf_o{r} + {v * lanes}, {acc[r][v]});")
        self.emit(depth, "} else {")
        self.emit(depth + 1, f"float wf_t[{mr}][{nr}] __attribute__((aligned(64)));")
        for r in range(mr):
            for v in range(vectors):
                self.emit(depth + 1, f"wfc_store_f(&wf_t[{r}][{v * lanes}], {acc[r][v]});")
        for r in range(mr):
            self.emit(depth + 1, f"if ({r} < wf_nrows) {{")
            self.emit(depth + 2, "for (long wf_cc = 0; wf_cc < wf_ncols; wf_cc++) {")
            if nest.epilogue is not None:
                self.emit(depth + 3, f"float wf_s = wf_t[{r}][wf_cc];")
                self.emit(depth + 3, "if (wf_last) {")
                value = self.epilogue_value(depth + 4, r, "wf_n0 + wf_cc", "wf_s", False)
                self.emit(depth + 4, f"wf_s = {value};")
                self.emit(depth + 3, "}")
                self.emit(depth + 3, f"wf_o{r}[wf_cc] = wf_s;")
            else:
                self.emit(depth + 3, f"wf_o{r}[wf_cc] = wf_t[{r}][wf_cc];")
            self.emit(depth + 2, "}")
            self.emit(depth + 1, "}")
        self.emit(depth, "}")

    def stream_stores(self, depth: int, acc: list[list[str]], mr: int) -> None:
        """The full tile's stores (``mr`` rows), non-temporal where the rows are 64-byte aligned
        (the instruction requires it) and the target has them; plain stores otherwise."""
        lanes = self.nest.lanes
        rows = " | ".join(f"(uintptr_t)wf_o{r}" for r in range(mr))
        intrinsic, guard, vector = (("_mm512_stream_ps", "__AVX512F__", "__m512") if lanes == 16
                                    else ("_mm256_stream_ps", "__AVX__", "__m256"))
        self.emit(0, f"#if defined({guard})")
        self.emit(depth, f"if ((({rows}) & {lanes * 4 - 1}) == 0) {{")
        for r in range(mr):
            self.emit(depth + 1, " ".join(f"{intrinsic}(wf_o{r} + {v * lanes}, ({vector}){a});"
                                          for v, a in enumerate(acc[r])))
        self.emit(depth, "} else")
        self.emit(0, "#endif")
        self.emit(depth, "{")
        for r in range(mr):
            self.emit(depth + 1, " ".join(f"wfc_store_f(wf_o{r} + {v * lanes}, {a});" for v, a in enumerate(acc[r])))
        self.emit(depth, "}")

    # ------------------------------------------------------------------ the whole nest

    def packed_offset(self) -> str:
        """Where the panels of batch point ``wf_bt``, column block ``wf_jc`` start in the packed
        view (every batch point's panels, then every column panel: ``nr`` x fold floats each)."""
        nest, b = self.nest, self.nest.blocking
        per_batch = -(-nest.columns // b.nr) * b.nr * nest.fold_points
        return f"wf_bt * {per_batch}L + wf_jc * {nest.fold_points}L"

    def write_pack(self, indent: int) -> None:
        """The packing of y alone, into the packed view (run once, at bind): every batch point
        and column panel, the same values the nest would pack per call."""
        nest, b = self.nest, self.nest.blocking
        panels = -(-nest.columns // b.nr)
        per_block = b.nc // b.nr
        d = indent
        self.emit(d, f"{{ /* member {nest.name}: its y packed once ({nest.batch_points} x {panels} panels) */")
        self.emit(d + 1, "#pragma omp parallel for schedule(static)")
        self.emit(d + 1, f"for (long wf_pi = 0; wf_pi < {nest.batch_points * panels}L; wf_pi++) {{")
        d += 2
        self.emit(d, f"const long wf_bt = wf_pi / {panels}, wf_gp = wf_pi % {panels};")
        self.emit(d, f"const long wf_jc = (wf_gp / {per_block}) * {b.nc}, wf_jp = wf_gp % {per_block};")
        if nest.batch_axes:
            self.decode(d, "wf_bt", nest.batch_axes, self.batch_env())
        self.emit(d, f"float *wf_yp = {nest.packed_y.pointer} + {self.packed_offset()};")
        self.pack_y(d)
        d -= 2
        self.emit(d + 1, "}")
        self.emit(d, "}")

    def write(self, indent: int) -> None:
        nest, b = self.nest, self.nest.blocking
        if nest.y_split is not None and nest.pack_x and nest.packed_y is None:
            self.write_split(indent)
            return
        n, k_total, m = nest.columns, nest.fold_points, nest.rows
        prepacked = nest.packed_y is not None
        shared = nest.parallel and not b.parallel_batches and not prepacked  # threads share y's panel (barriers)
        groups = b.column_groups if (nest.parallel and not b.parallel_batches) else 1
        row_blocks = -(-m // b.mc)
        y_bytes = k_total * b.nc * 4
        d = indent
        self.emit(d, f"{{ /* member {nest.name}: {nest.describe()} */")
        d += 1
        if shared:
            self.emit(d, f"float *wf_yp = (float *)aligned_alloc(64, {y_bytes});")
        if nest.parallel:
            self.emit(d, "#pragma omp parallel")
        self.emit(d, "{")
        d += 1
        if not shared and not prepacked:
            self.emit(d, f"float *wf_yp = (float *)aligned_alloc(64, {y_bytes});")
        if nest.pack_x:
            x_bytes = -(-b.kc * b.mc * 4 // 64) * 64  # aligned_alloc wants a multiple of the alignment
            self.emit(d, f"float *wf_xp = (float *)aligned_alloc(64, {x_bytes});")
        if nest.parallel and b.parallel_batches:
            self.emit(d, "#pragma omp for schedule(dynamic, 1)")
        self.emit(d, f"for (long wf_bt = 0; wf_bt < {nest.batch_points}; wf_bt++) {{")
        d += 1
        if nest.batch_axes:
            self.decode(d, "wf_bt", nest.batch_axes, self.batch_env())
        self.emit(d, f"for (long wf_jc = 0; wf_jc < {n}; wf_jc += {b.nc}) {{")
        d += 1
        self.emit(d, f"const long wf_npanels = (wfc_minl({b.nc}, {n} - wf_jc) + {b.nr - 1}) / {b.nr};")
        if prepacked:
            self.emit(d, f"const float *wf_yp = {nest.packed_y.pointer} + {self.packed_offset()};")
        else:
            if shared:
                self.emit(d, "#pragma omp for schedule(static)")
            self.emit(d, "for (long wf_jp = 0; wf_jp < wf_npanels; wf_jp++) {")
            self.pack_y(d + 1)
            self.emit(d, "}")
        if nest.parallel and not b.parallel_batches:
            self.emit(d, "#pragma omp for schedule(dynamic, 1)")
        self.emit(d, f"for (long wf_it = 0; wf_it < {row_blocks * groups}; wf_it++) {{")
        d += 1
        self.emit(d, f"const long wf_ic = (wf_it / {groups}) * {b.mc};")
        self.emit(d, f"const long wf_jg = wf_it % {groups};")
        self.emit(d, f"const long wf_mc = wfc_minl({b.mc}, {m} - wf_ic);")
        self.emit(d, f"const long wf_per = (wf_npanels + {groups - 1}) / {groups};")
        self.emit(d, "const long wf_jp_end = wfc_minl(wf_npanels, (wf_jg + 1) * wf_per);")
        self.emit(d, f"for (long wf_pc = 0; wf_pc < {k_total}; wf_pc += {b.kc}) {{")
        d += 1
        self.emit(d, f"const long wf_kc = wfc_minl({b.kc}, {k_total} - wf_pc);")
        if nest.pack_x:
            self.pack_x(d)
        self.emit(d, "for (long wf_jp = wf_jg * wf_per; wf_jp < wf_jp_end; wf_jp++) {")
        self.panel_tiles(d + 1, "wf_jp", "wf_jc + wf_jp")
        self.emit(d, "}")
        for _ in range(4):  # fold blocks, row blocks, column panels, batch points
            d -= 1
            self.emit(d, "}")
        if nest.stream_output:  # this thread's non-temporal stores reach memory before the barrier
            guard = "__AVX512F__" if nest.lanes == 16 else "__AVX__"
            self.emit(0, f"#if defined({guard})")
            self.emit(d, "_mm_sfence();")
            self.emit(0, "#endif")
        if nest.pack_x:
            self.emit(d, "free(wf_xp);")
        if not shared and not prepacked:
            self.emit(d, "free(wf_yp);")
        d -= 1
        self.emit(d, "}")
        if shared:
            self.emit(d, "free(wf_yp);")
        d -= 1
        self.emit(d, "}")


def render_contraction(nest: ContractionNest, lines: list[str], indent: int, counter: Counter) -> None:
    """Append the C of one contraction microkernel nest to ``lines``."""
    _ContractionWriter(nest, lines, counter).write(indent)


def pack_signature(function: LoweredFunction) -> str:
    """The declarator of ``wf_pack_<name>`` (hidden, like the function it packs for:
    ``weft.codegen.units.HIDDEN``)."""
    packed = {n.packed_y.pointer for n in function.nests if isinstance(n, ContractionNest) and n.packed_y}
    params = c_parameters(function, lambda view: view.pointer in packed)
    return f"{HIDDEN} int wf_pack_{function.name}({', '.join(params)})"


def render_pack_function(function: LoweredFunction) -> str:
    """``wf_pack_<name>``: the same parameters as ``function``, packing the y of each of its
    nests that reads a packed view (``weft.lower.contraction_prepack``), nothing else."""
    lines = [f"{pack_signature(function)} {{"]
    lines += [f"    (void){view.pointer};" for view in function.params]
    counter = Counter()
    for nest in function.nests:
        if isinstance(nest, ContractionNest) and nest.packed_y is not None:
            _ContractionWriter(nest, lines, counter).write_pack(1)
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)
