"""Rules of the Inference comparison found by the 5000-program runs (seed 2026):

- a sum whose total is an infinity but whose finite terms alone overflow float32 may come
  out NaN in another (legal) order: the element is unchecked, not a mismatch
  (``bmm`` of a row holding -inf and +-3e38, program 642); the bound is the finite terms'
  reassociation magnitude, which covers the one pass summing attention's unnormalised weights
  (seed 2030, program 119);
- where the oracle itself is off float64 inside a documented range limit (``rms_norm`` of a
  row beyond ~5e30, docs/unsupported.md) and the compiled output agrees with the oracle, the
  element is unchecked; a compiled output that agrees with neither is still a mismatch;
- a quotient by a value whose error magnitude reaches it (it may round to 0 or flip sign) is
  unchecked (``layer_norm`` then ``div``, program 3445); so is an exact zero times a value whose
  magnitude is past float32's range (0 * inf = NaN in some order, attention, program 3558).
"""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.fuzz import check_outputs
from weft.fuzz.reference64 import bounds64


def _bmm_plan():
    return weft.trace(lambda a, b: nn.bmm(a, b), weft.spec((1, 1, 4)), weft.spec((1, 4, 1)))


def test_an_infinite_sum_with_overflowing_finite_terms_is_unchecked():
    plan = _bmm_plan()
    a = np.array([[[-np.inf, 3e38, 3e38, 1.0]]], np.float32)
    b = np.ones((1, 4, 1), np.float32)
    values, magnitudes = bounds64(plan, a, b)
    assert values[plan.outputs[0]].item() == -np.inf
    assert magnitudes[plan.outputs[0]].item() == np.inf
    check_outputs(plan, [a, b], np.full((1, 1, 1), np.nan, np.float32), contract="inference")


def test_an_infinite_sum_without_overflow_is_exact():
    plan = _bmm_plan()
    a = np.array([[[-np.inf, 1.0, 2.0, 1.0]]], np.float32)
    b = np.ones((1, 4, 1), np.float32)
    with pytest.raises(AssertionError, match="contract broken"):
        check_outputs(plan, [a, b], np.full((1, 1, 1), np.nan, np.float32), contract="inference")


def test_rms_norm_beyond_its_range_follows_the_oracle():
    plan = weft.trace(lambda x: nn.rms_norm(x), weft.spec((3, 1)))
    x = np.array([[0.5], [3e38], [-2.0]], np.float32)
    oracle = weft.oracle.run(plan, x)
    compiled = weft.compile(plan, contract="inference")(x)
    check_outputs(plan, [x], compiled, contract="inference")
    wrong = np.array(oracle, copy=True)
    wrong[1, 0] = 0.5  # neither the oracle's value nor float64's
    with pytest.raises(AssertionError, match="oracle itself"):
        check_outputs(plan, [x], wrong, contract="inference")


def test_a_quotient_by_a_value_whose_error_reaches_it_is_unchecked():
    # program 3445 (seed 2026, Inference off): a layer_norm row of +-3e38 and 1e30 beside values
    # near 1 normalises those to about -6.5e-10 with an error magnitude of about 6: float32
    # may give 0 or the other sign there, so y / that is +-inf of either sign (float64 8.6e8)
    plan = weft.trace(lambda x, y: nn.div(y, nn.layer_norm(x, (13,))), weft.spec((1, 13)), weft.spec((1, 1)))
    x = np.array([[-3e38, 1.77, 0.53, 3e38, 1e30, -0.14, -0.49, -0.72, 1.67, -0.088, 0.98, 1.47, -1.25]], np.float32)
    y = np.array([[0.56]], np.float32)
    values, magnitudes = bounds64(plan, x, y)
    out = plan.outputs[0]
    assert np.all(np.isfinite(values[out])) and magnitudes[out][0, 1] == np.inf
    for sign in (1.0, -1.0):
        check_outputs(plan, [x, y], np.where(np.abs(values[out]) > 1e6, sign * np.inf, values[out]).astype(np.float32),
                      contract="inference")


def test_a_quotient_by_a_well_conditioned_value_is_still_checked():
    plan = weft.trace(lambda x, y: nn.div(y, nn.layer_norm(x, (4,))), weft.spec((1, 4)), weft.spec((1, 1)))
    x = np.array([[1.0, 2.0, 4.0, 8.0]], np.float32)
    y = np.ones((1, 1), np.float32)
    values, magnitudes = bounds64(plan, x, y)
    assert np.all(np.isfinite(magnitudes[plan.outputs[0]]))
    with pytest.raises(AssertionError, match="contract broken"):
        check_outputs(plan, [x, y], np.full((1, 4), np.inf, np.float32), contract="inference")


def test_zero_times_a_value_float32_may_not_hold_is_unchecked():
    # program 3558: one key, q holding 3e38 (scores beyond float32 in some orders of their sum):
    # float64 gives p = 1 and 0 * p = 0 where V is 0, a legal order gives p = inf - inf = NaN
    plan = weft.trace(lambda q, k, v: nn.attention(q, k, v, scale=0.125),
                      weft.spec((1, 4)), weft.spec((1, 4)), weft.spec((1, 2)))
    q = np.array([[3e38, -3e38, 3e38, 1.0]], np.float32)
    k = np.array([[3.0, 3.0, 1.0, 1.0]], np.float32)
    v = np.array([[0.0, 2.0]], np.float32)
    values, magnitudes = bounds64(plan, q, k, v)
    out = plan.outputs[0]
    assert values[out][0, 0] == 0.0 and magnitudes[out][0, 0] == np.inf
    check_outputs(plan, [q, k, v], np.array([[np.nan, 2.0]], np.float32), contract="inference")


def test_zero_times_a_value_float32_holds_is_exact():
    plan = weft.trace(lambda q, k, v: nn.attention(q, k, v), weft.spec((1, 4)), weft.spec((2, 4)), weft.spec((2, 2)))
    q, k = np.ones((1, 4), np.float32), np.ones((2, 4), np.float32)
    v = np.array([[0.0, 2.0], [0.0, 1.0]], np.float32)
    with pytest.raises(AssertionError, match="contract broken"):
        check_outputs(plan, [q, k, v], np.array([[np.nan, 1.5]], np.float32), contract="inference")


def test_an_infinite_attention_output_whose_deferred_sum_may_overflow_is_unchecked():
    # seed 2030, greedy Inference, program 119: uniform weights over 33 keys and V holding -inf
    # and +-3e38. float64 gives sum p_j v_j = -inf; the one pass (online softmax, legal under
    # Inference) sums e_j v_j with e_j = 1 before dividing by sum e_j = 33, so 3e38 + 3e38 = inf
    # meets -inf: NaN. The finite terms' reassociation magnitude ((n - 1) sum |p_j v_j|)
    # exceeds float32's range, so the element is unchecked.
    plan = weft.trace(lambda q, k, v: nn.attention(q, k, v, scale=0.125),
                      weft.spec((1, 3)), weft.spec((33, 3)), weft.spec((33, 1)))
    q, k = np.ones((1, 3), np.float32), np.ones((33, 3), np.float32)
    v = np.ones((33, 1), np.float32)
    v[0, 0], v[5, 0], v[9, 0] = -np.inf, 3e38, 3e38
    values, magnitudes = bounds64(plan, q, k, v)
    out = plan.outputs[0]
    assert values[out][0, 0] == -np.inf and magnitudes[out][0, 0] == np.inf
    check_outputs(plan, [q, k, v], np.array([[np.nan]], np.float32), contract="inference")
    compiled = weft.compile(plan, contract="inference", fusion="greedy")
    check_outputs(plan, [q, k, v], compiled(q, k, v), contract="inference")


def test_an_infinite_attention_output_with_small_finite_terms_is_exact():
    plan = weft.trace(lambda q, k, v: nn.attention(q, k, v, scale=0.125),
                      weft.spec((1, 3)), weft.spec((33, 3)), weft.spec((33, 1)))
    q, k = np.ones((1, 3), np.float32), np.ones((33, 3), np.float32)
    v = np.ones((33, 1), np.float32)
    v[0, 0] = -np.inf
    with pytest.raises(AssertionError, match="contract broken"):
        check_outputs(plan, [q, k, v], np.array([[np.nan]], np.float32), contract="inference")
