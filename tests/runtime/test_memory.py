"""Arena planning: intermediates share bytes only when their lifetimes do not overlap."""

from __future__ import annotations

import numpy as np

import weft
from weft import oracle
from weft.ir import Axis, AxisIndex, Binary, BinaryOp, Buffer, DType, Kernel, Load, Plan, Role
from weft.lower import Target, lower_plan
from weft.runtime import plan_arena
from weft.runtime.memory import PAGE, SKEW_MIN_BYTES, aligned_outputs, page_offset, store_page_offset
from weft.testing import at_page_offset


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


# ------------------------------------------------------------------ outputs beside their inputs


def test_store_page_offset_sits_at_or_just_below_every_load_stream():
    assert store_page_offset([16]) == 0  # NumPy's +16: the line below, not the line above (+64)
    assert store_page_offset([16, 32, 48, 0]) == 0
    assert store_page_offset([2064]) == 2048
    assert store_page_offset([4095]) == 4032
    assert store_page_offset([]) == 0
    # two streams half a page apart: just below either leaves the other half a page ahead
    offset = store_page_offset([100, 2148])
    assert offset in (64, 2112)
    assert all((load - offset) % PAGE <= 2048 + 36 for load in (100, 2148))


def test_large_outputs_start_beside_the_inputs_and_small_ones_stay_line_aligned():
    n = 64 * 1024  # 256 KiB: large
    plan = chain_plan(length=2, n=n)
    compiled = weft.compile(plan, contract="strict")
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    expected = oracle.run(plan, x)
    for offset in (16, 2000, 4080):
        source = at_page_offset(x, offset)
        out = compiled(source)
        assert page_offset(out) == offset // 64 * 64, offset
        assert out.tobytes() == expected.tobytes()
    small = chain_plan(length=2, n=100)
    tiny = weft.compile(small, contract="strict")(at_page_offset(x[:100], 16))
    assert tiny.ctypes.data % 64 == 0


def test_aligned_outputs_place_each_large_output_beside_the_earlier_ones():
    inputs = [at_page_offset(np.zeros(SKEW_MIN_BYTES // 4, np.float32), 1040)]
    specs = [((SKEW_MIN_BYTES // 4,), np.float32)] * 3 + [((4,), np.float32)]
    outputs = aligned_outputs(specs, inputs)
    assert [page_offset(array) for array in outputs[:3]] == [1024, 1024, 1024]
    assert outputs[3].ctypes.data % 64 == 0
    assert all(array.shape == shape and array.dtype == dtype for array, (shape, dtype) in zip(outputs, specs, strict=True))
