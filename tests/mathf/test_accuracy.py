"""Accuracy of the NumPy evaluation against float64 references (the bounds docs/math.md states)."""

import numpy as np
import pytest
from scipy import special

from weft import mathf
from weft.mathf.accuracy import REFERENCES, STATED_MAX_ULP, measure, ulp_error

MAX_ULP = STATED_MAX_ULP


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_max_ulp_error_within_stated_bound(name):
    row = measure(name, count=300_000, seed=7)
    assert row.max_ulp <= MAX_ULP[name], row


def test_ulp_error_scores_correct_rounding_and_nans():
    reference = np.array([1.0, 1.0 + 2.0**-25, np.inf, np.nan, 1e39])
    result = np.array([1.0, 1.0, np.inf, np.nan, np.inf], dtype=np.float32)
    assert ulp_error(result, reference).tolist() == [0.0, 0.0, 0.0, 0.0, 0.0]
    off_by_one = np.array([1.0 + 2.0**-23], dtype=np.float32)
    assert ulp_error(off_by_one, np.array([1.0]))[0] == pytest.approx(1.0)
    assert ulp_error(np.array([np.nan], np.float32), np.array([1.0]))[0] == np.inf


def test_denormal_results_are_gradual():
    """exp and sigmoid of large negatives land on the right denormal, not 0."""
    x = np.linspace(-103.0, -87.5, 20001, dtype=np.float32)
    for name, reference in (("exp", np.exp), ("sigmoid", special.expit)):
        result = getattr(mathf, name)(x)
        assert np.all(result > 0), name
        assert ulp_error(result, reference(x.astype(np.float64))).max() <= MAX_ULP[name], name


def test_log_of_denormals():
    bits = np.arange(1, 0x00800000, 97, dtype=np.uint32)
    x = bits.view(np.float32)
    error = ulp_error(mathf.log(x), np.log(x.astype(np.float64)))
    assert error.max() <= MAX_ULP["log"]


def test_small_arguments_keep_relative_accuracy():
    """Near 0, tanh(x) ~ x and erf(x) ~ 1.128 x: the error is relative, in ulps of the result."""
    x = np.geomspace(2.0**-140, 0.5, 50_000).astype(np.float32)
    x = np.concatenate([x, -x])
    for name, reference in (("tanh", np.tanh), ("erf", special.erf)):
        error = ulp_error(getattr(mathf, name)(x), reference(x.astype(np.float64)))
        assert error.max() <= MAX_ULP[name], name
