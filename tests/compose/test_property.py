"""Property: any plan, fused greedily, matches the oracle byte for byte under Strict and
float64 within tolerance under Inference (at least 200 random plans per run)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plans.random_plans import merge_with_inputs, random_plan

from weft.compose import choose_regions
from weft.compose.execute import run_partition
from weft.fuzz.reference64 import values64
from weft.oracle.interpreter import run_all
from weft.testing import assert_inference_close, assert_strict_equal


@settings(max_examples=200, deadline=None, derandomize=False)
@given(seed=st.integers(0, 2**31 - 1), tile=st.integers(1, 5), block=st.integers(1, 6))
def test_greedy_fusion_matches_the_oracle_and_float64(seed, tile, block):
    plan, arrays = random_plan(seed)
    expected = run_all(plan, *arrays)
    strict = run_partition(plan, choose_regions(plan, "greedy", "strict"), *arrays, tile=tile, block=block)
    for name in plan.outputs:
        assert_strict_equal(strict[name], expected[name], name)
    reference = values64(plan, *arrays)
    inference = run_partition(plan, choose_regions(plan, "greedy", "inference"), *arrays, tile=tile, block=block)
    for name in plan.outputs:
        assert_inference_close(inference[name], reference[name], name)


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


# ---------------------------------------------------------------- compiled to C
# 200 random plans merged into one plan per compile (a C compile costs seconds, and
# one compile of 200 costs about what two of 100 do): one example under Strict and
# one under Inference, so each contract sees 200 compiled random plans per run.

PLANS_PER_COMPILE = 200


def one_merged_compile(test):
    """One hypothesis example (a base seed) per run: each example compiles PLANS_PER_COMPILE plans."""
    return settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])(
        given(base_seed=st.integers(0, 2**30))(test))


def _compiled_merged(base_seed: int, config):
    """PLANS_PER_COMPILE random plans merged into one compile: (plan, inputs, outputs in plan order)."""
    import weft

    plan, arrays = merge_with_inputs([random_plan(base_seed + n) for n in range(PLANS_PER_COMPILE)])
    assert len(plan.outputs) >= PLANS_PER_COMPILE
    got = weft.compile(plan, config=config)(*arrays)
    return plan, arrays, got if isinstance(got, tuple) else (got,)


@one_merged_compile
def test_compiled_greedy_strict_is_byte_identical(base_seed, fused_config):
    plan, arrays, got = _compiled_merged(base_seed, fused_config("strict"))
    expected = run_all(plan, *arrays)
    assert_strict_equal(got, tuple(expected[name] for name in plan.outputs))


@one_merged_compile
def test_compiled_greedy_inference_is_close_to_float64(base_seed, fused_config):
    plan, arrays, got = _compiled_merged(base_seed, fused_config("inference"))
    reference = values64(plan, *arrays)
    for name, array in zip(plan.outputs, got, strict=True):
        assert_inference_close(array, reference[name], name)
