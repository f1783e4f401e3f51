"""The contract comparisons: each rule accepts what it should and rejects the rest."""

from __future__ import annotations

import numpy as np

from weft.fuzz import compare


def f32(*values):
    return np.array(values, np.float32)


def test_strict_accepts_any_nan_payload_and_rejects_signed_zero_or_one_ulp():
    quiet, other = f32(np.nan), np.array([0xFFC00001], np.uint32).view(np.float32)
    assert compare.strict(other, quiet).problem is None
    assert compare.strict(f32(-0.0), f32(0.0)).problem is not None
    assert compare.strict(np.nextafter(f32(1.0), f32(2.0)), f32(1.0)).problem is not None
    assert compare.strict(f32(1.0), f32(np.nan)).problem is not None
    assert compare.strict(f32(1.0, 2.0), f32(1.0)).problem is not None  # shape
    assert compare.strict(np.array([1], np.int64), np.array([1], np.int32)).problem is not None  # dtype


def test_inference_bound_is_the_contracts_rule_with_the_magnitude():
    # the contract's rule (weft.testing): 1e-4 |r| + 1e-4 max|r| + 16 * 2**-24 * m
    reference, oracle = np.array([1.0]), f32(1.0)
    assert compare.inference(f32(1.00019), oracle, reference, np.array([1.0])).problem is None
    assert compare.inference(f32(1.0003), oracle, reference, np.array([1.0])).problem is not None
    # a value near zero carries 1e-4 of the output's largest magnitude
    pair, magnitudes = np.array([1.0, 100.0]), np.array([1.0, 100.0])
    assert compare.inference(f32(1.009, 100.0), f32(1.0, 100.0), pair, magnitudes).problem is None
    assert compare.inference(f32(1.011, 100.0), f32(1.0, 100.0), pair, magnitudes).problem is not None
    # an ill-conditioned value (magnitude 1e4) may be off by 16 float32 roundings of 1e4
    assert compare.inference(f32(1.005), oracle, reference, np.array([1e4])).problem is None
    assert compare.inference(f32(1.02), oracle, reference, np.array([1e4])).problem is not None


def test_inference_non_finite_values_follow_the_oracle():
    reference, magnitude = np.array([2.0]), np.array([2.0])
    assert compare.inference(f32(np.nan), f32(2.0), reference, magnitude).problem is not None
    assert compare.inference(f32(np.inf), f32(2.0), reference, magnitude).problem is not None
    assert compare.inference(f32(2.0), f32(np.nan), np.array([np.nan]), magnitude).problem is not None
    assert compare.inference(f32(np.nan), f32(np.nan), np.array([np.nan]), magnitude).problem is None
    # float64 NaN where float32 is finite: not checked, but counted
    verdict = compare.inference(f32(5.0), f32(1.0), np.array([np.nan]), magnitude)
    assert verdict.problem is None and verdict.unchecked == 1
    # the oracle overflowed on the way (inf - inf) where float64 did not: not checked, counted
    verdict = compare.inference(f32(np.inf), f32(np.nan), np.array([np.inf]), np.array([0.0]))
    assert verdict.problem is None and verdict.unchecked == 1
    # terms beyond float32's range: a non-finite result is not checked; a finite one is
    huge = np.array([1e39])
    assert compare.inference(f32(np.nan), f32(np.inf), np.array([3e38]), huge).unchecked == 1
    assert compare.inference(f32(7.0), f32(np.inf), np.array([3e38]), huge).problem is not None


def test_inference_integers_are_exact():
    assert compare.inference(np.array([3], np.int32), np.array([3], np.int32), np.array([3]), None).problem is None
    assert compare.inference(np.array([3], np.int32), np.array([3], np.int32), np.array([4]), None).problem
