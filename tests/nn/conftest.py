"""Shared helpers: trace a function over arrays, run the oracle, compare to float64."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft.oracle import run


def _trace_and_run(fn, *arrays, **trace_kwargs):
    arrays = tuple(np.asarray(a) for a in arrays)
    specs = [weft.spec(a.shape, a.dtype) for a in arrays]
    plan = weft.trace(fn, *specs, **trace_kwargs)
    out = run(plan, *arrays)
    return plan, out


@pytest.fixture(scope="session")
def traced():
    """``traced(fn, *arrays) -> (plan, oracle outputs)``."""
    return _trace_and_run


@pytest.fixture(scope="session")
def close():
    """Compare float32 output to a float64 reference with a float32 tolerance."""

    def check(actual, expected, rtol=2e-5, atol=None):
        expected = np.asarray(expected, dtype=np.float64)
        assert actual.shape == expected.shape, (actual.shape, expected.shape)
        assert actual.dtype == np.float32 or actual.dtype.kind in "ib", actual.dtype
        scale = float(np.max(np.abs(expected))) if expected.size else 1.0
        limit = atol if atol is not None else 1e-6 * max(scale, 1.0)
        np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=rtol, atol=limit)

    return check
