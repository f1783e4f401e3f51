"""fusion="matchers" and WEFT_GENERIC_FUSION=off: matched patterns fuse on sight, nothing priced."""

import io

import pytest
from plans.workloads import assert_agrees_with_oracle

import weft
from weft.compose import choose_regions
from weft.decide.library import admitted_bodies
from weft.decide.library.matchers import match_pattern
from weft.decide.record import DecisionRecord
from weft.workloads import get_workload


def _small(name):
    workload = get_workload(name)
    return workload.plan(**workload.small), workload.inputs(**workload.small)


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_vit_block_fuses_exactly_the_matched_patterns_and_matches_the_oracle(contract, cache):
    plan, inputs = _small("vit-block")
    compiled = weft.compile(plan, contract, threads=2, fusion="matchers")
    fused = {f.members[-1]: f.members for f in compiled.lowered.functions if len(f.members) > 1}
    assert set(fused) == {"norm1_layer_norm", "attn_out", "norm2_layer_norm"}
    assert match_pattern(plan, fused["attn_out"]) == "attention"
    assert compiled.decide_report is None and compiled.partition.policy == "matchers"
    assert DecisionRecord.in_cache(cache).all() == []  # no price, no race, no record
    assert_agrees_with_oracle(compiled, plan, inputs, contract)
    text = io.StringIO()
    compiled.explain(file=text)
    assert "library bodies admitted by matchers:" in text.getvalue() and "attn_out:" in text.getvalue()


def test_generic_fusion_off_turns_priced_into_matchers(cache, monkeypatch):
    plan, _ = _small("layernorm")
    monkeypatch.setenv("WEFT_GENERIC_FUSION", "off")
    compiled = weft.compile(plan, "strict", threads=1, fusion="priced")
    assert compiled.config.fusion == "matchers" and compiled.partition.policy == "matchers"
    assert compiled.decide_report is None


def test_bodies_declare_their_contracts():
    plan, _ = _small("attention")
    members = choose_regions(plan, "greedy", "strict").regions[-1].members
    strict = {body.name for body in admitted_bodies(plan, members, "strict")}
    inference = {body.name for body in admitted_bodies(plan, members, "inference")}
    assert strict == {"exact attention"}  # the one pass reorders folds: Inference only
    assert inference == {"exact attention", "fused attention"}


def test_matchers_refuse_what_is_not_their_pattern():
    plan, _ = _small("attention")
    assert match_pattern(plan, ("attn_max", "attn_exp", "attn_sum", "attn_probs", "attn_out")) is None
    assert match_pattern(plan, ("attn_out",)) == "gemm"
    assert match_pattern(plan, ("attn_probs",)) is None
    plan, _ = _small("cross-entropy")
    assert all(match_pattern(plan, (kernel.output,)) in (None, "gemm") for kernel in plan.kernels)
