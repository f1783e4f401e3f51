"""Property tests over random plans: Strict byte-identical to the oracle, Inference
within tolerance. Each hypothesis example merges PLANS_PER_EXAMPLE independent
random plans into one compile; EXAMPLES * PLANS_PER_EXAMPLE >= 200 plans per run.

The fused tests run realistic random plans (several 16-lane vectors with odd tails,
halos with padding, gathers, contractions, causal masks, saturating casts, integer
division) through ``fusion="greedy"`` and the real C path, unfused alongside."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from plans.random_plans import arrays_for, batch_of_plans, merge_plans

import weft
from weft.fuzz.reference64 import outputs64
from weft.oracle import run
from weft.testing import assert_strict_equal

PLANS_PER_EXAMPLE = 8
EXAMPLES = 25
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
    HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])


def _arrays(plan, seed):
    return arrays_for(plan, seed)


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


def _strict_matches_each_plan(plans, config):
    merged = merge_plans(plans, rename=False)
    arrays = _arrays(merged, 0)
    compiled = weft.compile(merged, config=config)
    got = _as_tuple(compiled(*arrays))
    # each plan on its own through the oracle: the merged compile must agree with every one
    by_name = dict(zip(merged.outputs, got, strict=True))
    values = dict(zip(merged.inputs, arrays, strict=True))
    for plan in plans:
        want = _as_tuple(run(plan, *[values[n] for n in plan.inputs]))
        assert_strict_equal(tuple(by_name[name] for name in plan.outputs), want, f"{plan}")
    return compiled


@SETTINGS
@given(plans=batch_of_plans(PLANS_PER_EXAMPLE))
def test_random_plans_strict_byte_identical(plans, make_config):
    _strict_matches_each_plan(plans, make_config("strict"))


LARGE_SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow,
    HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])


def test_fused_realistic_random_plans_strict_byte_identical(make_config):
    """Fused (greedy) and unfused C over plans of realistic extents: every one Strict-equal
    to the oracle run on its own; and the runs as a whole did fuse (else nothing was tested)."""
    fused_groups = []

    @LARGE_SETTINGS
    @given(plans=batch_of_plans(PLANS_PER_EXAMPLE, large=True))
    def check(plans):
        fused = _strict_matches_each_plan(plans, make_config("strict", fusion="greedy"))
        fused_groups.extend(group for group in fused.groups if len(group) > 1)
        _strict_matches_each_plan(plans, make_config("strict"))

    check()
    assert len(fused_groups) >= 10, f"greedy fused only {len(fused_groups)} regions: fusion was barely tested"


@LARGE_SETTINGS
@given(plans=batch_of_plans(PLANS_PER_EXAMPLE, safe=True, large=True))
def test_fused_realistic_random_plans_inference_within_tolerance(plans, make_config):
    merged = merge_plans(plans, rename=False)
    arrays = _arrays(merged, 2)
    got = _as_tuple(weft.compile(merged, config=make_config("inference", fusion="greedy"))(*arrays))
    strict = _as_tuple(run(merged, *arrays))
    reference = outputs64(merged, *arrays)
    for name, actual, oracle, expected in zip(merged.outputs, got, strict, reference, strict=True):
        _within_inference_bound(name, actual, oracle, expected)


@SETTINGS
@given(plans=batch_of_plans(PLANS_PER_EXAMPLE, safe=True))
def test_random_plans_inference_within_tolerance_of_float64(plans, make_config):
    """|inference - f64| <= 1e-4 |f64| + 1e-4 max|f64| + 4 |oracle - f64|: within the stated
    tolerance, or no further from float64 than a few times Strict float32 itself is."""
    merged = merge_plans(plans, rename=False)
    arrays = _arrays(merged, 1)
    got = _as_tuple(weft.compile(merged, config=make_config("inference"))(*arrays))
    strict = _as_tuple(run(merged, *arrays))
    reference = outputs64(merged, *arrays)
    for name, actual, oracle, expected in zip(merged.outputs, got, strict, reference, strict=True):
        _within_inference_bound(name, actual, oracle, expected)


def _within_inference_bound(name, actual, oracle, expected):
    """Non-finite values exactly (position and sign); finite ones within the bound."""
    finite = np.isfinite(expected)
    actual64 = actual.astype(np.float64)
    assert np.all(np.isfinite(actual64[finite])), f"{name}: non-finite where float64 is finite"
    assert np.array_equal(actual64[~finite], expected[~finite], equal_nan=True), f"{name}: non-finite values differ"
    scale = float(np.max(np.abs(expected[finite]), initial=1.0))
    with np.errstate(invalid="ignore"):  # inf - inf at the non-finite positions, checked above
        error = np.abs(actual64 - expected)
        bound = 1e-4 * np.abs(expected) + 1e-4 * scale + 4 * np.abs(oracle.astype(np.float64) - expected)
    assert np.all((error <= bound)[finite]), f"{name}: worst excess {np.max((error - bound)[finite])}"
