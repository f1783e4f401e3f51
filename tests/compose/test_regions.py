"""Region formation: from member bodies alone, with no pattern anywhere."""

from __future__ import annotations

import plans
import pytest
from plans.models import qwen_decode_step

import weft.nn as nn
from weft.compose import choose_regions, grow, grow_from_anchor, plan_anchors
from weft.errors import ConfigError
from weft.ir import Combiner, DType, IndexOf, Load, verify


def only_fused(partition):
    fused = partition.fused
    assert len(fused) == 1, [r.members for r in partition.regions]
    return fused[0]


def test_attention_six_members_one_region_tiled_over_queries():
    plan = nn.trace(lambda q, k, v: nn.attention(q, k, v), *[nn.spec((1, 2, 16, 8))] * 3)
    partition = choose_regions(plan, "greedy", "inference")
    assert len(partition.regions) == 1
    region = partition.regions[0]
    assert set(region.members) == {k.output for k in plan.kernels} and region.size == 6
    assert region.tile_axis == "i"
    assert dict(region.tile_axes)["attn_max"] == "i" and dict(region.tile_axes)["attn_scores"] == "i"
    assert set(region.private) == set(region.members) - {"attn_out"}
    assert partition.unfused == ()


def test_attention_candidates_in_growth_order():
    plan = plans.attention()
    candidates = grow_from_anchor(plan, "o")
    assert [c.members for c in candidates] == [
        ("o",), ("p", "o"), ("l", "p", "o"), ("e", "l", "p", "o"), ("m", "e", "l", "p", "o"),
        ("s", "m", "e", "l", "p", "o"),
    ]
    # the anchor alone can tile along i5 or e5; once p joins only the query axis is common
    assert set(candidates[0].anchor_axes) == {"i5", "e5"}
    assert candidates[1].anchor_axes == ("i5",)


def test_layer_norm_chain_is_one_region():
    plan = nn.trace(lambda x, w, b: nn.layer_norm(x, 32, w, b), nn.spec((2, 8, 32)), nn.spec((32,)), nn.spec((32,)))
    region = only_fused(choose_regions(plan, "greedy"))
    assert set(region.members) == {"ln_mean", "ln_centered", "ln_var", "layer_norm"}
    assert region.tile_axis is not None


def test_norm_with_its_consumer():
    plan = nn.trace(lambda x, w, W: nn.linear(nn.rms_norm(x, w), W), nn.spec((8, 32)), nn.spec((32,)), nn.spec((16, 32)))
    region = only_fused(choose_regions(plan, "greedy"))
    assert set(region.members) == {"rms_meansq", "rms_norm", "linear"}
    assert region.anchor == "linear"


def test_contraction_with_bias_and_gelu_tail():
    plan = nn.trace(lambda x, W, b: nn.gelu(nn.linear(x, W, b)), nn.spec((8, 32)), nn.spec((16, 32)), nn.spec((16,)))
    region = only_fused(choose_regions(plan, "greedy"))
    assert region.size == 3
    first = plan.kernel(region.members[0])
    assert first.is_contraction and region.anchor == plan.kernels[-1].output


def test_softmax_is_one_region():
    plan = nn.trace(lambda x: nn.softmax(x), nn.spec((4, 64)))
    region = only_fused(choose_regions(plan, "greedy"))
    assert region.size == 4


def test_cross_entropy_rows_fuse_and_no_logits_sized_intermediate():
    rows, vocab = 8, 4096
    plan = nn.trace(lambda x, t: nn.cross_entropy(x, t), nn.spec((rows, vocab)), nn.spec((rows,), "int64"))
    partition = choose_regions(plan, "greedy", "inference")
    region = only_fused(partition)
    assert {plan.kernel(m).fold.combiner for m in region.members if plan.kernel(m).fold} == {Combiner.MAX, Combiner.SUM}
    logits = plan.buffer("x").size
    assert all(plan.buffer(m).size < logits for m in region.members)
    # the scalar mean cannot be tiled: it stays alone, with the reason
    reasons = dict(partition.unfused)["ce_mean"]
    assert any("no common tile axis" in reason for reason in reasons)


def test_adam_elementwise_chain_is_one_region():
    plan = nn.trace(lambda p, g, m, v: nn.adam_step(p, g, m, v, step=2), *[nn.spec((64, 16))] * 4)
    partition = choose_regions(plan, "greedy")
    region = only_fused(partition)
    assert set(region.members) == {"adam_m", "adam_v", "adam_param"}
    assert set(region.outputs) == {"adam_m", "adam_v", "adam_param"}
    assert region.private == ()


def test_qwen_decode_step_forms_a_handful_of_regions():
    plan = qwen_decode_step()
    partition = choose_regions(plan, "greedy", "inference")
    assert len(plan.kernels) == 24
    assert 4 <= len(partition.regions) <= 10
    attention = partition.region_of("attn_out")
    assert {"attn_scores", "attn_max", "attn_exp", "attn_sum", "attn_probs", "attn_out"} <= set(attention.members)
    assert partition.region_of("rms_meansq") is partition.region_of("rms_norm")
    assert len(partition.region_of("linear_7").members) >= 5  # the MLP and its norm
    # every member left alone says why
    assert all(reasons for _, reasons in partition.unfused)


def test_partition_is_disjoint_cover_in_execution_order():
    for plan in (plans.attention(), plans.layer_norm(), plans.cross_entropy(), qwen_decode_step()):
        for policy in ("greedy", "off"):
            partition = choose_regions(plan, policy)
            members = [m for r in partition.regions for m in r.members]
            assert sorted(members) == sorted(k.output for k in plan.kernels)
            done: set[str] = set(plan.inputs)
            for region in partition.regions:
                assert set(region.inputs) <= done, (region.anchor, region.inputs)
                done |= set(region.members)


def test_fusion_off_leaves_every_member_alone():
    partition = choose_regions(plans.attention(), "off")
    assert all(not r.is_fused for r in partition.regions) and len(partition.regions) == 6
    assert all(reasons == ("fusion='off'",) for _, reasons in partition.unfused)


def test_unknown_policy_is_a_config_error():
    with pytest.raises(ConfigError, match="priced"):
        choose_regions(plans.attention(), "priced")


# ---------------------------------------------------------------- refusals


def test_reader_outside_is_refused():
    """b = exp(a); c = b + 1 (anchor); d = b * 2 (another output): b has a reader outside c's region."""
    builder = plans.Builder("reader_outside")
    builder.input("a", 4, 8)
    builder.member("b", [("i", 4), ("j", 8)], plans.exp(plans.load("a", "i", "j")))
    builder.member("c", [("i", 4), ("j", 8)], plans.add(plans.load("b", "i", "j"), plans.const(1)))
    builder.member("d", [("i", 4), ("j", 8)], plans.mul(plans.load("b", "i", "j"), plans.const(2)))
    plan = verify(builder.plan("c", "d"))
    growth = grow(plan, "c")
    assert [c.members for c in growth.candidates] == [("c",)]
    assert growth.refusals[0].member == "b" and "a reader outside: d" in growth.refusals[0].reason
    partition = choose_regions(plan, "greedy")
    assert all(not r.is_fused for r in partition.regions)
    assert any("a reader outside" in reason for reason in dict(partition.unfused)["b"])


def test_no_common_tile_axis_transpose_read_is_refused():
    """c[i,j] = b[j,i] + b[i,j]: b's dimension carrying the tile differs between loads."""
    builder = plans.Builder("transposed")
    builder.input("a", 8, 8)
    builder.member("b", [("p", 8), ("q", 8)], plans.exp(plans.load("a", "p", "q")))
    builder.member("c", [("i", 8), ("j", 8)], plans.add(plans.load("b", "j", "i"), plans.load("b", "i", "j")))
    plan = verify(builder.plan("c"))
    growth = grow(plan, "c")
    assert len(growth.candidates) == 1
    assert "no common tile axis" in growth.refusals[0].reason


def test_no_common_tile_axis_when_a_fold_needs_the_whole_producer():
    """t = sum_r exp(x[r]) reads every row of e: e cannot be tiled with the scalar anchor."""
    builder = plans.Builder("scalar_anchor")
    builder.input("x", 16)
    builder.member("e", [("r", 16)], plans.exp(plans.load("x", "r")))
    builder.member("t", [], plans.load("e", "r1"), fold=[("r1", 16)])
    plan = verify(builder.plan("t"))
    growth = grow(plan, "t")
    assert len(growth.candidates) == 1 and "no common tile axis" in growth.refusals[0].reason


def test_gather_index_does_not_carry_the_tile_axis():
    builder = plans.Builder("gather")
    builder.input("table", 8, 4)
    builder.input("ids", 8, dtype=DType.INT64)
    builder.member("t2", [("r", 8), ("c", 4)], plans.exp(plans.load("table", "r", "c")))
    picked = Load("t2", (IndexOf(plans.load("ids", "i")), plans.ax("c1")))
    builder.member("out", [("i", 8), ("c1", 4)], picked)
    plan = verify(builder.plan("out"))
    growth = grow(plan, "out")
    # tiling along c1 still works (the gather is on the other dimension); along i it does not
    assert growth.largest.members == ("t2", "out") and growth.largest.anchor_axes == ("c1",)


def test_plan_anchors_are_the_outputs():
    assert plan_anchors(plans.attention()) == ("o",)


def test_qwen_decode_step_workload_per_layer_regions():
    """The library's decode step (two layers, small sizes): a handful of regions per layer."""
    from weft.workloads import get_workload

    plan = get_workload("qwen-decode-step").plan(layers=2, hidden=64, heads=4, kv_heads=2, intermediate=96, cache_len=40)
    partition = choose_regions(plan, "greedy", "inference")
    assert len(partition.regions) <= 10 * 2
    assert len(partition.regions) < len(plan.kernels) / 3
    for layer in ("l0", "l1"):
        attention = partition.region_of(f"{layer}_attn_out")
        assert {f"{layer}_attn_{m}" for m in ("scores", "max", "exp", "sum", "probs", "out")} <= set(attention.members)
        assert partition.region_of(f"{layer}_mlp_linear_3").size >= 8  # o-proj, residual, norm, SwiGLU MLP
