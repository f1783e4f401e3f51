"""Property: any plan, fused greedily, matches the oracle byte for byte under Strict and
float64 within tolerance under Inference (at least 200 random plans per run)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from compose_random_plans import random_plan
from compose_reference64 import evaluate64

from weft.compose import choose_regions
from weft.compose.execute import run_partition
from weft.oracle.interpreter import run_all


@settings(max_examples=200, deadline=None, derandomize=False)
@given(seed=st.integers(0, 2**31 - 1), tile=st.integers(1, 5), block=st.integers(1, 6))
def test_greedy_fusion_matches_the_oracle_and_float64(seed, tile, block):
    plan, arrays = random_plan(seed)
    expected = run_all(plan, *arrays)
    strict = run_partition(plan, choose_regions(plan, "greedy", "strict"), *arrays, tile=tile, block=block)
    for name in plan.outputs:
        assert strict[name].tobytes() == expected[name].tobytes(), name
    reference = evaluate64(plan, *arrays)
    inference = run_partition(plan, choose_regions(plan, "greedy", "inference"), *arrays, tile=tile, block=block)
    for name in plan.outputs:
        scale = max(1.0, float(np.max(np.abs(reference[name]))))
        np.testing.assert_allclose(inference[name], reference[name], rtol=1e-4, atol=1e-4 * scale, err_msg=name)


def test_random_plans_do_fuse_and_do_rewrite():
    """The generator is not vacuous: many plans form regions and some take the rewrite."""
    from weft.compose.rescale import OnlineFold, derive_online_fold

    fused = rewritten = 0
    for seed in range(200):
        plan, _ = random_plan(seed)
        partition = choose_regions(plan, "greedy", "inference")
        fused += bool(partition.fused)
        rewritten += any(isinstance(derive_online_fold(plan, r, "inference"), OnlineFold) for r in partition.fused)
    assert fused > 100 and rewritten > 10, (fused, rewritten)
