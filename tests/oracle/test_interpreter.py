"""The oracle's defined semantics: fold order, NaN rules, padding, gathers, input checks."""

import numpy as np
import pytest

from weft import oracle
from weft.errors import InputError
from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    Combiner,
    DType,
    Fold,
    IndexOf,
    Kernel,
    Load,
    Plan,
    Role,
)

I, J = AxisIndex("i"), AxisIndex("j")
F32 = DType.FLOAT32


def row_fold_plan(n: int, m: int, combiner: Combiner) -> Plan:
    buffers = (Buffer("x", (n, m), F32, Role.INPUT), Buffer("r", (n,), F32, Role.OUTPUT))
    kernel = Kernel("r", (Axis("i", n),), Load("x", (I, J)), Fold((Axis("j", m),), combiner))
    return Plan(buffers, (kernel,), ("x",), ("r",), "fold")


def test_sum_is_sequential_in_ascending_order():
    x = np.array([[1e8, 1.0, -1e8, 1.0]], dtype=np.float32)
    expected = np.float32(0)
    for value in x[0]:
        expected = np.float32(expected + value)
    result = oracle.run(row_fold_plan(1, 4, Combiner.SUM), x)
    assert result.dtype == np.float32
    assert result[0] == expected == np.float32(1.0)  # (1e8 + 1) rounds to 1e8; -1e8 leaves 0; + 1


def test_sum_matches_float64_within_tolerance():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 33)).astype(np.float32)
    result = oracle.run(row_fold_plan(7, 33, Combiner.SUM), x)
    np.testing.assert_allclose(result, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


def test_max_and_min_propagate_nan():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, -1.0, -2.0]], dtype=np.float32)
    high = oracle.run(row_fold_plan(2, 3, Combiner.MAX), x)
    low = oracle.run(row_fold_plan(2, 3, Combiner.MIN), x)
    assert np.isnan(high[0]) and high[1] == -1.0
    assert np.isnan(low[0]) and low[1] == -np.inf


def shift_plan(padding):
    buffers = (Buffer("x", (5,), F32, Role.INPUT), Buffer("y", (5,), F32, Role.OUTPUT))
    kernel = Kernel("y", (Axis("i", 5),), Load("x", (I - 2,), padding=padding))
    return Plan(buffers, (kernel,), ("x",), ("y",), "shift")


def test_padding_reads_value_outside():
    x = np.arange(1, 6, dtype=np.float32)
    np.testing.assert_array_equal(oracle.run(shift_plan(-7.0), x), [-7, -7, 1, 2, 3])


def gather_plan():
    buffers = (
        Buffer("table", (4, 3), F32, Role.INPUT),
        Buffer("ids", (2,), DType.INT32, Role.INPUT),
        Buffer("rows", (2, 3), F32, Role.OUTPUT),
    )
    kernel = Kernel("rows", (Axis("i", 2), Axis("j", 3)), Load("table", (IndexOf(Load("ids", (I,))), J)))
    return Plan(buffers, (kernel,), ("table", "ids"), ("rows",), "gather")


def test_gather_and_out_of_range_gather():
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(oracle.run(gather_plan(), table, np.array([3, 1], np.int32)), table[[3, 1]])
    with pytest.raises(InputError, match="out of range"):
        oracle.run(gather_plan(), table, np.array([4, 0], np.int32))


def test_input_validation_names_input_and_fix():
    plan = row_fold_plan(2, 3, Combiner.SUM)
    with pytest.raises(InputError, match=r"input x has shape \(3, 2\), expected \(2, 3\)"):
        oracle.run(plan, np.zeros((3, 2), np.float32))
    with pytest.raises(InputError, match="astype"):
        oracle.run(plan, np.zeros((2, 3), np.float64))
    with pytest.raises(InputError, match="takes 1 inputs"):
        oracle.run(plan)


def test_non_contiguous_input_view():
    base = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    view = base[::2]
    np.testing.assert_allclose(oracle.run(row_fold_plan(3, 3, Combiner.SUM), view), view.sum(1), rtol=1e-6)


def test_elementwise_ops_follow_binary_table():
    buffers = (Buffer("a", (4,), F32, Role.INPUT), Buffer("b", (4,), F32, Role.INPUT), Buffer("c", (4,), F32, Role.OUTPUT))
    kernel = Kernel("c", (Axis("i", 4),), Binary(BinaryOp.MAX, Load("a", (I,)), Load("b", (I,))))
    plan = Plan(buffers, (kernel,), ("a", "b"), ("c",), "max")
    a = np.array([1, np.nan, -0.0, 2], np.float32)
    b = np.array([2, 1, 0.0, np.nan], np.float32)
    result = oracle.run(plan, a, b)
    assert result[0] == 2 and np.isnan(result[1]) and np.isnan(result[3])
