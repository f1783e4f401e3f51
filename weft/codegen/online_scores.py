"""C for the one pass's streamed contraction on the register tile (``weft.lower.online_scores``).

Three pieces: the column factor packed once per call before the tile loop
(``write_packing``, freed by ``weft.codegen.online_tile.write_pass_release``); the row factor packed once per tile
(``write_row_packing``); and per key block, the register tile writing the block scratch the
rest of the pass reads (``write_block``)::

    kp[bp][kb][d][c] = k(bp, kb * block + c, d)      /* zeros past the pass axis; threads share */
    qp[row group][d][row in group] = q(row, d) * c   /* per tile; c: the scores' constant factors */
    for row group of 6:  acc[6][4 vectors] += qp[r][d] * kp[bp][jb / block][d][:]   (d ascending)
                         s_block[r][jb:jb+block] = acc
"""

from __future__ import annotations

from weft.codegen.body import BodyRenderer, Counter, Value, c_literal
from weft.codegen.values import c_value
from weft.ir import AxisIndex, Const, DType, Load, Where
from weft.lower.nest import BufferView
from weft.lower.online_scores import PackedScores

_ACC = "wa.acc"  # the finished score at the current point, as the mask's select reads it


def _emit(lines: list[str], depth: int, text: str) -> None:
    lines.append("    " * depth + text)


def _renderer(scores: PackedScores, views: dict[str, BufferView], lines, depth: int, counter: Counter,
              env: dict[str, str]) -> BodyRenderer:
    extents = {axis.name: axis.extent for axis in scores.kernel.all_axes}
    return BodyRenderer(views, extents, scores.lanes, lines, "    " * depth, counter, dict(env), None)


def write_packing(scores: PackedScores, views: dict[str, BufferView], lines: list[str], depth: int,
                  counter: Counter, parallel: bool) -> None:
    """Before the tile loop: every batch point's column factor in key blocks, shared by every tile."""
    block, depth_points = scores.block, scores.depth
    _emit(lines, depth, f"/* {scores.describe()} */")
    env = panel_env(scores, open_packing_loop(lines, depth, scores.packed_k, scores.batch_points * scores.panel_floats,
                                              scores.panel_axes, scores.batch_points, "wa_kb", scores.blocks, parallel))
    inner = depth + 1
    _emit(lines, inner, f"float *wa_dst = {scores.packed_k} + wa_w * {depth_points * block};")
    if scores.k_transposed:
        _write_transposed_block(scores, views, lines, inner, counter, env)
        inner += 1
    _emit(lines, inner, f"for (long wa_c = 0; wa_c < {block}; wa_c++) {{")
    _emit(lines, inner + 1, f"const long wa_j = wa_kb * {block} + wa_c;")
    _emit(lines, inner + 1, f"if (wa_j < {scores.extent}) {{")
    _emit(lines, inner + 2, f"for (long wa_d = 0; wa_d < {depth_points}; wa_d++) {{")
    env.update({scores.column_axis: "wa_j", scores.fold_axis: "wa_d"})
    renderer = _renderer(scores, views, lines, inner + 3, counter, env)
    value = renderer.render(scores.y_factor)
    renderer.emit(f"wa_dst[wa_d * {block} + wa_c] = {value.code};")
    _emit(lines, inner + 2, "}")
    _emit(lines, inner + 1, "} else {")
    _emit(lines, inner + 2, f"for (long wa_d = 0; wa_d < {depth_points}; wa_d++) wa_dst[wa_d * {block} + wa_c] = 0.0f;")
    _emit(lines, inner + 1, "}")
    _emit(lines, inner, "}")
    if inner > depth + 1:
        _emit(lines, depth + 1, "}")
    _emit(lines, depth, "}")


def panel_env(scores: PackedScores, decoded: dict[str, str]) -> dict[str, str]:
    """Batch axis -> its C value in the packing loop: the panel's index, times g where y reads
    the axis as ``h // g`` (the first query head of the K/V head: ``(p * g) / g`` is ``p``)."""
    return {axis: f"({code} * {scores.divisor(axis)})" if scores.divisor(axis) > 1 else code
            for axis, code in decoded.items()}


def _write_transposed_block(scores: PackedScores, views: dict[str, BufferView], lines: list[str], depth: int,
                            counter: Counter, env: dict[str, str]) -> None:
    """A full key block: ``lanes`` keys' vectors along ``d``, transposed, stored as ``lanes`` rows
    of the block (``d`` steps past the last whole vector element by element); opens the ``else``
    the caller's element-by-element loop (a partial last block, or the new key of a concat)
    goes into. Values are copied; a concat's cache blocks read its plain load (``y_plain``)."""
    block, lanes, points = scores.block, scores.lanes, scores.depth
    y = scores.y_plain or scores.y_factor
    view = views[y.buffer]
    full = points // lanes * lanes
    vector = _renderer(scores, views, lines, depth, counter,
                       {**env, scores.column_axis: f"wa_kb * {block} + wa_v * {lanes} + wa_l", scores.fold_axis: "wa_d"})
    scalar = _renderer(scores, views, lines, depth, counter,
                       {**env, scores.column_axis: f"wa_kb * {block} + wa_c", scores.fold_axis: "wa_d"})
    _emit(lines, depth, f"if (wa_kb < {scores.plain_blocks}) {{")
    _emit(lines, depth + 1, f"for (long wa_d = 0; wa_d < {full}; wa_d += {lanes}) {{")
    _emit(lines, depth + 2, f"for (long wa_v = 0; wa_v < {block // lanes}; wa_v++) {{")
    _emit(lines, depth + 3, f"wf_vf wa_rows[{lanes}];")
    ahead = _renderer(scores, views, lines, depth, counter,  # the next key block's line: it streams in under this one
                      {**env, scores.column_axis: f"(wa_kb + 1) * {block} + wa_v * {lanes} + wa_l", scores.fold_axis: "wa_d"})
    _emit(lines, depth + 3, f"for (long wa_l = 0; wa_l < {lanes}; wa_l++) {{ "
                            f"wa_rows[wa_l] = wfc_load_f(&{view.pointer}[{vector.address(view, y.index)}]); "
                            f"__builtin_prefetch(&{view.pointer}[{ahead.address(view, y.index)}], 0, 3); }}")
    _emit(lines, depth + 3, "wfc_transpose_f(wa_rows);")
    _emit(lines, depth + 3, f"for (long wa_l = 0; wa_l < {lanes}; wa_l++) "
                            f"wfc_store_f(wa_dst + (wa_d + wa_l) * {block} + wa_v * {lanes}, wa_rows[wa_l]);")
    _emit(lines, depth + 2, "}")
    _emit(lines, depth + 1, "}")
    if full < points:
        _emit(lines, depth + 1, f"for (long wa_d = {full}; wa_d < {points}; wa_d++)")
        _emit(lines, depth + 2, f"for (long wa_c = 0; wa_c < {block}; wa_c++) "
                                f"wa_dst[wa_d * {block} + wa_c] = {view.pointer}[{scalar.address(view, y.index)}];")
    _emit(lines, depth, "} else {")


def open_packing_loop(lines: list[str], depth: int, pointer: str, floats: int, batch_axes, batch_points: int,
                      inner: str, inner_extent: int, parallel: bool) -> dict[str, str]:
    """Allocate ``pointer`` (``floats``, 64-byte aligned) and open the loop that fills it, one
    work item ``wa_w`` per (batch point, ``inner`` point): ``inner = wa_w % inner_extent`` and
    each of ``batch_axes`` ((axis, extent), outermost first) decoded from the rest as ``wa_b_<axis>``. Returns axis -> its C name;
    the caller writes the item's body and closes the loop."""
    _emit(lines, depth, f"float *{pointer} = (float *)aligned_alloc(64, {-(-floats * 4 // 64) * 64});")
    if parallel:
        _emit(lines, depth, "#pragma omp parallel for schedule(static)")
    _emit(lines, depth, f"for (long wa_w = 0; wa_w < {batch_points * inner_extent}; wa_w++) {{")
    _emit(lines, depth + 1,
          f"const long {inner} = wa_w % {inner_extent}; long wa_rem = wa_w / {inner_extent}; (void)wa_rem;")
    decoded = {}
    for axis, extent in reversed(batch_axes):
        decoded[axis] = f"wa_b_{axis}"
        _emit(lines, depth + 1, f"const long wa_b_{axis} = wa_rem % {extent}; wa_rem /= {extent};")
    return decoded


def _outer_flat(rows, counts) -> str:
    """The flat index of the current point of the tile's outer rows (all but the last)."""
    flat = "0"
    for (_, var, start, _), count in zip(rows[:-1], counts[:-1], strict=True):
        offset = var if start == 0 else f"({var} - {c_value(start)})"
        flat = offset if flat == "0" else f"({flat}) * {count} + {offset}"
    return flat


def _groups(scores: PackedScores, counts) -> int:
    return -(-counts[-1] // scores.rows)


def write_row_packing(scores: PackedScores, views: dict[str, BufferView], rows, counts, lines: list[str],
                      depth: int, counter: Counter) -> None:
    """Per tile, before the pass: ``wa_qp[outer row][row group][d][row in group]`` (the
    group's ``rows`` values of one ``d`` share a cache line; rows past the tile repeat its last)."""
    mr, groups = scores.rows, _groups(scores, counts)
    outer = 1
    for count in counts[:-1]:
        outer *= count
    _emit(lines, depth, f"float wa_qp[{outer * groups * scores.depth * mr}] __attribute__((aligned(64)));")
    *outer_rows, (_, row_var, start, stop) = rows
    for _, var, lo, hi in outer_rows:
        _emit(lines, depth, f"for (long {var} = {c_value(lo)}; {var} < {c_value(hi)}; {var}++) {{")
        depth += 1
    _emit(lines, depth, f"for (long wa_g = 0; wa_g < {groups}; wa_g++) {{")
    _emit(lines, depth + 1, f"float *wa_dst = wa_qp + (({_outer_flat(rows, counts)}) * {groups} + wa_g)"
                            f" * {scores.depth * mr};")
    _emit(lines, depth + 1, f"for (long wa_r = 0; wa_r < {mr}; wa_r++) {{")
    _emit(lines, depth + 2, f"const long {row_var} = wfc_minl({c_value(start)} + wa_g * {mr} + wa_r,"
                            f" ({c_value(stop)}) - 1);")
    _emit(lines, depth + 2, f"for (long wa_d = 0; wa_d < {scores.depth}; wa_d++) {{")
    env = {**dict(scores.env), scores.fold_axis: "wa_d"}
    renderer = _renderer(scores, views, lines, depth + 3, counter, env)
    value = renderer.render(scores.x_factor)
    scaled = value.code if scores.scale == 1.0 else f"{value.code} * {c_literal(scores.scale, DType.FLOAT32)}"
    renderer.emit(f"wa_dst[wa_d * {mr} + wa_r] = {scaled};")
    _emit(lines, depth + 2, "}")
    _emit(lines, depth + 1, "}")
    _emit(lines, depth, "}")
    for _ in outer_rows:
        depth -= 1
        _emit(lines, depth, "}")


def write_score_tile(scores: PackedScores, views: dict[str, BufferView], rows, counts, lines: list[str],
                     depth: int, counter: Counter) -> tuple[int, str]:
    """Opens a scope, the loops over the tile's outer rows and its row groups, and leaves the
    group's scores of this key block in registers ``wa_a{r}_{v}`` (rows ``wa_i{r}``, clamped
    to the tile's last row). Returns (depth inside the group loop, the rows' stop as C);
    the caller closes the group loop, the outer row loops and the scope."""
    lanes, block, mr = scores.lanes, scores.block, scores.rows
    vectors = block // lanes
    env = dict(scores.env)
    *outer, (_, row_var, start, stop) = rows
    _emit(lines, depth, f"{{ /* {scores.kernel.output}: register tile {mr}x{block}, packed operands */")
    depth += 1
    for _, var, lo, hi in outer:
        _emit(lines, depth, f"for (long {var} = {c_value(lo)}; {var} < {c_value(hi)}; {var}++) {{")
        depth += 1
    stop_code = c_value(stop)
    _emit(lines, depth, f"for (long wa_i = {c_value(start)}; wa_i < {stop_code}; wa_i += {mr}) {{")
    inner = depth + 1
    batch_flat = "0"
    for axis, panels in scores.panel_axes:  # grouped rows: the group's K/V head, from its first row
        code = "wa_i" if axis == scores.row_axis else env[axis]
        code = f"({code}) / {scores.divisor(axis)}" if scores.divisor(axis) > 1 else code
        batch_flat = f"({batch_flat}) * {panels} + {code}"
    _emit(lines, inner, f"const long wa_bp = {batch_flat}; (void)wa_bp;")
    _emit(lines, inner, f"const float *wa_kb = {scores.packed_k} + wa_bp * {scores.panel_floats}"
                        f" + (wo_jb / {block}) * {scores.depth * block};")
    for r in range(mr):
        _emit(lines, inner, f"const long wa_i{r} = wfc_minl(wa_i + {r}, ({stop_code}) - 1);")
    _emit(lines, inner, f"const float *wa_x = wa_qp + (({_outer_flat(rows, counts)}) * {_groups(scores, counts)}"
                        f" + (wa_i - ({c_value(start)})) / {mr}) * {scores.depth * mr};")
    acc = [[f"wa_a{r}_{v}" for v in range(vectors)] for r in range(mr)]
    for first in range(0, vectors, scores.chunk):  # chunks of the block's vectors: rows x chunk accumulators
        chunk = range(first, first + scores.chunk)
        for r in range(mr):
            _emit(lines, inner, "wf_vf " + ", ".join(f"{acc[r][v]} = wfc_splat_f(0.0f)" for v in chunk) + ";")
        _emit(lines, inner, "#pragma GCC unroll 4")
        _emit(lines, inner, f"for (long wa_d = 0; wa_d < {scores.depth}; wa_d++) {{")
        _emit(lines, inner + 1, f"const float *wa_y = wa_kb + wa_d * {block};")
        for v in chunk:
            _emit(lines, inner + 1, f"const wf_vf wa_y{v} = wfc_load_f(wa_y + {v * lanes});")
        for r in range(mr):
            _emit(lines, inner + 1, f"const wf_vf wa_q{r} = wfc_splat_f(wa_x[wa_d * {mr} + {r}]);")
            for v in chunk:
                _emit(lines, inner + 1, f"{acc[r][v]} = {acc[r][v]} + wa_q{r} * wa_y{v};")
        _emit(lines, inner, "}")
    if scores.mask is not None:  # where(mask, sum, masked): the mask at each score, as a vector
        masked = Where(scores.mask, Load(_ACC, tuple(AxisIndex(a.name) for a in scores.kernel.axes)),
                       Const(scores.masked, DType.FLOAT32))
        for r in range(mr):
            for v in range(vectors):
                at = {**env, scores.row_axis: f"wa_i{r}", scores.column_axis: f"(wo_jb + {v * lanes})"}
                renderer = _renderer(scores, views, lines, inner, counter, at)
                renderer.vector_axis = scores.column_axis
                renderer.memo[renderer.memo_key(masked.if_true, True)] = Value(acc[r][v], DType.FLOAT32, True)
                _emit(lines, inner, f"{acc[r][v]} = {renderer.splat(renderer.render(masked))};")
    return inner, stop_code


def write_block(scores: PackedScores, views: dict[str, BufferView], rows, counts, lines: list[str],
                depth: int, counter: Counter) -> None:
    """This key block (``wo_jb``) of the scores for every row of the tile, into their block scratch."""
    lanes, mr = scores.lanes, scores.rows
    vectors = scores.block // lanes
    env = dict(scores.env)
    inner, stop_code = write_score_tile(scores, views, rows, counts, lines, depth, counter)
    view = views[scores.kernel.output]
    renderer = _renderer(scores, views, lines, inner, counter, env)
    for r in range(mr):
        _emit(lines, inner, f"if (wa_i + {r} < {stop_code}) {{")
        for v in range(vectors):
            positions = tuple(
                f"wa_i{r}" if axis.name == scores.row_axis
                else f"(wo_jb + {v * lanes})" if axis.name == scores.column_axis
                else env[axis.name]
                for axis in scores.kernel.axes
            )
            address = renderer.address(view, positions)
            _emit(lines, inner + 1, f"wfc_store_f(&{view.pointer}[{address}], wa_a{r}_{v});")
        _emit(lines, inner, "}")
    depth = inner - 1
    _emit(lines, depth, "}")
    for _ in rows[:-1]:
        depth -= 1
        _emit(lines, depth, "}")
    depth -= 1
    _emit(lines, depth, "}")
