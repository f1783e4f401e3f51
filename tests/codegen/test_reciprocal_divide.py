"""Inference divides lanes by a lane-invariant value (softmax's row sum, a row's norm) as a
multiply by one reciprocal (``MemberNest.reciprocal_divisors``); Strict keeps the division.

Checked through the compiled C, fused and unfused, at odd row lengths (a vector body and
a scalar tail), tiny rows, rows of -inf and NaN, and divisors where ``1 / d`` leaves
float32's normal range (0, denormals, above 2^126, inf, NaN): there the lanes are divided
exactly, so every non-finite value is the division's own."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.fuzz.reference64 import outputs64
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal


def _softmax_plan(rows, cols):
    return weft.trace(lambda x: nn.softmax(x), weft.spec((rows, cols), "float32"))


def _rows(rows, cols, seed):
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32) * 4
    if rows > 3:
        x[1, :] = -np.inf  # every term exp(-inf - -inf) = NaN: a NaN row
        x[2, cols // 2] = np.nan
        x[3, 0] = np.inf
    return x


@pytest.mark.parametrize("fusion", ["off", "greedy"])
@pytest.mark.parametrize(("rows", "cols"), [(6, 1), (5, 3), (7, 17), (6, 1023), (4, 1040)])
def test_softmax_inference_close_and_strict_exact(rows, cols, fusion):
    plan = _softmax_plan(rows, cols)
    x = _rows(rows, cols, seed=rows * 1000 + cols)
    (expected,) = outputs64(plan, x)
    inference = weft.compile(plan, "inference", fusion=fusion)
    assert_inference_close(inference(x), expected, context=f"softmax {rows}x{cols} {fusion}")
    strict = weft.compile(plan, "strict", fusion=fusion)
    assert_strict_equal(strict(x), run(plan, x))


def test_reciprocal_only_under_inference():
    plan = _softmax_plan(8, 64)
    for contract, expected in (("inference", True), ("strict", False)):
        lowered = weft.compile(plan, contract).lowered
        flags = [getattr(nest, "reciprocal_divisors", False) for function in lowered.functions
                 for nest in function.nests if nest.kernel.output == "softmax"]
        assert flags == [expected], (contract, flags)


@pytest.mark.parametrize("divisor", [0.0, -0.0, 1e-40, -3e-39, 2.0**127, 3e38, np.inf, -np.inf, np.nan, 1.5, 2.0**-126])
def test_divisors_outside_the_normal_reciprocal_range_divide_exactly(divisor):
    """x / d[row] with d out of the reciprocal's range: the C answers the division's bits."""
    cols = 37
    plan = weft.trace(lambda x, d: nn.div(x, d), weft.spec((3, cols), "float32"), weft.spec((3, 1), "float32"))
    x = np.random.default_rng(5).standard_normal((3, cols)).astype(np.float32)
    x[0, :3] = (0.0, np.inf, np.nan)
    d = np.array([[divisor], [divisor], [1.0]], np.float32)
    compiled = weft.compile(plan, "inference")
    assert any(getattr(nest, "reciprocal_divisors", False) for function in compiled.lowered.functions
               for nest in function.nests)
    out = compiled(x, d)
    with np.errstate(all="ignore"):
        exact = x / d
    finite = np.isfinite(exact)
    assert np.array_equal(np.isnan(out), np.isnan(exact)) and np.array_equal(out[~finite & ~np.isnan(exact)],
                                                                            exact[~finite & ~np.isnan(exact)])
    if not (1.17e-38 <= abs(divisor) <= 2.0**126):
        assert np.array_equal(out[:2].view(np.uint32), exact[:2].view(np.uint32)), divisor  # divided exactly
    assert_inference_close(out[finite], exact.astype(np.float64)[finite])
