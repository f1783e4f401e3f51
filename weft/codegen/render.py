"""Render lowered functions (``weft.lower.nest``) as C.

A member nest becomes one OpenMP work-item loop; each work item covers a block of
``block_vectors * lanes`` points of the vector axis (full vectors, then single
vectors, then scalar columns for the remainder) and, if the nest has a block
axis, walks it ``block_rows`` rows at a time. Folds run innermost, ascending,
one accumulator per output point (per lane), exactly the oracle's order::

    for (long wf_w = 0; wf_w < wf_items; wf_w++) {      /* parallel */
      ... decode outer axes and the vector block ...
      float acc1 = 0.0f, ...;   for (long a_k = 0; a_k < K; a_k++) { acc1 = acc1 + t; ... }
      store acc1 ...
    }
"""

from __future__ import annotations

from weft.codegen.body import (
    SCALAR_TYPE,
    SUFFIX,
    VECTOR_TYPE,
    BodyRenderer,
    Counter,
    c_literal,
)
from weft.codegen.fold_lanes import fold_lanes_by_index, orders_by_index, span_loop
from weft.codegen.values import c_value
from weft.ir import Combiner, Const, DType, expr_axes, expr_children
from weft.lower.access import row_major_strides
from weft.lower.fold_stream import peeled_stream
from weft.lower.nest import GemmCall, MemberNest
from weft.lower.values import Sum, renamed

_IDENTITY_INT = {
    (Combiner.SUM, DType.INT32): "0", (Combiner.MAX, DType.INT32): "INT32_MIN",
    (Combiner.MIN, DType.INT32): "INT32_MAX", (Combiner.SUM, DType.INT64): "INT64_C(0)",
    (Combiner.MAX, DType.INT64): "INT64_MIN", (Combiner.MIN, DType.INT64): "INT64_MAX",
}


def fold_identity(combiner: Combiner, dtype: DType) -> str:
    if dtype is DType.FLOAT32:
        return c_literal({Combiner.SUM: 0.0, Combiner.MAX: float("-inf"), Combiner.MIN: float("inf")}[combiner], dtype)
    return _IDENTITY_INT[(combiner, dtype)]


def combine(combiner: Combiner, dtype: DType, vector: bool, acc: str, term: str) -> str:
    if combiner is Combiner.SUM:
        return f"{acc} + {term}"
    kind = combiner.value
    return f"wfc_{kind}_{SUFFIX[dtype]}({acc}, {term})" if vector else f"wfc_s{kind}_{SUFFIX[dtype]}({acc}, {term})"


def lane_tree(lanes: int) -> list[str]:
    """C shuffles (``{v}`` the vector) that pair each lane with the one half a group away, for
    groups of ``lanes``, ``lanes / 2``, ... 2: combining each into ``v`` leaves lane 0 holding
    all lanes combined."""
    steps, width = [], lanes
    while width > 1:
        half = width // 2
        order = ", ".join(str((i % width + half) % width + i // width * width) for i in range(lanes))
        steps.append(f"WFC_SHUFFLE2({{v}}, {{v}}, {order})")
        width = half
    return steps


def stage_floats(nest: MemberNest) -> int:
    """Floats of one staged copy: the fold and a line of shift, whole lines."""
    return -(-(nest.kernel.fold_axes[-1].extent + nest.lanes) // 16) * 16


class NestWriter:
    def __init__(self, nest: MemberNest, lines: list[str], counter: Counter,
                 stages: dict | None = None) -> None:
        """``stages``: staged load -> the buffer its function allocated per thread around its
        tile loop (a serial nest inside one: staged once per thread, not once per tile)."""
        self.nest = nest
        self.kernel = nest.kernel
        self.lines = lines
        self.counter = counter
        self.views = {view.buffer: view for view in nest.views}
        self.extents = {a.name: a.extent for a in self.kernel.all_axes}
        self.out_view = self.views[self.kernel.output]
        self.dtype = self.out_view.dtype
        self.var = {a.name: f"a_{self.counter.fresh('x')}_{_clean(a.name)}" for a in self.kernel.all_axes}
        span = nest.block_vectors * nest.lanes
        fold_axes = tuple((a.name, a.extent) for a in self.kernel.fold_axes)
        self.hoisted: dict = {}
        self.panels = {
            load: (self.counter.fresh("wf_panel"), fold_axes, span, nest.vector_axis) for load in nest.packed
        }
        self.panel_floats = span
        # fold lanes: staged load -> its per-thread buffer (weft.lower.fold_stream)
        self.own_stages = stages is None
        self.stages = {load: self.counter.fresh("wf_stage") for load in nest.staged} if stages is None else stages
        for axis in self.kernel.fold_axes:
            self.panel_floats *= axis.extent

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def prefetch(self, indent: int, axis: str, position: str) -> None:
        """The nest's prefetches riding on the whole vector at ``position`` of ``axis``
        (``weft.lower.row_prefetch``): one per line of each stream they cover."""
        for prefetch in self.nest.prefetch:
            if prefetch.axis != axis:
                continue
            start, locality = prefetch.start, 3  # 3: into L1, 2: into L2
            if prefetch.row_axis is not None:
                start, locality = renamed(start, {prefetch.row_axis: self.var[prefetch.row_axis]}), 2
            for part in range(0, prefetch.elements, prefetch.extent):
                offset = f" + {part}" if part else ""
                self.emit(indent, f"__builtin_prefetch(&{prefetch.pointer}[{c_value(start)} + ({position}){offset}],"
                                  f" 0, {locality});")

    def renderer(self, depth: int, packed: bool = True) -> BodyRenderer:
        """A body renderer for one C scope; reads of packed loads go to their panels."""
        renderer = BodyRenderer(self.views, self.extents, self.nest.lanes, self.lines, "    " * depth,
                                self.counter, {}, None, self.nest.reciprocal_divisors)
        if packed:
            renderer.packed = dict(self.panels)
        renderer.memo = dict(self.hoisted)
        renderer.line_loads = not self.nest.l1_reads
        return renderer

    def hoist(self, depth: int, points) -> None:
        """Render the body's fold-invariant parts (a causal mask, a row's scale) once per
        point before the fold loops; the loop renderers start from these values."""
        fold = {axis.name for axis in self.kernel.fold_axes}
        invariant: list = []

        def collect(node) -> None:
            if not isinstance(node, Const) and not (expr_axes(node) & fold):
                invariant.append(node)
                return
            for child in expr_children(node):
                collect(child)

        collect(self.kernel.body)
        if not invariant:
            return
        renderer = self.renderer(depth)
        for row, column, vector in points:
            renderer.env = self.point_env(row, column)
            renderer.vector_axis = self.nest.vector_axis if vector else None
            for node in invariant:
                renderer.render(node)
        self.hoisted = renderer.memo

    def pack_panels(self, depth: int) -> None:
        """Fill each panel for the current vector block: every fold point x the block's lanes."""
        nest, lanes = self.nest, self.nest.lanes
        span = nest.block_vectors * lanes
        for load, (pointer, fold_axes, _span, lane_axis) in self.panels.items():
            self.emit(depth, "{")
            inner = depth + 1
            for name, extent in fold_axes:
                self.emit(inner, f"for (long {self.var[name]} = 0; {self.var[name]} < {extent}; {self.var[name]}++) {{")
                inner += 1
            flat = ""
            for name, extent in fold_axes:
                flat = f"({flat}) * {extent} + {self.var[name]}" if flat else self.var[name]
            self.emit(inner, f"float *wf_row = {pointer} + ({flat}) * {span};")
            self.emit(inner, f"if (wf_vn == {span}) {{")
            renderer = self.renderer(inner + 1, packed=False)
            renderer.vector_axis = lane_axis
            for c in range(nest.block_vectors):
                renderer.env = self.point_env(0, f"wf_v0 + {c * lanes}")
                value = renderer.render(load)
                renderer.emit(f"wfc_store_f(wf_row + {c * lanes}, {value.code});")
            self.emit(inner, "} else {")
            self.emit(inner + 1, "for (long wf_pc = 0; wf_pc < wf_vn; wf_pc++) {")
            renderer = self.renderer(inner + 2, packed=False)
            renderer.env = self.point_env(0, "wf_v0 + wf_pc")
            value = renderer.render(load)
            renderer.emit(f"wf_row[wf_pc] = {value.code};")
            self.emit(inner + 1, "}")
            self.emit(inner, "}")
            for _ in fold_axes:
                inner -= 1
                self.emit(inner, "}")
            self.emit(depth, "}")

    def write(self, indent: int) -> None:
        nest, lanes = self.nest, self.nest.lanes
        span = nest.block_vectors * lanes
        self.emit(indent, f"{{ /* member {self.kernel.output} */")
        inner = indent + 1
        counts = []
        for axis in nest.outer_axes:
            r = nest.axis_range(axis)
            self.emit(inner, f"const long n_{self.var[axis]} = ({c_value(r.stop)}) - ({c_value(r.start)});")
            counts.append(f"n_{self.var[axis]}")
        if nest.vector_axis is not None:
            r = nest.axis_range(nest.vector_axis)
            self.emit(inner, f"const long wf_nvb = (({c_value(r.stop)}) - ({c_value(r.start)}) + {span - 1}) / {span};")
            per_item = str(nest.blocks_per_item) if nest.blocks_per_item > 0 else "wf_nvb"
            self.emit(inner, f"const long wf_bpi = {per_item};")
            self.emit(inner, "const long wf_ngroups = (wf_nvb + wf_bpi - 1) / wf_bpi;")
            counts.append("wf_ngroups")
        self.emit(inner, f"const long wf_items = {' * '.join(counts) if counts else '1'};")
        own = self.panels or (self.stages and self.own_stages)
        if own:
            # panels are allocated once per thread, not per item: a fresh mmap'd panel per
            # item cost page faults, and its munmap a TLB shootdown of the other threads
            if nest.parallel:
                self.emit(inner, "#pragma omp parallel")
            self.emit(inner, "{")
            inner += 1
            for pointer, *_ in self.panels.values():
                self.emit(inner, f"float *{pointer} = (float *)aligned_alloc(64, {self.panel_floats * 4});")
            if self.own_stages:
                write_stage_buffers(self.lines, inner, nest, self.stages.values())
            if nest.parallel and not self.panels:
                self.emit(inner, "#pragma omp for schedule(guided)")
            elif nest.parallel:
                # few, long items (a 64-wide column block each: 16 at 1024^3): guided hands
                # the first thread half of them at once, so a thread sharing its core with
                # another process would hold the whole nest back; one at a time instead
                self.emit(inner, "#pragma omp for schedule(dynamic, 1)")
        elif nest.parallel:
            self.emit(inner, "#pragma omp parallel for schedule(guided)")
        self.emit(inner, "for (long wf_w = 0; wf_w < wf_items; wf_w++) {")
        body = inner + 1
        self.emit(body, "long wf_rem = wf_w; (void)wf_rem;")
        if nest.vector_axis is not None:
            self.emit(body, "const long wf_group = wf_rem % wf_ngroups; wf_rem /= wf_ngroups;")
        # an axis of one point is its start; the outermost of the others takes what is left of
        # the item (wf_rem < its count there): decode's score nest over one head's 64 keys
        # (counts 1 x 1 x a block computed at run time) had paid a 64-bit division per score
        spread = [axis for axis in nest.outer_axes if _known_points(nest.axis_range(axis)) != 1]
        for axis in reversed(nest.outer_axes):
            r = nest.axis_range(axis)
            v = self.var[axis]
            if axis not in spread:
                self.emit(body, f"const long {v} = ({c_value(r.start)});")
            elif axis == spread[0]:
                self.emit(body, f"const long {v} = ({c_value(r.start)}) + wf_rem;")
            else:
                self.emit(body, f"const long {v} = ({c_value(r.start)}) + wf_rem % n_{v}; wf_rem /= n_{v};")
        if nest.fold_chunk:  # inside the work item: no barrier between chunks
            extent = self.kernel.fold_axes[0].extent
            self.emit(body, f"for (long wf_kc = 0; wf_kc < {extent}; wf_kc += {nest.fold_chunk}) {{")
            body += 1
        if nest.vector_axis is not None:
            r = nest.axis_range(nest.vector_axis)
            self.emit(body, "const long wf_vb_end = wfc_minl(wf_nvb, (wf_group + 1) * wf_bpi);")
            self.emit(body, "for (long wf_vb = wf_group * wf_bpi; wf_vb < wf_vb_end; wf_vb++) {")
            body += 1
            self.emit(body, f"const long wf_v0 = ({c_value(r.start)}) + wf_vb * {span};")
            self.emit(body, f"const long wf_vn = wfc_minl({span}, ({c_value(r.stop)}) - wf_v0);")
            if self.panels:
                self.pack_panels(body)
        if nest.block_axis is not None:
            r = nest.axis_range(nest.block_axis)
            u, rows = self.var[nest.block_axis], nest.block_rows
            self.emit(body, f"long {u} = ({c_value(r.start)});")
            self.emit(body, f"for (; {u} + {rows} <= ({c_value(r.stop)}); {u} += {rows}) {{")
            self.tile(body + 1, rows)
            self.emit(body, "}")
            extent = _static_extent(r)
            if extent is None or extent % rows:
                self.emit(body, f"for (; {u} < ({c_value(r.stop)}); {u}++) {{")
                self.tile(body + 1, 1)
                self.emit(body, "}")
        else:
            self.tile(body, 1)
        if nest.vector_axis is not None:
            body -= 1
            self.emit(body, "}")
        if nest.fold_chunk:
            body -= 1
            self.emit(body, "}")
        self.emit(inner, "}")
        if own:
            owned = self.stages.values() if self.own_stages else ()
            for pointer in (*(panel[0] for panel in self.panels.values()), *owned):
                self.emit(inner, f"free({pointer});")
            inner -= 1
            self.emit(inner, "}")
        self.emit(indent, "}")

    def tile(self, indent: int, rows: int) -> None:
        nest, lanes = self.nest, self.nest.lanes
        if nest.vector_axis is None:
            self.block(indent, rows, [(None, False)])
            return
        span = nest.block_vectors * lanes
        full = [(f"wf_v0 + {c * lanes}", True) for c in range(nest.block_vectors)]
        extent = _static_extent(nest.axis_range(nest.vector_axis))
        if extent is not None and extent % span == 0:  # every block is full: no remainder code
            self.block(indent, rows, full)
            return
        self.emit(indent, f"if (wf_vn == {span}) {{")
        self.block(indent + 1, rows, full)
        self.emit(indent, "} else {")
        self.emit(indent + 1, "long wf_c = 0;")
        self.emit(indent + 1, f"for (; wf_c + {lanes} <= wf_vn; wf_c += {lanes}) {{")
        self.block(indent + 2, rows, [("wf_v0 + wf_c", True)])
        self.emit(indent + 1, "}")
        self.emit(indent + 1, "for (; wf_c < wf_vn; wf_c++) {")
        self.block(indent + 2, rows, [("wf_v0 + wf_c", False)])
        self.emit(indent + 1, "}")
        self.emit(indent, "}")

    def point_env(self, row: int, column: str | None) -> dict[str, str]:
        env = {axis: self.var[axis] for axis in self.nest.outer_axes}
        for axis in self.kernel.fold_axes:
            env[axis.name] = self.var[axis.name]
        if self.nest.block_axis is not None:
            u = self.var[self.nest.block_axis]
            env[self.nest.block_axis] = f"{u} + {row}" if row else u
        if self.nest.vector_axis is not None:
            env[self.nest.vector_axis] = column
        return env

    def block(self, indent: int, rows: int, columns: list[tuple[str | None, bool]]) -> None:
        kernel = self.kernel
        points = [(row, column, vector) for row in range(rows) for column, vector in columns]
        self.emit(indent, "{")
        inner = indent + 1
        renderer = self.renderer(inner + 1)
        if kernel.fold is None:
            renderer.indent = "    " * inner
            for row, column, vector in points:
                renderer.env = self.point_env(row, column)
                renderer.vector_axis = self.nest.vector_axis if vector else None
                value = renderer.render(kernel.body)
                self.store(inner, renderer, row, column, vector, value.code if value.vector or not vector
                           else renderer.splat(value))
                if vector:
                    self.prefetch(inner, self.nest.vector_axis, column)
            self.emit(indent, "}")
            return
        self.fold_block(indent, points)

    def fold_block(self, indent: int, points: list[tuple[int, str | None, bool]]) -> None:
        """Accumulators, the fold loops (innermost one plain, tiled-transposed or fold-laned), stores."""
        kernel, nest = self.kernel, self.nest
        inner = indent + 1
        combiner = kernel.fold.combiner
        identity = fold_identity(combiner, self.dtype)
        accumulators = []
        for row, column, vector in points:
            name = self.counter.fresh("acc")
            if vector:
                self.emit(inner, f"{VECTOR_TYPE[self.dtype]} {name} = wfc_splat_{SUFFIX[self.dtype]}({identity});")
            else:
                self.emit(inner, f"{SCALAR_TYPE[self.dtype]} {name} = {identity};")
            if nest.fold_chunk:  # resume from the partial result the previous chunk stored
                address = self.output_address(row, column)
                value = (f"wfc_load_{SUFFIX[self.dtype]}(&{self.out_view.pointer}[{address}])" if vector
                         else f"{self.out_view.pointer}[{address}]")
                self.emit(inner, f"if (wf_kc > 0) {name} = {value};")
            accumulators.append(name)
        lane_accumulators = []
        if nest.fold_lanes:
            for _ in range(nest.fold_accumulators):
                name = self.counter.fresh("vacc")
                self.emit(inner, f"{VECTOR_TYPE[self.dtype]} {name} = wfc_splat_{SUFFIX[self.dtype]}({identity});")
                lane_accumulators.append(name)
        self.hoist(inner, points)
        depth = inner
        for axis in kernel.fold_axes[:-1]:
            variable = self.var[axis.name]
            self.emit(depth, f"for (long {variable} = 0; {variable} < {axis.extent}; {variable}++) {{")
            depth += 1
        last = kernel.fold_axes[-1]
        variable, lanes = self.var[last.name], nest.lanes
        scalar_tail = True
        if nest.fold_lanes:
            self.emit(depth, f"long {variable} = 0;")
            peel = (self.fold_lane_peel(points[0], last.name)
                    if orders_by_index(self.dtype, len(kernel.fold_axes)) else None)
            if peel is not None:
                # Inference: the vector loops start where the widest stream's loads start on a
                # 64-byte line (NumPy's large arrays sit 16 bytes in: every vector load split two
                # lines), the fold's split into lanes still by index (weft.codegen.fold_lanes)
                fold_lanes_by_index(self, depth, points[0], last.name, last.extent, lane_accumulators, peel,
                                    identity)
                scalar_tail = False
            else:
                span_loop(self, depth, points[0], last.name, last.extent, lane_accumulators)
                self.emit(depth, f"for (; {variable} + {lanes} <= {last.extent}; {variable} += {lanes}) {{")
                self.fold_terms(depth + 1, [(points[0], lane_accumulators[0], {})], last.name)
                self.emit(depth, "}")
                self.emit(depth, f"for (; {variable} < {last.extent}; {variable}++) {{")
        elif nest.transpose_fold and all(vector for _, _, vector in points):
            self.emit(depth, f"long {variable} = 0;")
            peel = self.alignment_peel(points[0], last.name)
            if peel is not None:
                # step to the first fold point whose tile rows start on a 64-byte line, so no
                # tile load is split across two lines (NumPy's large arrays sit 16 bytes in)
                # (one split tile at 0 whose first steps are taken, in order: cheaper than gathers)
                self.emit(depth, f"const long {variable}_peel = {peel};")
                self.emit(depth, f"if ({variable}_peel > 0) {{")
                self.transposed_terms(depth + 1, points, accumulators, last.name, limit=f"{variable}_peel")
                self.emit(depth + 1, f"{variable} = {variable}_peel;")
                self.emit(depth, "}")
            self.emit(depth, f"for (; {variable} + {lanes} <= {last.extent}; {variable} += {lanes}) {{")
            self.transposed_terms(depth + 1, points, accumulators, last.name)
            self.emit(depth, "}")
            self.emit(depth, f"for (; {variable} < {last.extent}; {variable}++) {{")
        elif nest.fold_chunk:
            self.emit(depth, f"for (long {variable} = wf_kc; {variable} < wfc_minl(wf_kc + {nest.fold_chunk}, "
                             f"{last.extent}); {variable}++) {{")
        else:
            self.emit(depth, f"for (long {variable} = 0; {variable} < {last.extent}; {variable}++) {{")
        if scalar_tail:
            self.fold_terms(depth + 1, [(point, acc, {}) for point, acc in zip(points, accumulators, strict=False)],
                            None)
            self.emit(depth, "}")
        for _ in kernel.fold_axes[:-1]:
            depth -= 1
            self.emit(depth, "}")
        if lane_accumulators:
            first, rest = lane_accumulators[0], lane_accumulators[1:]
            for other in rest:
                self.emit(inner, f"{first} = {self.lane_combine(combiner, first, other)};")
            acc = accumulators[0]
            if self.dtype is DType.FLOAT32:
                # Inference (fold lanes are): the lanes combine as a tree of halves, log2(lanes)
                # steps on the row's critical path instead of a chain of one scalar step per lane
                for step in lane_tree(lanes):
                    self.emit(inner, f"{first} = {self.lane_combine(combiner, first, step.format(v=first))};")
                self.emit(inner, f"{acc} = {combine(combiner, self.dtype, False, acc, f'{first}[0]')};")
            else:
                lane = self.counter.fresh("l")
                self.emit(inner, f"for (int {lane} = 0; {lane} < {lanes}; {lane}++) "
                                 f"{acc} = {combine(combiner, self.dtype, False, acc, f'{first}[{lane}]')};")
        self.hoisted = {}
        renderer = BodyRenderer(self.views, self.extents, lanes, self.lines, "    " * inner, self.counter, {}, None)
        for (row, column, vector), acc in zip(points, accumulators, strict=False):
            renderer.env = self.point_env(row, column)
            self.store(inner, renderer, row, column, vector, acc)
        self.emit(indent, "}")

    def lane_combine(self, combiner: Combiner, acc: str, term: str) -> str:
        """One vector step of a fold-laned accumulator: a ``plain_max`` nest's max by
        compare-select, its steps and its lanes' tree alike (``weft.lower.row_max``)."""
        if self.nest.plain_max and combiner is Combiner.MAX:
            return f"wfc_pmax_f({acc}, {term})"
        return combine(combiner, self.dtype, True, acc, term)

    def fold_terms(self, depth: int, items, lane_axis: str | None, first: str | None = None,
                   aligned: frozenset = frozenset(), span: tuple[str, str] | None = None) -> None:
        """``acc = combine(acc, body)`` for each (point, accumulator, env override), in order.

        With ``lane_axis`` (fold lanes) the body is vectorised along that fold axis. ``first``:
        the step is the first of its accumulator, which holds this identity (not read back).
        ``aligned``: loads whose vectors start on a 64-byte line here; ``span``: (first lane,
        lane count), only those lanes read and combined, the others keep the accumulator's."""
        renderer = self.renderer(depth)
        if lane_axis is not None and (aligned or span is not None):  # the peeled form's vector steps
            renderer.staged = {load: (pointer, f"{pointer}_off") for load, pointer in self.stages.items()}
            renderer.aligned, renderer.span = aligned | frozenset(self.stages), span
        combiner = self.kernel.fold.combiner
        for (row, column, vector), acc, override in items:
            renderer.env = {**self.point_env(row, column), **override}
            renderer.vector_axis = lane_axis if lane_axis else (self.nest.vector_axis if vector else None)
            lanes_here = vector or lane_axis is not None
            value = renderer.render(self.kernel.body)
            term = renderer.splat(value) if lanes_here else value.code
            if lane_axis is not None:
                combined = self.lane_combine(combiner, first or acc, term)
            else:
                combined = combine(combiner, self.dtype, lanes_here, first or acc, term)
            if span is not None:
                combined = f"wfc_span_sel_{SUFFIX[self.dtype]}({span[0]}, {span[1]}, {combined}, {acc})"
            self.emit(depth, f"{acc} = {combined};")
            if lane_axis is not None and span is None and first is None:
                self.prefetch(depth, lane_axis, renderer.env[lane_axis])

    def fold_lane_peel(self, point, fold_axis: str) -> tuple[str, object] | None:
        """(C expression for the scalar fold steps 0 .. lanes-1 before the stream reaches a
        64-byte line, the stream's load), the stream from ``weft.lower.fold_stream``; None
        when there is none (fold lanes: Inference only, whose order is free)."""
        stream = peeled_stream(self.kernel, self.views, self.nest.lanes, exclude=self.panels)
        if stream is None:
            return None
        row, column, _vector = point
        renderer = self.renderer(0, packed=False)
        renderer.env = {**self.point_env(row, column), fold_axis: "0"}
        view = self.views[stream.buffer]
        address = f"(uintptr_t)(&{view.pointer}[{renderer.address(view, stream.index)}])"
        # the widest stream only: the other operand (x, in L1) is staged to meet it
        return f"(long)(((uintptr_t)0 - {address}) / 4 % {self.nest.lanes})", stream

    def alignment_peel(self, point, fold_axis: str) -> str | None:
        """A C expression for the fold steps (0 .. lanes-1) before the tile rows of the first
        transposed load start on a 64-byte line; None when the rows' alignments differ
        (their stride is not a multiple of 64 bytes) or the tile is not unit-stride along
        the fold. Any peel keeps the fold ascending: it only moves where tiles begin."""
        from weft.ir import expr_loads
        from weft.lower.access import address_step, transposable

        lanes, lane_axis = self.nest.lanes, self.nest.vector_axis
        for load in dict.fromkeys(expr_loads(self.kernel.body)):
            view = self.views[load.buffer]
            if view.dtype is not DType.FLOAT32 or not transposable(load, view.strides, lane_axis, fold_axis):
                continue
            row_step = address_step(load, view.strides, lane_axis)
            if address_step(load, view.strides, fold_axis) != 1 or row_step is None or (row_step * 4) % 64:
                return None
            row, column, _vector = point
            renderer = self.renderer(0, packed=False)
            renderer.env = {**self.point_env(row, column), fold_axis: "0"}
            address = f"&{view.pointer}[{renderer.address(view, load.index)}]"
            return f"(long)(((uintptr_t)0 - (uintptr_t)({address})) / 4 % {lanes})"
        return None

    def transposed_terms(self, depth: int, points, accumulators: list[str], fold_axis: str,
                         limit: str | None = None) -> None:
        """One tile of ``lanes`` fold steps: strided loads read as rows of a tile, transposed,
        then the fold steps in ascending order (each lane keeps the oracle's order). With
        ``limit`` (a C expression below ``lanes``) only the tile's first ``limit`` steps."""
        from weft.codegen.body import Value
        from weft.ir import expr_loads
        from weft.lower.access import transposable

        lanes, lane_axis = self.nest.lanes, self.nest.vector_axis
        variable = self.var[fold_axis]
        renderer = self.renderer(depth)
        loads = [
            load for load in dict.fromkeys(expr_loads(self.kernel.body))
            if self.views[load.buffer].dtype is DType.FLOAT32
            and transposable(load, self.views[load.buffer].strides, lane_axis, fold_axis)
        ]
        for row, column, _vector in points:
            base = self.point_env(row, column)
            for load in loads:
                renderer.env = {**base, fold_axis: f"{variable} + 0"}
                if renderer.memo_key(load, True) in renderer.memo:
                    continue
                tile = self.counter.fresh("tile")
                view = self.views[load.buffer]
                self.emit(depth, f"wf_vf {tile}[{lanes}];")
                for r in range(lanes):
                    renderer.env = {**base, lane_axis: f"{column} + {r}", fold_axis: variable}
                    self.emit(depth, f"{tile}[{r}] = wfc_load_f(&{view.pointer}[{renderer.address(view, load.index)}]);")
                self.emit(depth, f"wfc_transpose_f({tile});")
                for t in range(lanes):
                    renderer.env = {**base, fold_axis: f"{variable} + {t}"}
                    renderer.memo[renderer.memo_key(load, True)] = Value(f"{tile}[{t}]", DType.FLOAT32, True)
        renderer.vector_axis = lane_axis
        combiner = self.kernel.fold.combiner
        for t in range(lanes):
            step = depth
            if limit is not None:
                self.emit(depth, f"if ({t} < {limit}) {{")
                step = depth + 1
            for (row, column, _vector), acc in zip(points, accumulators, strict=False):
                renderer.env = {**self.point_env(row, column), fold_axis: f"{variable} + {t}"}
                renderer.indent = "    " * step
                value = renderer.render(self.kernel.body)
                self.emit(step, f"{acc} = {combine(combiner, self.dtype, True, acc, renderer.splat(value))};")
            if limit is not None:
                self.emit(depth, "}")

    def output_address(self, row: int, column) -> str:
        env = self.point_env(row, column)
        renderer = BodyRenderer(self.views, self.extents, self.nest.lanes, [], "", self.counter, env, None)
        return renderer.address(self.out_view, tuple(f"({env[a.name]})" for a in self.kernel.axes))

    def store(self, indent: int, renderer: BodyRenderer, row: int, column, vector: bool, value: str) -> None:
        view = self.out_view
        env = self.point_env(row, column)
        positions = tuple(f"({env[a.name]})" for a in self.kernel.axes)
        pointer = view.pointer
        if not vector:
            cast = "(uint8_t)" if self.dtype is DType.BOOL else ""
            self.emit(indent, f"{pointer}[{renderer.address(view, positions)}] = {cast}{value};")
            return
        v = self.nest.vector_axis
        position = [a.name for a in self.kernel.axes].index(v)
        if view.strides[position] == 1 and self.dtype is not DType.BOOL:
            self.emit(indent, f"wfc_store_{SUFFIX[self.dtype]}(&{pointer}[{renderer.address(view, positions)}], {value});")
            return
        lane = self.counter.fresh("l")
        lane_positions = tuple(
            f"({env[a.name]} + {lane})" if a.name == v else p for a, p in zip(self.kernel.axes, positions, strict=False)
        )
        element = f"({value}[{lane}] & 1)" if self.dtype is DType.BOOL else f"{value}[{lane}]"
        cast = "(uint8_t)" if self.dtype is DType.BOOL else ""
        self.emit(indent, f"for (int {lane} = 0; {lane} < {self.nest.lanes}; {lane}++) "
                          f"{pointer}[{renderer.address(view, lane_positions)}] = {cast}{element};")


def write_stage_buffers(lines: list[str], indent: int, nest: MemberNest, pointers) -> None:
    """Declare one thread's staged copies (weft.lower.fold_stream): filled at its first row."""
    for pointer in pointers:
        lines.append(f"{'    ' * indent}float *{pointer} = (float *)aligned_alloc(64, {stage_floats(nest) * 4});")
        lines.append(f"{'    ' * indent}long {pointer}_key = -1;")


def _static_extent(axis_range) -> int | None:
    """The number of points of a range whose bounds are integers, else None."""
    if isinstance(axis_range.start, int) and isinstance(axis_range.stop, int):
        return axis_range.stop - axis_range.start
    return None


def _known_points(axis_range) -> int | None:
    """Points of a range known before it runs: integer bounds, or a stop ``k`` past its start
    (a tile's ``wf_tile .. wf_tile + 1``); None otherwise."""
    start, stop = axis_range.start, axis_range.stop
    if isinstance(start, int) and isinstance(stop, int):
        return stop - start
    if isinstance(stop, Sum):
        if stop.left == start and isinstance(stop.right, int):
            return stop.right
        if stop.right == start and isinstance(stop.left, int):
            return stop.left
    return None


def _clean(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)


def render_gemm(call: GemmCall, lines: list[str], indent: int) -> None:
    """A BLAS sgemm call: row-major C = A @ B as column-major C^T = B^T A^T."""
    pad = "    " * indent
    sa, sb, sc = call.batch_strides
    lines += [
        f"{pad}{{ /* member {call.kernel.output}: BLAS sgemm */",
        f"{pad}    char ta = '{'T' if call.trans_b else 'N'}', tb = '{'T' if call.trans_a else 'N'}';",
        f"{pad}    int m = {call.n}, n = {call.m}, k = {call.k}, lda = {call.ldb}, ldb = {call.lda}, ldc = {call.ldc};",
        f"{pad}    float alpha = 1.0f, beta = 0.0f;",
        f"{pad}    for (long b = 0; b < {call.batch}; b++)",
        f"{pad}        ((wfc_sgemm_fn)wf_sgemm)(&ta, &tb, &m, &n, &k, &alpha, (float *){call.b.pointer} + b * {sb},"
        f" &lda, (float *){call.a.pointer} + b * {sa}, &ldb, &beta, {call.c.pointer} + b * {sc}, &ldc);",
        f"{pad}}}",
    ]


def check_row_major(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    return row_major_strides(shape) == strides
