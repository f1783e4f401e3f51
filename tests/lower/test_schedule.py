"""Lowering choices: vector axis, register block, GEMM matching, the lower_plan seam."""

from __future__ import annotations

from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    Combiner,
    DType,
    Fold,
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    UnaryOp,
)
from weft.lower import GemmCall, MemberNest, Target, default_views, lower_plan
from weft.lower.access import Access, address_step, load_access, row_major_strides

F32 = DType.FLOAT32


def ax(name):
    return AxisIndex(name)


def matmul_plan(m=64, k=48, n=80, transpose_b=False):
    b_shape = (n, k) if transpose_b else (k, n)
    b_index = (ax("j"), ax("k")) if transpose_b else (ax("k"), ax("j"))
    body = Binary(BinaryOp.MUL, Load("a", (ax("i"), ax("k"))), Load("b", b_index))
    kernels = (
        Kernel("c", (Axis("i", m), Axis("j", n)), body, Fold((Axis("k", k),), Combiner.SUM)),
        Kernel("rowmax", (Axis("i", m),), Load("c", (ax("i"), ax("j"))), Fold((Axis("j", n),), Combiner.MAX)),
        Kernel("e", (Axis("i", m), Axis("j", n)), Unary(UnaryOp.EXP, Load("c", (ax("i"), ax("j"))))),
    )
    buffers = (Buffer("a", (m, k), F32, Role.INPUT), Buffer("b", b_shape, F32, Role.INPUT),
               Buffer("c", (m, n), F32, Role.INTERMEDIATE), Buffer("rowmax", (m,), F32, Role.OUTPUT),
               Buffer("e", (m, n), F32, Role.OUTPUT))
    return Plan(buffers, kernels, ("a", "b"), ("rowmax", "e"))


def test_access_kinds():
    strides = row_major_strides((4, 5, 6))
    assert strides == (30, 6, 1)
    load = Load("x", (ax("i"), ax("j") * 2, ax("k")))
    assert address_step(load, strides, "j") == 12
    assert load_access(load, strides, "k") is Access.CONTIGUOUS
    assert load_access(load, strides, "i") is Access.GATHER
    assert load_access(load, strides, "q") is Access.BROADCAST
    assert load_access(Load("x", (ax("i"), ax("j") // 2, ax("k"))), strides, "j") is Access.GATHER


def test_matmul_lanes_along_j_block_along_i():
    lowered = lower_plan(matmul_plan(), None, Target(lanes=16, microkernel=False))
    c, rowmax, e = (f.nests[0] for f in lowered.functions)
    assert isinstance(c, MemberNest)
    assert (c.vector_axis, c.block_axis, c.outer_axes) == ("j", "i", ())
    assert c.block_rows > 1 and c.block_vectors >= 1
    # a row reduction has no unit-stride output axis: lanes along i (each lane its own row, in order)
    assert rowmax.vector_axis == "i" and rowmax.block_axis is None
    assert e.vector_axis == "j" and e.outer_axes == ("i",)


def test_small_axes_stay_scalar():
    lowered = lower_plan(matmul_plan(m=3, k=5, n=7), None, Target(lanes=16))
    assert all(f.nests[0].vector_axis is None for f in lowered.functions)


def test_gemm_library_body_only_under_inference():
    plan = matmul_plan(transpose_b=True)
    strict = lower_plan(plan, None, Target(lanes=16, contract="strict", use_blas=True))
    assert not isinstance(strict.functions[0].nests[0], GemmCall)
    inference = lower_plan(plan, None, Target(lanes=16, contract="inference", use_blas=True))
    gemm = inference.functions[0].nests[0]
    assert isinstance(gemm, GemmCall)
    assert (gemm.m, gemm.n, gemm.k, gemm.trans_a, gemm.trans_b) == (64, 80, 48, False, True)
    assert not isinstance(inference.functions[1].nests[0], GemmCall)


def test_groups_seam_puts_members_in_one_function():
    plan = matmul_plan()
    lowered = lower_plan(plan, (("c", "rowmax"), ("e",)), Target(lanes=8))
    assert [f.members for f in lowered.functions] == [("c", "rowmax"), ("e",)]
    assert {v.buffer for v in lowered.functions[0].params} == {"a", "b", "c", "rowmax"}
    views = default_views(plan)
    assert views["c"].strides == (80, 1) and views["c"].pointer.startswith("b_")


def test_matrix_vector_products_stay_generated():
    plan = matmul_plan(m=1, k=48, n=80)
    inference = lower_plan(plan, None, Target(lanes=16, contract="inference", use_blas=True))
    assert isinstance(inference.functions[0].nests[0], MemberNest)
