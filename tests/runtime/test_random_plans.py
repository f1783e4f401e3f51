"""Property tests over random plans: Strict byte-identical to the oracle, Inference
within tolerance. Each hypothesis example merges PLANS_PER_EXAMPLE independent
random plans into one compile; EXAMPLES * PLANS_PER_EXAMPLE >= 200 plans per run."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from random_plans import batch_of_plans, merge

import weft
from weft.fuzz.reference64 import outputs64
from weft.oracle import run

PLANS_PER_EXAMPLE = 8
EXAMPLES = 25
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
    HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])


def _arrays(plan, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(plan.buffer(n).shape).astype(np.float32) for n in plan.inputs]


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


@SETTINGS
@given(plans=batch_of_plans(PLANS_PER_EXAMPLE))
def test_random_plans_strict_byte_identical(plans, make_config):
    merged = merge(plans)
    arrays = _arrays(merged, 0)
    got = _as_tuple(weft.compile(merged, config=make_config("strict"))(*arrays))
    # each plan on its own through the oracle: the merged compile must agree with every one
    by_name = dict(zip(merged.outputs, got, strict=False))
    values = dict(zip(merged.inputs, arrays, strict=False))
    for plan in plans:
        want = _as_tuple(run(plan, *[values[n] for n in plan.inputs]))
        for name, expected in zip(plan.outputs, want, strict=False):
            actual = by_name[name]
            assert actual.shape == expected.shape
            assert actual.tobytes() == expected.tobytes(), f"{name} differs\n{plan}"


@SETTINGS
@given(plans=batch_of_plans(PLANS_PER_EXAMPLE, safe=True))
def test_random_plans_inference_within_tolerance_of_float64(plans, make_config):
    """|inference - f64| <= 1e-4 |f64| + 1e-4 max|f64| + 4 |oracle - f64|: within the stated
    tolerance, or no further from float64 than a few times Strict float32 itself is."""
    merged = merge(plans)
    arrays = _arrays(merged, 1)
    got = _as_tuple(weft.compile(merged, config=make_config("inference"))(*arrays))
    strict = _as_tuple(run(merged, *arrays))
    reference = outputs64(merged, *arrays)
    for name, actual, oracle, expected in zip(merged.outputs, got, strict, reference, strict=False):
        finite = np.isfinite(expected)
        assert np.array_equal(np.isfinite(actual), finite) or not finite.all(), name
        scale = float(np.max(np.abs(expected[finite]), initial=1.0))
        error = np.abs(actual.astype(np.float64) - expected)
        bound = 1e-4 * np.abs(expected) + 1e-4 * scale + 4 * np.abs(oracle.astype(np.float64) - expected)
        assert np.all((error <= bound)[finite]), f"{name}: worst excess {np.max((error - bound)[finite])}"
