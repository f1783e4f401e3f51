"""The float64 evaluator: values and error magnitudes on small plans with known answers."""

from __future__ import annotations

import numpy as np

import weft
from weft import nn
from weft.fuzz.reference64 import bounds64, float_to_int, outputs64


def test_sum_magnitude_counts_cancellation_and_fold_length():
    plan = weft.trace(lambda x: nn.sum(x, axis=0), weft.spec((4,)))
    x = np.array([1e8, 1.0, -1e8, 1.0], np.float32)
    values, magnitudes = bounds64(plan, x)
    out = plan.outputs[0]
    assert values[out] == 2.0
    # sum |t| = 2e8 + 2; three additions in any order: sum m_t + 3 * sum |t|
    assert magnitudes[out] == (2e8 + 2) + 3 * (2e8 + 2)


def test_exp_magnitude_scales_with_the_argument():
    plan = weft.trace(lambda x: nn.exp(x), weft.spec((2,)))
    x = np.array([0.0, 50.0], np.float32)
    values, magnitudes = bounds64(plan, x)
    m = magnitudes[plan.outputs[0]]
    assert np.allclose(values[plan.outputs[0]], np.exp([0.0, 50.0]))
    assert np.allclose(m, np.exp([0.0, 50.0]) * (np.array([0.0, 50.0]) + 1.0))


def test_integer_division_truncates_and_is_defined_for_every_pair():
    plan = weft.trace(lambda a, b: nn.div(a, b), weft.spec((5,), "int32"), weft.spec((5,), "int32"))
    a = np.array([7, -7, 5, np.iinfo(np.int32).min, 3], np.int32)
    b = np.array([2, 2, 0, -1, -2], np.int32)
    (out,) = outputs64(plan, a, b)
    assert out.dtype == np.int32
    assert out.tolist() == [3, -3, 0, np.iinfo(np.int32).min, -1]


def test_float_to_int_truncates_and_saturates():
    values = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, -2.7, 2.7])
    assert float_to_int(values, np.int32).tolist() == [0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), -2, 2]


def test_masked_attention_rows_match_a_direct_float64_softmax():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (6, 4), (6, 2)))
    mask = np.array([[True] * 6, [False] * 5 + [True], [True, False] * 3])
    plan = weft.trace(lambda q, k, v, m: nn.attention(q, k, v, mask=m), weft.spec((3, 4)), weft.spec((6, 4)),
                      weft.spec((6, 2)), weft.spec((3, 6), "bool"))
    (out,) = outputs64(plan, q, k, v, mask)
    scores = np.where(mask, q.astype(np.float64) @ k.T.astype(np.float64) / 2.0, -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    expected = weights / weights.sum(axis=1, keepdims=True) @ v.astype(np.float64)
    assert np.allclose(out, expected, rtol=1e-12, atol=0)
