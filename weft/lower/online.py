"""The rescaled one-pass lowering of a region (Inference only; the rewrite comes from
``weft.compose.one_pass`` as data). The pass is data too (``OnlinePass``);
``weft.codegen.online`` writes its C.

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
            if new != ref[r] and ref[r] != -inf:          /* one rescale per block */
                c = exp(b(new) - b(ref[r]))
                acc_l[r] = acc_l[r] * c                    /* same for acc_o[r][:] */
            run = new == -inf ? 0 : new                    /* a masked prefix: see below */
            for j in the block (vectors along j):
                acc_l[r] += exp(t[j] - run); acc_o[r][e] += exp(t[j] - run) * v[j,e]
            ref[r] = new
    m[r] = ref[r]; l[r], o[r,e] = ref[r] == -inf ? NaN : (acc_l[r], acc_o[r][e] / l[r])

Two details keep every row right. While a row's keys so far are all masked its
reference is -inf; against it the terms would be ``exp(-inf - -inf)``, NaN, while against
the final reference they are ``exp(-inf) = 0``. So they fold against 0 instead: the masked
prefix contributes exactly ``0 * v`` (0, or NaN where a masked key's V row is NaN or inf,
as in the oracle), and when the reference becomes finite the accumulators are kept, not
rescaled. The rewrite admits only exponents of this distance form, ``exp(t - R)`` with
``t`` the reference's own term (``weft.compose.rescale``). A row masked to the end is NaN,
the oracle's ``exp(-inf - -inf)``. And when
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

When the one streamed member is a contraction along the pass axis (attention's scores),
it runs on the contraction microkernel's register tile instead of its member nest
(``weft.lower.online_scores``: K packed once per call before the tile loop, Q once per
tile), and when the folds allow (a max reference, sum dependents, at most one with an
axis of its own and a ``p * V`` term) every full key block runs on that tile: block max,
rescale, exp and row sums on the score registers, ``P x V`` on a rows x ``e`` tile
(``OnlinePass.scores``, ``OnlinePass.tile``). A partial last block runs the pass above.

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
from dataclasses import dataclass, field

from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Combiner,
    Const,
    DType,
    Expr,
    Kernel,
    Plan,
    expr_axes,
    expr_children,
    expr_loads,
    index_axes,
)
from weft.ir.substitute import map_expr
from weft.lower.access import row_major_strides
from weft.lower.contraction import MICRO_ROWS
from weft.lower.fused import (
    MIN_TILES,
    SCRATCH_BUDGET,
    Tiling,
    choose_tiling,
    function_params,
    region_function_name,
    region_scratch_bytes,
    region_tiling,
    scratch_views,
    tile_loop,
    tile_shape,
    tiled_nest,
)
from weft.lower.nest import AxisRange, BufferView, LoweredFunction, MemberNest, Scratch
from weft.lower.online_scores import (
    PackedScores,
    TileFold,
    head_group,
    packed_scores,
    row_group_sizes,
    tile_fold,
)
from weft.lower.region import FoldDependent, FusedRegion, OnePass, OnlineFold
from weft.lower.schedule import Target, storage_name
from weft.lower.values import LoopValue, Minimum, Sum, Var

PASS_LANES = 16
"""Upper bound of vector lanes, for sizing the per-row vector accumulators."""

PASS_BLOCK = 64
"""Points of the pass axis per block: streamed members are computed a block at a time."""

PIPE_BLOCK = 1024
"""Points of the pass axis per block of a pipelined row pass (``OnlinePass.pipelined``): 4 KiB
of float32, so block b-1 is still in L1 when its exps run beside block b's loads."""

MAX_ACCUMULATORS = 16384
"""Accumulators per dependent fold per row (a stack array in the pass)."""


class _Unmappable(Exception):
    pass


@dataclass(frozen=True, slots=True)
class PassDependent:
    fold: FoldDependent
    kernel: Kernel
    env: tuple[tuple[str, str], ...]
    extras: tuple[tuple[Axis, str], ...]
    accumulator: str

    @property
    def count(self) -> int:
        return math.prod(axis.extent for axis, _ in self.extras)



@dataclass(frozen=True, eq=False)
class OnlinePass:
    """One pass over the shared fold axis for the rows of a tile, as data (module doc);
    ``weft.codegen.online`` writes its C."""

    online: OnlineFold
    reference: Kernel
    rows: tuple[tuple[str, str, LoopValue, LoopValue], ...]  # (axis, row variable, start, stop)
    step: str
    streamed_nests: tuple[MemberNest, ...]
    dependents: tuple[PassDependent, ...]
    local_views: dict[str, BufferView] = field(repr=False)
    views: tuple[BufferView, ...] = ()
    lanes: int = 1
    block: int = 1
    row_count: int = 1
    fold_lanes: bool = False  # Inference: vectors along the pass axis
    row_counts: tuple[int, ...] = ()  # rows of the tile along each row axis
    rounded: bool = False  # the reference terms are kept (wo_t) and read back by the dependents
    scores: PackedScores | None = None  # the streamed contraction on the register tile (online_scores)
    tile: TileFold | None = None  # the folds on that register tile, full key blocks (online_scores)
    plain_max: bool = False  # only the pass reads the reference: the block max folds by compare-select
    # (``TileFold.plain_max``: a NaN term still makes its row's outputs NaN)

    @property
    def name(self) -> str:
        return f"online pass of {self.online.anchor}"

    @property
    def pipelined(self) -> bool:
        """A plain row pass (nothing streamed, whole rows in one block) that runs its rows in
        blocks of ``PIPE_BLOCK`` points, block b's max beside block b-1's exps
        (``weft.codegen.online_rows``): each point is read from memory once, the dependents
        re-read it from L1."""
        extent = self.online.extent
        return (
            self.fold_lanes and not self.streamed_nests and not self.rounded and self.block == extent
            and extent >= 2 * PIPE_BLOCK and PIPE_BLOCK % self.lanes == 0 and bool(self.dependents)
            and all(dependent.count == 1 for dependent in self.dependents)
            and self.local_views[self.reference.output].dtype is DType.FLOAT32
        )


def _has_product(expr: Expr) -> bool:
    if isinstance(expr, Binary) and expr.op is BinaryOp.MUL:
        return True
    return any(_has_product(child) for child in expr_children(expr))


# ---------------------------------------------------------------------- building


def _bind(exprs, dims: dict[str, list[str | None]], env: dict[str, str]) -> None:
    """Extend ``env`` (axis -> loop variable) from loads of buffers whose dimensions have variables."""
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


def _dependent_exprs(dependent: FoldDependent) -> list[Expr]:
    return [dependent.term, *([dependent.exponent] if dependent.exponent is not None else []),
            *dependent.scale_by, *dependent.divide_by, *(expr for _, expr in dependent.offsets)]


def build_pass(plan: Plan, region: FusedRegion, online: OnlineFold, streamed: dict[str, int],
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
            rows.append((axis.name, var, 0, axis.extent))
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
        stop = Minimum(Sum(Var("wo_jb"), block), online.extent)
        ranges = tuple(AxisRange(r.axis, Var("wo_jb"), stop) if r.axis == step_axis else r for r in nest.ranges)
        streamed_nests.append(dataclasses.replace(nest, ranges=ranges))
    touched = {load.buffer for expr in [online.reference_term] + [e for d in online.dependents for e in _dependent_exprs(d)]
               for load in expr_loads(expr)}
    touched |= {load.buffer for name in streamed for load in expr_loads(plan.kernel(name).body)}
    touched |= set(online.members)
    touched -= set(streamed)
    views = tuple(local_views[name] for name in sorted(touched))
    row_count = math.prod(counts)
    # a product in the reference terms could be contracted into an FMA differently where the
    # dependents recompute it: keep the terms the max folded (wo_t) and read those back
    rounded = _has_product(online.reference_term)
    if not streamed and not rounded:  # nothing to compute per block: each row walks the whole axis
        block = online.extent
    fold_lanes = target.lanes > 1 and online.extent >= target.lanes and local_views[reference.output].dtype.is_float
    scores = None
    if len(streamed) == 1 and fold_lanes:
        (name,) = streamed
        kernel = plan.kernel(name)
        for order in _row_orders(kernel, envs[name], rows, counts, local_views):
            ordered_rows, ordered_counts = [rows[n] for n in order], [counts[n] for n in order]
            scores = packed_scores(kernel, envs[name], ordered_rows[-1][1], {var for _, var, _, _ in ordered_rows[:-1]},
                                   local_views, online.extent, block, target.lanes, set(region.members),
                                   ordered_counts[-1])
            if scores is not None:
                rows, counts = ordered_rows, ordered_counts
                break
    online_pass = OnlinePass(
        online, reference, tuple(rows), "wo_j", tuple(streamed_nests), tuple(dependents), local_views, views,
        target.lanes, block, row_count, fold_lanes, tuple(counts), rounded, scores,
    )
    # the block max may drop a NaN (compare-select) only where nothing but the pass reads the max:
    # attention's fully-masked-row select reads it, and a NaN max there is a NaN row, not a masked one
    unseen = all(reader in set(online.members) | set(online.dissolved) for reader in plan.readers_of(reference.output))
    tile = tile_fold(online_pass, target.lanes, unseen, set(region.members))
    return dataclasses.replace(online_pass, tile=tile, plain_max=unseen)


def _row_orders(kernel: Kernel, env: dict[str, str], rows, counts, views) -> list[list[int]]:
    """Orders of the tile's rows to try for the register tile (its rows: the last): the head
    axis last when K reads it as ``h // g`` and the tile holds whole groups of it (``head_group``:
    the query heads of one K/V head are the register tile's rows), then the reference's order."""
    plain = list(range(len(rows)))
    found = head_group(kernel, views)
    if found is None:
        return [plain]
    axis, group = found
    position = next((n for n, (_, var, _, _) in enumerate(rows) if var == env.get(axis)), None)
    if position is None or counts[position] % group:
        return [plain]
    return [[n for n in plain if n != position] + [position], plain]


def head_group_tiling(plan: Plan, region: FusedRegion, tiling: Tiling, online_pass: OnlinePass, fits) -> Tiling | None:
    """A tiling in tiles of one group of query heads (the g heads reading one K/V head as
    ``h // g``) when the register tile's rows are queries of one head and fewer than the group
    (a decode step: one query per head, so a 1-row tile that reads every K and V row once per
    query head), else None. The grouped pass reads each K and V row once per group."""
    scores = online_pass.scores
    if scores is None or scores.group > 1:
        return None
    found = head_group(scores.kernel, online_pass.local_views)
    if found is None:
        return None
    axis, group = found
    if scores.rows >= min(group, MICRO_ROWS):
        return None  # the query rows already fill the register tile (a prefill)
    anchor_axis = next((anchor for anchor, mapping in tiling.maps if dict(mapping).get(scores.kernel.output) == axis), None)
    if anchor_axis is None:
        return None
    grouped = region_tiling(plan, region, group, anchor_axis)
    return grouped if fits(grouped) else None


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
            Var("wo_jb") if n == position else tiled[axis.name][0] if axis.name in tiled else 0
            for n, axis in enumerate(axes)
        )
        pointer = storage_name(f"block_{name}", taken)
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


def strided_dependent(plan: Plan, region: FusedRegion, online: OnlineFold) -> tuple[str, str] | None:
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


def one_pass_declined(plan: Plan, region: FusedRegion, online: OnlineFold,
                      schedule: tuple[tuple[str, ...], tuple[str, ...]] | None, packed: str | None = None) -> str | None:
    """Why the lowering prefers the plain fused form although the rewrite fired (None: it does not).
    ``schedule``: the members before and after the pass (``OnePass.schedule``); ``packed``: a
    dependent whose rest the register tile packs once per call (``TileFold.pack_rest``), so
    its strided read is paid once, not once per row."""
    strided = strided_dependent(plan, region, online)
    if strided is not None and strided[0] != packed:
        return (f"{strided[0]} would read {strided[1]} across its rows inside the pass (the pass axis is"
                " its inner dimension): plain fused form")
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
    A member the pass runs on the packed register tile is not factored
    (``lower_online_region``): its factor goes into the packed queries instead.
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


def row_group_tiling(plan: Plan, region: FusedRegion, tiling: Tiling, online_pass: OnlinePass, fits) -> Tiling | None:
    """A tiling whose tile along the register tile's rows is a whole number of its row groups
    (``row_group_sizes``), or None when ``tiling``'s already is or none that fits wastes less.

    A row group past the tile's last row repeats that row (``PackedScores``): attention
    5184 x 32 in tiles of 64 queries ran 11 groups of 6 rows per tile, 66 rows' scores, exps
    and P x V for 64 (3%); tiles of 72 run 12 groups and none twice."""
    scores = online_pass.scores
    if scores is None or scores.rows <= 1 or not tiling.axes:
        return None
    primary, extent, size = tiling.axes[-1]
    _, _, start, _ = online_pass.rows[-1]
    if isinstance(start, int) or online_pass.row_counts[-1] != size or size % scores.rows == 0:
        return None  # the rows are not tiled along the primary axis, or already in whole groups
    for candidate in row_group_sizes(extent, size, scores.rows):
        regrouped = region_tiling(plan, region, candidate, primary)
        if regrouped.count >= min(MIN_TILES, tiling.count) and fits(regrouped):
            return regrouped
    return None


def lower_online_region(
    plan: Plan, region: FusedRegion, found: OnePass | None, views: dict[str, BufferView], target: Target,
    taken: set[str],
) -> LoweredFunction | None:
    """The one-pass function for ``region`` given the rewrite's ``found`` pass (from
    ``weft.compose.one_pass``), or None (no pass, or a map the pass cannot follow)."""
    if target.contract != "inference" or region.tile_axis is None or found is None:
        return None
    streamed = dict(found.streamed)
    whole_plan, whole_online = plan, found.online
    plan, online = factor_streamed_constants(plan, found.online, streamed)
    skipped = set(online.dissolved) | set(streamed)
    kept_private = tuple(name for name in region.private if name not in skipped)
    block = min(online.extent, PASS_BLOCK)

    def fits(tiling: Tiling) -> bool:
        blocks = sum(
            math.prod(tile_shape(plan, name, tiling)) // plan.kernel(name).axes[position].extent * block
            for name, position in streamed.items()
        )
        used = region_scratch_bytes(plan, region, tiling, kept_private) + 4 * blocks + _state_bytes(plan, online, tiling)
        return used <= SCRATCH_BUDGET

    def lowered_pass(tiling: Tiling):
        """(pass, local views, scratch, names taken, (plan, online) it was built from)."""
        probe = set(taken)
        local_views, scratch = scratch_views(plan, views, tiling, probe, kept_private)
        streamed_views, streamed_scratch = block_views(plan, streamed, tiling, block, probe)
        local_views.update(streamed_views)
        online_pass = build_pass(plan, region, online, streamed, local_views, tiling, block, target)
        source = (plan, online)
        if online_pass.scores is not None and plan is not whole_plan:
            # on the register tile the scores' constant factor goes into the packed row factor
            # (PackedScores.scale: once per q element and tile, not once per score): unfactored
            whole = build_pass(whole_plan, region, whole_online, streamed, local_views, tiling, block, target)
            if whole.scores is not None:
                online_pass, source = whole, (whole_plan, whole_online)
        return online_pass, local_views, scratch + streamed_scratch, probe, source

    tiling = choose_tiling(plan, region, target.lanes, fits)
    if tiling is None:
        return None
    try:
        online_pass, local_views, scratch, probe, (chosen_plan, chosen_online) = lowered_pass(tiling)
        regrouped = row_group_tiling(plan, region, tiling, online_pass, fits)
        if regrouped is not None:
            tiling = regrouped
            online_pass, local_views, scratch, probe, (chosen_plan, chosen_online) = lowered_pass(tiling)
        grouped = head_group_tiling(plan, region, tiling, online_pass, fits)
        if grouped is not None:
            candidate = lowered_pass(grouped)
            if candidate[0].scores is not None and candidate[0].scores.group > 1:
                tiling = grouped
                online_pass, local_views, scratch, probe, (chosen_plan, chosen_online) = candidate
    except _Unmappable:
        return None
    plan, online = chosen_plan, chosen_online
    tile = online_pass.tile
    packed = online_pass.dependents[tile.value_dependent].fold.member if tile is not None and tile.pack_rest else None
    if one_pass_declined(plan, region, online, found.schedule, packed) is not None:
        return None
    before, after = found.schedule
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

