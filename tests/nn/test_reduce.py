"""Reductions, softmax, norms and cross-entropy against float64 NumPy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from weft import nn

SETTINGS = settings(max_examples=25, deadline=None)


def _f32(shape, seed, scale=1.0):
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale, dtype=np.float32)


def _softmax(x, axis):
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5), data=st.data(),
       op=st.sampled_from(["sum", "max", "min", "mean"]), keepdims=st.booleans())
def test_reductions_over_axes(traced, close, shape, data, op, keepdims):
    x = _f32(shape, 0)
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=len(shape),
                              unique_by=lambda a: a % len(shape)))
    axes = tuple(axes)
    plan, out = traced(lambda x: getattr(nn, op)(x, axes, keepdims=keepdims), x)
    assert len(plan.kernels) == 1
    reference = getattr(np, op)(x.astype(np.float64), axis=axes, keepdims=keepdims)
    close(out, reference, rtol=1e-5, atol=1e-5)


def test_reduce_everything_and_through_a_view(traced, close):
    x = _f32((3, 4, 5), 1)
    _, out = traced(lambda x: nn.sum(x), x)
    close(out, x.astype(np.float64).sum(), atol=1e-5)
    _, out = traced(lambda x: nn.max(x.transpose(0, 2)[:, 1:], axis=1), x)
    close(out, np.swapaxes(x, 0, 2)[:, 1:].max(axis=1))


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6), data=st.data(),
       seed=st.integers(0, 999))
def test_softmax_and_log_softmax(traced, close, shape, data, seed):
    x = _f32(shape, seed, 3.0)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    plan, out = traced(lambda x: nn.softmax(x, axis), x)
    assert [k.output for k in plan.kernels] == ["softmax_max", "softmax_exp", "softmax_sum", "softmax"]
    close(out, _softmax(x.astype(np.float64), axis), rtol=2e-5, atol=1e-7)
    _, out = traced(lambda x: nn.log_softmax(x, axis), x)
    close(out, np.log(_softmax(x.astype(np.float64), axis)), rtol=2e-5, atol=2e-6)


def _layer_norm(x, k, weight, bias, eps):
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=7), data=st.data(),
       affine=st.booleans(), seed=st.integers(0, 999))
def test_layer_norm(traced, close, shape, data, affine, seed):
    k = data.draw(st.integers(1, len(shape)))
    x = _f32(shape, seed, 2.0) + np.float32(0.5)
    tail = shape[len(shape) - k:]
    if affine:
        w, b = _f32(tail, seed + 1), _f32(tail, seed + 2)
        plan, out = traced(lambda x, w, b: nn.layer_norm(x, tail, w, b, eps=1e-5), x, w, b)
        reference = _layer_norm(x.astype(np.float64), k, w.astype(np.float64), b.astype(np.float64), 1e-5)
    else:
        plan, out = traced(lambda x: nn.layer_norm(x, tail), x)
        reference = _layer_norm(x.astype(np.float64), k, None, None, 1e-5)
    assert [k.output for k in plan.kernels] == ["ln_mean", "ln_centered", "ln_var", "layer_norm"]
    close(out, reference, rtol=1e-4, atol=1e-4)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8), seed=st.integers(0, 999))
def test_rms_norm(traced, close, shape, seed):
    x, w = _f32(shape, seed), _f32(shape[-1:], seed + 1)
    plan, out = traced(lambda x, w: nn.rms_norm(x, w, eps=1e-6), x, w)
    assert len(plan.kernels) == 2
    x64 = x.astype(np.float64)
    close(out, x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w, rtol=5e-5, atol=1e-5)


def _cross_entropy(logits, targets):
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, targets[..., None].astype(np.int64), -1)[..., 0]


@SETTINGS
@given(lead=hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=5), classes=st.integers(1, 9),
       reduction=st.sampled_from(["mean", "sum", "none"]), dtype=st.sampled_from([np.int32, np.int64]),
       seed=st.integers(0, 999))
def test_cross_entropy(traced, close, lead, classes, reduction, dtype, seed):
    logits = _f32(lead + (classes,), seed, 4.0)
    targets = np.random.default_rng(seed).integers(0, classes, lead).astype(dtype)
    plan, out = traced(lambda logits, t: nn.cross_entropy(logits, t, reduction=reduction), logits, targets)
    losses = _cross_entropy(logits.astype(np.float64), targets)
    reference = {"mean": losses.mean(), "sum": losses.sum(), "none": losses}[reduction]
    assert len(plan.kernels) == {"none": 3, "sum": 4, "mean": 5}[reduction]  # mean counts the kept targets
    close(out, reference, rtol=5e-5, atol=5e-5)


def test_mean_is_one_member_with_scaled_terms():
    import weft
    from weft.ir import format_plan

    plan = weft.trace(lambda x: nn.mean(x, -1), weft.spec((4, 8)))
    assert len(plan.kernels) == 1
    assert "sum_{r1:8} (x[i0, r1] * 0.125)" in format_plan(plan)
