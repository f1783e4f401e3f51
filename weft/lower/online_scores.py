"""The one pass's streamed contraction (attention's scores) on the packed register tile.

Inside the one pass (``weft.lower.online``) a streamed member computes one tile of rows by
one block of the pass axis at a time. When that member is a contraction whose column axis is
the pass axis (``s[b, h, i, j] = sum_d q[b, h, i, d] * k[b, h, j, d]``), it runs as the
contraction microkernel's register tile instead of its own member nest:

- the column factor (``k``) is packed **once per function call**, before the tile loop, into
  key blocks ``kp[batch point][block][d][block columns]`` (zeros past the pass axis), so every
  query tile reads the same packed panel (its gathers are paid once, not once per tile);
- the row factor (``q``) is packed once per tile into ``qp[row][d]``, times the body's constant
  factors (attention's ``1 / sqrt(d)``: a reassociation, ``sum (q c) k`` for ``c sum q k``, once
  per element of ``q`` per tile instead of once per score);
- a block of scores is ``MICRO_ROWS`` rows x ``block`` columns of FMA accumulators over ``d``
  (6 x 4 vectors = 24 of the 32 AVX-512 registers, as in ``weft.lower.contraction``), stored to
  the block scratch the rest of the pass already reads.

Before/after (attention 5184 x 32, one head, 16 lanes)::

    s block: member nest, k gathered into a panel per query tile and key block
    s block: PackedScores(row axis i, column axis j, fold d = 32, 6 x 64 register tile,
             k packed once into 81 blocks of 32 x 64)

Grouped-query attention (K and V read the query head ``h`` as ``h // g``): K is packed once
per K/V head (``PackedScores.divisors``: ``batch_points`` counts K/V heads), and when the tile's
query rows are fewer than the group (a decode step: one query per head), the tile holds whole
groups of heads and the register tile's rows are the g query heads of one K/V head
(``PackedScores.group``; the pass's head row last), so each K and V row is read once per group,
not once per query head. A decode step's keys and values are a concat of the cache and the new
token's entry (``where(j < L, cache[h // g, j, d], new[...])``): K's key blocks below L are packed
from the cache's plain load (``y_plain``, by transposed tiles), and the folds' register tile reads
V's cache in place on the full blocks below L (``TileFold.stop``); the block holding the new key
runs the general pass. Before/after (qwen-decode-step, 14 heads, 2 K/V heads, 1025 keys)::

    s block: member nest per query head (tiles of 1 head), K and V read 14 times per call
    s block: PackedScores(rows: 7 h per K/V head, 2 x 17 key blocks packed once per call,
             below key 1024 from l0_k_cache); P x V: 7 rows x 2 vectors of e, V in place

Inference only (the pass is). Each score is one FMA chain over ``d`` ascending.
The packed column factor reads only the function's inputs (a factor computed inside the
region is produced per tile, after the packing would run): otherwise None (the member nest).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Const,
    DType,
    Expr,
    IndexAdd,
    IndexConst,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    IndexValue,
    Kernel,
    Load,
    Where,
    expr_axes,
    expr_loads,
    index_axes,
    walk_expr,
)
from weft.lower.access import transposable
from weft.lower.contraction import MICRO_ROWS, plain_index, split_contraction
from weft.lower.nest import BufferView

TILE_REGISTERS = 24
"""Accumulators of the register tile (6 rows x 4 vectors at 16 lanes, as the contraction
microkernel; 3 x 8 at 8 lanes, 1 x 16 at 4, for a key block of 64)."""

GROUP_ROWS = 8
"""Most query heads of one K/V head the register tile takes as its rows (``PackedScores.group``):
a larger group runs as tiles of its largest divisor up to this (16 heads: two tiles of 8)."""


@dataclass(frozen=True, slots=True)
class PackedScores:
    """The streamed contraction of a one pass on the register tile (module doc)."""

    kernel: Kernel
    x_factor: Expr  # the row factor (q), packed per tile
    y_factor: Expr  # the column factor (k), packed once per call
    row_axis: str  # the contraction's row axis (i), walked by the pass's last row variable
    column_axis: str  # the contraction's column axis (j): the pass axis
    fold_axis: str  # d
    batch_axes: tuple[tuple[str, int], ...]  # (axis, extent): one packed panel per point
    env: tuple[tuple[str, str], ...]  # the contraction's axes -> the pass's row variables
    depth: int  # points of the fold (d)
    extent: int  # points of the pass axis
    block: int  # columns per key block (the pass's block)
    lanes: int
    rows: int = MICRO_ROWS
    packed_k: str = "wa_kp"
    scale: float = 1.0  # the body's constant factors, folded into the packed row factor (Inference: q * c, then the FMA chain)
    mask: Expr | None = None  # causal: where(mask, sum, masked) with mask free of the fold axis
    masked: float = 0.0
    k_transposed: bool = False  # full key blocks packed by lanes x lanes tiles transposed in registers
    divisors: tuple[int, ...] = ()  # per batch axis: y reads it as axis // divisor (grouped-query K: g)
    group: int = 1  # > 1: row_axis is the head axis, and the register tile's rows are heads of one K/V head
    column_vectors: int = 0  # vectors of the key block per pass over the fold (0: the whole block)
    y_plain: Load | None = None  # y is a concat: below y_stop it is this plain load (the cache)
    y_stop: int = 0  # keys below it read y_plain; the rest (the new key) the whole y factor

    @property
    def blocks(self) -> int:
        return -(-self.extent // self.block)

    def divisor(self, axis: str) -> int:
        """How many points of batch ``axis`` share one packed panel (1 unless y reads it as ``axis // g``)."""
        for (name, _), divisor in zip(self.batch_axes, self.divisors or (1,) * len(self.batch_axes), strict=True):
            if name == axis:
                return divisor
        return 1

    @property
    def panel_axes(self) -> tuple[tuple[str, int], ...]:
        """(batch axis, panels along it): one panel per K/V head where y reads the head as ``h // g``."""
        return tuple((axis, extent // self.divisor(axis)) for axis, extent in self.batch_axes)

    @property
    def batch_points(self) -> int:
        """Packed panels: one per point of the batch axes y reads (a K/V head, not a query head)."""
        return math.prod(extent for _, extent in self.panel_axes)

    @property
    def plain_blocks(self) -> int:
        """Key blocks wholly below ``y_stop`` (every block when y is one plain load)."""
        return (self.y_stop if self.y_plain is not None else self.extent) // self.block

    @property
    def chunk(self) -> int:
        """Vectors of the key block each pass over the fold computes (the register budget)."""
        return self.column_vectors or self.block // self.lanes

    @property
    def panel_floats(self) -> int:
        """Floats of one batch point's packed column factor."""
        return self.blocks * self.depth * self.block

    def describe(self) -> str:
        batch = f"{self.batch_points} x " if self.batch_axes else ""
        grouped = f", rows: {self.rows} of {self.group} {self.row_axis} per K/V head" if self.group > 1 else ""
        plain = f", below key {self.y_stop} from {self.y_plain.buffer}" if self.y_plain is not None else ""
        return (f"{self.kernel.output}: packed register tile {self.rows}x{self.block} over {self.fold_axis} "
                f"({self.depth}), {batch}{self.blocks} key blocks packed once per call{grouped}{plain}")


def packed_scores(
    kernel: Kernel, env: dict[str, str], row_var: str, row_outer_vars: set[str], views: dict[str, BufferView],
    extent: int, block: int, lanes: int, private: set[str], tile_rows: int = MICRO_ROWS,
) -> PackedScores | None:
    """The register-tile form of the streamed member ``kernel`` (module doc), or None.

    ``env``: the member's axes -> the pass's variables (rows, and ``wo_j`` for the pass axis);
    ``row_var``: the pass's last (innermost) row variable; ``row_outer_vars``: the others;
    ``tile_rows``: the tile's rows along ``row_var`` (a decode step's one query: a 1-row tile).
    When ``row_var`` walks a head axis that K reads as ``h // g`` (``head_group``), the
    register tile's rows are the query heads of one K/V head (``PackedScores.group``); the
    caller makes the tile a whole number of groups.
    """
    if block % lanes or lanes < 4 or len(kernel.fold_axes) != 1:
        return None
    mask, masked, body = _masked_body(kernel)
    if body is None:
        return None
    product = dataclasses.replace(kernel, body=body)
    split = split_contraction(product, views)
    if split is None:
        return None
    x, y, term, rows, column, batch = split
    extents = {axis.name: axis.extent for axis in kernel.all_axes}
    divisors = tuple(head_divisor(y, axis, extents[axis]) for axis in batch)
    inner = [axis for axis in rows if env.get(axis) == row_var]
    group = 1
    if not inner:  # the rows are heads of one K/V head: the head axis is a batch axis K reads as h // g
        inner = [axis for axis, g in zip(batch, divisors, strict=True) if g > 1 and env.get(axis) == row_var]
        if len(inner) == 1:
            group = divisors[batch.index(inner[0])]
            if tile_rows % group:
                return None
    if env.get(column) != "wo_j" or len(inner) != 1:
        return None
    # every other axis is fixed per tile row point: batch axes pick the packed panel, and a row
    # axis y does not read (the query heads of one K/V head) shares it
    if any(env.get(axis) not in row_outer_vars for axis in batch + rows if axis != inner[0]):
        return None
    leaves = _product_leaves(body)
    if [leaf for leaf in leaves if not isinstance(leaf, Const)] not in ([x, y], [y, x]) or not _product_only(body, y):
        return None
    scale = math.prod(float(leaf.value) for leaf in leaves if isinstance(leaf, Const))
    if {load.buffer for load in expr_loads(y)} & private:
        return None  # produced inside the region: not ready before the tile loop
    if any(views[load.buffer].dtype is not DType.FLOAT32 for load in expr_loads(x) + expr_loads(y)):
        return None
    concat = None if isinstance(y, Load) else concat_prefix(y, column, views, extents)
    if not isinstance(y, Load) and concat is None:
        return None
    plain, stop = concat if concat is not None else (None, 0)
    fold = kernel.fold_axes[0]
    transposed = _rows_along_fold(plain or y, views, column, fold.name) and fold.extent >= lanes
    vectors = block // lanes
    if group > 1:
        tile = max(n for n in range(1, min(GROUP_ROWS, group) + 1) if group % n == 0)
    else:
        tile = max(1, min(MICRO_ROWS, TILE_REGISTERS // vectors, tile_rows))
    chunk = max(c for c in range(1, vectors + 1) if vectors % c == 0 and (c == 1 or tile * c <= TILE_REGISTERS))
    return PackedScores(
        kernel=kernel, x_factor=x, y_factor=y, row_axis=inner[0], column_axis=column, fold_axis=fold.name,
        batch_axes=tuple((axis, extents[axis]) for axis in batch), env=tuple(env.items()), depth=fold.extent,
        extent=extent, block=block, lanes=lanes, rows=tile, scale=scale, mask=mask, masked=masked,
        k_transposed=transposed, divisors=divisors, group=group, column_vectors=0 if chunk == vectors else chunk,
        y_plain=plain, y_stop=stop,
    )


def head_divisor(expr: Expr, axis: str, extent: int) -> int:
    """g when every read of ``axis`` in ``expr`` is ``axis // g`` (grouped-query K and V:
    query head h reads K/V head h // g) and g divides ``extent``; else 1."""
    found: set[int] = set()

    def visit(index) -> None:
        if isinstance(index, IndexFloorDiv) and index.operand == AxisIndex(axis):
            found.add(index.divisor)
        elif isinstance(index, AxisIndex):
            if index.axis == axis:
                found.add(1)
        elif isinstance(index, IndexAdd):
            visit(index.left)
            visit(index.right)
        elif isinstance(index, IndexMul | IndexFloorDiv | IndexMod):
            visit(index.operand)
        elif isinstance(index, IndexOf):
            found.add(1)

    for node in walk_expr(expr):
        for index in node.index if isinstance(node, Load) else (node.index,) if isinstance(node, IndexValue) else ():
            visit(index)
    if len(found) != 1:
        return 1
    (divisor,) = found
    return divisor if divisor > 1 and extent % divisor == 0 else 1


def head_group(kernel: Kernel, views: dict[str, BufferView]) -> tuple[str, int] | None:
    """(head axis, g) when the contraction ``kernel``'s column factor (K) reads a batch axis as
    ``h // g`` with g > 1: the query heads the register tile may take as its rows."""
    _, _, body = _masked_body(kernel)
    if body is None or len(kernel.fold_axes) != 1:
        return None
    split = split_contraction(dataclasses.replace(kernel, body=body), views)
    if split is None:
        return None
    _, y, _, _, _, batch = split
    extents = {axis.name: axis.extent for axis in kernel.all_axes}
    for axis in batch:
        divisor = head_divisor(y, axis, extents[axis])
        if divisor > 1:
            return axis, divisor
    return None


def concat_prefix(expr: Expr, column: str, views: dict[str, BufferView], extents: dict[str, int]) -> tuple[Load, int] | None:
    """(plain load, L) when ``expr`` is a concat along ``column`` whose first part is one plain
    load (``where(column < L, cache[..., column, ...], rest)``, a decode step's keys or values:
    the cache, then the new token's entry), in range for every point below L; else None."""
    if not isinstance(expr, Where) or not isinstance(expr.if_true, Load):
        return None
    condition, load = expr.condition, expr.if_true
    if not (isinstance(condition, Binary) and condition.op is BinaryOp.LT and condition.left == IndexValue(AxisIndex(column))
            and isinstance(condition.right, Const) and isinstance(condition.right.value, int)):
        return None
    stop = condition.right.value
    shape = views[load.buffer].shape
    if stop <= 0 or len(shape) != len(load.index):
        return None
    for index, size in zip(load.index, shape, strict=True):
        if index == AxisIndex(column):
            if stop > size:
                return None
        elif isinstance(index, AxisIndex):
            if extents.get(index.axis, size + 1) > size:
                return None
        elif isinstance(index, IndexConst):
            if not 0 <= index.value < size:
                return None
        elif isinstance(index, IndexFloorDiv) and isinstance(index.operand, AxisIndex):
            if -(-extents.get(index.operand.axis, 0) // index.divisor) > size or index.operand.axis not in extents:
                return None
        else:
            return None
    return dataclasses.replace(load, padding=None), stop


def _rows_along_fold(y: Expr, views: dict[str, BufferView], column: str, fold: str) -> bool:
    """K is one plain float32 load strided along the keys and unit-stride along the fold (rows
    contiguous along ``d``, as attention's keys; ``weft.lower.access.transposable``): its full
    key blocks are then packed by lanes x lanes tiles, one vector load per key and an
    in-register transpose (``k_transposed``), not element by element (measured 0.4 against
    1.45 cycles per element, vit-block's 64-key windows: the whole pass 0.918 of the
    element-by-element packing, same bytes)."""
    if not isinstance(y, Load) or any(isinstance(index, IndexOf) for index in y.index):
        return False
    # the keys' and the fold's dimensions plain; the others (a K/V head, h // g) any plain index
    if not all(isinstance(index, AxisIndex) or not index_axes(index) & {column, fold} for index in y.index):
        return False
    if not all(plain_index(index) for index in y.index):
        return False
    view = views[y.buffer]
    return view.dtype is DType.FLOAT32 and transposable(y, view.strides, column, fold)


def row_group_sizes(extent: int, size: int, rows: int) -> list[int]:
    """Tile sizes along the register tile's rows to try instead of ``size``: multiples of
    ``rows`` from 3/4 to 3/2 of ``size`` that compute fewer rows than ``size`` does over
    ``extent`` (a tile's last group repeats its last row where it falls short), the fewest
    first, then those dividing ``extent`` (equal tiles: threads that share them evenly share
    the work evenly; 5184 x 32 in tiles of 66 left a last tile of 36 rows, 79 tiles for 2
    threads), then the nearest to ``size`` (the budget it was chosen for), then the larger."""
    def computed(tile: int) -> int:
        whole, rest = divmod(extent, tile)
        return whole * -(-tile // rows) * rows + -(-rest // rows) * rows

    now = computed(size)
    candidates = [tile for tile in range(rows, size * 3 // 2 + 1, rows)
                  if tile * 4 >= size * 3 and tile <= extent and computed(tile) < now]
    return sorted(candidates, key=lambda tile: (computed(tile), extent % tile != 0, abs(tile - size), -tile))


def _masked_body(kernel: Kernel) -> tuple[Expr | None, float, Expr | None]:
    """(mask, masked value, product) of a body ``where(mask, product, c)`` whose mask does not
    read the fold axis and whose ``c`` sums to itself over any number of terms (±inf, 0): the
    fold of it is ``where(mask, sum product, c)`` (causal attention's scores); (None, 0, body)
    for any other body."""
    body = kernel.body
    if not isinstance(body, Where):
        return None, 0.0, body
    fold = {axis.name for axis in kernel.fold_axes}
    if expr_axes(body.condition) & fold or not isinstance(body.if_false, Const):
        return None, 0.0, None
    value = float(body.if_false.value)
    if not (math.isinf(value) or value == 0.0):
        return None, 0.0, None
    return body.condition, value, body.if_true


def _product_leaves(expr: Expr) -> list[Expr]:
    if isinstance(expr, Binary) and expr.op is BinaryOp.MUL:
        return _product_leaves(expr.left) + _product_leaves(expr.right)
    return [expr]


def _product_only(expr: Expr, y: Expr) -> bool:
    """A tree of multiplications of loads and float constants (the tile computes ``sum x * y``
    and multiplies the constants in once); ``y`` may be any expression (it is packed, element by
    element where it is not one plain load: a concat of a cache and the new key)."""
    return all(leaf is y or (isinstance(leaf, Load | Const) and (not isinstance(leaf, Const) or leaf.dtype is DType.FLOAT32))
               for leaf in _product_leaves(expr))


@dataclass(frozen=True, slots=True)
class TileFold:
    """The pass's folds applied on the scores' register tile, for every full key block.

    Per group of ``MICRO_ROWS`` rows: the reference terms from the accumulators, the block
    max (one horizontal reduction per row), one rescale per row when it moved, the terms of
    each dependent without an axis of its own (the row sum, a vector accumulator per row),
    and for the one dependent with an axis of its own (the output's ``e``) whose term is
    ``p * rest`` (``p = exp(t - m)`` along the pass axis, ``rest = V[j, e]`` the same for
    every row): ``p`` parked in a row-group scratch, then ``rows x chunk_vectors`` output
    accumulators take every key of the block (the contraction microkernel's tile, ``p``
    broadcast, ``rest`` a vector along ``e``). A partial last block runs the general pass.

    ``pack_rest``: when ``rest`` is not one unit-stride load along ``e`` (a transposed or
    gathered V), it is packed once per call, like K, into ``[batch point][key][e]``; its row
    axes must be the scores' batch axes (the panel's index). A unit-stride V is read in place:
    its rows are already the tile's y operand.

    ``rest_head``: with the scores' rows the query heads of one K/V head (``PackedScores.group``),
    rest may read the head axis as ``h // g`` (grouped-query V): every row of a register tile
    reads the same V row, once per group. ``stop``: rest is a concat (a decode step's values, the
    cache then the new token's): full key blocks below ``stop`` read the cache's plain load in
    place; the others (the new token's block) run the general pass.

    ``plain_max``: when nothing but the pass reads the reference (the row max), the block max
    folds lanes by compare-select instead of the NaN-propagating max: a NaN score still makes
    its term ``exp(NaN - m)`` NaN, so every output of the row is NaN as the oracle's is, and
    only the unread max itself could differ. A member after the pass that reads the max
    (attention's fully-masked-row select, ``m == -inf``) would see -inf where the oracle's max
    is NaN (a NaN score at a masked key: ``NaN + -inf``) and give 0 for the oracle's NaN.
    """

    value_dependent: int | None  # index into OnlinePass.dependents
    hoisted: Expr | None  # p: varies along the pass axis, not along the extra axis
    rest: Expr | None  # the same for every row
    chunk_vectors: int = 0  # output vectors per register tile row
    plain_max: bool = False  # only the pass reads the reference: its lanes fold by compare-select (module doc)
    pack_rest: bool = False  # rest is not one unit-stride load along e: packed once per call (wa_vp)
    rest_env: tuple[tuple[str, str], ...] = ()  # with pack_rest: rest's row axes -> the scores' batch axes
    packed_v: str = "wa_vp"
    rest_head: bool = False  # rest reads the rows' head axis as h // g: one V row per K/V head, for the whole group
    stop: int | None = None  # full key blocks ending at or below it take the tile (rest: a concat's cache part)
    prefetch_rest: bool = False  # rest is read once per call (each tile its own rows): the next block's prefetched

    def rest_floats(self, extent: int, value_extent: int) -> int:
        """Floats of one batch point's packed rest (``extent`` keys x ``value_extent``)."""
        return extent * value_extent


def tile_fold(online_pass, lanes: int, unseen: bool, members: set[str]) -> TileFold | None:
    """The register-tile form of ``online_pass``'s folds (``TileFold``), or None (``unseen``:
    nothing but the pass reads the reference, so its lanes may fold by compare-select): the
    reference folds a max, every dependent a sum, and at most one dependent has an axis of
    its own, a whole number of vectors long, with a ``p * rest`` term as above."""
    from weft.ir import Binary, BinaryOp, Combiner, expr_axes

    scores = online_pass.scores
    if scores is None or online_pass.online.reference_combiner is not Combiner.MAX:
        return None
    row_var = online_pass.rows[-1][1]
    value, hoisted, rest, chunk, rest_head = None, None, None, 0, False
    for number, dependent in enumerate(online_pass.dependents):
        if dependent.fold.combiner is not Combiner.SUM:
            return None
        if not dependent.extras:
            continue
        if value is not None or len(dependent.extras) != 1:
            return None
        extra_axis = dependent.extras[0][0]
        if extra_axis.extent % lanes:
            return None
        term, fold_axis = dependent.fold.term, dependent.fold.fold_axis
        if not (isinstance(term, Binary) and term.op is BinaryOp.MUL):
            return None
        row_axes = {axis for axis, var in dependent.env if var == row_var}
        extents = {axis.name: axis.extent for axis in dependent.kernel.all_axes}
        for p, r in ((term.left, term.right), (term.right, term.left)):
            p_axes, r_axes = expr_axes(p), expr_axes(r)
            if fold_axis not in p_axes or extra_axis.name in p_axes:
                continue
            shared = r_axes & row_axes  # grouped: the rows' head, read as h // g, is one V row per group
            grouped = scores.group > 1 and all(head_divisor(r, axis, extents[axis]) == scores.group for axis in shared)
            if not shared or grouped:
                hoisted, rest, rest_head = p, r, bool(shared)
                break
        else:
            return None
        value = number
        vectors = extra_axis.extent // lanes
        chunk = next(c for c in (4, 3, 2, 1) if vectors % c == 0 and (c == 1 or scores.rows * c <= TILE_REGISTERS))
    pack_rest, rest_env, stop = False, (), None
    if value is not None:
        dependent = online_pass.dependents[value]
        (extra_axis, _), = dependent.extras
        extents = {axis.name: axis.extent for axis in dependent.kernel.all_axes}
        concat = concat_prefix(rest, dependent.fold.fold_axis, online_pass.local_views, extents)
        if concat is not None and _in_place(concat[0], extra_axis.name, online_pass.local_views):
            rest, stop = concat  # the cache's V in place below its length; the new token's block: general pass
        elif not _in_place(rest, extra_axis.name, online_pass.local_views):
            packed = _rest_packing(online_pass, dependent, rest, members)
            if packed is None:
                return None
            pack_rest, rest_env = True, packed
    prefetch = value is not None and not pack_rest and _streamed_once(online_pass, online_pass.dependents[value], rest)
    return TileFold(value, hoisted, rest, chunk, unseen, pack_rest, rest_env, rest_head=rest_head, stop=stop,
                    prefetch_rest=prefetch)


def _streamed_once(online_pass, dependent, rest: Expr) -> bool:
    """Each tile reads its own rows of ``rest`` (V), once per call: every row of the pass that
    rest does not read (the queries) is whole in the tile, so the tiles split V between them (a
    decode step: one query, tiles of K/V heads). Then V streams from memory and the value tile
    prefetches the next key block's rows under this block's FMAs (cache cold, qwen shapes: 0.67x
    the pass without); where the query tiles share V (attention 5184 x 32: V in L2 for every
    tile) the prefetches would only be extra instructions (1.03x)."""
    from weft.ir import expr_axes

    env = dict(dependent.env)
    read = {env[axis] for axis in expr_axes(rest) if axis in env}
    extents = {axis.name: axis.extent for axis in online_pass.reference.axes}
    return all(count == extents[axis] for (axis, var, _, _), count in zip(online_pass.rows, online_pass.row_counts,
                                                                            strict=True) if var not in read)


def _in_place(rest: Expr, axis: str, views) -> bool:
    """``rest`` is one plain load, unit stride along ``axis`` (attention's row-major V)."""
    from weft.ir import IndexOf
    from weft.lower.access import address_step

    if not isinstance(rest, Load) or rest.padding is not None:
        return False
    if any(isinstance(index, IndexOf) for index in rest.index):
        return False
    return address_step(rest, views[rest.buffer].strides, axis) == 1


def _rest_packing(online_pass, dependent, rest: Expr, members: set[str]) -> tuple[tuple[str, str], ...] | None:
    """(rest's axis, the scores' batch axis at the same row variable) for every axis of rest
    other than the pass and extra axes, or None when rest cannot be packed before the tile
    loop (it reads a buffer of the region, or varies along a row the panel does not index)."""
    from weft.ir import expr_axes

    if {load.buffer for load in expr_loads(rest)} & members:
        return None
    scores = online_pass.scores
    batch_of_var = {dict(scores.env)[axis]: axis for axis, _ in scores.batch_axes}
    env = dict(dependent.env)
    extra = {axis.name for axis, _ in dependent.extras}
    extents = {axis.name: axis.extent for axis in dependent.kernel.all_axes}
    pairs = []
    for axis in sorted(expr_axes(rest) - extra - {dependent.fold.fold_axis}):
        if env.get(axis) not in batch_of_var:
            return None
        batch_axis = batch_of_var[env[axis]]
        if scores.divisor(batch_axis) > 1 and head_divisor(rest, axis, extents[axis]) != scores.divisor(batch_axis):
            return None  # one packed V panel per K/V head: rest must read the head as K does
        pairs.append((axis, batch_axis))
    return tuple(pairs)
