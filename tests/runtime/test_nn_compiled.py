"""Every weft.nn function, traced into one plan, compiled: Strict byte-identical to the
oracle, Inference within tolerance of float64 (one compile per contract amortises gcc)."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.fuzz.reference64 import outputs64
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal


def _f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def everything(x, y, w, b, q, k, v, ids, table, targets, img, kern, cos, sin, grid, cc, sc, cr, sr, p, g, m, vv):
    """One output per nn function (odd extents, a size-1 axis, lanes that do not divide)."""
    outs = [
        nn.add(x, y), nn.sub(x, 0.5), nn.mul(x, y), nn.div(x, nn.add(nn.abs(y), 1.0)), nn.maximum(x, y),
        nn.minimum(x, y), nn.pow(x, 3), nn.square(x), nn.neg(x), nn.exp(x), nn.log(nn.abs(x)),
        nn.sqrt(nn.abs(x)), nn.rsqrt(nn.add(nn.abs(x), 0.1)), nn.tanh(x), nn.erf(x), nn.sigmoid(x), nn.relu(x),
        nn.silu(x), nn.gelu(x), nn.gelu(x, approximate="tanh"),
        nn.where(nn.logical_and(nn.less(x, y), nn.logical_not(nn.equal(x, 0.0))), x, y),
        nn.cast(nn.logical_or(nn.greater(x, 0.3), nn.less_equal(y, -0.2)), "float32"),
        nn.cast(nn.not_equal(nn.greater_equal(x, y), nn.less(x, 0.0)), "float32"),
        nn.sum(x, 1), nn.max(x, 0), nn.min(x, (0, 1)), nn.mean(x, -1, keepdims=True),
        nn.softmax(x), nn.log_softmax(x, 0), nn.layer_norm(x, 37), nn.rms_norm(x),
        nn.cross_entropy(x, targets), nn.cross_entropy(x, targets, reduction="none"),
        nn.matmul(x, w), nn.linear(x, nn.transpose(w, 0, 1), b), nn.bmm(nn.reshape(q, (6, 17, 8)), nn.transpose(nn.reshape(k, (6, 17, 8)), 1, 2)),
        nn.attention(q, k, v), nn.attention(q, k, v, causal=True),
        nn.conv2d(img, kern, None, 1, 1), nn.embedding(ids, table), nn.rope(q, cos, sin),
        nn.rope_2d(grid, cc, sc, cr, sr),
        nn.reshape(x, (37, 5)), nn.transpose(x, 0, 1), nn.flatten(q), nn.permute(q, (3, 1, 0, 2)),
        nn.concat([x, y], 0), nn.slice_axis(x, 1, 3, 30), nn.squeeze(nn.unsqueeze(x, 0), 0),
        nn.broadcast_to(b, (5, 19)), nn.expand(nn.unsqueeze(b, 0), (3, 19)),
        nn.window_partition(nn.reshape(img, (1, 9, 10, 3)), 4),
        *nn.adam_step(p, g, m, vv, step=3, weight_decay=0.01),
    ]
    return tuple(outs)


def _inputs():
    rng = np.random.default_rng(7)
    return [
        _f32((5, 37), 1), _f32((5, 37), 2), _f32((37, 19), 3), _f32((19,), 4),
        _f32((2, 3, 17, 8), 5), _f32((2, 3, 17, 8), 6), _f32((2, 3, 17, 8), 7),
        rng.integers(0, 13, (11,)).astype(np.int64), _f32((13, 37), 8), rng.integers(0, 37, (5,)).astype(np.int64),
        _f32((1, 3, 9, 10), 9), _f32((4, 3, 3, 3), 10),
        np.cos(rng.random((17, 4))).astype(np.float32), np.sin(rng.random((17, 4))).astype(np.float32),
        _f32((2, 6, 8), 11), *[np.cos(rng.random((s, 2))).astype(np.float32) for s in (3, 3, 2, 2)],
        _f32((7, 33), 12), _f32((7, 33), 13), _f32((7, 33), 14), np.abs(_f32((7, 33), 15)),
    ]


def _specs(arrays):
    return [weft.spec(a.shape, str(a.dtype)) for a in arrays]


@pytest.fixture(scope="module")
def traced():
    arrays = _inputs()
    return weft.trace(everything, *_specs(arrays), name="nn_everything"), arrays


@pytest.mark.parametrize("lanes", [None, 8, 4])
def test_every_nn_function_strict_byte_identical(traced, make_config, lanes):
    """At the CPU's lane width and at the AVX2/NEON widths (other machines' code paths)."""
    plan, arrays = traced
    compiled = weft.compile(plan, config=make_config("strict"), lanes=lanes)
    got, want = compiled(*arrays), run(plan, *arrays)
    assert len(got) == len(want) == len(plan.outputs) > 50
    assert_strict_equal(got, want)


def test_every_nn_function_inference_within_tolerance_of_float64(traced, make_config):
    """Every output against an independent float64 evaluation of the plan (not the float32
    oracle), within the Inference contract: |out - f64| <= 1e-4 (|f64| + max|f64|)."""
    plan, arrays = traced
    compiled = weft.compile(plan, config=make_config("inference"))
    got = compiled(*arrays)
    reference = outputs64(plan, *arrays)
    assert len(got) == len(reference) == len(plan.outputs) > 50
    for name, actual, expected in zip(plan.outputs, got, reference, strict=True):
        assert_inference_close(actual, expected, name)
    # and the reference itself is right where NumPy can say so directly
    by_name = dict(zip(plan.outputs, reference, strict=True))
    x, w = arrays[0].astype(np.float64), arrays[2].astype(np.float64)
    assert_inference_close(by_name[plan.outputs[33]], x @ w, "matmul")
    soft = np.exp(x - x.max(1, keepdims=True))
    assert_inference_close(by_name[plan.outputs[27]], soft / soft.sum(1, keepdims=True), "softmax")
    centred = x - x.mean(1, keepdims=True)
    assert_inference_close(by_name[plan.outputs[29]],
                           centred / np.sqrt((centred ** 2).mean(1, keepdims=True) + 1e-5), "layer_norm")
