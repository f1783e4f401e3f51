"""verify() rejects each class of malformed plan with a message naming the member."""

import dataclasses

import pytest

from weft.errors import WeftIRError
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
    IndexValue,
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    UnaryOp,
    Where,
    format_plan,
    kernel_set_digest,
    verify,
)

I, J, K = AxisIndex("i"), AxisIndex("j"), AxisIndex("k")
F32 = DType.FLOAT32


def matmul_plan() -> Plan:
    buffers = (
        Buffer("a", (3, 4), F32, Role.INPUT),
        Buffer("b", (4, 5), F32, Role.INPUT),
        Buffer("c", (3, 5), F32, Role.INTERMEDIATE),
        Buffer("d", (3, 5), F32, Role.OUTPUT),
    )
    product = Kernel(
        "c", (Axis("i", 3), Axis("j", 5)),
        Binary(BinaryOp.MUL, Load("a", (I, K)), Load("b", (K, J))),
        Fold((Axis("k", 4),), Combiner.SUM),
    )
    tail = Kernel("d", (Axis("i", 3), Axis("j", 5)), Unary(UnaryOp.TANH, Load("c", (I, J))))
    return Plan(buffers, (product, tail), ("a", "b"), ("d",), "mm")


def with_kernel(plan: Plan, position: int, kernel: Kernel) -> Plan:
    kernels = list(plan.kernels)
    kernels[position] = kernel
    return dataclasses.replace(plan, kernels=tuple(kernels))


def test_well_formed_plan_passes_and_prints():
    plan = matmul_plan()
    assert verify(plan) is plan
    text = format_plan(plan)
    assert "c[i:3, j:5] f32 = sum_{k:4} (a[i, k] * b[k, j])" in text
    assert "d[i:3, j:5] f32 = tanh(c[i, j])" in text


def expect_error(plan: Plan, *fragments: str) -> str:
    with pytest.raises(WeftIRError) as caught:
        verify(plan)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_out_of_range_index_names_member_and_shows_context():
    plan = matmul_plan()
    bad = dataclasses.replace(plan.kernels[1], body=Load("c", (I, J + 1)))
    message = expect_error(with_kernel(plan, 1, bad), "member 1 (d)", "out of range", "[1, 5]")
    assert ">>" in message and "c[i:3, j:5]" in message  # context: the neighbouring member is printed


def test_padding_allows_halo_reads():
    plan = matmul_plan()
    halo = dataclasses.replace(plan.kernels[1], body=Load("c", (I, J + 1), padding=0.0))
    verify(with_kernel(plan, 1, halo))


def test_wrong_rank():
    plan = matmul_plan()
    bad = dataclasses.replace(plan.kernels[1], body=Load("c", (I,)))
    expect_error(with_kernel(plan, 1, bad), "member 1 (d)", "rank 2", "1 indices")


def test_fold_axis_used_outside_its_fold():
    plan = matmul_plan()
    # the tail uses k, which is the contraction's fold axis, not one of its own
    bad = dataclasses.replace(plan.kernels[1], body=Load("a", (I, K)))
    expect_error(with_kernel(plan, 1, bad), "member 1 (d)", "axis k")


def test_cycle_read_of_later_member():
    plan = matmul_plan()
    swapped = dataclasses.replace(plan, kernels=(plan.kernels[1], plan.kernels[0]))
    expect_error(swapped, "member 0 (d)", "before it is written")


def test_self_read_is_a_cycle():
    plan = matmul_plan()
    bad = dataclasses.replace(plan.kernels[1], body=Load("d", (I, J)))
    expect_error(with_kernel(plan, 1, bad), "member 1 (d)", "cycle")


def test_dtype_mismatch():
    plan = matmul_plan()
    bad = dataclasses.replace(
        plan.kernels[1], body=Binary(BinaryOp.ADD, Load("c", (I, J)), IndexValue(I))
    )
    expect_error(with_kernel(plan, 1, bad), "member 1 (d)", "dtype mismatch", "float32 vs int64")


def test_where_condition_must_be_bool():
    plan = matmul_plan()
    bad = dataclasses.replace(
        plan.kernels[1], body=Where(Load("c", (I, J)), Const(1.0), Const(0.0))
    )
    expect_error(with_kernel(plan, 1, bad), "member 1 (d)", "condition must be bool")


def test_transcendental_needs_float():
    plan = matmul_plan()
    bad = dataclasses.replace(plan.kernels[1], body=Cast(Unary(UnaryOp.EXP, IndexValue(I)), F32))
    expect_error(with_kernel(plan, 1, bad), "member 1 (d)", "exp() needs float32")


def test_output_shape_mismatch():
    plan = matmul_plan()
    bad = dataclasses.replace(plan.kernels[1], axes=(Axis("i", 3), Axis("j", 4)), body=Load("c", (I, J)))
    expect_error(with_kernel(plan, 1, bad), "member 1 (d)", "do not match buffer d")


def test_unknown_buffer_and_unwritten_output():
    plan = matmul_plan()
    bad = dataclasses.replace(plan.kernels[1], body=Load("nope", (I, J)))
    expect_error(with_kernel(plan, 1, bad), "member 1 (d)", "unknown buffer 'nope'")
    missing = dataclasses.replace(plan, outputs=("d", "zz"))
    expect_error(missing, "output 'zz'")


def test_digest_is_structural():
    plan = matmul_plan()
    assert kernel_set_digest(plan) == kernel_set_digest(matmul_plan())
    changed = with_kernel(plan, 1, dataclasses.replace(plan.kernels[1], body=Unary(UnaryOp.EXP, Load("c", (I, J)))))
    assert kernel_set_digest(changed) != kernel_set_digest(plan)
