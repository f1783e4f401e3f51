"""The single-pass layer norm body (Welford, Inference): matcher and price.

Matches the four members ``weft.nn.layer_norm`` emits over the last axis (any leading
axes, weight and bias each optional)::

    mean[r]  = sum_c x[r, c] * inv_n
    cent[r, c] = x[r, c] - mean[r]
    var[r]   = sum_c ((cent[r, c] * s) * (cent[r, c] * s)) * inv_n         (s = 2**-32, exact)
    out[r, c] = ((cent[r, c] * s) * rsqrt(var[r] + eps')) (* w[c]) (+ b[c])

checked by rebuilding those bodies from the constants and buffers found and comparing
them with the plan's. The body reads each row once for its statistics (Welford's update
per vector lane, the lanes merged by Chan's formula) and once more, from cache, for the
output. Welford reorders the row folds, so it is Inference-only; under Strict the
generic fused form (the row tile in scratch, both folds in the oracle's order) serves.
"""

from __future__ import annotations

from weft.decide.library.adam import LibraryMatch, stream_parts
from weft.ir import AxisIndex, Binary, BinaryOp, Combiner, Const, DType, Load, Plan, Unary, UnaryOp


def _mul(a, b):
    return Binary(BinaryOp.MUL, a, b)


def match_layer_norm(plan: Plan, members: tuple[str, ...]) -> LibraryMatch | None:
    """A ``LibraryMatch`` for "welford layer norm" when ``members`` are exactly the four of
    the module doc, in that order, float32, normalising the last axis; else None."""
    if len(members) != 4:
        return None
    mean_name, centered_name, var_name, out_name = members
    mean, centered, var, out = (plan.kernel(name) for name in members)
    if mean.fold is None or var.fold is None or centered.fold is not None or out.fold is not None:
        return None
    if mean.fold.combiner is not Combiner.SUM or var.fold.combiner is not Combiner.SUM or len(mean.fold.axes) != 1:
        return None
    if var.fold.axes != mean.fold.axes or [a.name for a in var.axes] != [a.name for a in mean.axes]:
        return None
    lead = tuple(AxisIndex(axis.name) for axis in mean.axes)
    fold = AxisIndex(mean.fold.axes[0].name)
    if [a.name for a in centered.axes] != [a.name for a in out.axes] or len(out.axes) != len(lead) + 1:
        return None
    full_lead = tuple(AxisIndex(axis.name) for axis in out.axes[:-1])
    column = AxisIndex(out.axes[-1].name)
    body = mean.body
    if not (isinstance(body, Binary) and body.op is BinaryOp.MUL and isinstance(body.left, Load)
            and isinstance(body.right, Const)):
        return None
    source, inv_n = body.left.buffer, body.right
    if body.left != Load(source, lead + (fold,)):
        return None
    if centered.body != Binary(BinaryOp.SUB, Load(source, full_lead + (column,)), Load(mean_name, full_lead)):
        return None
    try:
        shrink = var.body.left.left.right  # ((cent * s) * (cent * s)) * inv_n
    except AttributeError:
        return None
    if not isinstance(shrink, Const):
        return None
    deviation = _mul(Load(centered_name, lead + (fold,)), shrink)
    if var.body != _mul(_mul(deviation, deviation), inv_n):
        return None
    # the output: peel an optional bias, then an optional weight, off the normalised value
    value, bias, weight = out.body, None, None
    if isinstance(value, Binary) and value.op is BinaryOp.ADD and isinstance(value.right, Load) \
            and value.right.index == (column,):
        bias, value = value.right.buffer, value.left
    if isinstance(value, Binary) and value.op is BinaryOp.MUL and isinstance(value.right, Load) \
            and value.right.index == (column,):
        weight, value = value.right.buffer, value.left
    try:
        epsilon = value.right.operand.right
    except AttributeError:
        return None
    if not isinstance(epsilon, Const):
        return None
    inverse = Unary(UnaryOp.RSQRT, Binary(BinaryOp.ADD, Load(var_name, full_lead), epsilon))
    if value != _mul(_mul(Load(centered_name, full_lead + (column,)), shrink), inverse):
        return None
    buffers = plan.buffer_map()
    dim = out.axes[-1].extent
    if any(buffers[name].dtype is not DType.FLOAT32 for name in (source, *members)):
        return None
    if any(name is not None and (buffers[name].shape != (dim,) or buffers[name].dtype is not DType.FLOAT32)
           for name in (weight, bias)):
        return None
    readers = plan.readers()
    if set(readers.get(mean_name, ())) - {centered_name} or set(readers.get(centered_name, ())) - {var_name, out_name} \
            or set(readers.get(var_name, ())) - {out_name} or {mean_name, centered_name, var_name} & set(plan.outputs):
        return None
    rows = 1
    for axis in out.axes[:-1]:
        rows *= axis.extent
    roles = (("x", source), ("out", out_name)) + (("weight", weight),) * (weight is not None) \
        + (("bias", bias),) * (bias is not None)
    constants = (("rows", float(rows)), ("dim", float(dim)), ("shrink", float(shrink.value)),
                 ("epsilon", float(epsilon.value)))
    return LibraryMatch("welford layer norm", roles, constants, (rows, dim), members)


def price_layer_norm(match: LibraryMatch, numbers, homes: dict[str, int] | None = None) -> float:
    """Cycles, combined as a generated nest's (``weft.cost.model.body_cycles``): the body
    prefetches nothing, so its in-core work waits on its transfers from beyond L1 (x read
    once from where the plan leaves it, ``homes``, else where its size puts it; the output
    written once) and overlaps only its L1 traffic (the second read of each row, from cache).

    In-core, per row: the statistics are one chain of dependent updates (``d = x - mean;
    mean += d / k`` per vector: a subtract and an FMA, each waiting on the last, at
    ``FOLD_LATENCY``), then Chan's merge of the lanes (scalar and serial, two dependent
    operations per lane) and a scalar tail; the output 3 vector operations per vector (and
    one each for the weight and the bias). Worked example, 8192 x 1024 with 16 lanes, one
    thread: 8192 x (64 x 2 + 16 x 2) x 4 = 5.2M cycles of chains, 8192 x 64 x 5 / 2 = 1.3M of
    output operations, on top of reading and writing 32 MiB each from memory."""
    from weft.cost.model import ARITHMETIC_PER_CYCLE, FOLD_LATENCY, ITEM_CYCLES, NEST_CYCLES, body_cycles

    rows, dim = match.shape
    size = rows * dim * 4.0
    l1, exposed = stream_parts(((match.role("x"), size),), ((match.role("out"), size),), numbers, homes)
    l1 += size / numbers.read_bytes_per_cycle[0]  # the second read of each row
    lanes = max(numbers.lanes, 1)
    full, tail = divmod(dim, lanes)
    chains = rows * (2 * full + (2 * lanes if full else 0) + 2 * tail) * FOLD_LATENCY
    affine = sum(role in dict(match.roles) for role in ("weight", "bias"))
    output = rows * -(-dim // lanes) * (3 + affine) / ARITHMETIC_PER_CYCLE
    threads = max(numbers.threads, 1)
    overhead = NEST_CYCLES + ITEM_CYCLES * rows / threads + (numbers.parallel_region_cycles if threads > 1 else 0.0)
    return body_cycles((chains + output) / threads, l1, exposed) + overhead
