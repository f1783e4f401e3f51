"""A fold-laned contraction (decode's matrix-vector products) in an order fixed by the plan,
its weight stream read from whole 64-byte lines whatever the weight's address.

Under Inference a fold-laned member folds its innermost axis in ``S = lanes x accumulators``
*slots*: step ``k`` belongs to slot ``k mod S``, each slot folds its steps in ascending order,
and the slots combine in one fixed order at the end (the accumulators lane by lane, then
the lanes). That order depends on the plan alone.

Vector loads that straddle two lines cost (4864 x 896 from L3: 245 us unaligned, 151 us
aligned), so when a row of the weight starts ``p`` floats past a line the vector loops
start at its first line, step ``k0 = (lanes - p) % lanes``, with the slots *rotated*: step
``k`` is folded into accumulator slot ``(k - k0) mod S``. The steps before ``k0`` (the
first of their slots) and those after the last whole vector (the last of theirs) are
folded one at a time into their own slots, and the slots are rotated back by ``k0`` (one
two-vector shuffle per accumulator) before they combine, so each slot has folded exactly
the steps, in exactly the order, it folds when the weight is aligned::

    k:     0 .. k0-1   k0 ..................................... K-1
           head         S-wide steps | whole vectors | one by one
    slot:  (k - k0) mod S, rotated back by k0 at the end  ->  k mod S

(Before this the peeled head went to the scalar accumulator, so the split of the fold
followed the address: two processes given equal arrays differed in the last bits.)

The head and the last steps are one masked vector each (``wfc_load_span_f``: only the
span's lanes read, ``wfc_span_sel_f``: only they combined) where every read moving with
the fold is contiguous; lane by lane through the stack otherwise (a vector stored, its
lanes rewritten, loaded again: a store-forwarding stall per row, which cost decode's
4864 x 896 rows from memory 40% of their bandwidth). Inside the vector loops the stream
and the staged loads (``weft.lower.fold_stream``) are read as whole 64-byte lines.
"""

from __future__ import annotations

from weft.codegen.body import SCALAR_TYPE, SUFFIX, VECTOR_TYPE
from weft.ir import DType, expr_loads, index_axes
from weft.lower.access import Access, has_index_of, load_access


def fold_lanes_by_index(writer, depth: int, point, fold_axis: str, extent: int, accumulators: list[str],
                        peel: tuple[str, object], identity: str) -> None:
    """Fold ``point``'s innermost axis (``extent`` steps, variable at 0) into the lane
    ``accumulators`` (holding ``identity``) in slot order (module docstring); ``peel``: the
    C expression for ``k0`` and the stream it aligns. Leaves the fold variable at ``extent``."""
    expression, stream = peel
    variable = writer.var[fold_axis]
    start = f"{variable}_peel"
    writer.emit(depth, f"const long {start} = {expression};")
    _stage(writer, depth, point, fold_axis, extent, start)
    masked = _maskable(writer, fold_axis)
    aligned = frozenset({stream})
    writer.emit(depth, f"if ({start} == 0) {{")
    _aligned(writer, depth + 1, point, fold_axis, extent, accumulators, aligned, masked)
    writer.emit(depth, "} else {")
    _rotated(writer, depth + 1, point, fold_axis, extent, accumulators, start, identity, aligned, masked)
    writer.emit(depth, "}")


def span_loop(writer, depth: int, point, fold_axis: str, extent: int, accumulators: list[str],
              aligned: frozenset = frozenset()) -> None:
    """``S``-wide steps while a whole span is left: accumulator ``n`` takes the ``n``-th vector."""
    lanes, variable = writer.nest.lanes, writer.var[fold_axis]
    span = lanes * len(accumulators)
    writer.emit(depth, f"for (; {variable} + {span} <= {extent}; {variable} += {span}) {{")
    writer.fold_terms(depth + 1, [(point, acc, {fold_axis: f"{variable} + {n * lanes}"})
                                  for n, acc in enumerate(accumulators)], fold_axis, aligned=aligned)
    writer.emit(depth, "}")


def _stage(writer, depth: int, point, fold_axis: str, extent: int, start: str) -> None:
    """Copy each staged load (``weft.lower.fold_stream``) into its thread's buffer, shifted so
    that its vectors start on a line where the stream's do: again only when the outer axes it
    reads (or the shift) changed since the last row of this thread."""
    lanes = writer.nest.lanes
    row, column, _vector = point
    env = writer.point_env(row, column)
    for load, pointer in writer.stages.items():
        writer.emit(depth, f"const long {pointer}_off = ({lanes} - {start}) % {lanes};")
        key = f"{pointer}_off"
        scale = lanes
        for axis in sorted(set().union(*map(index_axes, load.index)) - {fold_axis}):
            key = f"{key} + ({env[axis]}) * {scale}"
            scale *= writer.extents[axis]
        writer.emit(depth, f"if (({key}) != {pointer}_key) {{")
        writer.emit(depth + 1, f"{pointer}_key = {key};")
        step = writer.counter.fresh("wf_s")
        writer.emit(depth + 1, f"for (long {step} = 0; {step} < {extent}; {step}++) {{")
        renderer = writer.renderer(depth + 2, packed=False)
        renderer.env = {**env, fold_axis: step}
        value = renderer.render(load)
        renderer.emit(f"{pointer}[{pointer}_off + {step}] = {value.code};")
        writer.emit(depth + 1, "}")
        writer.emit(depth, "}")


def _maskable(writer, fold_axis: str) -> bool:
    """Whether every read moving with the fold is one contiguous float32 vector (the head and
    tail may then be masked loads: no lane outside the span is touched)."""
    for load in expr_loads(writer.kernel.body):
        if load in writer.stages or not any(fold_axis in index_axes(index) for index in load.index):
            continue  # a staged load is read from its contiguous copy
        view = writer.views[load.buffer]
        if (view.dtype is not DType.FLOAT32 or load.padding is not None or load in writer.panels
                or any(map(has_index_of, load.index))
                or load_access(load, view.strides, fold_axis) is not Access.CONTIGUOUS):
            return False
    return True


def _aligned(writer, depth: int, point, fold_axis: str, extent: int, accumulators: list[str],
             aligned: frozenset, masked: bool) -> None:
    """``k0 = 0``: slot ``k mod S`` is accumulator ``(k mod S) // lanes``, lane ``k mod lanes``;
    the bounds are static."""
    lanes, variable = writer.nest.lanes, writer.var[fold_axis]
    span = lanes * len(accumulators)
    span_loop(writer, depth, point, fold_axis, extent, accumulators, aligned)
    done = extent // span * span
    vectors = (extent - done) // lanes
    for n in range(vectors):
        writer.fold_terms(depth, [(point, accumulators[n], {fold_axis: f"{variable} + {n * lanes}"})], fold_axis,
                          aligned=aligned)
    if vectors:
        writer.emit(depth, f"{variable} += {vectors * lanes};")
    if done + vectors * lanes < extent:
        _last_steps(writer, depth, point, fold_axis, extent, accumulators[vectors], masked)


def _rotated(writer, depth: int, point, fold_axis: str, extent: int, accumulators: list[str], start: str,
             identity: str, aligned: frozenset, masked: bool) -> None:
    """``0 < k0 < lanes``: the head into the last accumulator's top lanes, the vector loops
    from ``k0``, whole vectors of the tail into the next accumulators, the last steps
    into the low lanes of the one after, and the accumulators rotated back by ``k0`` lanes."""
    lanes, variable = writer.nest.lanes, writer.var[fold_axis]
    dtype = writer.dtype
    suffix = SUFFIX[dtype]
    if masked:
        # the vector ``lanes - k0`` steps before ``k0``: its top ``k0`` lanes are steps 0 .. k0-1
        writer.fold_terms(depth, [(point, accumulators[-1], {fold_axis: f"{start} - {lanes}"})], fold_axis,
                          first=identity, span=(f"{lanes} - {start}", start))
        writer.emit(depth, f"{variable} = {start};")
    else:
        # each head step is the first of its slot, so its slot's lane is written, never read back
        # (a read-modify-write of a vector's lane made one store-to-load chain of the steps: decode
        # measured 9% slower); the lanes below the head keep the identity
        head = writer.counter.fresh("wf_head")
        scalar = SCALAR_TYPE[dtype]
        writer.emit(depth, "{")
        writer.emit(depth + 1, f"{scalar} {head}[{lanes}] __attribute__((aligned(64)));")
        writer.emit(depth + 1, f"wfc_store_{suffix}({head}, {accumulators[-1]});")
        writer.emit(depth + 1, f"for (; {variable} < {start}; {variable}++) {{")
        writer.fold_terms(depth + 2, [(point, f"{head}[{lanes} - {start} + {variable}]", {})], None,
                          first=identity)
        writer.emit(depth + 1, "}")
        writer.emit(depth + 1, f"{accumulators[-1]} = wfc_load_{suffix}({head});")
        writer.emit(depth, "}")
    span_loop(writer, depth, point, fold_axis, extent, accumulators, aligned)
    # fewer than S steps are left: whole vectors of them go to the slots after the last span,
    # the last few steps into the lanes of the next (each the last of its slot)
    at = depth
    for acc in accumulators[:-1]:
        writer.emit(at, f"if ({variable} + {lanes} <= {extent}) {{")
        writer.fold_terms(at + 1, [(point, acc, {})], fold_axis, aligned=aligned)
        writer.emit(at + 1, f"{variable} += {lanes};")
        at += 1
    _last_steps(writer, at, point, fold_axis, extent, accumulators[-1], masked)
    for acc in reversed(accumulators[:-1]):
        at -= 1
        writer.emit(at, "} else {")
        _last_steps(writer, at + 1, point, fold_axis, extent, acc, masked)
        writer.emit(at, "}")
    # rotated back: canonical accumulator n, lane l is rotated slot 16 n + l - k0, a lane of
    # accumulator n (l >= k0) or of accumulator n - 1 (l < k0): one two-vector shuffle each
    rotate = writer.counter.fresh("wf_rotate")
    iota = ", ".join(str(lane) for lane in range(lanes))
    writer.emit(depth, f"const wf_vi {rotate} = (wf_vi){{{iota}}} + (int32_t)({lanes} - {start});")
    back = [writer.counter.fresh("wf_back") for _ in accumulators]
    for n, name in enumerate(back):
        writer.emit(depth, f"const {VECTOR_TYPE[dtype]} {name} = __builtin_shuffle({accumulators[n - 1]},"
                           f" {accumulators[n]}, {rotate});")
    for acc, name in zip(accumulators, back, strict=True):
        writer.emit(depth, f"{acc} = {name};")


def _last_steps(writer, depth: int, point, fold_axis: str, extent: int, accumulator: str, masked: bool) -> None:
    """The fold's last steps (fewer than ``lanes``) into the low lanes of ``accumulator``: one
    masked vector, or lane by lane; leaves the fold variable at ``extent``."""
    if not masked:
        _steps_into(writer, depth, point, fold_axis, extent, accumulator)
        return
    variable = writer.var[fold_axis]
    count = writer.counter.fresh("wf_n")
    writer.emit(depth, f"if ({variable} < {extent}) {{")
    writer.emit(depth + 1, f"const long {count} = {extent} - {variable};")
    writer.fold_terms(depth + 1, [(point, accumulator, {})], fold_axis, span=("0", count))
    writer.emit(depth + 1, f"{variable} = {extent};")
    writer.emit(depth, "}")


def _steps_into(writer, depth: int, point, fold_axis: str, extent: int, accumulator: str) -> None:
    """The fold's last steps (fewer than ``lanes``) into the low lanes of ``accumulator``,
    through a buffer of its lanes (a lane of a vector variable updated in place is a
    store-to-load chain)."""
    lanes, variable, suffix = writer.nest.lanes, writer.var[fold_axis], SUFFIX[writer.dtype]
    lane_buffer, first = writer.counter.fresh("wf_lanes"), writer.counter.fresh("wf_first")
    writer.emit(depth, f"if ({variable} < {extent}) {{")
    writer.emit(depth + 1, f"{SCALAR_TYPE[writer.dtype]} {lane_buffer}[{lanes}] __attribute__((aligned(64)));")
    writer.emit(depth + 1, f"wfc_store_{suffix}({lane_buffer}, {accumulator});")
    writer.emit(depth + 1, f"const long {first} = {variable};")
    writer.emit(depth + 1, f"for (; {variable} < {extent}; {variable}++) {{")
    writer.fold_terms(depth + 2, [(point, f"{lane_buffer}[{variable} - {first}]", {})], None)
    writer.emit(depth + 1, "}")
    writer.emit(depth + 1, f"{accumulator} = wfc_load_{suffix}({lane_buffer});")
    writer.emit(depth, "}")


def orders_by_index(dtype: DType, fold_axes: int) -> bool:
    """Whether a fold-laned member may take the rotated form: one fold axis (the peel, and so
    the rotation, would change from one step of an outer fold axis to the next) of float32."""
    return dtype is DType.FLOAT32 and fold_axes == 1
