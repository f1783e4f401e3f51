"""Fused regions compiled to C: Strict bit-identical to the oracle, Inference close to float64,
no rows×tokens intermediate in one-pass attention, and the explanation of a compile."""

from __future__ import annotations

import numpy as np
import plans
import pytest
from plans.models import qwen_decode_step
from plans.random_plans import merge_with_inputs

import weft
import weft.nn as nn
from weft.fuzz.reference64 import values64
from weft.oracle.interpreter import run_all
from weft.testing import assert_inference_close, assert_strict_equal

NAMED = {
    "attention": lambda: nn.trace(lambda q, k, v: nn.attention(q, k, v, causal=True), *[nn.spec((2, 37, 16))] * 3),
    "attention_handbuilt": lambda: plans.attention(t=40, d=8, e=8),
    # several blocks of the pass axis (64 per block), grouped-query heads, causal mask
    "attention_long": lambda: nn.trace(
        lambda q, k, v: nn.attention(q, k, v, causal=True), nn.spec((4, 150, 16)), nn.spec((2, 150, 16)), nn.spec((2, 150, 16))
    ),
    "softmax": lambda: nn.trace(lambda x: nn.softmax(x), nn.spec((9, 70))),
    "cross_entropy": lambda: nn.trace(lambda x, t: nn.cross_entropy(x, t), nn.spec((6, 1000)), nn.spec((6,), "int64")),
    "layer_norm": lambda: nn.trace(lambda x, w, b: nn.layer_norm(x, 48, w, b), nn.spec((2, 19, 48)), nn.spec((48,)), nn.spec((48,))),
    "norm_linear": lambda: nn.trace(lambda x, w, W: nn.linear(nn.rms_norm(x, w), W), nn.spec((21, 32)), nn.spec((32,)), nn.spec((24, 32))),
    # the same with the weight stored (in, out): the pass reads it along its rows, so it stays one pass
    "norm_matmul": lambda: nn.trace(lambda x, w, W: nn.matmul(nn.rms_norm(x, w), W), nn.spec((21, 32)), nn.spec((32,)), nn.spec((32, 24))),
    "linear_gelu": lambda: nn.trace(lambda x, W, b: nn.gelu(nn.linear(x, W, b)), nn.spec((21, 32)), nn.spec((40, 32)), nn.spec((40,))),
    "adam": lambda: nn.trace(lambda p, g, m, v: nn.adam_step(p, g, m, v, step=3), *[nn.spec((33, 17))] * 4),
    "decode_step": lambda: qwen_decode_step(),
    "late_input": lambda: plans.late_input(),
    "cofolds": lambda: plans.cofolds(rows=7, cols=150),
}


def inputs_for(plan, seed):
    rng = np.random.default_rng(seed)
    arrays = []
    for name in plan.inputs:
        buffer = plan.buffer(name)
        if buffer.dtype.is_int:
            arrays.append(rng.integers(0, 1000, buffer.shape).astype(np.int64))
        elif name.endswith("_v"):  # Adam's second moment is never negative
            arrays.append(np.abs(rng.standard_normal(buffer.shape)).astype(np.float32))
        else:
            arrays.append((0.5 * rng.standard_normal(buffer.shape)).astype(np.float32))
    return arrays


@pytest.fixture(scope="module")
def named():
    parts = []
    for number, build in enumerate(NAMED.values()):
        plan = build()
        parts.append((plan, inputs_for(plan, number)))
    return merge_with_inputs(parts)


def as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


def test_strict_fused_compile_is_bit_identical_to_the_oracle(named, fused_config):
    plan, arrays = named
    compiled = weft.compile(plan, config=fused_config("strict"))
    assert sum(len(group) > 1 for group in compiled.groups) >= len(NAMED)
    expected = run_all(plan, *arrays)
    assert_strict_equal(as_tuple(compiled(*arrays)), tuple(expected[name] for name in plan.outputs))


def test_inference_fused_compile_is_close_to_float64(named, fused_config):
    plan, arrays = named
    compiled = weft.compile(plan, config=fused_config("inference"))
    one_pass = [f for f in compiled.lowered.functions if any(type(n).__name__ == "OnlinePass" for n in f.nests)]
    # the attentions, the late input, cross-entropy, norm + matmul, the decode step's attention
    # (softmax and norm + linear over a (out, in) weight take the plain fused form: test_online_pass)
    assert len(one_pass) >= 6
    reference = values64(plan, *arrays)
    for name, got in zip(plan.outputs, as_tuple(compiled(*arrays)), strict=True):
        assert_inference_close(got, reference[name], name)


def test_one_pass_attention_holds_no_rows_by_tokens_intermediate(fused_config):
    sizes = {}
    for tokens in (256, 1024):
        plan = plans.attention(t=tokens, d=16, e=16)
        fused = weft.compile(plan, config=fused_config("inference"))
        unfused = weft.compile(plan, config=fused_config("inference", fusion="off"))
        sizes[tokens] = (fused.memory_bytes(), unfused.memory_bytes())
        assert fused.arena_bytes == 0
        assert fused.memory_bytes() < 4 * tokens * tokens  # less than one scores matrix
    growth_fused = sizes[1024][0] / sizes[256][0]
    growth_unfused = sizes[1024][1] / sizes[256][1]
    assert growth_fused < 5 and growth_unfused > 12, sizes  # 4x tokens: linear vs quadratic


def test_strict_attention_keeps_a_tile_of_scores_in_scratch(fused_config):
    """One query tile of one head: scores scratch is q_tile x tokens; tiles run over heads and queries."""
    heads, tokens = 4, 512
    plan = nn.trace(lambda q, k, v: nn.attention(q, k, v), *[nn.spec((1, heads, tokens, 16))] * 3)
    compiled = weft.compile(plan, config=fused_config("strict"))
    (function,) = compiled.lowered.functions
    scores = next(s for s in function.scratch if "scratch_attn_scores" in s.pointer)
    assert scores.elements % tokens == 0
    query_tile = scores.elements // tokens
    assert 1 < query_tile < tokens
    assert function.tile_loop.extent == heads * -(-tokens // query_tile) and function.tile_loop.parallel
    assert compiled.arena_bytes == 0


def test_compiled_explain_names_regions_rewrite_and_lowering(fused_config, capsys):
    compiled = weft.compile(plans.cross_entropy(), config=fused_config("inference"))
    compiled.explain()
    text = capsys.readouterr().out
    assert "anchor nll" in text and "candidates: [nll] -> [l nll] -> [m l nll]" in text
    assert "rewrite: fired" in text and "one pass (rescaled)" in text
    assert "loss: could not take nll: no common tile axis" in text
    strict = weft.compile(plans.attention(), config=fused_config("strict"))
    strict.explain()
    assert "Strict forbids" in capsys.readouterr().out


def test_fusion_policy_is_a_compile_parameter_not_a_global(fused_config):
    plan = plans.softmax()
    fused = weft.compile(plan, config=fused_config("strict"))
    unfused = weft.compile(plan, config=fused_config("strict", fusion="off"))
    assert len(fused.groups) == 1 and len(unfused.groups) == 4


def test_cross_entropy_is_one_pass_with_no_logits_sized_scratch(fused_config):
    rows, vocab = 8, 5000
    plan = nn.trace(lambda x, t: nn.cross_entropy(x, t), nn.spec((rows, vocab)), nn.spec((rows,), "int64"))
    compiled = weft.compile(plan, config=fused_config("inference"))
    (region,) = [f for f in compiled.lowered.functions if len(f.members) > 1]
    assert set(region.members) == {"ce_max", "ce_sumexp", "ce_loss"}
    assert [type(nest).__name__ for nest in region.nests][0] == "OnlinePass"
    assert sum(s.elements for s in region.scratch) < vocab and compiled.arena_bytes < 4 * vocab
    arrays = inputs_for(plan, 9)
    expected = values64(plan, *arrays)[plan.outputs[0]]
    np.testing.assert_allclose(compiled(*arrays), expected, rtol=1e-5)
