"""Fused execution: Strict bit-identical to the oracle, Inference within tolerance of float64."""

from __future__ import annotations

import numpy as np
import plans
import pytest
from plans.models import qwen_decode_step

import weft.nn as nn
from weft.compose import choose_regions
from weft.compose.execute import ExecutionReport, run_partition_outputs
from weft.fuzz.reference64 import values64
from weft.oracle.interpreter import run
from weft.testing import assert_strict_equal


def random_inputs(plan, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    arrays = []
    for name in plan.inputs:
        buffer = plan.buffer(name)
        if buffer.dtype.is_int:
            arrays.append(rng.integers(0, plan.buffer(plan.inputs[0]).shape[-1], buffer.shape).astype(np.int64))
        else:
            arrays.append((rng.standard_normal(buffer.shape) * scale).astype(np.float32))
    return arrays


def as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


def fused(plan, contract, arrays, tile=3, block=5):
    report = ExecutionReport(tile)
    outputs = run_partition_outputs(plan, choose_regions(plan, "greedy", contract), *arrays, tile=tile, block=block, report=report)
    return as_tuple(outputs), report


CASES = {
    "attention": lambda: nn.trace(lambda q, k, v: nn.attention(q, k, v, causal=True), *[nn.spec((2, 11, 8))] * 3),
    "attention_handbuilt": lambda: plans.attention(t=13, d=8, e=4),
    "softmax": lambda: nn.trace(lambda x: nn.softmax(x), nn.spec((5, 40))),
    "cross_entropy": lambda: nn.trace(lambda x, t: nn.cross_entropy(x, t), nn.spec((6, 257)), nn.spec((6,), "int64")),
    "layer_norm": lambda: nn.trace(lambda x, w, b: nn.layer_norm(x, 24, w, b), nn.spec((7, 24)), nn.spec((24,)), nn.spec((24,))),
    "linear_gelu": lambda: nn.trace(lambda x, W, b: nn.gelu(nn.linear(x, W, b)), nn.spec((5, 16)), nn.spec((9, 16)), nn.spec((9,))),
    "decode_step": lambda: qwen_decode_step(),
    "cofolds": lambda: plans.cofolds(rows=7, cols=30),
    "late_input": lambda: plans.late_input(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_strict_fused_is_bit_identical_to_the_oracle(name):
    plan = CASES[name]()
    arrays = random_inputs(plan, scale=0.5)
    expected = as_tuple(run(plan, *arrays))
    got, report = fused(plan, "strict", arrays)
    assert report.online_regions == []
    assert_strict_equal(got, expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_inference_fused_is_close_to_float64(name):
    plan = CASES[name]()
    arrays = random_inputs(plan, seed=1, scale=0.5)
    reference = values64(plan, *arrays)
    got, report = fused(plan, "inference", arrays)
    for output, array in zip(plan.outputs, got, strict=True):
        np.testing.assert_allclose(array, reference[output], rtol=2e-5, atol=2e-5)
    if name in ("attention", "attention_handbuilt", "softmax", "cross_entropy", "decode_step", "cofolds", "late_input"):
        assert report.online_regions, "the rescaling rewrite should have fired"


def test_inference_attention_survives_large_scores():
    """Scores near 100: exp would overflow without the running reference."""
    plan = plans.attention(t=20, d=4, e=4)
    arrays = random_inputs(plan, seed=3, scale=7.0)
    reference = values64(plan, *arrays)["o"]
    got, report = fused(plan, "inference", arrays, tile=4, block=3)
    assert report.online_regions == ["o"]
    assert np.all(np.isfinite(got[0]))
    np.testing.assert_allclose(got[0], reference, rtol=1e-4, atol=1e-4)


def test_strict_attention_keeps_a_query_tile_of_scores():
    tokens, tile = 40, 8
    plan = plans.attention(t=tokens, d=4, e=4)
    _, report = fused(plan, "strict", random_inputs(plan), tile=tile)
    # scores, exps and probabilities of one tile of queries: 3 * tile * tokens floats, plus row vectors
    assert report.peak_scratch_bytes < 4 * (3 * tile * tokens + 3 * tile + tile * 4) + 1
    assert report.peak_scratch_bytes >= 4 * tile * tokens


def test_inference_attention_memory_grows_linearly_with_tokens():
    peaks = {}
    for tokens in (32, 64, 128):
        plan = plans.attention(t=tokens, d=4, e=4)
        _, report = fused(plan, "inference", random_inputs(plan), tile=8, block=8)
        peaks[tokens] = report.peak_scratch_bytes
    # no T×T intermediate: scratch does not grow with tokens at a fixed tile and block
    assert peaks[128] <= 2 * peaks[32]
    unfused = {t: 4 * t * t for t in peaks}  # bytes of one scores matrix
    assert peaks[128] < unfused[128] / 8


def _traced_peak(fn) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_of_fused_inference_attention_is_about_linear_in_tokens():
    """Measured with tracemalloc around the whole run (inputs excluded, outputs included)."""
    peaks, oracle_peaks = {}, {}
    for tokens in (64, 256):
        plan = plans.attention(t=tokens, d=8, e=8)
        arrays = random_inputs(plan)
        partition = choose_regions(plan, "greedy", "inference")
        peaks[tokens] = _traced_peak(lambda p=plan, q=partition, a=arrays: run_partition_outputs(p, q, *a, tile=32, block=32))
        oracle_peaks[tokens] = _traced_peak(lambda p=plan, a=arrays: run(p, *a))
    growth, oracle_growth = peaks[256] / peaks[64], oracle_peaks[256] / oracle_peaks[64]
    assert growth < 6, (peaks, oracle_peaks)  # 4x tokens: linear is 4, quadratic 16
    assert oracle_growth > 10, oracle_peaks  # the unfused plan holds T×T intermediates


def test_the_pass_runs_after_what_its_terms_read():
    plan = plans.late_input()
    arrays = random_inputs(plan, seed=5)
    reference = values64(plan, *arrays)["t"]
    got, report = fused(plan, "inference", arrays, tile=4, block=7)
    assert report.online_regions == ["t"]
    np.testing.assert_allclose(got[0], reference, rtol=1e-5, atol=1e-5)
