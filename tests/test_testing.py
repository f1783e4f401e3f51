"""The Strict and Inference comparison helpers (weft.testing) say what the contracts say."""

import numpy as np
import pytest

from weft.testing import assert_inference_close, assert_strict_equal, strict_mismatch


def test_strict_rule_nan_any_payload_but_signed_zeros_and_values_exact():
    base = np.array([1.0, np.nan, 0.0, -np.inf], np.float32)
    other_payload = base.copy()
    other_payload.view(np.uint32)[1] = 0xFFC00001
    assert_strict_equal(other_payload, base)
    for position, value in ((0, np.nextafter(np.float32(1), np.float32(2))), (2, -0.0), (3, np.inf), (1, 0.0)):
        changed = base.copy()
        changed[position] = value
        with pytest.raises(AssertionError, match="not Strict-equal"):
            assert_strict_equal(changed, base)
    moved_nan = np.array([np.nan, 1.0, 0.0, -np.inf], np.float32)
    assert strict_mismatch(moved_nan, base) is not None


def test_strict_rule_checks_counts_shapes_dtypes_and_integers():
    ints = np.array([1, -2, 3], np.int32)
    assert strict_mismatch((ints,), (ints, ints)) is not None  # fewer outputs cannot pass
    assert strict_mismatch(ints.astype(np.int64), ints) is not None
    assert strict_mismatch(ints.reshape(3, 1), ints) is not None
    assert strict_mismatch(ints + np.array([0, 0, 1], np.int32), ints) is not None
    assert strict_mismatch((ints, ints), (ints, ints)) is None


def test_inference_rule_tolerance_and_exact_non_finite():
    reference = np.array([1.0, 0.0, np.inf, np.nan])
    assert_inference_close(np.array([1.00005, 1e-5, np.inf, np.nan], np.float32), reference)
    for wrong in ([1.001, 0.0, np.inf, np.nan], [1.0, 0.0, -np.inf, np.nan], [1.0, 0.0, 3e38, np.nan],
                  [1.0, 0.0, np.inf, 1.0], [1.0, np.nan, np.inf, np.nan]):
        with pytest.raises(AssertionError, match="Inference tolerance"):
            assert_inference_close(np.array(wrong, np.float32), reference)
