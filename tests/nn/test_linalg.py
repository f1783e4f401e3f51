"""Contractions, attention, conv2d, embedding and rotary embeddings against float64 NumPy."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import weft
from weft import nn

SETTINGS = settings(max_examples=25, deadline=None)


def _f32(shape, seed, scale=1.0):
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale, dtype=np.float32)


@SETTINGS
@given(m=st.integers(1, 5), k=st.integers(1, 6), n=st.integers(1, 5),
       batch_a=st.sampled_from([(), (1,), (3,), (2, 1)]), batch_b=st.sampled_from([(), (1,), (3,), (1, 3)]),
       vector=st.sampled_from(["none", "left", "right"]), transposed=st.booleans(), seed=st.integers(0, 999))
def test_matmul_broadcasting_vectors_and_transposed_views(traced, close, m, k, n, batch_a, batch_b, vector,
                                                          transposed, seed):
    a_shape = (k,) if vector == "left" else batch_a + (m, k)
    b_shape = (k,) if vector == "right" else batch_b + (k, n)
    a = _f32(a_shape, seed)
    b = _f32(b_shape[:-2] + (b_shape[-1], b_shape[-2]) if transposed and len(b_shape) >= 2 else b_shape, seed + 1)
    if transposed and b.ndim >= 2:
        plan, out = traced(lambda a, b: nn.matmul(a, nn.transpose(b)), a, b)
        b_ref = np.swapaxes(b, -1, -2)
    else:
        plan, out = traced(lambda a, b: a @ b, a, b)
        b_ref = b
    assert len(plan.kernels) == 1 and plan.kernels[0].is_contraction
    close(out, np.matmul(a.astype(np.float64), b_ref.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_linear_and_bmm(traced, close):
    x, w, b = _f32((2, 3, 5), 0), _f32((4, 5), 1), _f32((4,), 2)
    plan, out = traced(nn.linear, x, w, b)
    assert len(plan.kernels) == 2
    close(out, x.astype(np.float64) @ w.T.astype(np.float64) + b, atol=1e-5)
    a, c = _f32((3, 2, 4), 3), _f32((3, 4, 5), 4)
    _, out = traced(nn.bmm, a, c)
    close(out, a.astype(np.float64) @ c, atol=1e-5)


def _attention_reference(q, k, v, scale, mask, causal):
    group = q.shape[-3] // k.shape[-3] if q.ndim >= 3 else 1
    if q.ndim >= 3:
        k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], dtype=bool)), scores, -np.inf)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == np.bool_ else scores + mask
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


@SETTINGS
@given(batch=st.sampled_from([None, (), (2,), (1, 2)]), kv_heads=st.integers(1, 2), group=st.integers(1, 3),
       tq=st.integers(1, 5), extra_keys=st.integers(0, 3), depth=st.integers(1, 6), value_depth=st.integers(1, 4),
       causal=st.booleans(), mask=st.sampled_from([None, "bool", "float"]), custom_scale=st.booleans(),
       seed=st.integers(0, 999))
def test_attention_six_members_match_reference(traced, close, batch, kv_heads, group, tq, extra_keys, depth,
                                               value_depth, causal, mask, custom_scale, seed):
    tk = tq + extra_keys
    if batch is None:  # (T, D): no heads
        q_shape, k_shape, v_shape = (tq, depth), (tk, depth), (tk, value_depth)
    else:
        q_shape = batch + (kv_heads * group, tq, depth)
        k_shape, v_shape = batch + (kv_heads, tk, depth), batch + (kv_heads, tk, value_depth)
    q, k, v = _f32(q_shape, seed), _f32(k_shape, seed + 1), _f32(v_shape, seed + 2)
    scale = 0.3 if custom_scale else None
    arrays = [q, k, v]
    mask_array = None
    if mask == "bool":
        mask_array = np.random.default_rng(seed).random((tq, tk)) < 0.7
        mask_array[:, 0] = True  # keep every row non-empty (key 0 also survives causal)
    elif mask == "float":
        mask_array = _f32((tq, tk), seed + 3)
    if mask_array is not None:
        arrays.append(mask_array)

        def fn(q, k, v, m):
            return nn.attention(q, k, v, scale=scale, mask=m, causal=causal)
    else:

        def fn(q, k, v):
            return nn.attention(q, k, v, scale=scale, causal=causal)

    plan, out = traced(fn, *arrays)
    names = [kernel.output for kernel in plan.kernels]
    six = ["attn_scores", "attn_max", "attn_exp", "attn_sum", "attn_probs", "attn_out"]
    assert names == six + (["attn_masked_rows"] if mask_array is not None else [])  # fully masked rows give 0
    effective = scale if scale is not None else 1 / math.sqrt(depth)
    reference = _attention_reference(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                                     effective, mask_array, causal)
    close(out, reference, rtol=5e-5, atol=5e-6)


def test_attention_on_transposed_projection_views(traced, close):
    x = _f32((6, 8), 7)  # tokens x (heads * depth); heads read through reshape + transpose views
    plan, out = traced(lambda x: nn.attention(*(x.reshape(6, 2, 4).transpose(0, 1),) * 3), x)
    assert len(plan.kernels) == 6
    heads = x.astype(np.float64).reshape(6, 2, 4).transpose(1, 0, 2)
    close(out, _attention_reference(heads, heads, heads, 0.5, None, False), rtol=5e-5, atol=5e-6)


def _conv_reference(x, w, stride, padding, dilation):
    (sy, sx), (py, px), (dy, dx) = stride, padding, dilation
    x = np.pad(x, ((0, 0), (0, 0), (py, py), (px, px)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - dy * (kh - 1) - 1) // sy + 1, (wd - dx * (kw - 1) - 1) // sx + 1
    out = np.zeros((n, o, oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            patch = x[:, :, ky * dy: ky * dy + sy * (oh - 1) + 1: sy, kx * dx: kx * dx + sx * (ow - 1) + 1: sx]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
    return out


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 3), o=st.integers(1, 3), h=st.integers(3, 7), w=st.integers(3, 7),
       kh=st.integers(1, 3), kw=st.integers(1, 3), stride=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.tuples(st.integers(0, 2), st.integers(0, 1)), dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       bias=st.booleans(), seed=st.integers(0, 999))
def test_conv2d(traced, close, n, c, o, h, w, kh, kw, stride, padding, dilation, bias, seed):
    if h + 2 * padding[0] < dilation[0] * (kh - 1) + 1 or w + 2 * padding[1] < dilation[1] * (kw - 1) + 1:
        return
    x, weight, b = _f32((n, c, h, w), seed), _f32((o, c, kh, kw), seed + 1), _f32((o,), seed + 2)
    if bias:
        plan, out = traced(lambda x, wt, b: nn.conv2d(x, wt, b, stride, padding, dilation), x, weight, b)
    else:
        plan, out = traced(lambda x, wt: nn.conv2d(x, wt, None, stride, padding, dilation), x, weight)
    # one contraction: the direct member (one input channel, its output as it is), or the
    # contraction over the patch view (weft/nn/conv.py) and a bias add or the copy of its
    # (n, groups, channels, pixels) result (none when that reshape is the output's own shape)
    kinds = [k.is_contraction for k in plan.kernels]
    if c == 1:
        assert kinds == [True] + [False] * bias
    else:
        assert kinds[0] and not any(kinds[1:]) and len(kinds) <= 2, kinds
    reference = _conv_reference(x.astype(np.float64), weight.astype(np.float64), stride, padding, dilation)
    if bias:
        reference = reference + b[None, :, None, None]
    close(out, reference, rtol=1e-5, atol=1e-5)


def test_embedding(traced):
    ids = np.array([[3, 0, 7], [7, 1, 2]], dtype=np.int64)
    table = _f32((8, 5), 8)
    plan, out = traced(nn.embedding, ids, table)
    assert len(plan.kernels) == 1
    np.testing.assert_array_equal(out, table[ids])


def _rope_reference(x, cos, sin, interleaved):
    if interleaved:
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = odd * cos + even * sin
        return out
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * np.concatenate([cos, cos], -1) + rotated * np.concatenate([sin, sin], -1)


@SETTINGS
@given(lead=st.sampled_from([(), (2,), (1, 3)]), tokens=st.integers(1, 5), half=st.integers(1, 4),
       interleaved=st.booleans(), seed=st.integers(0, 999))
def test_rope(traced, close, lead, tokens, half, interleaved, seed):
    x = _f32(lead + (tokens, 2 * half), seed)
    angles = np.random.default_rng(seed).random((tokens, half)) * 6
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    plan, out = traced(lambda x, c, s: nn.rope(x, c, s, interleaved=interleaved), x, cos, sin)
    assert len(plan.kernels) == 1
    close(out, _rope_reference(x.astype(np.float64), cos.astype(np.float64), sin.astype(np.float64), interleaved),
          rtol=1e-5, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(height=st.integers(1, 4), width=st.integers(1, 4), quarter=st.integers(1, 3), seed=st.integers(0, 999))
def test_rope_2d_matches_complex_axial_rotation(traced, close, height, width, quarter, seed):
    depth = 4 * quarter
    x = _f32((2, height * width, depth), seed)
    rng = np.random.default_rng(seed)
    col_angles, row_angles = rng.random((width, quarter)) * 6, rng.random((height, quarter)) * 6
    tables = [np.cos(col_angles), np.sin(col_angles), np.cos(row_angles), np.sin(row_angles)]
    tables = [t.astype(np.float32) for t in tables]
    plan, out = traced(nn.rope_2d, x, *tables)
    assert len(plan.kernels) == 1
    # SAM 2 style: complex pairs; first D/4 pairs rotate by column angle, the rest by row angle
    tokens = np.arange(height * width)
    angles = np.concatenate([col_angles[tokens % width], row_angles[tokens // width]], -1)
    pairs = x.astype(np.float64).reshape(2, height * width, depth // 2, 2)
    rotated = (pairs[..., 0] + 1j * pairs[..., 1]) * np.exp(1j * angles.astype(np.float32).astype(np.float64))
    reference = np.stack([rotated.real, rotated.imag], -1).reshape(x.shape)
    close(out, reference, rtol=1e-5, atol=2e-6)


def test_linear_weight_marked_param_has_param_role():
    plan = weft.trace(lambda x, w: nn.linear(x, w), weft.spec((2, 3)), weft.spec((4, 3), param=True))
    assert plan.buffer("w").role.value == "param"


@SETTINGS
@given(lead=st.sampled_from([(), (1,), (3,), (2, 1)]), in_features=st.integers(1, 6), out_features=st.integers(1, 5),
       bias=st.booleans(), strided=st.booleans(), seed=st.integers(0, 999))
def test_linear_over_leading_dims_and_strided_views(traced, close, lead, in_features, out_features, bias, strided,
                                                    seed):
    x = _f32(lead + (2 * in_features if strided else in_features,), seed)
    w, b = _f32((out_features, in_features), seed + 1), _f32((out_features,), seed + 2)
    x_ref = x[..., ::2] if strided else x

    def fn(x, w, *rest):
        return nn.linear(x[..., ::2] if strided else x, w, *rest)

    plan, out = traced(fn, x, w, *((b,) if bias else ()))
    assert len(plan.kernels) == (2 if bias else 1)
    reference = x_ref.astype(np.float64) @ w.T.astype(np.float64) + (b if bias else 0.0)
    close(out, reference, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(ids_shape=st.sampled_from([(1,), (4,), (2, 3), (1, 1, 2)]), vocab=st.integers(1, 9), dim=st.integers(1, 4),
       dtype=st.sampled_from([np.int32, np.int64]), seed=st.integers(0, 999))
def test_embedding_gathers_rows(traced, ids_shape, vocab, dim, dtype, seed):
    ids = np.random.default_rng(seed).integers(0, vocab, ids_shape).astype(dtype)
    table = _f32((vocab, dim), seed)
    plan, out = traced(nn.embedding, ids, table)
    assert len(plan.kernels) == 1
    np.testing.assert_array_equal(out, table[ids])
