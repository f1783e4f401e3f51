"""FLOP and byte counts from IR shapes, checked against counts done by hand."""

import pytest

from weft.cost.work import (
    TRANSCENDENTAL_FLOPS,
    Work,
    floor,
    fraction_of_floor,
    group_work,
    member_work,
    plan_work,
    unfused_work,
)
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
    verify,
)

F32 = DType.FLOAT32
M, N, K = 8, 16, 4


def small_chain() -> Plan:
    """s = a @ b (M x N, fold K); m = max_j s; e = exp(s - m)."""
    i, j, k = AxisIndex("i"), AxisIndex("j"), AxisIndex("k")
    buffers = (
        Buffer("a", (M, K), F32, Role.INPUT),
        Buffer("b", (K, N), F32, Role.INPUT),
        Buffer("s", (M, N), F32, Role.INTERMEDIATE),
        Buffer("m", (M,), F32, Role.INTERMEDIATE),
        Buffer("e", (M, N), F32, Role.OUTPUT),
    )
    matmul = Kernel(
        "s", (Axis("i", M), Axis("j", N)),
        Binary(BinaryOp.MUL, Load("a", (i, k)), Load("b", (k, j))),
        Fold((Axis("k", K),), Combiner.SUM),
    )
    row_max = Kernel("m", (Axis("i", M),), Load("s", (i, j)), Fold((Axis("j", N),), Combiner.MAX))
    exp = Kernel(
        "e", (Axis("i", M), Axis("j", N)),
        Unary(UnaryOp.EXP, Binary(BinaryOp.SUB, Load("s", (i, j)), Load("m", (i,)))),
    )
    plan = Plan(buffers, (matmul, row_max, exp), ("a", "b"), ("e",), name="chain")
    verify(plan)
    return plan


def test_member_counts_by_hand():
    plan = small_chain()
    matmul, row_max, exp = plan.kernels
    assert member_work(plan, matmul) == Work(2.0 * M * N * K, 4.0 * (M * K + K * N), 4.0 * M * N)
    # max fold: no body ops, one combine per point
    assert member_work(plan, row_max) == Work(float(M * N), 4.0 * M * N, 4.0 * M)
    # exp(s - m): sub + transcendental; m[i] broadcast reads M elements, not M*N
    assert member_work(plan, exp) == Work(float(M * N * (1 + TRANSCENDENTAL_FLOPS)), 4.0 * (M * N + M), 4.0 * M * N)


def test_plan_group_and_unfused_work():
    plan = small_chain()
    total_flops = 2.0 * M * N * K + M * N + M * N * (1 + TRANSCENDENTAL_FLOPS)
    assert plan_work(plan) == Work(total_flops, 4.0 * (M * K + K * N), 4.0 * M * N)
    fused = group_work(plan, ("s", "m", "e"))
    assert fused == plan_work(plan)
    unfused = unfused_work(plan)
    assert unfused.bytes == pytest.approx(sum(member_work(plan, k).bytes for k in plan.kernels))
    assert unfused.bytes > fused.bytes
    # a partial group writes what leaves it: s is read by e outside {s, m}
    partial = group_work(plan, ("s", "m"))
    assert partial.bytes_written == 4.0 * (M * N + M)


def test_floor_takes_the_larger_bound():
    work = Work(flops=1e9, bytes_read=1e9, bytes_written=1e9)
    result = floor(work, bandwidth=1e10, peak_flops=1e11)
    assert result.memory_seconds == pytest.approx(0.2) and result.compute_seconds == pytest.approx(0.01)
    assert result.seconds == pytest.approx(0.2) and result.bound == "memory"
    assert fraction_of_floor(result.seconds, 0.4) == pytest.approx(0.5)
    assert Work(10.0, 2.0, 3.0).intensity == pytest.approx(2.0)
