"""C for the one pass's folds on the scores' register tile (``weft.lower.online_scores.TileFold``).

For a full key block (``wo_jb + block <= extent``), per group of ``mr`` rows of the tile::

    acc[r][v] = sum_d qp[r][d] * kp[jb][d][v]                   /* scores, 6 x 4 vectors */
    t[r][v] = reference term(acc[r][v])                         /* scale, mask: in registers */
    new[r] = max(ref[r], hmax(max_v t[r][v]))                   /* one shuffle tree per row */
    if new[r] != ref[r]: c[r] = exp(b(new) - b(ref)), restart[r] = ref[r] == -inf
    run[r] = new[r] == -inf ? 0 : new[r]                        /* a masked prefix folds 0 * V */
    l_v[r] = restart or c == 1 ? l_v[r] : l_v[r] * c;  l_v[r] += term(t[r][v]) /* the row sums */
    p[r][:] = exp(t[r][v] - run[r])                             /* parked for the tile below */
    for chunk of e:  o[r][e] = restart or c == 1 ? o[r][e] : o[r][e] * c;  o[r][e] += p[r][j] * V[j, e]  (j ascending)

A duplicate row (the group past the tile's last row repeats it) computes the same values and
writes no state but its output tile, which equals the real row's.
"""

from __future__ import annotations

import re

from weft.codegen.body import Value, scalar_unary
from weft.codegen.online_scores import open_packing_loop, panel_env, write_packing, write_score_tile
from weft.codegen.render import fold_identity
from weft.ir import (
    Binary,
    BinaryOp,
    DType,
    Load,
    Unary,
    UnaryOp,
    expr_axes,
    expr_children,
    expr_loads,
)

LINE_FLOATS = 16
"""float32 values per 64-byte cache line: the value tile prefetches one per line of V."""


def _emit(lines: list[str], depth: int, text: str) -> None:
    lines.append("    " * depth + text)


def vector_max(a: str, b: str, plain: bool) -> str:
    """``wfc_max_f`` (NaN-propagating), or the ordered compare-select ``a > b ? a : b``
    (``TileFold.plain_max``: ``wfc_pmax_f``, one max instruction)."""
    return f"wfc_pmax_f({a}, {b})" if plain else f"wfc_max_f({a}, {b})"


def hmax_code(value: str, lanes: int, plain: bool = False) -> list[str]:
    """Statements folding the lanes of vector ``value`` by ``vector_max`` (lane 0 holds the max)."""
    out, step = [], lanes // 2
    while step:
        order = ", ".join(str((i + step) % lanes) for i in range(lanes))
        out.append(f"{value} = {vector_max(value, f'WFC_SHUFFLE2({value}, {value}, {order})', plain)};")
        step //= 2
    return out


EXP_FLOOR = "-0x1.58p+6f"  # -86: 2^n stays a normal float in one step; exp(-86) = 4.4e-38
EXP_CLAMP = "-0x1.ap+6f"  # -104, wf_exp's lower clamp: 2^n * p rounds to +0 below it (vscalefps)


def exp_nonpositive(lines: list[str], depth: int, x: str, name: str, lanes: int = 16) -> None:
    """``name = exp(x)`` for x <= 0, -inf or NaN (Inference: the pass's ``exp(t - max)``).

    The mirrored ``wf_exp`` (same reduction and polynomial), without what a non-positive
    argument never needs (no upper clamp). With AVX-512 at 16 lanes it is ``wf_exp``'s own
    form: one max clamp at -104 and 2^n applied by one ``vscalefps`` (its results below
    exp(-87.3) are denormals, 0 from exp(-103.3); -inf gives 0 and NaN stays NaN, as max
    returns its second operand); elsewhere x below exp(-86) gives 0 by a compare and select
    and 2^n is added to the exponent bits in one step (n >= -124).
    """
    emit = lambda text: lines.append("    " * depth + text)  # noqa: E731
    emit(f"#if defined(__AVX512F__) && {lanes} == 16")
    emit(f"const wf_vf {name}_x = (wf_vf)_mm512_max_ps(_mm512_set1_ps({EXP_CLAMP}), (__m512)({x}));")
    emit("#else")
    emit(f"const wf_vi {name}_m = {x} < WF_F({EXP_FLOOR});")
    emit(f"const wf_vf {name}_x = wfc_sel_f({name}_m, WF_F({EXP_FLOOR}), {x});")
    emit("#endif")
    emit(f"const wf_vf {name}_z = {name}_x * WF_F(0x1.715476p+0f) + WF_F(0x1.8p+23f);")
    emit(f"const wf_vf {name}_n = {name}_z - WF_F(0x1.8p+23f);")
    emit(f"const wf_vf {name}_r = ({name}_x - {name}_n * WF_F(0x1.63p-1f)) - {name}_n * WF_F(-0x1.bd0106p-13f);")
    emit(f"wf_vf {name}_p = WF_F(0x1.a0d2cep-13f) * {name}_r + WF_F(0x1.6e879cp-10f);")
    for coefficient in ("0x1.11121p-7f", "0x1.555382p-5f", "0x1.555554p-3f", "0x1p-1f"):
        emit(f"{name}_p = {name}_p * {name}_r + WF_F({coefficient});")
    emit(f"{name}_p = {name}_p * ({name}_r * {name}_r) + {name}_r + WF_F(0x1p+0f);")
    emit(f"#if defined(__AVX512F__) && {lanes} == 16")
    emit(f"const wf_vf {name} = (wf_vf)_mm512_scalef_ps((__m512){name}_p, (__m512){name}_n);")
    emit("#else")
    emit(f"const wf_vi {name}_e = ((wf_vi){name}_z - (wf_vi)WF_F(0x1.8p+23f)) << 23;")
    emit(f"const wf_vf {name} = wfc_sel_f({name}_m, WF_F(0.0f), (wf_vf)((wf_vi){name}_p + {name}_e));")
    emit("#endif")


class TileBlockWriter:
    """Writes one full key block of the pass on the register tile (module doc)."""

    def __init__(self, writer) -> None:  # an OnlinePassWriter (its renderers and slots)
        self.w = writer
        self.scores = writer.scores
        self.tile = writer.tile
        self.lanes = writer.lanes
        self.mr = self.scores.rows
        self.vectors = self.scores.block // self.lanes
        self.row_var = writer.rows[-1][1]

    def _sub(self, text: str, r: int) -> str:
        return re.sub(rf"\b{self.row_var}\b", f"wa_i{r}", text)

    def _env(self, env: dict[str, str], r: int, step: str | None) -> dict[str, str]:
        out = {}
        for axis, var in env.items():
            if var == self.row_var:
                out[axis] = f"wa_i{r}"
            elif var == self.w.step and step is not None:
                out[axis] = step
            else:
                out[axis] = var
        return out

    def write(self, lines: list[str], depth: int, counter) -> None:
        w, lanes, mr = self.w, self.lanes, self.mr
        dtype = DType.FLOAT32
        online, reference = w.online, w.reference
        identity = fold_identity(online.reference_combiner, dtype)
        header = write_score_tile(self.scores, w.local_views, w.rows, w.row_counts, lines, depth, counter)
        inner, stop_code = header
        flats = [self._sub(w.row_flat, r) for r in range(mr)]
        env_ref = {axis: var for axis, var, _, _ in w.rows}
        env_ref[online.reference_axis] = w.step
        score_loads = [load for load in expr_loads(online.reference_term) if load.buffer == self.scores.kernel.output]
        terms = {}
        # the reference terms and the block max of each row
        for r in range(mr):
            _emit(lines, inner, f"float wa_old{r}[1] = {{wo_ref[{flats[r]}]}}; float wa_new{r}[1];")
            maxima = []
            for v in range(self.vectors):
                env = self._env(env_ref, r, f"(wo_jb + {v * lanes})")
                renderer = w._renderer(lines, inner, counter, env, {})
                renderer.vector_axis = online.reference_axis
                for load in score_loads:
                    renderer.memo[renderer.memo_key(load, True)] = Value(f"wa_a{r}_{v}", dtype, True)
                value = renderer.splat(renderer.render(online.reference_term))
                terms[r, v] = f"wa_t{r}_{v}"
                _emit(lines, inner, f"const wf_vf wa_t{r}_{v} = {value};")
                maxima.append(f"wa_t{r}_{v}")
            while len(maxima) > 1:
                maxima = [vector_max(a, b, self.tile.plain_max)
                          for a, b in zip(maxima[::2], maxima[1::2], strict=False)] + (maxima[-1:] if len(maxima) % 2 else [])
            _emit(lines, inner, f"wf_vf wa_m{r} = {maxima[0]};")
            for statement in hmax_code(f"wa_m{r}", lanes, self.tile.plain_max):
                _emit(lines, inner, statement)
            _emit(lines, inner, f"wa_new{r}[0] = wfc_smax_f(wa_old{r}[0], wa_m{r}[0]);")
            _emit(lines, inner, f"float wa_run{r}[1]; {w.running_reference(dtype, f'wa_new{r}[0]', f'wa_run{r}[0]')}")
        # one rescale factor per row and dependent, when the reference moved
        for r in range(mr):
            _emit(lines, inner, f"int wa_z{r} = 0; (void)wa_z{r};")
            for k, dependent in enumerate(w.dependents):
                if dependent.fold.exponent is None:
                    continue
                _emit(lines, inner, f"float wa_c{k}_{r} = 1.0f;")
            _emit(lines, inner, f"if (wa_new{r}[0] != wa_old{r}[0]) {{")
            _emit(lines, inner + 1, f"wa_z{r} = wa_old{r}[0] == {identity};")
            factors: dict = {}  # the same exponent at the same row (the sum's and the output's): one exp
            for k, dependent in enumerate(w.dependents):
                if dependent.fold.exponent is None:
                    continue
                env = self._env(dict(dependent.env), r, None)
                same = (dependent.fold.exponent, tuple(sorted((a, env.get(a)) for a in expr_axes(dependent.fold.exponent))))
                if same in factors:
                    _emit(lines, inner + 1, f"wa_c{k}_{r} = {factors[same]};")
                    continue
                factors[same] = f"wa_c{k}_{r}"
                new = w._renderer(lines, inner + 1, counter, env, {reference.output: f"wa_new{r}"},
                                  dependent.kernel).render(dependent.fold.exponent)
                old = w._renderer(lines, inner + 1, counter, env, {reference.output: f"wa_old{r}"},
                                  dependent.kernel).render(dependent.fold.exponent)
                factor = scalar_unary(UnaryOp.EXP, Value(f"({new.code} - {old.code})", dtype, False))
                _emit(lines, inner + 1, f"wa_c{k}_{r} = {factor};")
            _emit(lines, inner, "}")
        # the dependents' terms: vector sums per row, p parked for the value tile
        block = self.scores.block
        if self.tile.value_dependent is not None:
            _emit(lines, inner, f"float wa_p[{mr * block}] __attribute__((aligned(64)));")
        for r in range(mr):
            shared: dict = {}
            real = f"wa_i + {r} < {stop_code}"
            for k, dependent in enumerate(w.dependents):
                scale = f"wa_c{k}_{r}" if dependent.fold.exponent is not None else "1.0f"
                if k == self.tile.value_dependent:
                    for v in range(self.vectors):
                        renderer = self._dependent_renderer(lines, inner, counter, dependent, r, v, shared)
                        value = renderer.splat(renderer.render(self.tile.hoisted))
                        _emit(lines, inner, f"wfc_store_f(&wa_p[{r * block + v * lanes}], {value});")
                    continue
                vector_slot = w._vector_slot(dependent).replace(w.row_flat, flats[r], 1)
                slot = w._slot(dependent).replace(w.row_flat, flats[r], 1)
                _emit(lines, inner, f"wf_vf wa_l{k}_{r} = wfc_load_f({vector_slot}); float wa_s{k}_{r} = {slot};")
                # a masked prefix ends (wa_z): its sums are kept as they are (OnlinePassWriter.running_reference)
                # x * 1 is x (NaN and infinities too): a factor of exactly 1 is skipped
                _emit(lines, inner, f"if (!wa_z{r} && {scale} != 1.0f) {{ wa_l{k}_{r} = wa_l{k}_{r} * wfc_splat_f({scale});"
                                    f" wa_s{k}_{r} = wa_s{k}_{r} * {scale}; }}")
                for v in range(self.vectors):
                    renderer = self._dependent_renderer(lines, inner, counter, dependent, r, v, shared)
                    value = renderer.splat(renderer.render(dependent.fold.term))
                    _emit(lines, inner, f"wa_l{k}_{r} = wa_l{k}_{r} + {value};")
                _emit(lines, inner, f"if ({real}) {{ wfc_store_f({vector_slot}, wa_l{k}_{r}); {slot} = wa_s{k}_{r}; }}")
            _emit(lines, inner, f"if ({real}) wo_ref[{flats[r]}] = wa_new{r}[0];")
        if self.tile.value_dependent is not None:
            self._value_tile(lines, inner, counter, flats)
        self._close(lines, inner)

    def _dependent_renderer(self, lines, depth, counter, dependent, r: int, v: int, shared: dict):
        w, lanes = self.w, self.lanes
        fold_axis = dependent.fold.fold_axis
        env = self._env(dict(dependent.env), r, f"(wo_jb + {v * lanes})")
        renderer = w._renderer(lines, depth, counter, env, {w.reference.output: f"wa_run{r}"}, dependent.kernel)
        renderer.memo = shared
        renderer.vector_axis = fold_axis
        # the reference terms this step are the registers the max folded
        target = w.reference_term_of(dependent)
        renderer.memo[renderer.memo_key(target, True)] = Value(f"wa_t{r}_{v}", DType.FLOAT32, True)
        # exp(t - max) has a non-positive argument: the shorter exp (exp_nonpositive)
        for node in _exps_of_distance(dependent.fold.term, target, w.reference.output):
            key = renderer.memo_key(node, True)
            if key not in renderer.memo:
                argument = renderer.splat(renderer.render(node.operand))
                name = counter.fresh("wa_e")
                exp_nonpositive(lines, depth, argument, name, lanes)
                renderer.memo[key] = Value(name, DType.FLOAT32, True)
        return renderer

    def _value_tile(self, lines, depth: int, counter, flats: list[str]) -> None:
        """o[r][e] (rescaled, or restarted) += p[r][j] * rest[j][e] over the block's keys."""
        w, lanes, mr = self.w, self.lanes, self.mr
        k = self.tile.value_dependent
        dependent = w.dependents[k]
        (axis, var), = dependent.extras
        chunk = self.tile.chunk_vectors
        block = self.scores.block
        fold_axis = dependent.fold.fold_axis
        scale = (lambda r: f"wa_c{k}_{r}") if dependent.fold.exponent is not None else (lambda r: "1.0f")
        _emit(lines, depth, f"for (long {var} = 0; {var} < {axis.extent}; {var} += {chunk * lanes}) {{")
        inner = depth + 1
        slots = {}
        for r in range(mr):
            for v in range(chunk):
                slot = "&" + w._slot(dependent, f"({var} + {v * lanes})").replace(w.row_flat, flats[r], 1)
                slots[r, v] = slot
                # a factor of exactly 1 (the max did not move: most blocks) multiplies nothing
                _emit(lines, inner, f"wf_vf wa_o{r}_{v} = (wa_z{r} || {scale(r)} == 1.0f) ? wfc_load_f({slot})"
                                    f" : wfc_load_f({slot}) * wfc_splat_f({scale(r)});")
        _emit(lines, inner, "#pragma GCC unroll 4")
        _emit(lines, inner, f"for (long wa_jj = 0; wa_jj < {block}; wa_jj++) {{")
        # grouped rows (TileFold.rest_head): rest reads the group's K/V head, from the group's first row
        env = {a: "wa_i" if v == self.row_var else v for a, v in dependent.env}
        env[fold_axis] = "(wo_jb + wa_jj)"
        ys = []
        if self.tile.pack_rest:  # V packed once per call: [batch point][key][e]
            extent = w.online.extent
            _emit(lines, inner + 1, f"const float *wa_vr = {self.tile.packed_v} + (wa_bp * {extent} + wo_jb + wa_jj)"
                                    f" * {axis.extent} + {var};")
        for v in range(chunk):
            if self.tile.pack_rest:
                _emit(lines, inner + 1, f"const wf_vf wa_y{v} = wfc_load_f(wa_vr + {v * lanes});")
                ys.append(f"wa_y{v}")
                continue
            renderer = w._renderer(lines, inner + 1, counter, {**env, axis.name: f"({var} + {v * lanes})"}, {},
                                   dependent.kernel)
            renderer.vector_axis = axis.name
            value = renderer.splat(renderer.render(self.tile.rest))
            _emit(lines, inner + 1, f"const wf_vf wa_y{v} = {value};")
            ys.append(f"wa_y{v}")
            if self.tile.prefetch_rest and isinstance(self.tile.rest, Load) and (v * lanes) % LINE_FLOATS == 0:
                # the same line of the key a block ahead: the next block's V streams in under this one's FMAs
                ahead = w._renderer(lines, inner + 1, counter, {**env, fold_axis: f"(wo_jb + wa_jj + {block})",
                                                                axis.name: f"({var} + {v * lanes})"}, {}, dependent.kernel)
                view = w.local_views[self.tile.rest.buffer]
                _emit(lines, inner + 1, f"__builtin_prefetch(&{view.pointer}[{ahead.address(view, self.tile.rest.index)}], 0, 3);")
        for r in range(mr):
            _emit(lines, inner + 1, f"const wf_vf wa_pr{r} = wfc_splat_f(wa_p[{r * block} + wa_jj]);")
            for v in range(chunk):
                _emit(lines, inner + 1, f"wa_o{r}_{v} = wa_o{r}_{v} + wa_pr{r} * {ys[v]};")
        _emit(lines, inner, "}")
        for r in range(mr):
            for v in range(chunk):
                _emit(lines, inner, f"wfc_store_f({slots[r, v]}, wa_o{r}_{v});")
        _emit(lines, depth, "}")

    def _close(self, lines, inner: int) -> None:
        depth = inner - 1
        _emit(lines, depth, "}")  # the row groups
        for _ in self.w.rows[:-1]:
            depth -= 1
            _emit(lines, depth, "}")
        depth -= 1
        _emit(lines, depth, "}")


def _exps_of_distance(expr, term, reference: str):
    """Nodes ``exp(term - reference[row])`` in ``expr``: the distance of a reference term
    below the running max, never positive."""
    if isinstance(expr, Unary) and expr.op is UnaryOp.EXP:
        operand = expr.operand
        if (isinstance(operand, Binary) and operand.op is BinaryOp.SUB and operand.left == term
                and isinstance(operand.right, Load) and operand.right.buffer == reference):
            yield expr
            return
    for child in expr_children(expr):
        yield from _exps_of_distance(child, term, reference)


def write_value_packing(online_pass, lines: list[str], depth: int, counter, parallel: bool) -> None:
    """Before the tile loop (``TileFold.pack_rest``): ``wa_vp[batch point][key][e]`` = rest."""
    tile, scores = online_pass.tile, online_pass.scores
    dependent = online_pass.dependents[tile.value_dependent]
    (axis, _), = dependent.extras
    extent, width = online_pass.online.extent, axis.extent
    decoded = panel_env(scores, open_packing_loop(lines, depth, tile.packed_v, scores.batch_points * extent * width,
                                                  scores.panel_axes, scores.batch_points, "wa_j", extent, parallel))
    inner = depth + 1
    _emit(lines, inner, f"for (long wa_e = 0; wa_e < {width}; wa_e++) {{")
    env = {rest_axis: decoded[batch_axis] for rest_axis, batch_axis in tile.rest_env}
    env.update({dependent.fold.fold_axis: "wa_j", axis.name: "wa_e"})
    renderer = online_pass_renderer(online_pass, lines, inner + 1, counter, env, dependent.kernel)
    value = renderer.render(tile.rest)
    renderer.emit(f"{tile.packed_v}[wa_w * {width} + wa_e] = {value.code};")
    _emit(lines, inner, "}")
    _emit(lines, depth, "}")


def online_pass_renderer(online_pass, lines, depth: int, counter, env: dict[str, str], kernel):
    from weft.codegen.body import BodyRenderer

    extents = {a.name: a.extent for a in kernel.all_axes}
    return BodyRenderer(online_pass.local_views, extents, online_pass.lanes, lines, "    " * depth, counter, env, None)


def write_pass_packing(online_pass, lines: list[str], depth: int, counter, parallel: bool) -> None:
    """Everything of the pass packed once per call, before the tile loop (K; V when it is packed)."""
    write_packing(online_pass.scores, online_pass.local_views, lines, depth, counter, parallel)
    if online_pass.tile is not None and online_pass.tile.pack_rest:
        write_value_packing(online_pass, lines, depth, counter, parallel)


def write_pass_release(online_pass, lines: list[str], depth: int) -> None:
    _emit(lines, depth, f"free({online_pass.scores.packed_k});")
    if online_pass.tile is not None and online_pass.tile.pack_rest:
        _emit(lines, depth, f"free({online_pass.tile.packed_v});")


def write_tile_block(writer, lines: list[str], depth: int, counter) -> None:
    TileBlockWriter(writer).write(lines, depth, counter)


__all__ = ["exp_nonpositive", "hmax_code", "write_pass_packing", "write_pass_release", "write_tile_block"]
