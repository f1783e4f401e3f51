"""Arena planning: intermediates share bytes only when their lifetimes do not overlap."""

from __future__ import annotations

from weft.ir import Axis, AxisIndex, Binary, BinaryOp, Buffer, DType, Kernel, Load, Plan, Role
from weft.lower import Target, lower_plan
from weft.runtime import plan_arena


def chain_plan(length=5, n=1000):
    """x -> t0 -> t1 -> ... -> out, each t_k = t_{k-1} + x: only two intermediates live at once."""
    i = Axis("i", n)
    buffers = [Buffer("x", (n,), DType.FLOAT32, Role.INPUT)]
    kernels = []
    previous = "x"
    for k in range(length):
        name = f"t{k}" if k < length - 1 else "out"
        role = Role.OUTPUT if name == "out" else Role.INTERMEDIATE
        buffers.append(Buffer(name, (n,), DType.FLOAT32, role))
        body = Binary(BinaryOp.ADD, Load(previous, (AxisIndex("i"),)), Load("x", (AxisIndex("i"),)))
        kernels.append(Kernel(name, (i,), body))
        previous = name
    return Plan(tuple(buffers), tuple(kernels), ("x",), ("out",))


def test_chain_reuses_space():
    plan = chain_plan()
    arena = plan_arena(plan, lower_plan(plan, None, Target(lanes=16)))
    assert {p.buffer for p in arena.placements} == {"t0", "t1", "t2", "t3"}
    assert arena.nbytes == 2 * 4032  # 4000 bytes aligned to 64, two live at a time
    for a in arena.placements:
        for b in arena.placements:
            overlap_time = not (a.last < b.first or b.last < a.first)
            overlap_space = a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes
            if a is not b and overlap_time:
                assert not overlap_space, (a, b)
        assert a.offset % 64 == 0


def test_long_lived_buffer_is_not_shared():
    plan = chain_plan(3)
    n = 1000
    # make t0 also read by the last member: it must stay alive until then
    kernels = list(plan.kernels)
    last = kernels[-1]
    kernels[-1] = Kernel(last.output, last.axes, Binary(BinaryOp.ADD, last.body, Load("t0", (AxisIndex("i"),))))
    plan = Plan(plan.buffers, tuple(kernels), plan.inputs, plan.outputs)
    arena = plan_arena(plan, lower_plan(plan, None, Target(lanes=16)))
    assert arena.offset("t0") != arena.offset("t1")
    assert arena.nbytes == 2 * 4032 and n == 1000
