"""The rescaling rewrite: derived from bodies, Inference only, refused when the term does not split."""

from __future__ import annotations

import plans
import pytest

import weft.nn as nn
from weft.compose import choose_regions
from weft.compose.rescale import STRICT_REFUSAL, OnlineFold, RewriteRefusal, derive_online_fold
from weft.ir import Combiner, verify


def rewrite_for(plan, contract="inference"):
    partition = choose_regions(plan, "greedy", contract)
    results = [derive_online_fold(plan, region, contract) for region in partition.fused]
    results = [r for r in results if r is not None]
    assert len(results) == 1, results
    return results[0]


def test_attention_merges_max_sum_and_pv_into_one_pass():
    online = rewrite_for(plans.attention())
    assert isinstance(online, OnlineFold)
    assert online.reference == "m" and online.reference_combiner is Combiner.MAX
    assert [d.member for d in online.dependents] == ["l", "o"]
    l_fold, o_fold = online.dependents
    assert l_fold.exponent is not None and o_fold.exponent is not None  # both rescaled as m moves
    assert len(o_fold.divide_by) == 1 and o_fold.divide_by[0].buffer == "l"  # o / l once at the end
    assert online.dissolved == ("e", "p")  # never materialised: no T×T intermediate


def test_traced_attention_and_softmax_and_cross_entropy_fire_without_naming_them():
    attention = nn.trace(lambda q, k, v: nn.attention(q, k, v, causal=True), *[nn.spec((2, 8, 4))] * 3)
    softmax = nn.trace(lambda x: nn.softmax(x), nn.spec((4, 32)))
    xent = nn.trace(lambda x, t: nn.cross_entropy(x, t), nn.spec((4, 300)), nn.spec((4,), "int64"))
    assert rewrite_for(attention).members == ("attn_max", "attn_sum", "attn_out")
    assert rewrite_for(softmax).members == ("softmax_max", "softmax_sum")
    assert rewrite_for(xent).members == ("ce_max", "ce_sumexp")


def test_additive_mask_splits_into_the_data_part():
    plan = nn.trace(lambda q, k, v, m: nn.attention(q, k, v, mask=m), *[nn.spec((8, 4))] * 3, nn.spec((8, 8)))
    assert isinstance(rewrite_for(plan), OnlineFold)


@pytest.mark.parametrize("build", [plans.attention, plans.softmax, plans.cross_entropy])
def test_strict_forbids_the_rewrite(build):
    refusal = rewrite_for(build(), "strict")
    assert isinstance(refusal, RewriteRefusal) and refusal.applicable and refusal.reason == STRICT_REFUSAL


def _two_fold_plan(term_builder):
    """m[r] = max_c x[r,c]; t[r] = sum_c term(x[r,c], m[r]); y[r] = t[r] + m[r]."""
    builder = plans.Builder("two_folds")
    builder.input("x", 4, 16)
    builder.member("m", [("r", 4)], plans.load("x", "r", "c"), fold=[("c", 16)], combiner=Combiner.MAX)
    term = term_builder(plans.load("x", "r1", "c1"), plans.load("m", "r1"))
    builder.member("t", [("r1", 4)], term, fold=[("c1", 16)])
    builder.member("y", [("r2", 4)], plans.add(plans.load("t", "r2"), plans.load("m", "r2")))
    return verify(builder.plan("y"))


def test_exp_of_a_product_does_not_split():
    refusal = rewrite_for(_two_fold_plan(lambda s, m: plans.exp(plans.mul(s, m))))
    assert isinstance(refusal, RewriteRefusal) and not refusal.applicable
    assert "does not split" in refusal.reason


def test_square_of_a_difference_does_not_split():
    refusal = rewrite_for(_two_fold_plan(lambda s, m: plans.mul(plans.sub(s, m), plans.sub(s, m))))
    assert isinstance(refusal, RewriteRefusal) and "not exp" in refusal.reason


def test_a_product_with_a_constant_factor_splits():
    online = rewrite_for(_two_fold_plan(lambda s, m: plans.mul(plans.exp(plans.sub(s, m)), plans.add(m, plans.const(2)))))
    assert isinstance(online, OnlineFold)
    assert len(online.dependents[0].scale_by) == 1  # (m + 2) applied once after the pass


def test_max_fold_of_a_sum_splits_additively():
    builder = plans.Builder("max_plus")
    builder.input("x", 4, 16)
    builder.member("m", [("r", 4)], plans.load("x", "r", "c"), fold=[("c", 16)], combiner=Combiner.MIN)
    builder.member("t", [("r1", 4)], plans.add(plans.exp(plans.load("x", "r1", "c1")), plans.load("m", "r1")),
                   fold=[("c1", 16)], combiner=Combiner.MAX)
    online = rewrite_for(verify(builder.plan("t")))
    assert isinstance(online, OnlineFold) and online.dependents[0].offsets


def test_layer_norm_variance_is_refused_with_the_reason():
    plan = nn.trace(lambda x: nn.layer_norm(x), nn.spec((4, 16)))
    refusal = rewrite_for(plan)
    assert isinstance(refusal, RewriteRefusal) and "ln_var" in refusal.reason


def test_no_fold_chain_means_no_rewrite():
    partition = choose_regions(plans.linear_bias_gelu(), "greedy", "inference")
    assert derive_online_fold(plans.linear_bias_gelu(), partition.fused[0], "inference") is None


def test_an_independent_fold_over_the_same_axis_joins_the_pass():
    """A sum of squares folds alongside the max in the same pass, unrescaled."""
    online = rewrite_for(verify(plans.cofolds()))
    assert isinstance(online, OnlineFold) and online.reference == "m"
    assert [d.member for d in online.dependents] == ["q", "t"]
    assert online.dependents[0].exponent is None and online.dependents[1].scale_by  # q[r] applied after the pass


def test_two_extremum_references_are_refused():
    builder = plans.Builder("two_maxima")
    builder.input("x", 4, 16)
    builder.member("m", [("r", 4)], plans.load("x", "r", "c"), fold=[("c", 16)], combiner=Combiner.MAX)
    builder.member("n", [("r1", 4)], plans.load("x", "r1", "c1"), fold=[("c1", 16)], combiner=Combiner.MIN)
    term = plans.exp(plans.sub(plans.load("x", "r2", "c2"), plans.sub(plans.load("m", "r2"), plans.load("n", "r2"))))
    builder.member("t", [("r2", 4)], term, fold=[("c2", 16)])
    refusal = rewrite_for(verify(builder.plan("t")))
    assert isinstance(refusal, RewriteRefusal) and "running reference" in refusal.reason


def _negated_distance_plan(columns: int):
    """m[r] = max_c x[r,c]; t[r] = sum_c exp((0 - x[r,c]) - m[r]): an exponent that is not x's distance below m."""
    builder = plans.Builder("negated")
    builder.input("x", 2, columns)
    builder.member("m", [("r", 2)], plans.load("x", "r", "c"), fold=[("c", columns)], combiner=Combiner.MAX)
    term = plans.exp(plans.sub(plans.sub(plans.const(0.0), plans.load("x", "r1", "c1")), plans.load("m", "r1")))
    builder.member("t", [("r1", 2)], term, fold=[("c1", columns)])
    builder.member("y", [("r2", 2)], plans.add(plans.load("t", "r2"), plans.load("m", "r2")))
    return verify(builder.plan("y"))


def test_an_exponent_that_is_not_the_distance_below_the_reference_is_refused():
    # exp(-x - m): while m is still -inf (a masked prefix) its terms are not what they are
    # against the final m (inf, not 0), so the pass could not restart exactly; and against a
    # running m its terms are not bounded by 1
    refusal = rewrite_for(_negated_distance_plan(16))
    assert isinstance(refusal, RewriteRefusal) and "distance" in refusal.reason


def test_an_exponent_of_another_form_is_not_folded_against_a_running_reference(fused_config):
    import numpy as np

    import weft
    from weft.fuzz import check_outputs

    # pipelined blocks of 1024: against the first block's max (-50) its terms are exp(100), inf
    # in float32, where against the final max (about 3) they are exp(47): the pass gave inf
    plan = _negated_distance_plan(2100)
    x = np.random.default_rng(0).standard_normal((2, 2100)).astype(np.float32)
    x[:, :1100] = -50.0
    compiled = weft.compile(plan, config=fused_config("inference", threads=1))
    check_outputs(plan, [x], compiled(x), contract="inference")
