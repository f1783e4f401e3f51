"""Random plans for property tests, two kinds.

``random_plan(seed)``: chains of row folds and elementwise members over (R, C),
sometimes repeated over a leading batch axis (region and fused-execution tests).
They exercise what region growth and fused execution must get right: broadcast
reads of row results, max-then-sum-of-exp chains (the rewrite's shape), folds
whose results are plan outputs, members read outside a region, and transposed
reads that refuse a common tile axis.

``sub_plans(prefix, safe, large)`` / ``batch_of_plans(count, safe, large)``: a hypothesis
strategy of small plans: elementwise chains, folds, views (transpose, slice, flatten,
halo with padding), broadcasts and contractions, with odd extents (not multiples of
any lane width) and size-1 axes (compiled-code tests). ``safe=True`` guards the
operations whose float32 rounding is amplified without bound (x / y near y = 0, log
near 0), so an Inference result may be compared with a tolerance; ``safe=False``
(Strict, compared byte for byte) keeps the raw operations, and adds integer work:
float-to-int casts that saturate (NaN, huge values), integer division and fmod with
zero divisors. ``large=True`` draws realistic extents (several 16-lane vectors with
odd tails, up to 65) and adds the kinds fusion must keep exact: gathers (rows picked
by integer ids, in range, or computed from data and read with padding), and masks
from axis positions (a causal ``i >= j + offset``). Integer inputs are named
``...ids<n>_lt<bound>``; ``arrays_for`` draws their values in ``[0, bound)``.

``merge_plans`` puts independent plans side by side in one plan, so one C compile
checks many of them.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
from hypothesis import strategies as st

from plans import build
from plans.build import F32
from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    Cast,
    Combiner,
    Const,
    DType,
    Fold,
    IndexConst,
    IndexOf,
    IndexValue,
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    UnaryOp,
    Where,
    verify,
)
from weft.ir.substitute import map_loads, rename_buffers


def random_plan(seed: int):
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(1, 7)), int(rng.integers(1, 9))
    square = rng.random() < 0.2
    if square:
        cols = rows
    builder = build.Builder(f"random_{seed}")
    full = [builder.input("x0", rows, cols), builder.input("x1", rows, cols)]
    row = [builder.input("w", rows)]
    maxima: list[tuple[str, str]] = []  # (row max, the full buffer it folds)
    count = int(rng.integers(2, 8))

    def pick(pool):
        return pool[int(rng.integers(len(pool)))]

    def full_value(a: str, b: str):
        options = [
            lambda: build.add(build.load(pick(full), a, b), build.load(pick(row), a)),
            lambda: build.mul(build.load(pick(full), a, b), build.load(pick(full), a, b)),
            lambda: build.sub(build.load(pick(full), a, b), build.load(pick(row), a)),
            lambda: build.Unary(build.UnaryOp.TANH, build.load(pick(full), a, b)),
            lambda: build.exp(build.Unary(build.UnaryOp.TANH, build.load(pick(full), a, b))),
            lambda: build.Binary(build.BinaryOp.MAX, build.load(pick(full), a, b), build.const(0.25)),
        ]
        if square:
            options.append(lambda: build.add(build.load(pick(full), b, a), build.load(pick(full), a, b)))
        return pick(options)()

    for number in range(count):
        name = f"t{number}"
        kind = rng.random()
        if kind < 0.4:
            builder.member(name, [(f"r{number}", rows), (f"c{number}", cols)], full_value(f"r{number}", f"c{number}"))
            full.append(name)
        elif kind < 0.6:
            source = pick(full)
            builder.member(name, [(f"r{number}", rows)], build.load(source, f"r{number}", f"c{number}"),
                           fold=[(f"c{number}", cols)], combiner=Combiner.MAX)
            row.append(name)
            maxima.append((name, source))
        elif kind < 0.8:
            if maxima and rng.random() < 0.7:
                reference, source = pick(maxima)
                term = build.exp(build.sub(build.load(source, f"r{number}", f"c{number}"), build.load(reference, f"r{number}")))
                if rng.random() < 0.5:
                    term = build.mul(term, build.load(pick(full), f"r{number}", f"c{number}"))
            else:
                term = full_value(f"r{number}", f"c{number}")
            builder.member(name, [(f"r{number}", rows)], term, fold=[(f"c{number}", cols)])
            row.append(name)
        else:
            a, b = pick(row), pick(row)
            body = build.add(build.mul(build.load(a, f"r{number}"), build.const(0.5)), build.Unary(build.UnaryOp.TANH, build.load(b, f"r{number}")))
            builder.member(name, [(f"r{number}", rows)], body)
            row.append(name)
    members = [kernel.output for kernel in builder.kernels]
    outputs = [members[-1]] + [m for m in members[:-1] if rng.random() < 0.25]
    plan = verify(builder.plan(*outputs))
    if rng.random() < 0.4:  # a leading batch axis: tiled by one ahead of the region's tile axis
        plan = with_batch(plan, int(rng.integers(1, 4)))
    arrays = [rng.standard_normal(plan.buffer(n).shape).astype(np.float32) for n in plan.inputs]
    return plan, arrays


def with_batch(plan, batch: int):
    """``plan`` repeated over a leading batch axis: every buffer, member and load gains it."""

    def batched(kernel: Kernel) -> Kernel:
        axis = f"bt_{kernel.output}"
        body = map_loads(kernel.body, lambda load: Load(load.buffer, (AxisIndex(axis),) + load.index, load.padding))
        return Kernel(kernel.output, (Axis(axis, batch),) + kernel.axes, body, kernel.fold)

    buffers = tuple(dataclasses.replace(b, shape=(batch,) + b.shape) for b in plan.buffers)
    return verify(Plan(buffers, tuple(batched(k) for k in plan.kernels), plan.inputs, plan.outputs, plan.name))


def merge_plans(plans, rename: bool = True) -> Plan:
    """Independent plans side by side in one plan, so one C compile checks many plans.

    ``rename`` prefixes plan ``n``'s buffer names with ``p{n}_``; without it the names
    must already be disjoint (``sub_plans`` prefixes its own)."""
    buffers, kernels, inputs, outputs = [], [], [], []
    for number, plan in enumerate(plans):
        names = {b.name: f"p{number}_{b.name}" if rename else b.name for b in plan.buffers}
        buffers += [dataclasses.replace(b, name=names[b.name]) for b in plan.buffers]
        kernels += [Kernel(names[k.output], k.axes, rename_buffers(k.body, names), k.fold) if rename else k
                    for k in plan.kernels]
        inputs += [names[n] for n in plan.inputs]
        outputs += [names[n] for n in plan.outputs]
    return verify(Plan(tuple(buffers), tuple(kernels), tuple(inputs), tuple(outputs), "merged"))


def merge_with_inputs(parts) -> tuple[Plan, list]:
    """``merge_plans`` over (plan, inputs) pairs: the merged plan and the inputs in its order."""
    return merge_plans([plan for plan, _ in parts]), [array for _, arrays in parts for array in arrays]


# ---------------------------------------------------------------------- hypothesis strategy

EXTENTS = st.sampled_from([1, 2, 3, 5, 7, 16, 17, 19, 33])
LARGE_EXTENTS = st.sampled_from([1, 3, 17, 33, 37, 48, 65])  # several vectors, odd tails
UNARY = [UnaryOp.NEG, UnaryOp.ABS, UnaryOp.EXP, UnaryOp.LOG, UnaryOp.SQRT, UnaryOp.RSQRT, UnaryOp.TANH,
         UnaryOp.ERF, UnaryOp.SIGMOID]
BINARY = [BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL, BinaryOp.DIV, BinaryOp.MAX, BinaryOp.MIN]
KINDS = ["unary", "binary", "scalar", "broadcast", "transpose", "slice", "flatten", "fold", "contract", "halo",
         "where"]
LARGE_KINDS = ["gather", "gather_padded", "mask"]
INTEGER_KINDS = ["int_cast", "int_div"]


def _axes(shape, prefix="a"):
    return tuple(Axis(f"{prefix}{n}", e) for n, e in enumerate(shape))


def _index(axes):
    return tuple(AxisIndex(a.name) for a in axes)


def _guard(op, operand, safe):
    if not safe:
        return Unary(op, operand)
    if op in (UnaryOp.LOG, UnaryOp.SQRT, UnaryOp.RSQRT):
        return Unary(op, Binary(BinaryOp.ADD, Unary(UnaryOp.ABS, operand), Const(0.5)))
    if op is UnaryOp.EXP:
        return Unary(op, Unary(UnaryOp.TANH, operand))
    return Unary(op, operand)


def _binary(op, left, right, safe):
    if safe and op is BinaryOp.DIV:
        right = Binary(BinaryOp.ADD, Unary(UnaryOp.ABS, right), Const(1.0))
    return Binary(op, left, right)


@st.composite
def sub_plans(draw, prefix: str, safe: bool = False, large: bool = False) -> Plan:
    """One random verified plan whose buffer names all start with ``prefix``."""
    extents = LARGE_EXTENTS if large else EXTENTS
    kinds = KINDS + (LARGE_KINDS if large else []) + ([] if safe else INTEGER_KINDS)
    buffers: list[Buffer] = []
    kernels: list[Kernel] = []
    inputs: list[str] = []

    def new_input(shape):
        name = f"{prefix}in{len(inputs)}"
        buffers.append(Buffer(name, tuple(shape), F32, Role.INPUT))
        inputs.append(name)
        return name, tuple(shape)

    def new_ids(shape, bound):
        name = f"{prefix}ids{len(inputs)}_lt{bound}"
        buffers.append(Buffer(name, tuple(shape), DType.INT32, Role.INPUT))
        inputs.append(name)
        return name

    def add(shape, body, axes, fold=None):
        name = f"{prefix}m{len(kernels)}"
        buffers.append(Buffer(name, tuple(shape), F32, Role.INTERMEDIATE))
        kernels.append(Kernel(name, axes, body, fold))
        return name, tuple(shape)

    rank = draw(st.integers(1, 3))
    pool = [new_input([draw(extents) for _ in range(rank)])]
    for _ in range(draw(st.integers(2, 5 if large else 4))):
        name, shape = draw(st.sampled_from(pool))
        kind = draw(st.sampled_from(kinds))
        axes = _axes(shape)
        src = Load(name, _index(axes))
        if kind == "unary":
            pool.append(add(shape, _guard(draw(st.sampled_from(UNARY)), src, safe), axes))
        elif kind == "binary":
            others = [p for p in pool if p[1] == shape and p[0] != name]
            other = draw(st.sampled_from(others)) if others and draw(st.booleans()) else new_input(shape)
            op = draw(st.sampled_from(BINARY))
            pool.append(add(shape, _binary(op, src, Load(other[0], _index(axes)), safe), axes))
        elif kind == "scalar":
            value = draw(st.sampled_from([0.5, -1.25, 3.0, 1e-3]))
            op = draw(st.sampled_from(BINARY))
            pool.append(add(shape, _binary(op, Const(value), src, safe), axes))
        elif kind == "broadcast" and shape:
            vector, _ = new_input(shape[-1:])
            op = draw(st.sampled_from(BINARY))
            pool.append(add(shape, _binary(op, src, Load(vector, _index(axes[-1:])), safe), axes))
        elif kind == "transpose" and len(shape) >= 2:
            out = (shape[1], shape[0], *shape[2:])
            out_axes = _axes(out)
            index = (AxisIndex(out_axes[1].name), AxisIndex(out_axes[0].name), *_index(out_axes[2:]))
            pool.append(add(out, Load(name, index), out_axes))
        elif kind == "slice" and shape and max(shape) >= 2:
            dim = max(range(len(shape)), key=lambda d: shape[d])
            start = draw(st.integers(0, shape[dim] - 1))
            length = draw(st.integers(1, shape[dim] - start))
            out = tuple(length if d == dim else e for d, e in enumerate(shape))
            out_axes = _axes(out)
            index = tuple(AxisIndex(a.name) + start if d == dim else AxisIndex(a.name) for d, a in enumerate(out_axes))
            pool.append(add(out, Load(name, index), out_axes))
        elif kind == "flatten" and len(shape) >= 2:
            total = math.prod(shape)
            flat = Axis("f", total)
            index, stride = [], total
            for extent in shape:
                stride //= extent
                index.append((AxisIndex("f") // stride) % extent if stride > 1 else AxisIndex("f") % extent)
            pool.append(add((total,), Load(name, tuple(index)), (flat,)))
        elif kind == "fold" and shape:
            folded = draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))
            combiner = draw(st.sampled_from(list(Combiner)))
            keep = tuple(a for d, a in enumerate(axes) if d not in folded)
            over = tuple(a for d, a in enumerate(axes) if d in folded)
            pool.append(add(tuple(a.extent for a in keep), src, keep, Fold(over, combiner)))
        elif kind == "contract" and shape:
            n = draw(extents)
            k = Axis("k", shape[-1])
            out_axes = (*axes[:-1], Axis(f"a{len(shape) - 1}", n))
            a_load = Load(name, (*_index(axes[:-1]), AxisIndex("k")))
            if draw(st.booleans()):
                weight, _ = new_input((shape[-1], n))
                w_load = Load(weight, (AxisIndex("k"), AxisIndex(out_axes[-1].name)))
            else:
                weight, _ = new_input((n, shape[-1]))
                w_load = Load(weight, (AxisIndex(out_axes[-1].name), AxisIndex("k")))
            out = (*shape[:-1], n)
            pool.append(add(out, Binary(BinaryOp.MUL, a_load, w_load), out_axes, Fold((k,), Combiner.SUM)))
        elif kind == "halo" and shape:
            dim = draw(st.integers(0, len(shape) - 1))
            shift = draw(st.sampled_from([-2, -1, 1]))
            index = tuple(AxisIndex(a.name) + shift if d == dim else AxisIndex(a.name) for d, a in enumerate(axes))
            pool.append(add(shape, Load(name, index, padding=draw(st.sampled_from([0.0, -1.5]))), axes))
        elif kind == "where":
            threshold = draw(st.sampled_from([0.0, 0.7]))
            other = new_input(shape)
            cond = Binary(draw(st.sampled_from([BinaryOp.GT, BinaryOp.LE, BinaryOp.NE])), src, Const(threshold))
            pool.append(add(shape, Where(cond, src, Load(other[0], _index(axes))), axes))
        elif kind == "gather" and shape:
            # out[..., e] = table[ids[...], e]: an embedding, ids in range
            rows = draw(extents)
            table, _ = new_input((rows, shape[-1]))
            ids = new_ids(shape[:-1], rows)
            token = Load(ids, _index(axes[:-1]))
            gathered = Load(table, (IndexOf(token), AxisIndex(axes[-1].name)))
            pool.append(add(shape, _binary(BinaryOp.ADD, gathered, src, safe), axes))
        elif kind == "gather_padded" and shape:
            # positions computed from the data (a saturating cast), read with padding outside
            target, target_shape = draw(st.sampled_from(pool))
            position = Cast(Binary(BinaryOp.MUL, src, Const(float(draw(st.sampled_from([3.0, 40.0, 1e10]))))),
                            DType.INT32)
            index = tuple(
                IndexOf(position) if d == 0 else AxisIndex(axes[d].name) if d < len(axes) else IndexConst(0)
                for d in range(len(target_shape))
            )
            pool.append(add(shape, Load(target, index, padding=-2.5), axes))  # out of range: the padding
        elif kind == "mask" and len(shape) >= 2:
            offset = draw(st.sampled_from([0, 1, -3]))
            row, column = IndexValue(AxisIndex(axes[0].name), DType.INT64), IndexValue(
                AxisIndex(axes[1].name) + offset, DType.INT64)
            hidden = draw(st.sampled_from([float("-inf"), -1e4, 0.0]))
            pool.append(add(shape, Where(Binary(BinaryOp.GE, row, column), src, Const(hidden)), axes))
        elif kind == "int_cast":
            # NaN (from log of negatives), huge values and infinities cast to int and back
            scale = draw(st.sampled_from([1.0, 7.5, 1e10]))
            inner = Unary(UnaryOp.LOG, src) if draw(st.booleans()) else Binary(BinaryOp.MUL, src, Const(scale))
            target = draw(st.sampled_from([DType.INT32, DType.INT64]))
            pool.append(add(shape, Cast(Cast(inner, target), F32), axes))
        elif kind == "int_div":
            # integer division and fmod, zero divisors included (|x * 2| < 1 truncates to 0)
            op = draw(st.sampled_from([BinaryOp.DIV, BinaryOp.FMOD]))
            target = draw(st.sampled_from([DType.INT32, DType.INT64]))
            numerator = Cast(Binary(BinaryOp.MUL, src, Const(1000.0)), target)
            denominator = Cast(Binary(BinaryOp.MUL, src, Const(2.0)), target)
            pool.append(add(shape, Cast(Binary(op, numerator, denominator), F32), axes))
    if not kernels:
        name, shape = pool[0]
        axes = _axes(shape)
        pool.append(add(shape, Unary(UnaryOp.NEG, Load(name, _index(axes))), axes))
    outputs = [kernels[-1].output]
    extra = draw(st.sampled_from([None, *[k.output for k in kernels[:-1]]]))
    if extra is not None:
        outputs.append(extra)
    buffers = [Buffer(b.name, b.shape, b.dtype, Role.OUTPUT) if b.name in outputs else b for b in buffers]
    plan = Plan(tuple(buffers), tuple(kernels), tuple(inputs), tuple(outputs), name=prefix.rstrip("_") or "random")
    return verify(plan)


def batch_of_plans(count: int, safe: bool = False, large: bool = False):
    return st.tuples(*[sub_plans(f"p{n}_", safe, large) for n in range(count)]).map(list)


_BOUND = re.compile(r"_lt(\d+)$")


def arrays_for(plan: Plan, seed: int) -> list[np.ndarray]:
    """Inputs for a random plan: standard normal floats; ids in ``[0, bound)``."""
    rng = np.random.default_rng(seed)
    arrays = []
    for name in plan.inputs:
        buffer = plan.buffer(name)
        if buffer.dtype is DType.INT32:
            arrays.append(rng.integers(0, int(_BOUND.search(name).group(1)), buffer.shape).astype(np.int32))
        else:
            arrays.append(rng.standard_normal(buffer.shape).astype(np.float32))
    return arrays


