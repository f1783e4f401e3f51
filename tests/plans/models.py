"""Whole-model plans traced with weft.nn for region-formation tests (small sizes)."""

from __future__ import annotations

import weft.nn as nn


def qwen_decode_step(hidden: int = 64, heads: int = 4, kv_heads: int = 2, cache: int = 31, ffn: int = 128):
    """One Qwen-style decoder block for one new token: RMSNorm, q/k/v projections, RoPE,
    grouped-query attention over the KV cache plus the new key, output projection,
    residual, RMSNorm, SwiGLU MLP, residual. Returns (hidden out, new key, new value)."""
    head_dim = hidden // heads

    def step(x, w_norm1, wq, wk, wv, cos, sin, k_cache, v_cache, wo, w_norm2, wg, wu, wd):
        h = nn.rms_norm(x, w_norm1)
        q = nn.transpose(nn.reshape(nn.linear(h, wq), 1, heads, head_dim), 0, 1)
        k_new = nn.transpose(nn.reshape(nn.linear(h, wk), 1, kv_heads, head_dim), 0, 1)
        v_new = nn.transpose(nn.reshape(nn.linear(h, wv), 1, kv_heads, head_dim), 0, 1)
        q, k_new = nn.rope(q, cos, sin), nn.rope(k_new, cos, sin)
        keys = nn.concat([k_cache, k_new], axis=1)
        values = nn.concat([v_cache, v_new], axis=1)
        attended = nn.attention(q, keys, values)
        merged = nn.reshape(nn.transpose(attended, 0, 1), 1, hidden)
        x2 = nn.add(x, nn.linear(merged, wo))
        h2 = nn.rms_norm(x2, w_norm2)
        mlp = nn.linear(nn.mul(nn.silu(nn.linear(h2, wg)), nn.linear(h2, wu)), wd)
        return nn.add(x2, mlp), k_new, v_new

    s = nn.spec
    return nn.trace(
        step,
        s((1, hidden)), s((hidden,), param=True), s((hidden, hidden), param=True),
        s((kv_heads * head_dim, hidden), param=True), s((kv_heads * head_dim, hidden), param=True),
        s((1, head_dim // 2)), s((1, head_dim // 2)),
        s((kv_heads, cache, head_dim)), s((kv_heads, cache, head_dim)),
        s((hidden, hidden), param=True), s((hidden,), param=True),
        s((ffn, hidden), param=True), s((ffn, hidden), param=True), s((hidden, ffn), param=True),
        name="qwen_decode_step",
    )
