"""The Strict and Inference comparison helpers (weft.testing) say what the contracts say."""

import numpy as np
import pytest

from weft.testing import (
    INFERENCE_RTOL,
    assert_inference_close,
    assert_strict_equal,
    inference_bound,
    inference_error,
    inference_within,
    strict_mismatch,
)


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


def test_inference_rule_has_one_bound_with_an_optional_error_magnitude():
    # 1e-4 |r| + 1e-4 max|r| + 16 * 2**-24 * m + 1e-37, per element
    reference = np.array([1.0, 100.0])
    allowed = inference_bound(reference)
    assert np.allclose(allowed, [1e-4 * 101, 1e-4 * 200], rtol=1e-12)
    assert inference_within(np.array([1.0 + 0.9 * allowed[0], 100.0]), reference).all()
    assert not inference_within(np.array([1.0 + 1.1 * allowed[0], 100.0]), reference)[0]
    # a magnitude widens the bound by sixteen float32 roundings per unit of it, no more
    magnitude = np.array([1e6, 100.0])
    wider = inference_bound(reference, magnitude)[0]
    assert np.isclose(wider - allowed[0], 16 * 2.0**-24 * 1e6)
    assert inference_within(np.array([1.0 + 0.9 * wider, 100.0]), reference, magnitude).all()
    assert not inference_within(np.array([1.0 + 1.1 * wider, 100.0]), reference, magnitude)[0]
    # the one number agrees with the per-element rule: <= INFERENCE_RTOL exactly when it holds
    for factor in (0.5, 0.99, 1.01, 2.0):
        got = np.array([1.0 + factor * wider, 100.0])
        assert (inference_error(got, reference, magnitude) <= INFERENCE_RTOL) == bool(
            inference_within(got, reference, magnitude).all())


def test_at_line_offset_places_a_contiguous_copy_past_a_line():
    import numpy as np
    import pytest

    from weft.testing import at_line_offset

    array = np.arange(37 * 5, dtype=np.float32).reshape(37, 5)
    for offset in (0, 4, 16, 60):
        copy = at_line_offset(array, offset)
        assert copy.ctypes.data % 64 == offset and copy.flags.c_contiguous
        assert np.array_equal(copy, array) and not np.shares_memory(copy, array)
    with pytest.raises(ValueError, match="0..63"):
        at_line_offset(array, 64)
