"""The one-pass lowering's shape: the running max moves once per block (a vector max,
one reduction, one rescale), and a region whose exps must be materialised anyway
(softmax: P = E / L) is lowered in the plain fused form instead."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.fuzz.reference64 import attention64
from weft.testing import assert_inference_close


def _source(compiled) -> str:
    return Path(compiled.source_path).read_text()


def _kinds(compiled) -> list[set[str]]:
    return [{type(n).__name__ for n in f.nests} for f in compiled.lowered.functions if len(f.members) > 1]


def test_softmax_prefers_the_plain_fused_form_under_inference(fused_config):
    plan = nn.trace(lambda x: nn.softmax(x), nn.spec((5, 300)))
    compiled = weft.compile(plan, config=fused_config("inference"))
    (kinds,) = _kinds(compiled)
    assert "OnlinePass" not in kinds  # one fused function, three passes over a tile in cache
    x = (3 * np.random.default_rng(1).standard_normal((5, 300))).astype(np.float32)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(compiled(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_one_pass_rescales_once_per_block_with_a_vector_max(fused_config):
    # rows whose max rises many times along the axis (ascending ramps), inside and across vectors
    rows, vocab = 4, 1000
    plan = nn.trace(lambda x, t: nn.cross_entropy(x, t, reduction="none"), nn.spec((rows, vocab)), nn.spec((rows,), "int64"))
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert any("OnlinePass" in kinds for kinds in _kinds(compiled))
    source = _source(compiled)
    assert "memcmp(&wo_up" not in source and "wo_vm = wfc_max_f(wo_vm" in source
    assert source.count("if (wo_ref_new[0] != wo_ref_old[0])") == 1  # per block, not per vector or point
    ramp = np.linspace(-20, 30, vocab, dtype=np.float64)
    x = np.stack([ramp, ramp[::-1], np.sin(ramp) * 40, ramp * 0 - 7]).astype(np.float32)
    t = np.array([3, 999, 500, 0], dtype=np.int64)
    x64 = x.astype(np.float64)
    m = x64.max(axis=1)
    expected = np.log(np.exp(x64 - m[:, None]).sum(axis=1)) + m - x64[np.arange(rows), t]
    np.testing.assert_allclose(compiled(x, t), expected, rtol=1e-5, atol=1e-5)


def test_attention_blocks_rescale_accumulated_outputs(fused_config):
    # 200 keys: four blocks of 64 (the last partial); later keys score higher, so the max rises per block
    q = np.random.default_rng(2).standard_normal((3, 200, 16)).astype(np.float32)
    k = q + np.linspace(0, 3, 200, dtype=np.float32)[None, :, None]
    v = np.random.default_rng(3).standard_normal((3, 200, 16)).astype(np.float32)
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c), *[nn.spec((3, 200, 16))] * 3)
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert any("OnlinePass" in kinds for kinds in _kinds(compiled))
    expected = attention64(q, k, v)
    assert_inference_close(compiled(q, k, v), expected)


def test_norm_then_linear_over_an_out_in_weight_is_not_one_pass(fused_config):
    # linear's weight is (out, in): the pass over `in` would read it across its rows (a gather
    # per vector), and the plain fused form would run linear as a generic tiled nest instead
    # of the microkernel: greedy takes the norm's scale as linear's prologue, and says why
    from weft.explain import explain_plan

    plan = nn.trace(lambda x, w, W: nn.linear(nn.rms_norm(x, w), W), nn.spec((3, 64)), nn.spec((64,)), nn.spec((48, 64)))
    text = explain_plan(plan, "greedy", "inference").text()
    assert "chosen: rms_norm linear" in text and "linear would run as a generic tiled nest" in text
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert all("OnlinePass" not in kinds for kinds in _kinds(compiled))
    rng = np.random.default_rng(4)
    x, w, W = (rng.standard_normal(s).astype(np.float32) for s in ((3, 64), (64,), (48, 64)))
    x64 = x.astype(np.float64)
    normed = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
    assert_inference_close(compiled(x, w, W), normed @ W.astype(np.float64).T)


@pytest.mark.parametrize("head_dim", [8, 40, 64, 256])  # tail only, vectors + tail, 4 vectors, 2 groups of 8
def test_attention_output_accumulators_of_any_width(fused_config, head_dim):
    rng = np.random.default_rng(head_dim)
    q, k = (rng.standard_normal((2, 70, 16)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((2, 70, head_dim)).astype(np.float32)
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c), nn.spec((2, 70, 16)), nn.spec((2, 70, 16)), nn.spec((2, 70, head_dim)))
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert any("OnlinePass" in kinds for kinds in _kinds(compiled))
    expected = attention64(q, k, v)
    assert_inference_close(compiled(q, k, v), expected)


@pytest.mark.parametrize("heads,tokens,head_dim", [(2, 256, 32), (1, 128, 64), (3, 192, 16)])
def test_attention_output_updates_shared_by_a_group_of_rows(fused_config, heads, tokens, head_dim):
    # whole blocks of 64 keys: every block runs on the scores' register tile, whose rows share
    # each V row they load; later keys score higher so every block rescales
    rng = np.random.default_rng(tokens + head_dim)
    q = rng.standard_normal((heads, tokens, 16)).astype(np.float32)
    k = q + np.linspace(0, 3, tokens, dtype=np.float32)[None, :, None]
    v = rng.standard_normal((heads, tokens, head_dim)).astype(np.float32)
    specs = (nn.spec((heads, tokens, 16)), nn.spec((heads, tokens, 16)), nn.spec((heads, tokens, head_dim)))
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c), *specs)
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert any("OnlinePass" in kinds for kinds in _kinds(compiled))
    assert "wa_o1_0 = wa_o1_0 + wa_pr1 * wa_y0;" in _source(compiled)  # two rows share a V load
    expected = attention64(q, k, v)
    assert_inference_close(compiled(q, k, v), expected)


@pytest.mark.parametrize("tokens,partial", [(128, False), (130, True)])
def test_the_general_path_of_a_pass_is_emitted_only_for_a_partial_block(fused_config, tokens, partial):
    # 128 keys are two whole blocks of 64: the register tile takes every block and the general
    # path (the per-row pass of a partial block) would be dead C; 130 keys end in a block of 2
    rng = np.random.default_rng(tokens)
    q, k, v = (rng.standard_normal((1, tokens, 16)).astype(np.float32) for _ in range(3))
    spec = nn.spec((1, tokens, 16))
    compiled = weft.compile(nn.trace(lambda a, b, c: nn.attention(a, b, c), spec, spec, spec),
                            config=fused_config("inference"))
    source = _one_pass_source(compiled)
    assert "wa_o1_0 = wa_o1_0 + wa_pr1 * wa_y0;" in source
    assert ("wo_ref_old" in source) is partial
    assert_inference_close(compiled(q, k, v), attention64(q, k, v))


def _one_pass_source(compiled) -> str:
    assert any("OnlinePass" in kinds for kinds in _kinds(compiled))
    return _source(compiled)


def test_block_max_of_a_pass_over_given_scores_runs_on_four_chains(fused_config):
    # softmax(s) @ v over 1000 given scores per row: one block (nothing streamed), the row max
    # read by the pass alone, so it folds by compare-select on four independent vector chains
    # and its 16 lanes by a tree of shuffles (not one lane at a time); the maximum of each row
    # sits in a different chain or the tail, one row holds a NaN, one is all -inf but one point
    rows, keys, width = 6, 1000, 16
    plan = nn.trace(lambda s, v: nn.matmul(nn.softmax(s), v), nn.spec((1, rows, keys)), nn.spec((1, keys, width)))
    compiled = weft.compile(plan, config=fused_config("inference"))
    source = _one_pass_source(compiled)
    assert "wo_vm3 = wfc_pmax_f(wo_vm3" in source and "wo_l++) wo_bm =" not in source
    rng = np.random.default_rng(7)
    s = rng.standard_normal((1, rows, keys)).astype(np.float32)
    v = rng.standard_normal((1, keys, width)).astype(np.float32)
    for row, at in enumerate((5, 21, 40, 62, 997)):
        s[0, row, at] = 30.0
    s[0, 3, :] = -np.inf
    s[0, 3, 62] = 2.0
    s[0, 5, 333] = np.nan
    got = compiled(s, v)
    s64 = s.astype(np.float64)[0, :5]
    p = np.exp(s64 - s64.max(axis=1, keepdims=True))
    expected = (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)[0]
    assert np.isnan(got[0, 5]).all()
    assert_inference_close(got[0, :5], expected)


def test_block_max_read_after_the_pass_keeps_the_nan_propagating_max_on_four_chains(fused_config):
    # cross-entropy reads the row max after the pass (it adds it back): the chains fold by the
    # NaN-propagating max, and a NaN logit gives a NaN loss
    rows, vocab = 6, 1000
    plan = nn.trace(lambda x, t: nn.cross_entropy(x, t, reduction="none"), nn.spec((rows, vocab)),
                    nn.spec((rows,), "int64"))
    compiled = weft.compile(plan, config=fused_config("inference"))
    source = _one_pass_source(compiled)
    assert "wo_vm3 = wfc_max_f(wo_vm3" in source and "wo_l++) wo_bm =" not in source
    x = np.random.default_rng(8).standard_normal((rows, vocab)).astype(np.float32)
    for row, at in enumerate((5, 21, 40, 62, 997)):
        x[row, at] = 30.0
    x[5, 333] = np.nan
    t = np.array([5, 0, 40, 999, 997, 1], dtype=np.int64)
    x64 = x.astype(np.float64)
    m = x64.max(axis=1)
    expected = np.log(np.exp(x64 - m[:, None]).sum(axis=1)) + m - x64[np.arange(rows), t]
    got = compiled(x, t)
    assert np.isnan(got[5])
    np.testing.assert_allclose(got[:5], expected[:5], rtol=1e-5, atol=1e-5)
