"""The fusion-opportunity signature on plans built by hand."""


import pytest
from plans import attention, ffn, layer_norm_gain, matmul

from weft.cost.chains import FUSION_GAIN, find_chains, rank_chains
from weft.cost.work import floor

BANDWIDTH, PEAK = 27e9, 99e9  # this machine, roughly: ridge 3.7 FLOP/B


def test_attention_is_one_chain_with_the_score_matrix():
    plan = attention(256, 16, 16)
    chains = find_chains(plan)
    assert len(chains) == 1
    chain = chains[0]
    assert chain.members == ("s", "m", "e", "l", "p", "o")
    assert chain.inputs == ("q", "k", "v") and chain.outputs == ("o",)
    assert chain.intermediate_bytes == 256 * 256 * 4 and chain.boundary_bytes == 256 * 16 * 4
    assert chain.strictly_larger
    # unfused: s (written, read by m and e), e (written, read by l and p), p (written, read by o)
    assert chain.avoidable_bytes >= 8 * 256 * 256 * 4
    assert chain.memory_bound_members(BANDWIDTH, PEAK) == ("m", "e", "l", "p")
    # mark 3 by hand: per-member floors summed, against the chain's own floor
    by_hand = sum(floor(w, BANDWIDTH, PEAK).seconds for w in chain.member_works)
    assert chain.unfused_floor(BANDWIDTH, PEAK) == pytest.approx(by_hand)
    assert chain.fusion_gain(BANDWIDTH, PEAK) == pytest.approx(1 - chain.fused_floor(BANDWIDTH, PEAK) / by_hand)
    assert chain.holds(BANDWIDTH, PEAK)
    # on a machine with effectively unlimited bandwidth nothing is worth fusing
    assert not chain.holds(1e18, PEAK)


def test_naive_layernorm_chain_absorbs_its_row_statistics():
    (chain,) = find_chains(layer_norm_gain(16, 32))
    assert chain.members == ("mean", "xc", "var", "rstd", "y")
    assert chain.large_intermediate and not chain.strictly_larger
    assert chain.holds(BANDWIDTH, PEAK)  # all memory-bound: fused it reads x once and writes y once


def test_feed_forward_is_a_chain_but_compute_bound():
    plan = ffn(512, 256, 1024)
    (chain,) = find_chains(plan)
    assert chain.members == ("h", "g", "y")
    assert chain.large_intermediate  # h is T x 4C, larger than x, the weights' ... and y
    assert chain.fusion_gain(BANDWIDTH, PEAK) < FUSION_GAIN
    assert not chain.holds(BANDWIDTH, PEAK)
    assert rank_chains([chain], BANDWIDTH, PEAK) == [chain]


def test_a_single_matmul_is_no_chain():
    assert find_chains(matmul(16)) == []
