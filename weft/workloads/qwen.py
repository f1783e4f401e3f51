"""``qwen-decode-step``: one decode step of a Qwen2.5-0.5B-shaped decoder.

Per layer (hidden 896, 14 query heads, 2 KV heads of 64, intermediate 4864)::

    h = RMSNorm(x);  q, k, v = linear+bias(h);  q, k = RoPE(q, k)   (rotate-half, theta 1e6)
    keys = concat(k_cache, k);  values = concat(v_cache, v)           (views, no copy member)
    x = x + o_proj(attention(q, keys, values))                        (grouped-query: 7 per KV head)
    x = x + down(silu(gate(RMSNorm(x))) * up(RMSNorm(x)))

then a final RMSNorm. Inputs: the current token's hidden state (1, hidden), the
RoPE cos/sin of its position (= ``cache_len``), then each layer's weights and KV
cache. Outputs: the final hidden state, then each layer's new k and v (the entries
a caller appends to its cache).
"""

from __future__ import annotations

import numpy as np

from weft import nn
from weft.ir import Plan
from weft.nn import spec
from weft.workloads.base import (
    Workload,
    lazy_torch,
    normal,
    positive,
    require,
    rope_tables,
    trace_named,
    weight,
)

EPS = 1e-6
LAYER_INPUTS = ("ln1", "q_weight", "q_bias", "k_weight", "k_bias", "v_weight", "v_bias", "o_weight",
                "ln2", "gate_weight", "up_weight", "down_weight", "k_cache", "v_cache")


def _layer_shapes(hidden, heads, kv_heads, intermediate, cache_len):
    head_dim = hidden // heads
    kv = kv_heads * head_dim
    return ((hidden,), (hidden, hidden), (hidden,), (kv, hidden), (kv,), (kv, hidden), (kv,), (hidden, hidden),
            (hidden,), (intermediate, hidden), (intermediate, hidden), (hidden, intermediate),
            (kv_heads, cache_len, head_dim), (kv_heads, cache_len, head_dim))


def _plan(layers, hidden, heads, kv_heads, intermediate, cache_len, rope_theta) -> Plan:
    head_dim = hidden // heads
    names = ["x", "cos", "sin"]
    specs = [spec((1, hidden)), spec((1, head_dim // 2)), spec((1, head_dim // 2))]
    for layer in range(layers):
        for name, shape in zip(LAYER_INPUTS, _layer_shapes(hidden, heads, kv_heads, intermediate, cache_len),
                               strict=True):
            names.append(f"l{layer}_{name}")
            specs.append(spec(shape, param=not name.endswith("cache")))
    names.append("final_norm")
    specs.append(spec(hidden, param=True))

    def decode_step(x, cos, sin, *weights):
        new_entries = []
        for layer in range(layers):
            ln1, qw, qb, kw, kb, vw, vb, ow, ln2, gw, uw, dw, k_cache, v_cache = weights[14 * layer: 14 * layer + 14]
            with nn.name_scope(f"l{layer}"):
                with nn.name_scope("ln1"):
                    h = nn.rms_norm(x, ln1, eps=EPS)
                with nn.name_scope("q"):
                    q = nn.rope(nn.linear(h, qw, qb).reshape(heads, 1, head_dim), cos, sin)
                with nn.name_scope("k"):
                    k = nn.rope(nn.linear(h, kw, kb).reshape(kv_heads, 1, head_dim), cos, sin)
                with nn.name_scope("v"):
                    v = nn.linear(h, vw, vb).reshape(kv_heads, 1, head_dim)
                keys, values = nn.concat([k_cache, k], axis=1), nn.concat([v_cache, v], axis=1)
                attended = nn.attention(q, keys, values).reshape(1, hidden)
                with nn.name_scope("o"):
                    x = x + nn.linear(attended, ow)
                with nn.name_scope("ln2"):
                    h = nn.rms_norm(x, ln2, eps=EPS)
                with nn.name_scope("mlp"):
                    x = x + nn.linear(nn.silu(nn.linear(h, gw)) * nn.linear(h, uw), dw)
            new_entries += [k, v]
        with nn.name_scope("final"):
            return (nn.rms_norm(x, weights[-1], eps=EPS), *new_entries)

    return trace_named(decode_step, names, specs, "qwen_decode_step")


def _inputs(rng, layers, hidden, heads, kv_heads, intermediate, cache_len, rope_theta):
    head_dim = hidden // heads
    cos, sin = rope_tables(np.array([cache_len]), head_dim // 2, rope_theta)
    arrays = [normal(rng, (1, hidden)), cos, sin]
    for _ in range(layers):
        for name, shape in zip(LAYER_INPUTS, _layer_shapes(hidden, heads, kv_heads, intermediate, cache_len),
                               strict=True):
            if name.startswith("ln"):
                arrays.append(normal(rng, shape, 0.1, 1.0))
            elif name.endswith("bias"):
                arrays.append(normal(rng, shape, 0.1))
            elif name.endswith("cache"):
                arrays.append(normal(rng, shape))
            else:
                arrays.append(weight(rng, *shape))
    arrays.append(normal(rng, (hidden,), 0.1, 1.0))
    return tuple(arrays)


def _torch(layers, hidden, heads, kv_heads, intermediate, cache_len, rope_theta):
    torch = lazy_torch()
    functional = torch.nn.functional
    head_dim = hidden // heads
    half = head_dim // 2

    def rope(t, cos, sin):
        rotated = torch.cat((-t[..., half:], t[..., :half]), -1)
        return t * cos + rotated * sin

    def decode_step(x, cos, sin, *weights):
        cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
        new_entries = []
        for layer in range(layers):
            ln1, qw, qb, kw, kb, vw, vb, ow, ln2, gw, uw, dw, k_cache, v_cache = weights[14 * layer: 14 * layer + 14]
            h = functional.rms_norm(x, (hidden,), ln1, EPS)
            q = rope(functional.linear(h, qw, qb).view(heads, 1, head_dim), cos, sin)
            k = rope(functional.linear(h, kw, kb).view(kv_heads, 1, head_dim), cos, sin)
            v = functional.linear(h, vw, vb).view(kv_heads, 1, head_dim)
            keys, values = torch.cat((k_cache, k), 1), torch.cat((v_cache, v), 1)
            attended = functional.scaled_dot_product_attention(q[None], keys[None], values[None], enable_gqa=True)
            x = x + functional.linear(attended.reshape(1, hidden), ow)
            h = functional.rms_norm(x, (hidden,), ln2, EPS)
            x = x + functional.linear(functional.silu(functional.linear(h, gw)) * functional.linear(h, uw), dw)
            new_entries += [k, v]
        return (functional.rms_norm(x, (hidden,), weights[-1], EPS), *new_entries)

    return decode_step


def _check(p):
    positive("qwen-decode-step", p, "layers", "hidden", "heads", "kv_heads", "intermediate", "cache_len")
    require("qwen-decode-step", p["hidden"] % p["heads"] == 0, f"hidden {p['hidden']} must be a multiple of heads")
    require("qwen-decode-step", p["heads"] % p["kv_heads"] == 0,
            f"heads {p['heads']} must be a multiple of kv_heads {p['kv_heads']}")
    require("qwen-decode-step", (p["hidden"] // p["heads"]) % 2 == 0, "head dim must be even for RoPE")


QWEN_DECODE_STEP = Workload(
    name="qwen-decode-step",
    description="One decode step of a Qwen2.5-0.5B-shaped decoder: hidden 896, 14 heads, 2 KV heads,"
                " intermediate 4864, RMSNorm, RoPE, SwiGLU, KV cache of cache_len tokens",
    defaults={"layers": 24, "hidden": 896, "heads": 14, "kv_heads": 2, "intermediate": 4864, "cache_len": 1024,
              "rope_theta": 1_000_000.0},
    small={"layers": 2, "hidden": 32, "heads": 4, "kv_heads": 2, "intermediate": 48, "cache_len": 5,
           "rope_theta": 1_000_000.0},
    sequence_param="cache_len",
    build=_plan,
    make_inputs=_inputs,
    make_torch=_torch,
    check=_check,
)
