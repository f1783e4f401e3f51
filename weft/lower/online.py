"""The rescaled one-pass lowering of a region (Inference only; ``weft.compose.rescale``).

A region whose ``OnlineFold`` the rewrite admits becomes one tiled function in
which the reference fold and every dependent fold share one pass over their
axis, in blocks. Streamed members (attention's scores) are computed one tile of
rows by one block of the pass axis at a time, by their own (vectorised) member
nests into block scratch; dissolved members (exp, probabilities) are inlined
into the terms; so nothing of size rows × pass-extent exists. Per tile::

    ref[r] = -inf; acc_l[r] = 0; acc_o[r][e] = 0            /* per row of the tile */
    for jb in blocks of 64 (the whole axis when nothing is streamed):
        s_block[r][j] = sum_d q[r,d] * k[j,d]              /* streamed member, its own nest */
        for each row r:
            t[j] = s_block[r][j] * scale                   /* kept: what the max folds */
            new = max(ref[r], max of t over the block)     /* vector max, one reduction */
            if new != ref[r]:                              /* one rescale per block */
                c = exp(b(new) - b(ref[r]))
                acc_l[r] = ref[r] == -inf ? 0 : acc_l[r] * c    /* same for acc_o[r][:] */
            for j in the block (vectors along j):
                acc_l[r] += exp(t[j] - new); acc_o[r][e] += exp(t[j] - new) * v[j,e]
            ref[r] = new
    m[r] = ref[r]; l[r] = acc_l[r]; o[r,e] = acc_o[r][e] / l[r]

Two details keep every row right. While a row's keys so far are all masked its
reference is -inf and its terms ``exp(-inf - -inf)`` are NaN; when the reference
becomes finite those terms are really ``exp(-inf) = 0``, so the accumulators restart
instead of being rescaled (a row masked to the end keeps the oracle's NaN). And when
the reference terms hold a product (``s * scale``), the dependents read back the
values the max folded (``t``) instead of recomputing them: with FMA contraction,
``s * scale - new`` recomputed is one FMA whose result at the row max is the
product's rounding error, not 0, and overflows ``exp`` once |scores| pass ~1e9.

When a dependent has one extra axis and its term splits into a part along the pass
axis (``exp(s - m)``) and a rest that does not depend on the rows (``V[j, e]``), the
per-row loop only parks that part in block scratch, and after it a group of rows
(up to 8) folds the block together: each ``V`` row is loaded once per group, and the
group's accumulators (rows x vectors of ``e``) stay in registers as independent add
chains (``_shared_rows``). Each accumulator still folds in ascending pass order.

Members of the region outside the pass run as ordinary tile-restricted nests
before or after it. When an axis of the pass cannot be matched up (an index map
the pass does not follow), the region falls back to the plain fused lowering.

When the one pass is not taken although the rewrite is legal: if a member run
after the pass reads the reference fold's result and is itself as long as the
pass axis (softmax's ``E = exp(x - m)``, which ``P = E / L`` needs), the terms
must be materialised anyway. The one pass then saves no memory traffic (the
plain fused form walks a tile that is in cache) and would compute every exp
twice (in the pass, and again for ``E``), so the plain fused form is used
(``rematerialised_after``). Otherwise (attention, cross-entropy, norm + linear)
the one pass is used.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from weft.codegen.body import SCALAR_TYPE, BodyRenderer, Counter, Value, scalar_unary
from weft.codegen.render import (  # the member-nest writer, reused for streamed blocks
    _NestWriter,
    combine,
    fold_identity,
)
from weft.compose.regions import Region
from weft.compose.rescale import (
    OnlineDependent,
    OnlineFold,
    derive_online_fold,
    pass_schedule,
    streamed_members,
)
from weft.compose.substitute import map_expr, substitute_axes
from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Combiner,
    Const,
    Expr,
    Kernel,
    Plan,
    UnaryOp,
    expr_axes,
    expr_children,
    expr_loads,
    index_axes,
)
from weft.lower.access import row_major_strides
from weft.lower.fused import (
    SCRATCH_BUDGET,
    Tiling,
    choose_tiling,
    function_params,
    region_function_name,
    region_scratch_bytes,
    scratch_views,
    tile_loop,
    tile_shape,
    tiled_nest,
)
from weft.lower.nest import AxisRange, BufferView, LoweredFunction, MemberNest, Scratch
from weft.lower.schedule import Target, c_identifier

PASS_LANES = 16
"""Upper bound of vector lanes, for sizing the per-row vector accumulators."""

PASS_BLOCK = 64
"""Points of the pass axis per block: streamed members are computed a block at a time."""

MAX_ACCUMULATORS = 16384
"""Accumulators per dependent fold per row (a stack array in the pass)."""


class _Unmappable(Exception):
    pass


@dataclass(frozen=True, slots=True)
class PassDependent:
    fold: OnlineDependent
    kernel: Kernel
    env: tuple[tuple[str, str], ...]
    extras: tuple[tuple[Axis, str], ...]
    accumulator: str

    @property
    def count(self) -> int:
        return math.prod(axis.extent for axis, _ in self.extras)

    def flat(self) -> str:
        code = "0"
        for axis, var in self.extras:
            code = f"({code}) * {axis.extent} + {var}"
        return code


@dataclass(frozen=True, eq=False)
class OnlinePass:
    """One pass over the shared fold axis for the rows of a tile (renders itself)."""

    online: OnlineFold
    reference: Kernel
    rows: tuple[tuple[str, str, str, str], ...]  # (axis, C variable, start, stop)
    step: str
    streamed_nests: tuple[MemberNest, ...]
    dependents: tuple[PassDependent, ...]
    local_views: dict[str, BufferView] = field(repr=False)
    views: tuple[BufferView, ...] = ()
    lanes: int = 1
    block: int = 1
    row_count: int = 1
    row_flat: str = "0"
    fold_lanes: bool = False  # Inference: vectors along the pass axis
    row_counts: tuple[int, ...] = ()  # rows of the tile along each row axis
    rounded: bool = False  # the reference terms are kept (wo_t) and read back by the dependents

    @property
    def name(self) -> str:
        return f"online pass of {self.online.anchor}"

    # ------------------------------------------------------------------ rendering

    def _pseudo(self, buffer: str, pointer: str) -> BufferView:
        shape = self.local_views[buffer].shape
        return BufferView(buffer, pointer, self.local_views[buffer].dtype, shape, (0,) * len(shape), ("0",) * len(shape))

    def _renderer(self, lines, indent: int, counter, env, overrides: dict[str, str], kernel: Kernel | None = None) -> BodyRenderer:
        views = dict(self.local_views)
        for buffer, pointer in overrides.items():
            views[buffer] = self._pseudo(buffer, pointer)
        owner = kernel or self.reference
        extents = {axis.name: axis.extent for axis in owner.all_axes}
        return BodyRenderer(views, extents, self.lanes, lines, "    " * indent, counter, dict(env), None)

    def _seed_reference_terms(self, renderer: BodyRenderer, dependent: PassDependent) -> BodyRenderer:
        """Let ``renderer`` read the reference terms of this step from ``wo_t`` (what the max
        folded) instead of computing them again: with FMA contraction allowed, ``s * c - m``
        recomputed would be one FMA, not ``round(s * c) - m``, so at the row max the exponent
        would be the product's rounding error (exp overflows once |s * c| > ~1e9), not 0."""
        if not self.rounded:
            return renderer
        fold_axis = dependent.fold.fold_axis
        row_vars = {var: axis for axis, var in dependent.env if axis != fold_axis}
        renames = {self.online.reference_axis: AxisIndex(fold_axis)}
        for axis, (_, var, _, _) in zip(self.reference.axes, self.rows, strict=True):
            if var in row_vars:
                renames[axis.name] = AxisIndex(row_vars[var])
        target = substitute_axes(self.online.reference_term, renames)
        vector = renderer.is_vector(target)
        where = f"wo_t[{renderer.env[fold_axis]} - wo_jb]"
        code = f"wfc_load_f(&{where})" if vector else where
        renderer.memo[renderer.memo_key(target, vector)] = Value(code, self.local_views[self.reference.output].dtype, vector)
        return renderer

    def _slot(self, dependent: PassDependent, flat: str | None = None) -> str:
        """The accumulator of ``dependent`` at the current row (and extra point ``flat``)."""
        return f"{dependent.accumulator}[({self.row_flat}) * {dependent.count} + {flat or dependent.flat()}]"

    def _row_loops(self, lines, depth: int) -> int:
        for _, var, start, stop in self.rows:
            lines.append("    " * depth + f"for (long {var} = {start}; {var} < {stop}; {var}++) {{")
            depth += 1
        return depth

    def render(self, lines: list[str], indent: int, counter: Counter) -> None:
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
        object.__setattr__(self, "_parked", set())  # accumulators whose terms phase 1 parked
        for dependent in self.dependents:
            for k in range(len(self._shared_rows(dependent)[1])):
                emit(depth, f"{ctype} {dependent.accumulator}_p{k}[{self.row_count * self.block}] __attribute__((aligned(64)));")
        if self.rounded:
            emit(depth, f"{ctype} wo_t[{self.block}] __attribute__((aligned(64)));  /* this row's reference terms */")
        emit(depth, f"for (long wo_jb = 0; wo_jb < {extent}; wo_jb += {self.block}) {{")
        for nest in self.streamed_nests:  # this block of the streamed members, by their own nests
            _NestWriter(nest, lines, counter).write(depth + 1)
        inner = self._row_loops(lines, depth + 1)
        emit(inner, f"{ctype} wo_ref_old[1] = {{wo_ref[{self.row_flat}]}}; {ctype} wo_ref_new[1];")
        emit(inner, f"long {self.step} = wo_jb; const long wo_stop = wfc_minl(wo_jb + {self.block}, {extent});")
        self._render_reference(lines, inner, counter, dtype)
        self._render_rescale(lines, inner, counter, dtype)
        emit(inner, f"{self.step} = wo_jb;")
        if self.fold_lanes:
            emit(inner, f"for (; {self.step} + {lanes} <= wo_stop; {self.step} += {lanes}) {{")
            self._render_step(lines, inner + 1, counter, dtype, vector=True)
            emit(inner, "}")
        emit(inner, f"for (; {self.step} < wo_stop; {self.step}++) {{")
        self._render_step(lines, inner + 1, counter, dtype, vector=False)
        emit(inner, "}")
        emit(inner, f"wo_ref[{self.row_flat}] = wo_ref_new[0];")
        for _ in self.rows:
            inner -= 1
            emit(inner, "}")
        for dependent in self.dependents:
            if dependent.accumulator in self._parked:
                self._render_shared_rows(lines, depth + 1, counter, dependent, dtype)
        emit(depth, "}")
        env_ref = {axis.name: var for axis, (_, var, _, _) in zip(reference.axes, self.rows, strict=True)}
        inner = self._row_loops(lines, depth)
        self._store(lines, inner, counter, reference, env_ref, f"wo_ref[{self.row_flat}]")
        for dependent in self.dependents:
            self._render_final(lines, inner, counter, dependent, dtype)
        for _ in self.rows:
            inner -= 1
            emit(inner, "}")
        emit(indent, "}")

    def _vector_slot(self, dependent: PassDependent) -> str:
        return f"&{dependent.accumulator}_v[({self.row_flat}) * {self.lanes}]"

    def _render_reference(self, lines, depth: int, counter, dtype) -> None:
        """The block's reference (the row max over this block of the pass axis), in vectors:
        one vector accumulator, one horizontal reduction, then the scalar tail."""
        online = self.online
        ctype = SCALAR_TYPE[dtype]
        emit = lambda d, text: lines.append("    " * d + text)  # noqa: E731
        combiner = online.reference_combiner
        env_ref = {axis.name: var for axis, (_, var, _, _) in zip(self.reference.axes, self.rows, strict=True)}
        env_ref[online.reference_axis] = self.step
        emit(depth, f"{ctype} wo_bm = wo_ref_old[0];")
        if self.fold_lanes:
            identity = fold_identity(combiner, dtype)
            emit(depth, f"wf_vf wo_vm = wfc_splat_f({identity});")
            emit(depth, f"for (; {self.step} + {self.lanes} <= wo_stop; {self.step} += {self.lanes}) {{")
            renderer = self._renderer(lines, depth + 1, counter, env_ref, {})
            renderer.vector_axis = online.reference_axis
            term = renderer.splat(renderer.render(online.reference_term))
            if self.rounded:
                emit(depth + 1, f"const wf_vf wo_tv = {term}; wfc_store_f(&wo_t[{self.step} - wo_jb], wo_tv);")
                term = "wo_tv"
            emit(depth + 1, f"wo_vm = {combine(combiner, dtype, True, 'wo_vm', term)};")
            emit(depth, "}")
            pick = combine(combiner, dtype, False, "wo_bm", "wo_vm[wo_l]")
            emit(depth, f"for (int wo_l = 0; wo_l < {self.lanes}; wo_l++) wo_bm = {pick};")
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
        # terms folded so far were exp(-inf - -inf) = NaN, against a finite reference each is
        # exp(-inf) = 0, so the accumulators restart (a row that stays masked keeps the oracle's NaN).
        identity = fold_identity(self.online.reference_combiner, dtype)
        emit(depth + 1, f"const int wo_restart = wo_ref_old[0] == {identity};")
        for dependent in rescaled:
            env = dict(dependent.env)
            new = self._renderer(lines, depth + 1, counter, env, {reference: "wo_ref_new"}, dependent.kernel).render(dependent.fold.exponent)
            old = self._renderer(lines, depth + 1, counter, env, {reference: "wo_ref_old"}, dependent.kernel).render(dependent.fold.exponent)
            factor = scalar_unary(UnaryOp.EXP, Value(f"({new.code} - {old.code})", dtype, False))
            restart = fold_identity(dependent.fold.combiner, dtype)
            emit(depth + 1, f"{{ const {ctype} wo_c = {factor};")
            slot = self._slot(dependent, "wo_n")
            emit(depth + 1, f"  for (long wo_n = 0; wo_n < {dependent.count}; wo_n++) {slot} = wo_restart ? {restart} : {slot} * wo_c;")
            if self.fold_lanes and dependent.count == 1:
                slot = self._vector_slot(dependent)
                emit(depth + 1, f"  wfc_store_f({slot}, wo_restart ? wfc_splat_f({restart}) : wfc_load_f({slot}) * wfc_splat_f(wo_c));")
            emit(depth + 1, "}")
        emit(depth, "}")

    def _render_step(self, lines, step: int, counter, dtype, vector: bool) -> None:
        """One point (or, with ``vector``, one vector of points) of the pass axis for one row:
        every dependent folds its term against the block's reference (already final)."""
        emit = lambda depth, text: lines.append("    " * depth + text)  # noqa: E731
        running = {self.reference.output: "wo_ref_new"}
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
            emit(depth, f"for (long {v} = {lo}; {v} < {hi}; {v}++) {{")
            depth += 1
        emit(depth, f"for (long {row_var} = {start}; {row_var} < {stop}; {row_var} += {group}) {{")
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


def _has_product(expr: Expr) -> bool:
    if isinstance(expr, Binary) and expr.op is BinaryOp.MUL:
        return True
    return any(_has_product(child) for child in expr_children(expr))


def _hoistable(expr: Expr, extras: set[str]):
    """Maximal subtrees of ``expr`` that do not depend on the extra axes (rendered before their loop)."""
    if not (expr_axes(expr) & extras):
        yield expr
        return
    for child in expr_children(expr):
        yield from _hoistable(child, extras)


# ---------------------------------------------------------------------- building


def _bind(exprs, dims: dict[str, list[str | None]], env: dict[str, str]) -> None:
    """Extend ``env`` (axis -> C variable) from loads of buffers whose dimensions have variables."""
    for expr in exprs:
        for load in expr_loads(expr):
            for index, var in zip(load.index, dims.get(load.buffer, ()), strict=False):
                if isinstance(index, AxisIndex) and var is not None:
                    if env.setdefault(index.axis, var) != var:
                        raise _Unmappable(f"{load.buffer} is read at two different rows")


def _check(exprs, dims: dict[str, list[str | None]], env: dict[str, str], buffers: set[str]) -> None:
    """Every load of a pass-local buffer must read exactly the current row and step."""
    for expr in exprs:
        for load in expr_loads(expr):
            if load.buffer not in buffers:
                continue
            for index, var in zip(load.index, dims[load.buffer], strict=False):
                if not isinstance(index, AxisIndex) or env.get(index.axis) != var:
                    raise _Unmappable(f"{load.buffer} is read off the current row or step")


def _dependent_exprs(dependent: OnlineDependent) -> list[Expr]:
    return [dependent.term, *([dependent.exponent] if dependent.exponent is not None else []),
            *dependent.scale_by, *dependent.divide_by, *(expr for _, expr in dependent.offsets)]


def build_pass(plan: Plan, region: Region, online: OnlineFold, streamed: dict[str, int],
               local_views: dict[str, BufferView], tiling: Tiling, block: int, target: Target) -> OnlinePass:
    """The pass for the rows of one tile; ``local_views`` already maps streamed members to
    their block scratch (``block_views``)."""
    tile_of = dict(region.tile_axes)
    reference = plan.kernel(online.reference)
    tile_axis = tile_of[reference.output]
    tiled = tiling.ranges(reference.output)
    rows, counts = [], []
    for n, axis in enumerate(reference.axes):
        var = f"wo_r{n}"
        if axis.name in tiled:
            start, stop, count = tiled[axis.name]
            rows.append((axis.name, var, start, stop))
            counts.append(count)
        else:
            rows.append((axis.name, var, "0", str(axis.extent)))
            counts.append(axis.extent)
    dims: dict[str, list[str | None]] = {reference.output: [var for _, var, _, _ in rows]}
    env_ref = {axis.name: var for axis, (_, var, _, _) in zip(reference.axes, rows, strict=False)}
    env_ref[online.reference_axis] = "wo_j"
    envs: dict[str, dict[str, str]] = {reference.output: env_ref}
    pending_streamed = dict(streamed)
    pending_dependents = list(online.dependents)
    exprs_of = {reference.output: [online.reference_term]}
    exprs_of.update({d.member: [d.term] for d in online.dependents})
    while pending_streamed or pending_dependents:
        progress = False
        for name in list(pending_streamed):
            found: dict[int, str] = {}
            for owner, exprs in exprs_of.items():
                if owner not in envs:
                    continue
                for load in (load for expr in exprs for load in expr_loads(expr) if load.buffer == name):
                    for d, index in enumerate(load.index):
                        if isinstance(index, AxisIndex) and index.axis in envs[owner]:
                            found.setdefault(d, envs[owner][index.axis])
            kernel = plan.kernel(name)
            if len(found) == len(kernel.axes):
                dims[name] = [found[d] for d in range(len(kernel.axes))]
                envs[name] = {axis.name: found[d] for d, axis in enumerate(kernel.axes)}
                del pending_streamed[name]
                progress = True
        for dependent in list(pending_dependents):
            env = {dependent.fold_axis: "wo_j"}
            _bind(_dependent_exprs(dependent), dims, env)
            kernel = plan.kernel(dependent.member)
            if env.get(tile_of[dependent.member]) != env_ref[tile_axis]:
                continue
            envs[dependent.member] = env
            dims[dependent.member] = [env.get(axis.name) for axis in kernel.axes]
            pending_dependents.remove(dependent)
            progress = True
        if not progress:
            raise _Unmappable("an axis of the pass cannot be matched to the reference's rows")
    # every tiled axis of every member in the pass must walk the reference's rows of this tile
    for anchor_axis, mapping in tiling.maps:
        row_var = env_ref[dict(mapping)[reference.output]]
        for name in list(streamed) + [d.member for d in online.dependents]:
            if envs[name].get(dict(mapping)[name]) != row_var:
                raise _Unmappable(f"{name} does not follow the tile along {anchor_axis}")
    local = set(streamed) | {reference.output}
    _check([online.reference_term], dims, env_ref, local)
    dependents = []
    for number, dependent in enumerate(online.dependents):
        kernel = plan.kernel(dependent.member)
        env = envs[dependent.member]
        _check([dependent.term] + ([dependent.exponent] if dependent.exponent is not None else []), dims, env, local)
        for axis in kernel.axes:  # an extra axis of extent 1 (a value head dim of 1) is the point 0
            if axis.name not in env and axis.extent == 1:
                env[axis.name] = "0"
        extras = tuple((axis, f"wo_x{number}_{n}") for n, axis in enumerate(kernel.axes) if axis.name not in env)
        if dependent.exponent is not None and expr_axes(dependent.exponent) & {axis.name for axis, _ in extras}:
            raise _Unmappable("the rescaling factor varies along an extra axis")
        item = PassDependent(dependent, kernel, tuple(env.items()), extras, f"wo_acc{number}")
        if item.count > MAX_ACCUMULATORS:
            raise _Unmappable(f"{dependent.member} needs {item.count} accumulators per row")
        dependents.append(item)
    streamed_nests = []
    for name, position in streamed.items():  # region order: producers first
        kernel = plan.kernel(name)
        if kernel.axes[position].extent != online.extent:
            raise _Unmappable(f"{name} is walked over a different extent than the pass")
        nest = tiled_nest(plan, name, local_views, target, tiling)
        step_axis = kernel.axes[position].name
        stop = f"wfc_minl(wo_jb + {block}, {online.extent})"
        ranges = tuple(AxisRange(r.axis, "wo_jb", stop) if r.axis == step_axis else r for r in nest.ranges)
        streamed_nests.append(dataclasses.replace(nest, ranges=ranges))
    touched = {load.buffer for expr in [online.reference_term] + [e for d in online.dependents for e in _dependent_exprs(d)]
               for load in expr_loads(expr)}
    touched |= {load.buffer for name in streamed for load in expr_loads(plan.kernel(name).body)}
    touched |= set(online.members)
    touched -= set(streamed)
    views = tuple(local_views[name] for name in sorted(touched))
    row_count, row_flat = 1, "0"
    for (_, var, start, _), count in zip(rows, counts, strict=True):
        offset = var if start == "0" else f"({var} - {start})"
        row_flat = offset if row_flat == "0" else f"({row_flat}) * {count} + {offset}"
        row_count *= count
    # a product in the reference terms could be contracted into an FMA differently where the
    # dependents recompute it: keep the terms the max folded (wo_t) and read those back
    rounded = _has_product(online.reference_term)
    if not streamed and not rounded:  # nothing to compute per block: each row walks the whole axis
        block = online.extent
    fold_lanes = target.lanes > 1 and online.extent >= target.lanes and local_views[reference.output].dtype.is_float
    return OnlinePass(
        online, reference, tuple(rows), "wo_j", tuple(streamed_nests), tuple(dependents), local_views, views,
        target.lanes, block, row_count, row_flat, fold_lanes, tuple(counts), rounded,
    )


def block_views(
    plan: Plan, streamed: dict[str, int], tiling: Tiling, block: int, taken: set[str]
) -> tuple[dict[str, BufferView], tuple[Scratch, ...]]:
    """Each streamed member in scratch holding one tile of rows by one block of the pass axis."""
    views, scratch = {}, []
    for name, position in streamed.items():
        buffer = plan.buffer(name)
        tiled = tiling.ranges(name)
        axes = plan.kernel(name).axes
        shape = tuple(
            block if n == position else tiled[axis.name][2] if axis.name in tiled else axis.extent
            for n, axis in enumerate(axes)
        )
        offsets = tuple(
            "wo_jb" if n == position else tiled[axis.name][0] if axis.name in tiled else "0"
            for n, axis in enumerate(axes)
        )
        pointer = c_identifier(f"block_{name}", taken)
        views[name] = BufferView(name, pointer, buffer.dtype, buffer.shape, row_major_strides(shape), offsets)
        scratch.append(Scratch(pointer, buffer.dtype, math.prod(shape)))
    return views, tuple(scratch)


def _state_bytes(plan: Plan, online: OnlineFold, tiling: Tiling) -> int:
    """Running reference and accumulators of one tile's rows (stack arrays in the pass)."""
    reference = plan.kernel(online.reference)
    points = math.prod(axis.extent for axis in reference.axes)
    row_count = math.prod(tile_shape(plan, reference.output, tiling))
    per_row = 1 + sum(max(1, plan.buffer(d.member).size // points) for d in online.dependents)
    return 4 * row_count * (per_row + PASS_LANES * len(online.dependents))


def rematerialised_after(plan: Plan, online: OnlineFold, after: tuple[str, ...]) -> str | None:
    """A member after the pass that recomputes the pass's terms over the pass axis (module doc):
    it reads the reference fold's result and what the pass's terms read, and has an output
    axis as long as the pass axis. (A member reading only the pass's results, such as
    attention's fully-masked-row select of its output, recomputes nothing.)"""
    terms = (online.reference_term,) + tuple(d.term for d in online.dependents)
    term_sources = {load.buffer for term in terms for load in expr_loads(term)} - {online.reference}
    for name in after:
        kernel = plan.kernel(name)
        if (online.reference in kernel.reads and term_sources & set(kernel.reads)
                and any(axis.extent == online.extent for axis in kernel.axes)):
            return name
    return None


def strided_dependent(plan: Plan, region: Region, online: OnlineFold) -> tuple[str, str] | None:
    """(member, buffer) when a dependent fold with extra axes reads ``buffer`` with the pass
    axis inside (more contiguous than) one of its extra axes.

    The pass walks its axis outermost and the extra axes inside it, so such a load
    (a weight ``W[x, j]`` folded over ``j`` for every output ``x``) is read across
    its rows, a gather per vector: qwen-decode-step's RMS norm + MLP as one pass
    ran 26 ms per layer against 4 ms unfused. Attention's ``V[j, e]`` (the extra
    axis ``e`` inside) is read along its rows and stays one pass.
    """
    for dependent in online.dependents:
        kernel = plan.kernel(dependent.member)
        rows = {dict(mapping).get(dependent.member) for _, mapping in region.tile_maps}
        rows |= {axis for member, axis in region.tile_axes if member == dependent.member}
        extras = {axis.name for axis in kernel.axes} - {dependent.fold_axis} - rows
        for load in expr_loads(dependent.term):
            dims = [index_axes(index) for index in load.index]
            pass_dims = [n for n, axes in enumerate(dims) if dependent.fold_axis in axes]
            extra_dims = [n for n, axes in enumerate(dims) if axes & extras]
            if pass_dims and extra_dims and max(pass_dims) > min(extra_dims):
                return dependent.member, load.buffer
    return None


def one_pass_declined(plan: Plan, region: Region, online: OnlineFold) -> str | None:
    """Why the lowering prefers the plain fused form although the rewrite fired (None: it does not)."""
    strided = strided_dependent(plan, region, online)
    if strided is not None:
        return (f"{strided[0]} would read {strided[1]} across its rows inside the pass (the pass axis is"
                " its inner dimension): plain fused form")
    schedule = pass_schedule(plan, region, online)
    if schedule is None:
        return "no order of the other members around the pass works"
    name = rematerialised_after(plan, online, schedule[1])
    if name is not None:
        return (f"{name} needs the terms over the pass axis after the pass (it reads {online.reference}),"
                " so one pass would save no traffic and compute every exp twice: plain fused form")
    return None


def _constant_factor(kernel: Kernel) -> tuple[Expr, Const] | None:
    """(rest, c) when ``kernel`` is a sum fold of ``rest * c`` with ``c`` a float constant."""
    body = kernel.body
    if kernel.fold is None or kernel.fold.combiner is not Combiner.SUM or not isinstance(body, Binary):
        return None
    if body.op is not BinaryOp.MUL:
        return None
    for rest, factor in ((body.left, body.right), (body.right, body.left)):
        if isinstance(factor, Const) and isinstance(factor.value, float) and factor.dtype.is_float:
            return rest, factor
    return None


def factor_streamed_constants(plan: Plan, online: OnlineFold, streamed: dict[str, int]) -> tuple[Plan, OnlineFold]:
    """Under Inference, a streamed sum fold of ``x * c`` (attention's scores ``q·k·scale``) is
    computed as ``sum x`` and its readers in the pass read ``s * c`` instead.

    The streamed member's nest then does one multiply-add per point of its fold instead
    of a multiply and a multiply-add (the constant factor is applied once per result, in
    the pass, where the value is loaded anyway): at 1024 tokens the scores took a third
    less time. A reassociation, so Inference only (the pass is Inference only); only when
    every reader of the member is in the pass (its terms are where the factor goes back).
    """
    factors: dict[str, Const] = {}
    kernels = {}
    readers = plan.readers()
    inside = set(online.members) | set(online.dissolved)  # dissolved members are inlined into the terms
    for name in streamed:
        kernel = plan.kernel(name)
        found = _constant_factor(kernel)
        if found is None or not set(readers.get(name, ())) <= inside:
            continue
        rest, factors[name] = found
        kernels[name] = dataclasses.replace(kernel, body=rest)
    if not factors:
        return plan, online

    def on_load(load):
        return Binary(BinaryOp.MUL, load, factors[load.buffer]) if load.buffer in factors else load

    def scaled(expr: Expr) -> Expr:
        return map_expr(expr, on_load, {})

    dependents = tuple(
        dataclasses.replace(
            d, term=scaled(d.term), exponent=None if d.exponent is None else scaled(d.exponent),
            scale_by=tuple(scaled(e) for e in d.scale_by), divide_by=tuple(scaled(e) for e in d.divide_by),
            offsets=tuple((sign, scaled(e)) for sign, e in d.offsets),
        )
        for d in online.dependents
    )
    online = dataclasses.replace(online, reference_term=scaled(online.reference_term), dependents=dependents)
    plan = dataclasses.replace(plan, kernels=tuple(kernels.get(k.output, k) for k in plan.kernels))
    return plan, online


def lower_online_region(
    plan: Plan, region: Region, views: dict[str, BufferView], target: Target, taken: set[str]
) -> LoweredFunction | None:
    """The one-pass function for ``region``, or None (not rewritable, or a map the pass cannot follow)."""
    if target.contract != "inference" or region.tile_axis is None:
        return None
    online = derive_online_fold(plan, region, target.contract)
    if not isinstance(online, OnlineFold):
        return None
    streamed = streamed_members(plan, region, online)
    plan, online = factor_streamed_constants(plan, online, streamed)
    skipped = set(online.dissolved) | set(streamed)
    kept_private = tuple(name for name in region.private if name not in skipped)
    block = min(online.extent, PASS_BLOCK)
    probe = set(taken)

    def fits(tiling: Tiling) -> bool:
        blocks = sum(
            math.prod(tile_shape(plan, name, tiling)) // plan.kernel(name).axes[position].extent * block
            for name, position in streamed.items()
        )
        used = region_scratch_bytes(plan, region, tiling, kept_private) + 4 * blocks + _state_bytes(plan, online, tiling)
        return used <= SCRATCH_BUDGET

    tiling = choose_tiling(plan, region, target.lanes, fits)
    if tiling is None:
        return None
    local_views, scratch = scratch_views(plan, views, tiling, probe, kept_private)
    streamed_views, streamed_scratch = block_views(plan, streamed, tiling, block, probe)
    local_views.update(streamed_views)
    scratch = scratch + streamed_scratch
    try:
        online_pass = build_pass(plan, region, online, streamed, local_views, tiling, block, target)
    except _Unmappable:
        return None
    if one_pass_declined(plan, region, online) is not None:
        return None
    before, after = pass_schedule(plan, region, online)
    taken |= probe
    single = tiling.count == 1
    nests = [tiled_nest(plan, name, local_views, target, tiling, single) for name in before]
    nests.append(online_pass)
    nests += [tiled_nest(plan, name, local_views, target, tiling, single) for name in after]
    return LoweredFunction(
        name=region_function_name(region, taken),
        members=region.members,
        nests=tuple(nests),
        params=function_params(nests, region.private),
        tile_loop=tile_loop(plan, region, tiling),
        scratch=scratch,
        private=region.private,
    )
