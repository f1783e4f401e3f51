"""The model workloads against float64 NumPy written here (no torch needed).

Independent of weft.nn: windows via pad/reshape/transpose, RoPE via complex
multiplication, attention via explicit softmax.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

from weft.oracle import run
from weft.workloads import get_workload


def _layer_norm(x, w, b, eps):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


def _rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _attention(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ v


def _vit_reference(p, arrays):
    x, n1w, n1b, qkv_w, qkv_b, proj_w, proj_b, n2w, n2b, f1w, f1b, f2w, f2b, cc, sc, cr, sr = (
        a.astype(np.float64) for a in arrays)
    side, dim, heads, window = p["tokens_side"], p["dim"], p["heads"], p["window"]
    head_dim, batch = dim // heads, x.shape[0]
    h = _layer_norm(x, n1w, n1b, 1e-6)
    grid = window or side
    if window:
        padded = -(-side // window) * window
        h = np.pad(h, ((0, 0), (0, padded - side), (0, padded - side), (0, 0)))
        cells = padded // window
        h = h.reshape(batch, cells, window, cells, window, dim).transpose(0, 1, 3, 2, 4, 5)
        h = h.reshape(-1, window, window, dim)
    groups = h.shape[0]
    qkv = (h.reshape(groups, grid * grid, dim) @ qkv_w.T + qkv_b).reshape(groups, grid * grid, 3, heads, head_dim)
    q, k, v = qkv.transpose(2, 0, 3, 1, 4)
    token = np.arange(grid * grid)
    angle_cos = np.concatenate([cc[token % grid], cr[token // grid]], -1)
    angle_sin = np.concatenate([sc[token % grid], sr[token // grid]], -1)
    rotation = angle_cos + 1j * angle_sin

    def rope(t):
        pairs = t.reshape(*t.shape[:-1], head_dim // 2, 2)
        turned = (pairs[..., 0] + 1j * pairs[..., 1]) * rotation
        return np.stack([turned.real, turned.imag], -1).reshape(t.shape)

    attended = _attention(rope(q), rope(k), v).transpose(0, 2, 1, 3).reshape(groups, grid, grid, dim)
    attended = attended @ proj_w.T + proj_b
    if window:
        attended = attended.reshape(batch, cells, cells, window, window, dim).transpose(0, 1, 3, 2, 4, 5)
        attended = attended.reshape(batch, padded, padded, dim)[:, :side, :side]
    x = x + attended
    hidden = _layer_norm(x, n2w, n2b, 1e-6) @ f1w.T + f1b
    hidden = 0.5 * hidden * (1 + scipy.special.erf(hidden / np.sqrt(2)))
    return x + hidden @ f2w.T + f2b


@pytest.mark.parametrize("window", [0, 4, 3])
def test_vit_block_matches_numpy(window):
    workload = get_workload("vit-block")
    params = dict(workload.small, window=window)
    arrays = workload.inputs(seed=3, **params)
    out = run(workload.plan(**params), *arrays)
    expected = _vit_reference(workload.resolve(**params), arrays)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def _sam3_reference(p, arrays):
    """Patch embedding as a matrix product over patches (not a convolution), then each block by
    ``_vit_reference`` with the window or global RoPE tables."""
    image, patch_w, patch_b, pos = (a.astype(np.float64) for a in arrays[:4])
    window_tables, global_tables, weights = arrays[4:8], arrays[8:12], arrays[12:]
    size, patch, dim = p["image_size"], p["patch"], p["dim"]
    side = size // patch
    patches = image.reshape(1, 3, side, patch, side, patch).transpose(0, 2, 4, 1, 3, 5).reshape(1, side, side, -1)
    x = patches @ patch_w.reshape(dim, -1).T + patch_b + pos
    for block in range(p["blocks"]):
        glob = (block + 1) % p["global_every"] == 0
        params = {"tokens_side": side, "dim": dim, "heads": p["heads"], "window": 0 if glob else p["window"]}
        tables = global_tables if glob else window_tables
        x = _vit_reference(params, (x, *weights[12 * block: 12 * block + 12], *tables))
    return x


@pytest.mark.parametrize("blocks", [1, 3])
def test_sam3_encoder_matches_numpy(blocks):
    workload = get_workload("sam3-encoder")
    params = dict(workload.small, blocks=blocks)  # block 1 (of 0, 1, 2) attends globally
    arrays = workload.inputs(seed=6, **params)
    out = run(workload.plan(**params), *arrays)
    np.testing.assert_allclose(out, _sam3_reference(workload.resolve(**params), arrays), rtol=1e-4, atol=1e-4)


def _qwen_reference(p, arrays):
    arrays = [a.astype(np.float64) for a in arrays]
    x, cos, sin = arrays[:3]
    heads, kv_heads, hidden = p["heads"], p["kv_heads"], p["hidden"]
    head_dim = hidden // heads
    half = head_dim // 2
    cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)

    def rope(t):
        return t * cos + np.concatenate([-t[..., half:], t[..., :half]], -1) * sin

    new = []
    for layer in range(p["layers"]):
        ln1, qw, qb, kw, kb, vw, vb, ow, ln2, gw, uw, dw, k_cache, v_cache = arrays[3 + 14 * layer: 17 + 14 * layer]
        h = _rms_norm(x, ln1, 1e-6)
        q = rope((h @ qw.T + qb).reshape(heads, 1, head_dim))
        k = rope((h @ kw.T + kb).reshape(kv_heads, 1, head_dim))
        v = (h @ vw.T + vb).reshape(kv_heads, 1, head_dim)
        keys = np.repeat(np.concatenate([k_cache, k], 1), heads // kv_heads, 0)
        values = np.repeat(np.concatenate([v_cache, v], 1), heads // kv_heads, 0)
        x = x + _attention(q, keys, values).reshape(1, hidden) @ ow.T
        h = _rms_norm(x, ln2, 1e-6)
        gate = h @ gw.T
        x = x + (gate / (1 + np.exp(-gate)) * (h @ uw.T)) @ dw.T
        new += [k, v]
    return (_rms_norm(x, arrays[-1], 1e-6), *new)


def test_qwen_decode_step_matches_numpy():
    workload = get_workload("qwen-decode-step")
    arrays = workload.inputs(seed=4, **workload.small)
    outputs = run(workload.plan(**workload.small), *arrays)
    expected = _qwen_reference(workload.resolve(**workload.small), arrays)
    assert len(outputs) == len(expected) == 1 + 2 * workload.small["layers"]
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _adam_reference(arrays, step, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    out = []
    for n in range(len(arrays) // 4):
        p, g, m, v = (a.astype(np.float64) for a in arrays[4 * n: 4 * n + 4])
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p - lr * (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + eps)
        out += [p, m, v]
    return out


def test_adam_and_cross_entropy_workloads_match_numpy():
    adam = get_workload("adam")
    arrays = adam.inputs(seed=5, **adam.small)
    for got, want in zip(run(adam.plan(**adam.small), *arrays), _adam_reference(arrays, adam.small["step"]),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
    ce = get_workload("cross-entropy")
    for projection in (False, True):
        params = dict(ce.small, projection=projection)
        arrays = ce.inputs(seed=6, **params)
        logits = arrays[0].astype(np.float64)
        if projection:
            logits = logits @ arrays[1].astype(np.float64).T
        targets = arrays[-1]
        shifted = logits - logits.max(-1, keepdims=True)
        losses = np.log(np.exp(shifted).sum(-1)) - shifted[np.arange(len(targets)), targets]
        np.testing.assert_allclose(run(ce.plan(**params), *arrays), losses.mean(), rtol=1e-5)
