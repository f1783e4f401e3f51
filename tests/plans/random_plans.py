"""Random plans for property tests: chains of row folds and elementwise members over (R, C),
sometimes repeated over a leading batch axis.

They exercise what region growth and fused execution must get right: broadcast
reads of row results, max-then-sum-of-exp chains (the rewrite's shape), folds
whose results are plan outputs, members read outside a region, and transposed
reads that refuse a common tile axis.
"""

from __future__ import annotations

import compose_plans as plans
import numpy as np

from weft.ir import Combiner, verify


def random_plan(seed: int):
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(1, 7)), int(rng.integers(1, 9))
    square = rng.random() < 0.2
    if square:
        cols = rows
    builder = plans.Builder(f"random_{seed}")
    full = [builder.input("x0", rows, cols), builder.input("x1", rows, cols)]
    row = [builder.input("w", rows)]
    maxima: list[tuple[str, str]] = []  # (row max, the full buffer it folds)
    count = int(rng.integers(2, 8))

    def pick(pool):
        return pool[int(rng.integers(len(pool)))]

    def full_value(a: str, b: str):
        options = [
            lambda: plans.add(plans.load(pick(full), a, b), plans.load(pick(row), a)),
            lambda: plans.mul(plans.load(pick(full), a, b), plans.load(pick(full), a, b)),
            lambda: plans.sub(plans.load(pick(full), a, b), plans.load(pick(row), a)),
            lambda: plans.Unary(plans.UnaryOp.TANH, plans.load(pick(full), a, b)),
            lambda: plans.exp(plans.Unary(plans.UnaryOp.TANH, plans.load(pick(full), a, b))),
            lambda: plans.Binary(plans.BinaryOp.MAX, plans.load(pick(full), a, b), plans.const(0.25)),
        ]
        if square:
            options.append(lambda: plans.add(plans.load(pick(full), b, a), plans.load(pick(full), a, b)))
        return pick(options)()

    for number in range(count):
        name = f"t{number}"
        kind = rng.random()
        if kind < 0.4:
            builder.member(name, [(f"r{number}", rows), (f"c{number}", cols)], full_value(f"r{number}", f"c{number}"))
            full.append(name)
        elif kind < 0.6:
            source = pick(full)
            builder.member(name, [(f"r{number}", rows)], plans.load(source, f"r{number}", f"c{number}"),
                           fold=[(f"c{number}", cols)], combiner=Combiner.MAX)
            row.append(name)
            maxima.append((name, source))
        elif kind < 0.8:
            if maxima and rng.random() < 0.7:
                reference, source = pick(maxima)
                term = plans.exp(plans.sub(plans.load(source, f"r{number}", f"c{number}"), plans.load(reference, f"r{number}")))
                if rng.random() < 0.5:
                    term = plans.mul(term, plans.load(pick(full), f"r{number}", f"c{number}"))
            else:
                term = full_value(f"r{number}", f"c{number}")
            builder.member(name, [(f"r{number}", rows)], term, fold=[(f"c{number}", cols)])
            row.append(name)
        else:
            a, b = pick(row), pick(row)
            body = plans.add(plans.mul(plans.load(a, f"r{number}"), plans.const(0.5)), plans.Unary(plans.UnaryOp.TANH, plans.load(b, f"r{number}")))
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
    import dataclasses

    from weft.compose.substitute import map_loads
    from weft.ir import Axis, AxisIndex, Kernel, Load, Plan

    def batched(kernel: Kernel) -> Kernel:
        axis = f"bt_{kernel.output}"
        body = map_loads(kernel.body, lambda load: Load(load.buffer, (AxisIndex(axis),) + load.index, load.padding))
        return Kernel(kernel.output, (Axis(axis, batch),) + kernel.axes, body, kernel.fold)

    buffers = tuple(dataclasses.replace(b, shape=(batch,) + b.shape) for b in plan.buffers)
    return verify(Plan(buffers, tuple(batched(k) for k in plan.kernels), plan.inputs, plan.outputs, plan.name))


def merge_plans(parts):
    """Independent plans side by side in one plan (names prefixed), so one C compile
    checks many random plans; returns the merged plan and the concatenated inputs."""
    import dataclasses

    from weft.compose.substitute import rename_buffers
    from weft.ir import Kernel, Plan

    buffers, kernels, inputs, outputs, arrays = [], [], [], [], []
    for number, (plan, plan_arrays) in enumerate(parts):
        names = {buffer.name: f"p{number}_{buffer.name}" for buffer in plan.buffers}
        buffers += [dataclasses.replace(b, name=names[b.name]) for b in plan.buffers]
        kernels += [Kernel(names[k.output], k.axes, rename_buffers(k.body, names), k.fold) for k in plan.kernels]
        inputs += [names[n] for n in plan.inputs]
        outputs += [names[n] for n in plan.outputs]
        arrays += list(plan_arrays)
    return verify(Plan(tuple(buffers), tuple(kernels), tuple(inputs), tuple(outputs), "merged")), arrays
