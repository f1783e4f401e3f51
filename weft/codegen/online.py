"""C for the rescaled one pass (``weft.lower.online.OnlinePass``, Inference only).

The lowering describes the pass as data (the reference fold and its dependents, the
tile's rows as loop values, the streamed members' nests, block size, lanes); this
writer emits it, per tile::

    ref[r] = -inf; acc_l[r] = 0; acc_o[r][e] = 0            /* per row of the tile */
    for jb in blocks of the pass axis:
        streamed members' nests for this block              /* NestWriter */
        for each row r: block max, one rescale if it moved, then every dependent folds
        (a group of rows at a time for a dependent with one extra axis: each V row loaded once)
    m[r] = ref[r]; l[r] = acc_l[r]; o[r,e] = acc_o[r][e] / l[r]

Each accumulator folds in ascending pass order (see ``weft.lower.online`` for the why
of each form).
"""

from __future__ import annotations

import re

from weft.codegen.body import SCALAR_TYPE, BodyRenderer, Counter, Value, scalar_unary
from weft.codegen.online_scores import write_block, write_row_packing
from weft.codegen.online_tile import vector_max, write_tile_block
from weft.codegen.render import NestWriter, combine, fold_identity, lane_tree
from weft.codegen.values import c_value
from weft.ir import AxisIndex, Combiner, Expr, Kernel, UnaryOp, expr_axes, expr_children
from weft.ir.substitute import substitute_axes
from weft.lower.nest import BufferView
from weft.lower.online import OnlinePass, PassDependent

REFERENCE_CHAINS = 4
"""Vector accumulators of the block's reference fold (the row max): independent chains."""


def row_flat(rows, counts) -> str:
    """The flat index of the current row of the tile (row-major over the tile's rows)."""
    flat = "0"
    for (_, var, start, _), count in zip(rows, counts, strict=True):
        offset = var if start == 0 else f"({var} - {c_value(start)})"
        flat = offset if flat == "0" else f"({flat}) * {count} + {offset}"
    return flat


class OnlinePassWriter:
    """Writes one ``OnlinePass`` as C (``write(lines, indent, counter)``)."""

    def __init__(self, online_pass: OnlinePass) -> None:
        self.online = online_pass.online
        self.reference = online_pass.reference
        self.rows = online_pass.rows
        self.step = online_pass.step
        self.streamed_nests = online_pass.streamed_nests
        self.dependents = online_pass.dependents
        self.local_views = online_pass.local_views
        self.lanes = online_pass.lanes
        self.block = online_pass.block
        self.row_count = online_pass.row_count
        self.fold_lanes = online_pass.fold_lanes
        self.row_counts = online_pass.row_counts
        self.rounded = online_pass.rounded
        self.name = online_pass.name
        self.scores = online_pass.scores
        self.tile = online_pass.tile
        self.plain_max = online_pass.plain_max
        self.pipelined = online_pass.pipelined
        self.row_flat = row_flat(online_pass.rows, online_pass.row_counts)
        self._parked = set()
        # a dependent's vector accumulator held in registers (weft.codegen.online_rows): its chains,
        # and the one each vector step folds into now
        self.chains: dict[str, list[str]] = {}
        self.registers: dict[str, str] = {}
        self.plain_loads = False  # unaligned vector loads, not line loads (weft.codegen.online_rows)

    @staticmethod
    def _flat(dependent: PassDependent) -> str:
        """The flat index of ``dependent``'s current extra point."""
        code = "0"
        for axis, var in dependent.extras:
            code = f"({code}) * {axis.extent} + {var}"
        return code

    def _pseudo(self, buffer: str, pointer: str) -> BufferView:
        shape = self.local_views[buffer].shape
        return BufferView(buffer, pointer, self.local_views[buffer].dtype, shape, (0,) * len(shape), (0,) * len(shape))

    def _renderer(self, lines, indent: int, counter, env, overrides: dict[str, str], kernel: Kernel | None = None) -> BodyRenderer:
        views = dict(self.local_views)
        for buffer, pointer in overrides.items():
            views[buffer] = self._pseudo(buffer, pointer)
        owner = kernel or self.reference
        extents = {axis.name: axis.extent for axis in owner.all_axes}
        renderer = BodyRenderer(views, extents, self.lanes, lines, "    " * indent, counter, dict(env), None)
        renderer.line_loads = not self.plain_loads
        return renderer

    def _seed_reference_terms(self, renderer: BodyRenderer, dependent: PassDependent) -> BodyRenderer:
        """Let ``renderer`` read the reference terms of this step from ``wo_t`` (what the max
        folded) instead of computing them again: with FMA contraction allowed, ``s * c - m``
        recomputed would be one FMA, not ``round(s * c) - m``, so at the row max the exponent
        would be the product's rounding error (exp overflows once |s * c| > ~1e9), not 0."""
        if not self.rounded:
            return renderer
        fold_axis = dependent.fold.fold_axis
        target = self.reference_term_of(dependent)
        vector = renderer.is_vector(target)
        where = f"wo_t[{renderer.env[fold_axis]} - wo_jb]"
        code = f"wfc_load_f(&{where})" if vector else where
        renderer.memo[renderer.memo_key(target, vector)] = Value(code, self.local_views[self.reference.output].dtype, vector)
        return renderer

    def reference_term_of(self, dependent: PassDependent) -> Expr:
        """The reference's term as ``dependent``'s step reads it: on the dependent's fold axis
        and on its own names of the pass's rows."""
        fold_axis = dependent.fold.fold_axis
        row_vars = {var: axis for axis, var in dependent.env if axis != fold_axis}
        renames = {self.online.reference_axis: AxisIndex(fold_axis)}
        for axis, var, _, _ in self.rows:  # by name: the rows may be reordered (grouped heads last)
            if var in row_vars:
                renames[axis] = AxisIndex(row_vars[var])
        return substitute_axes(self.online.reference_term, renames)

    def _slot(self, dependent: PassDependent, flat: str | None = None) -> str:
        """The accumulator of ``dependent`` at the current row (and extra point ``flat``)."""
        return f"{dependent.accumulator}[({self.row_flat}) * {dependent.count} + {flat or self._flat(dependent)}]"

    def _row_loops(self, lines, depth: int) -> int:
        for _, var, start, stop in self.rows:
            lines.append("    " * depth + f"for (long {var} = {c_value(start)}; {var} < {c_value(stop)}; {var}++) {{")
            depth += 1
        return depth

    def write(self, lines: list[str], indent: int, counter: Counter) -> None:
        from weft.codegen.online_rows import write_pipelined

        if self.pipelined:  # nothing streamed: the read and the exps overlap (online_rows)
            write_pipelined(self, lines, indent, counter)
            return
        online, reference = self.online, self.reference
        dtype = self.local_views[reference.output].dtype
        ctype = SCALAR_TYPE[dtype]
        emit = lambda depth, text: lines.append("    " * depth + text)  # noqa: E731
        emit(indent, f"{{ /* {self.name}: {', '.join(online.members)} in one pass, blocks of {self.block} */")
        depth = indent + 1
        identity = fold_identity(online.reference_combiner, dtype)
        emit(depth, f"{ctype} wo_ref[{self.row_count}];")
        emit(depth, f"for (long wo_n = 0; wo_n < {self.row_count}; wo_n++) wo_ref[wo_n] = {identity};")
        for dependent in self.dependents:
            size = self.row_count * dependent.count
            emit(depth, f"{ctype} {dependent.accumulator}[{size}];")
            init = fold_identity(dependent.fold.combiner, dtype)
            emit(depth, f"for (long wo_n = 0; wo_n < {size}; wo_n++) {dependent.accumulator}[wo_n] = {init};")
        lanes = self.lanes
        if self.fold_lanes:  # one vector accumulator per row and dependent, lanes along the pass axis
            for dependent in self.dependents:
                if dependent.count != 1:
                    continue
                init = fold_identity(dependent.fold.combiner, dtype)
                emit(depth, f"{ctype} {dependent.accumulator}_v[{self.row_count * lanes}] __attribute__((aligned(64)));")
                emit(depth, f"for (long wo_n = 0; wo_n < {self.row_count * lanes}; wo_n++) {dependent.accumulator}_v[wo_n] = {init};")
        extent = online.extent
        self._parked: set[str] = set()  # accumulators whose terms phase 1 parked
        for dependent in self.dependents:
            for k in range(len(self._shared_rows(dependent)[1])):
                emit(depth, f"{ctype} {dependent.accumulator}_p{k}[{self.row_count * self.block}] __attribute__((aligned(64)));")
        if self.rounded:
            emit(depth, f"{ctype} wo_t[{self.block}] __attribute__((aligned(64)));  /* this row's reference terms */")
        if self.scores is not None:
            write_row_packing(self.scores, self.local_views, self.rows, self.row_counts, lines, depth, counter)
        emit(depth, f"for (long wo_jb = 0; wo_jb < {extent}; wo_jb += {self.block}) {{")
        if self.tile is not None and self._every_block_full():  # no partial block: no other path
            write_tile_block(self, lines, depth + 1, counter)
            emit(depth, "}")
            self._write_finals(lines, indent, depth, counter, dtype)
            return
        if self.tile is not None:  # a full key block (of a concat's cache part): every fold on the register tile
            stop = extent if self.tile.stop is None else self.tile.stop
            emit(depth + 1, f"if (wo_jb + {self.block} <= {stop}) {{")
            write_tile_block(self, lines, depth + 2, counter)
            emit(depth + 2, "continue;")
            emit(depth + 1, "}")
        if self.scores is not None:  # this block of the scores on the register tile
            write_block(self.scores, self.local_views, self.rows, self.row_counts, lines, depth + 1, counter)
        for nest in () if self.scores is not None else self.streamed_nests:  # else by their own nests
            NestWriter(nest, lines, counter).write(depth + 1)
        inner = self._row_loops(lines, depth + 1)
        emit(inner, f"{ctype} wo_ref_old[1] = {{wo_ref[{self.row_flat}]}}; {ctype} wo_ref_new[1];")
        emit(inner, f"long {self.step} = wo_jb; const long wo_stop = wfc_minl(wo_jb + {self.block}, {extent});")
        self._render_reference(lines, inner, counter, dtype)
        self._render_rescale(lines, inner, counter, dtype)
        emit(inner, f"{ctype} wo_ref_run[1]; {self.running_reference(dtype)}")
        emit(inner, f"{self.step} = wo_jb;")
        self._render_steps(lines, inner, counter, dtype, "wo_stop", self.fold_lanes)
        emit(inner, f"wo_ref[{self.row_flat}] = wo_ref_new[0];")
        self._close_row_loops(lines, inner)
        for dependent in self.dependents:
            if dependent.accumulator in self._parked:
                self._render_shared_rows(lines, depth + 1, counter, dependent, dtype)
        emit(depth, "}")
        self._write_finals(lines, indent, depth, counter, dtype)

    def _every_block_full(self) -> bool:
        """Whether every block of the pass is a full block of the register tile: the pass's
        extent a multiple of the block and no part of it read another way (a concat's cache
        part ends where the tile's ``stop`` is). Then the general path, for a partial block,
        would never run, and it is not emitted (a third of the pass's C, compiled for nothing)."""
        extent = self.online.extent
        return extent % self.block == 0 and self.tile.stop in (None, extent)

    def _close_row_loops(self, lines, inner: int) -> None:
        """Close the row loops ``_row_loops`` opened (``inner``: the depth inside them)."""
        for _ in self.rows:
            inner -= 1
            lines.append("    " * inner + "}")

    def _write_finals(self, lines, indent: int, depth: int, counter, dtype) -> None:
        """After the pass, per row: the reference stored, each dependent's final value; then
        the pass's block (opened at ``indent``) closed."""
        env_ref = {axis: var for axis, var, _, _ in self.rows}
        inner = self._row_loops(lines, depth)
        self._store(lines, inner, counter, self.reference, env_ref, f"wo_ref[{self.row_flat}]")
        for dependent in self.dependents:
            self._render_final(lines, inner, counter, dependent, dtype)
        self._close_row_loops(lines, inner)
        lines.append("    " * indent + "}")

    def running_reference(self, dtype, new: str = "wo_ref_new[0]", run: str = "wo_ref_run[0]") -> str:
        """C setting ``run``, the reference the terms fold against, from the running ``new``:
        ``new``, or 0 while ``new`` is still the fold's identity (every reference term so far
        -inf: a masked prefix). Each term's factor ``exp(t - R)`` (the rewrite admits only
        that distance, ``weft.compose.rescale``) is then ``exp(-inf) = 0``, as against the
        final reference, so the prefix folds exactly ``0 * g``: 0, or NaN where ``g`` (a V row
        of a masked key) is NaN or inf, as in the oracle. (Against the identity itself each
        factor would be ``exp(-inf - -inf)``, NaN, and the prefix would have to be dropped.)"""
        identity = fold_identity(self.online.reference_combiner, dtype)
        return f"{run} = {new} == {identity} ? 0.0f : {new};"

    def _vector_slot(self, dependent: PassDependent) -> str:
        return f"&{dependent.accumulator}_v[({self.row_flat}) * {self.lanes}]"

    def _render_reference(self, lines, depth: int, counter, dtype) -> None:
        """The block's reference (the row max over this block of the pass axis), in vectors:
        one vector accumulator, one horizontal reduction, then the scalar tail."""
        online = self.online
        ctype = SCALAR_TYPE[dtype]
        emit = lambda d, text: lines.append("    " * d + text)  # noqa: E731
        combiner = online.reference_combiner
        env_ref = {axis: var for axis, var, _, _ in self.rows}
        env_ref[online.reference_axis] = self.step
        emit(depth, f"{ctype} wo_bm = wo_ref_old[0];")
        if self.fold_lanes:
            identity = fold_identity(combiner, dtype)
            plain = self.plain_max and combiner is Combiner.MAX

            def fold(acc: str, term: str) -> str:
                return vector_max(acc, term, True) if plain else combine(combiner, dtype, True, acc, term)

            # REFERENCE_CHAINS vector accumulators (max/min is exact in any order: NaN propagates
            # from any position), so the block max waits on a chain a quarter as long
            chains = REFERENCE_CHAINS if self.block >= REFERENCE_CHAINS * self.lanes else 1
            for chain in range(chains):
                emit(depth, f"wf_vf wo_vm{chain or ''} = wfc_splat_f({identity});")
            width = chains * self.lanes
            for unrolled in ((chains, width), (1, self.lanes)) if chains > 1 else ((1, self.lanes),):
                count, stride = unrolled
                emit(depth, f"for (; {self.step} + {stride} <= wo_stop; {self.step} += {stride}) {{")
                for chain in range(count):
                    env = {**env_ref, online.reference_axis: f"({self.step} + {chain * self.lanes})"} if chain else env_ref
                    renderer = self._renderer(lines, depth + 1, counter, env, {})
                    renderer.vector_axis = online.reference_axis
                    term = renderer.splat(renderer.render(online.reference_term))
                    at = f"{self.step} - wo_jb" + (f" + {chain * self.lanes}" if chain else "")
                    if self.rounded:
                        emit(depth + 1, f"const wf_vf wo_tv{chain} = {term}; wfc_store_f(&wo_t[{at}], wo_tv{chain});")
                        term = f"wo_tv{chain}"
                    acc = f"wo_vm{chain or ''}"
                    emit(depth + 1, f"{acc} = {fold(acc, term)};")
                emit(depth, "}")
            for chain in range(1, chains):
                emit(depth, f"wo_vm = {fold('wo_vm', f'wo_vm{chain}')};")
            for shuffle in lane_tree(self.lanes):  # lanes folded in registers: lane 0 holds them all
                emit(depth, f"wo_vm = {fold('wo_vm', shuffle.format(v='wo_vm'))};")
            emit(depth, f"wo_bm = {combine(combiner, dtype, False, 'wo_bm', 'wo_vm[0]')};")
        emit(depth, f"for (; {self.step} < wo_stop; {self.step}++) {{")
        renderer = self._renderer(lines, depth + 1, counter, env_ref, {})
        term = renderer.render(online.reference_term).code
        if self.rounded:
            emit(depth + 1, f"wo_t[{self.step} - wo_jb] = {term};")
            term = f"wo_t[{self.step} - wo_jb]"
        emit(depth + 1, f"wo_bm = {combine(combiner, dtype, False, 'wo_bm', term)};")
        emit(depth, "}")
        emit(depth, "wo_ref_new[0] = wo_bm;")

    def _render_rescale(self, lines, depth: int, counter, dtype) -> None:
        """Once per block: if the reference moved, scale what was folded by exp(b(new) - b(old))."""
        rescaled = [d for d in self.dependents if d.fold.exponent is not None]
        if not rescaled:
            return
        ctype = SCALAR_TYPE[dtype]
        emit = lambda d, text: lines.append("    " * d + text)  # noqa: E731
        reference = self.reference.output
        emit(depth, "if (wo_ref_new[0] != wo_ref_old[0]) {")
        # The reference leaves its identity (the row's keys so far all masked, max -inf): the
        # terms folded so far were folded against 0 (``running_reference``), each exactly
        # exp(-inf) * g, as against the final reference, so the accumulators are kept as they
        # are (0, or NaN from a masked key's non-finite g), not rescaled.
        identity = fold_identity(self.online.reference_combiner, dtype)
        emit(depth + 1, f"const int wo_restart = wo_ref_old[0] == {identity};")
        for dependent in rescaled:
            env = dict(dependent.env)
            new = self._renderer(lines, depth + 1, counter, env, {reference: "wo_ref_new"}, dependent.kernel).render(dependent.fold.exponent)
            old = self._renderer(lines, depth + 1, counter, env, {reference: "wo_ref_old"}, dependent.kernel).render(dependent.fold.exponent)
            factor = scalar_unary(UnaryOp.EXP, Value(f"({new.code} - {old.code})", dtype, False))
            emit(depth + 1, f"if (!wo_restart) {{ const {ctype} wo_c = {factor};")
            slot = self._slot(dependent, "wo_n")
            emit(depth + 1, f"  for (long wo_n = 0; wo_n < {dependent.count}; wo_n++) {slot} = {slot} * wo_c;")
            if self.fold_lanes and dependent.count == 1 and dependent.accumulator in self.chains:
                for register in self.chains[dependent.accumulator]:
                    emit(depth + 1, f"  {register} = {register} * wfc_splat_f(wo_c);")
            elif self.fold_lanes and dependent.count == 1:
                slot = self._vector_slot(dependent)
                emit(depth + 1, f"  wfc_store_f({slot}, wfc_load_f({slot}) * wfc_splat_f(wo_c));")
            emit(depth + 1, "}")
        emit(depth, "}")

    def _render_steps(self, lines: list[str], depth: int, counter: Counter, dtype, stop: str, vector: bool) -> None:
        """The steps of the pass up to ``stop`` (a C expression): whole vectors first when
        ``vector``, then one point at a time."""
        emit = lambda d, text: lines.append("    " * d + text)  # noqa: E731
        if vector:
            emit(depth, f"for (; {self.step} + {self.lanes} <= {stop}; {self.step} += {self.lanes}) {{")
            self._render_step(lines, depth + 1, counter, dtype, vector=True)
            emit(depth, "}")
        emit(depth, f"for (; {self.step} < {stop}; {self.step}++) {{")
        self._render_step(lines, depth + 1, counter, dtype, vector=False)
        emit(depth, "}")

    def _render_step(self, lines, step: int, counter, dtype, vector: bool) -> None:
        """One point (or, with ``vector``, one vector of points) of the pass axis for one row:
        every dependent folds its term against the block's reference (already final)."""
        emit = lambda depth, text: lines.append("    " * depth + text)  # noqa: E731
        running = {self.reference.output: "wo_ref_run"}  # running_reference
        # values rendered at this step's scope are shared by every dependent: attention's
        # exp(s - m) is computed once per vector for both the row sum and the output
        shared: dict = {}
        for dependent in self.dependents:
            if vector and dependent.count == 1:
                renderer = self._renderer(lines, step, counter, dict(dependent.env), running, dependent.kernel)
                renderer.memo = shared
                renderer.vector_axis = dependent.fold.fold_axis
                self._seed_reference_terms(renderer, dependent)
                value = renderer.splat(renderer.render(dependent.fold.term))
                register = self.registers.get(dependent.accumulator)
                if register is not None:  # held in a register across the row (weft.codegen.online_rows)
                    emit(step, f"{register} = {combine(dependent.fold.combiner, dtype, True, register, value)};")
                    continue
                slot = self._vector_slot(dependent)
                update = combine(dependent.fold.combiner, dtype, True, f"wfc_load_f({slot})", value)
                emit(step, f"wfc_store_f({slot}, {update});")
            elif vector:
                self._render_lanes(lines, step, counter, dependent, running, dtype, shared)
            else:
                self._render_update(lines, step, counter, dependent, running, dtype)

    def _render_lanes(self, lines, step: int, counter, dependent: PassDependent, running, dtype, shared=None) -> None:
        """A dependent with extra axes over one vector of the pass axis: the parts of its term
        that do not vary along the extra axes (attention's exp(s - m)) are computed as vectors
        along the pass axis, then each point of the vector updates the accumulators in turn."""
        fold_axis = dependent.fold.fold_axis
        vector = self._renderer(lines, step, counter, dict(dependent.env), running, dependent.kernel)
        if shared is not None:  # the step's scope: values other dependents rendered are reused
            vector.memo = shared
        vector.vector_axis = fold_axis
        self._seed_reference_terms(vector, dependent)
        names = {axis.name for axis, _ in dependent.extras}
        computed = []
        for node in _hoistable(dependent.fold.term, names):
            if fold_axis in expr_axes(node):
                value = vector.render(node)
                if value.vector and value.dtype.is_float:
                    local = counter.fresh("wo_h")
                    lines.append("    " * step + f"const wf_vf {local} = {value.code};")
                    computed.append((node, local))
        group, nodes = self._shared_rows(dependent)
        if group > 1 and [node for node, _ in computed] == nodes:  # terms parked for the row-group pass
            for k, (_, local) in enumerate(computed):
                slot = f"&{dependent.accumulator}_p{k}[({self.row_flat}) * {self.block} + ({self.step} - wo_jb)]"
                lines.append("    " * step + f"wfc_store_f({slot}, {local});")
            self._parked.add(dependent.accumulator)
            return
        extra = dependent.extras[0][0].extent if len(dependent.extras) == 1 else 0
        if extra and extra % self.lanes == 0 and (extra // self.lanes <= 8 or extra % (8 * self.lanes) == 0) and dtype.is_float:
            self._render_lanes_in_registers(lines, step, counter, dependent, running, dtype, computed)
            return
        lines.append("    " * step + f"for (int wo_l = 0; wo_l < {self.lanes}; wo_l++) {{")
        env = dict(dependent.env)
        env[fold_axis] = f"({self.step} + wo_l)"
        outer = self._seed_reference_terms(self._renderer(lines, step + 1, counter, env, running, dependent.kernel), dependent)
        for node, local in computed:  # the scalar renderer finds these lanes instead of recomputing
            key = (node, False, tuple((a, env.get(a)) for a in sorted(expr_axes(node))))
            outer.memo[key] = Value(f"{local}[wo_l]", dtype, False)
        self._render_update(lines, step + 1, counter, dependent, running, dtype, outer)
        lines.append("    " * step + "}")

    def _shared_rows(self, dependent: PassDependent) -> tuple[int, list]:
        """(rows per group, hoisted nodes) when ``dependent``'s extra-axis updates run after the
        per-row pass, several rows of the tile at a time (1, [] when not).

        A dependent with one extra axis (attention's ``e``) whose term splits into parts that
        vary along the pass axis only (``exp(s - m)``, parked per row and step in block
        scratch) and a rest that does not depend on the rows (``V[j, e]``): a group of rows
        then shares each load of the rest, and group x vectors independent accumulator chains
        hide the add latency. Each accumulator still folds in ascending pass order."""
        if not (self.fold_lanes and len(dependent.extras) == 1 and self.row_counts):
            return 1, []
        extent = dependent.extras[0][0].extent
        if extent % self.lanes or self.block % self.lanes or self.online.extent % self.block:
            return 1, []
        vectors = min(extent // self.lanes, 8)
        if extent % (vectors * self.lanes):
            return 1, []
        fold_axis = dependent.fold.fold_axis
        names = {axis.name for axis, _ in dependent.extras}
        nodes = list(_hoistable(dependent.fold.term, names))
        if not nodes or any(fold_axis not in expr_axes(node) for node in nodes):
            return 1, []
        row_var = self.rows[-1][1]
        env = dict(dependent.env)
        row_axes = {axis for axis, var in env.items() if var == row_var}
        rest_axes = expr_axes(dependent.fold.term) - set().union(*(expr_axes(n) for n in nodes))
        if rest_axes & row_axes:  # the rest varies with the rows: nothing to share
            return 1, []
        for group in (8, 4, 2):
            if group * vectors <= 16 and self.row_counts[-1] % group == 0:
                return group, nodes
        return 1, []

    def _render_shared_rows(self, lines, depth: int, counter, dependent: PassDependent, dtype) -> None:
        """This block's extra-axis updates of ``dependent``, a group of rows at a time (``_shared_rows``)."""
        emit = lambda d, text: lines.append("    " * d + text)  # noqa: E731
        group, nodes = self._shared_rows(dependent)
        axis, var = dependent.extras[0]
        fold_axis = dependent.fold.fold_axis
        vectors = min(axis.extent // self.lanes, 8)
        *outer_rows, (_, row_var, start, stop) = self.rows
        for _, v, lo, hi in outer_rows:
            emit(depth, f"for (long {v} = {c_value(lo)}; {v} < {c_value(hi)}; {v}++) {{")
            depth += 1
        emit(depth, f"for (long {row_var} = {c_value(start)}; {row_var} < {c_value(stop)}; {row_var} += {group}) {{")
        emit(depth + 1, f"for (long {var} = 0; {var} < {axis.extent}; {var} += {vectors * self.lanes}) {{")
        body = depth + 2
        flats, slots = [], []
        for g in range(group):
            flat = re.sub(rf"\b{row_var}\b", f"({row_var} + {g})", self.row_flat)
            flats.append(flat)
            for n in range(vectors):
                slot = "&" + self._slot(dependent, f"({var} + {n * self.lanes})").replace(self.row_flat, flat, 1)
                slots.append((f"wo_g{g}_{n}", slot))
                emit(body, f"wf_vf wo_g{g}_{n} = wfc_load_f({slot});")
        emit(body, f"for (long {self.step} = wo_jb; {self.step} < wo_jb + {self.block}; {self.step}++) {{")
        shared: dict = {}
        for g in range(group):
            env = {a: (f"({row_var} + {g})" if v == row_var else v) for a, v in dependent.env}
            env[fold_axis] = self.step
            outer = self._renderer(lines, body + 1, counter, env, {}, dependent.kernel)
            outer.memo = shared
            for k, node in enumerate(nodes):
                key = (node, False, tuple((a, env.get(a)) for a in sorted(expr_axes(node))))
                shared[key] = Value(f"{dependent.accumulator}_p{k}[({flats[g]}) * {self.block} + ({self.step} - wo_jb)]", dtype, False)
            for n in range(vectors):
                inner = outer.sub_renderer(lines, "    " * (body + 1), {**env, axis.name: f"({var} + {n * self.lanes})"}, axis.name)
                inner.memo = shared
                value = inner.splat(inner.render(dependent.fold.term))
                emit(body + 1, f"wo_g{g}_{n} = {combine(dependent.fold.combiner, dtype, True, f'wo_g{g}_{n}', value)};")
        emit(body, "}")
        for name, slot in slots:
            emit(body, f"wfc_store_f({slot}, {name});")
        emit(depth + 1, "}")
        emit(depth, "}")
        for _ in outer_rows:
            depth -= 1
            emit(depth, "}")

    def _render_lanes_in_registers(self, lines, step: int, counter, dependent: PassDependent, running, dtype,
                                   computed) -> None:
        """One extra axis, a whole number of vectors long (attention's ``e``): up to 8 vectors of
        accumulators held in registers take every point of the pass-axis vector in turn. The
        order of the fold per accumulator is unchanged (ascending along the pass axis); the
        accumulators are loaded and stored once per vector of points, not once per point, and
        the independent chains hide the add latency."""
        emit = lambda depth, text: lines.append("    " * depth + text)  # noqa: E731
        axis, var = dependent.extras[0]
        fold_axis = dependent.fold.fold_axis
        vectors = axis.extent // self.lanes
        # up to 8 vectors of accumulators at once: independent add chains hide the latency
        group = min(vectors, 8)
        emit(step, f"for (long {var} = 0; {var} < {axis.extent}; {var} += {group * self.lanes}) {{")
        slots = []
        for n in range(group):
            slot = "&" + self._slot(dependent, f"({var} + {n * self.lanes})")
            slots.append(slot)
            emit(step + 1, f"wf_vf wo_a{n} = wfc_load_f({slot});")
        emit(step + 1, f"for (int wo_l = 0; wo_l < {self.lanes}; wo_l++) {{")
        env = dict(dependent.env)
        env[fold_axis] = f"({self.step} + wo_l)"
        outer = self._seed_reference_terms(self._renderer(lines, step + 2, counter, env, running, dependent.kernel), dependent)
        for node, local in computed:  # the lanes computed before the loop, not recomputed
            key = (node, False, tuple((a, env.get(a)) for a in sorted(expr_axes(node))))
            outer.memo[key] = Value(f"{local}[wo_l]", dtype, False)
        for n in range(group):
            inner = self._inner(outer, lines, step + 2, axis.name, f"({var} + {n * self.lanes})", vector=True)
            value = inner.splat(inner.render(dependent.fold.term))
            emit(step + 2, f"wo_a{n} = {combine(dependent.fold.combiner, dtype, True, f'wo_a{n}', value)};")
        emit(step + 1, "}")
        for n, slot in enumerate(slots):
            emit(step + 1, f"wfc_store_f({slot}, wo_a{n});")
        emit(step, "}")

    def _render_update(self, lines, indent, counter, dependent: PassDependent, running, dtype, outer=None) -> None:
        """``acc = combine(acc, term)`` at every extra point; the innermost extra axis runs in
        vectors of ``lanes`` (then a scalar tail); parts of the term that do not vary along
        the extra axes are computed once per step, before those loops (or were, by ``outer``)."""
        lines.append("    " * indent + "{")
        depth = indent + 1
        if outer is None:
            outer = self._renderer(lines, depth, counter, dict(dependent.env), running, dependent.kernel)
            self._seed_reference_terms(outer, dependent)
        else:
            outer.indent = "    " * depth
        names = {axis.name for axis, _ in dependent.extras}
        for node in _hoistable(dependent.fold.term, names):
            outer.render(node)
        *outer_extras, last = dependent.extras or ((None, None),)
        for axis, var in outer_extras:
            lines.append("    " * depth + f"for (long {var} = 0; {var} < {axis.extent}; {var}++) {{")
            depth += 1
            outer.env[axis.name] = var
        combiner, fold = dependent.fold.combiner, dependent.fold
        if last[0] is None:  # no extra axis: one accumulator
            outer.indent = "    " * depth
            term = outer.render(fold.term)
            slot = self._slot(dependent)
            lines.append("    " * depth + f"{slot} = {combine(combiner, dtype, False, slot, term.code)};")
        else:
            axis, var = last
            lines.append("    " * depth + f"long {var} = 0;")
            if axis.extent >= self.lanes and dtype.is_float:
                lines.append("    " * depth + f"for (; {var} + {self.lanes} <= {axis.extent}; {var} += {self.lanes}) {{")
                vector = self._inner(outer, lines, depth + 1, axis.name, var, vector=True)
                term = vector.render(fold.term)
                slot = "&" + self._slot(dependent)
                value = vector.splat(term)
                lines.append("    " * (depth + 1) + f"wfc_store_f({slot}, {combine(combiner, dtype, True, f'wfc_load_f({slot})', value)});")
                lines.append("    " * depth + "}")
            lines.append("    " * depth + f"for (; {var} < {axis.extent}; {var}++) {{")
            scalar = self._inner(outer, lines, depth + 1, axis.name, var, vector=False)
            term = scalar.render(fold.term)
            slot = self._slot(dependent)
            lines.append("    " * (depth + 1) + f"{slot} = {combine(combiner, dtype, False, slot, term.code)};")
            lines.append("    " * depth + "}")
        for _ in outer_extras:
            depth -= 1
            lines.append("    " * depth + "}")
        lines.append("    " * indent + "}")

    @staticmethod
    def _inner(outer: BodyRenderer, lines, depth: int, axis: str, var: str, vector: bool) -> BodyRenderer:
        """A renderer for one loop over ``axis`` that reuses what ``outer`` already computed."""
        env = dict(outer.env)
        env[axis] = var
        inner = outer.sub_renderer(lines, "    " * depth, env, axis if vector else None)
        inner.memo = dict(outer.memo)
        return inner

    def _render_final(self, lines, indent, counter, dependent: PassDependent, dtype) -> None:
        lines.append("    " * indent + "{")
        depth = indent + 1
        env = dict(dependent.env)
        for axis, var in dependent.extras:
            lines.append("    " * depth + f"for (long {var} = 0; {var} < {axis.extent}; {var}++) {{")
            depth += 1
            env[axis.name] = var
        renderer = self._renderer(lines, depth, counter, env, {}, dependent.kernel)
        value = counter.fresh("wo_v")
        lines.append("    " * depth + f"{SCALAR_TYPE[dtype]} {value} = {self._slot(dependent)};")
        if self.fold_lanes and dependent.count == 1:
            lane = f"{dependent.accumulator}_v[({self.row_flat}) * {self.lanes} + wo_l]"
            merge = combine(dependent.fold.combiner, dtype, False, value, lane)
            lines.append("    " * depth + f"for (int wo_l = 0; wo_l < {self.lanes}; wo_l++) {value} = {merge};")
        if dependent.fold.exponent is not None:  # a row masked to the end: the oracle's exp(-inf - -inf)
            identity = fold_identity(self.online.reference_combiner, dtype)
            lines.append("    " * depth + f"if (wo_ref[{self.row_flat}] == {identity}) {value} = __builtin_nanf(\"\");")
        for expr in dependent.fold.scale_by:
            lines.append("    " * depth + f"{value} = {value} * {renderer.render(expr).code};")
        for expr in dependent.fold.divide_by:
            lines.append("    " * depth + f"{value} = {value} / {renderer.render(expr).code};")
        for sign, expr in dependent.fold.offsets:
            lines.append("    " * depth + f"{value} = {value} {'+' if sign > 0 else '-'} {renderer.render(expr).code};")
        self._store(lines, depth, counter, dependent.kernel, env, value)
        for _ in dependent.extras:
            depth -= 1
            lines.append("    " * depth + "}")
        lines.append("    " * indent + "}")

    def _store(self, lines, indent, counter, kernel: Kernel, env: dict[str, str], value: str) -> None:
        view = self.local_views[kernel.output]
        renderer = self._renderer(lines, indent, counter, env, {}, kernel)
        address = renderer.address(view, tuple(f"({env[axis.name]})" for axis in kernel.axes))
        lines.append("    " * indent + f"{view.pointer}[{address}] = {value};")


def _hoistable(expr: Expr, extras: set[str]):
    """Maximal subtrees of ``expr`` that do not depend on the extra axes (rendered before their loop)."""
    if not (expr_axes(expr) & extras):
        yield expr
        return
    for child in expr_children(expr):
        yield from _hoistable(child, extras)
