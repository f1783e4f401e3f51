"""A BERT encoder layer (hidden 384, 12 heads, a padding mask) written with ``weft.nn``.

    weft plan examples/bert.py:build --set tokens=32
    weft bench examples/bert.py:build --arms inference,torch-eager --threads 1
    weft diagnose examples/bert.py:build

``build(**params)`` returns ``(fn, inputs, torch_fn)``: the layer over ``weft.nn``
tensors, example inputs (a dict: the activations, the padding mask and the weights,
named ``weights_q_w``, ``weights_ln1_b``...) and the same layer in PyTorch.
Post-norm as in BERT: ``h = LN(x + Attn(x)); out = LN(h + FFN(h))``.
"""

from __future__ import annotations

import numpy as np

from weft import nn

LN_EPS = 1e-12  # BERT's layer-norm epsilon


def layer_weights(rng: np.random.Generator, hidden: int, intermediate: int) -> dict[str, np.ndarray]:
    """One layer's weights, PyTorch layout ((out, in) for a linear), scaled so activations stay O(1)."""

    def linear(out_features: int, in_features: int) -> np.ndarray:
        return (rng.standard_normal((out_features, in_features)) / np.sqrt(in_features)).astype(np.float32)

    def vector(size: int, scale: float = 0.02, offset: float = 0.0) -> np.ndarray:
        return (offset + scale * rng.standard_normal(size)).astype(np.float32)

    return {
        "q_w": linear(hidden, hidden), "q_b": vector(hidden),
        "k_w": linear(hidden, hidden), "k_b": vector(hidden),
        "v_w": linear(hidden, hidden), "v_b": vector(hidden),
        "o_w": linear(hidden, hidden), "o_b": vector(hidden),
        "ln1_w": vector(hidden, 0.1, 1.0), "ln1_b": vector(hidden),
        "ff1_w": linear(intermediate, hidden), "ff1_b": vector(intermediate),
        "ff2_w": linear(hidden, intermediate), "ff2_b": vector(hidden),
        "ln2_w": vector(hidden, 0.1, 1.0), "ln2_b": vector(hidden),
    }


def encoder_layer(x, keep, w, heads: int):
    """One post-norm encoder layer. ``x`` (B, T, H); ``keep`` (B, 1, 1, T) bool, True at real
    tokens (a padding mask over the keys); ``w`` a dict of this layer's weights."""
    batch, tokens, hidden = x.shape
    head_dim = hidden // heads

    def split_heads(t):  # (B, T, H) -> (B, heads, T, head_dim): views, no copies
        return nn.permute(nn.reshape(t, (batch, tokens, heads, head_dim)), (0, 2, 1, 3))

    with nn.name_scope("attn"):
        q = split_heads(nn.linear(x, w["q_w"], w["q_b"]))
        k = split_heads(nn.linear(x, w["k_w"], w["k_b"]))
        v = split_heads(nn.linear(x, w["v_w"], w["v_b"]))
        context = nn.attention(q, k, v, mask=keep)
        context = nn.reshape(nn.permute(context, (0, 2, 1, 3)), (batch, tokens, hidden))
        h = nn.layer_norm(x + nn.linear(context, w["o_w"], w["o_b"]), weight=w["ln1_w"], bias=w["ln1_b"], eps=LN_EPS)
    with nn.name_scope("ffn"):
        up = nn.gelu(nn.linear(h, w["ff1_w"], w["ff1_b"]))
        return nn.layer_norm(h + nn.linear(up, w["ff2_w"], w["ff2_b"]), weight=w["ln2_w"], bias=w["ln2_b"],
                             eps=LN_EPS)


def torch_encoder_layer(x, keep, w, heads: int):
    """The same layer in PyTorch (scaled_dot_product_attention with a boolean mask)."""
    import torch.nn.functional as F

    batch, tokens, hidden = x.shape
    head_dim = hidden // heads

    def split_heads(t):
        return t.reshape(batch, tokens, heads, head_dim).permute(0, 2, 1, 3)

    q = split_heads(F.linear(x, w["q_w"], w["q_b"]))
    k = split_heads(F.linear(x, w["k_w"], w["k_b"]))
    v = split_heads(F.linear(x, w["v_w"], w["v_b"]))
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    context = context.permute(0, 2, 1, 3).reshape(batch, tokens, hidden)
    h = F.layer_norm(x + F.linear(context, w["o_w"], w["o_b"]), (hidden,), w["ln1_w"], w["ln1_b"], LN_EPS)
    up = F.gelu(F.linear(h, w["ff1_w"], w["ff1_b"]))
    return F.layer_norm(h + F.linear(up, w["ff2_w"], w["ff2_b"]), (hidden,), w["ln2_w"], w["ln2_b"], LN_EPS)


def padding_mask(batch: int, tokens: int) -> np.ndarray:
    """(B, 1, 1, T) bool: sequence b has its last b/(2B) of tokens padded (the first is full)."""
    lengths = [tokens - (tokens * b) // (2 * batch) for b in range(batch)]
    keep = np.zeros((batch, 1, 1, tokens), dtype=bool)
    for b, length in enumerate(lengths):
        keep[b, ..., :length] = True
    return keep


def build(batch: int = 2, tokens: int = 128, hidden: int = 384, heads: int = 12, intermediate: int = 1536):
    """A BERT encoder layer (post-norm, GELU), hidden 384, 12 heads, with a padding mask."""
    if hidden % heads:
        raise ValueError(f"hidden={hidden} must be a multiple of heads={heads}")
    rng = np.random.default_rng(0)
    inputs = {
        "x": rng.standard_normal((batch, tokens, hidden)).astype(np.float32),
        "keep": padding_mask(batch, tokens),
        "weights": layer_weights(rng, hidden, intermediate),
    }

    def layer(x, keep, weights):
        return encoder_layer(x, keep, weights, heads)

    def torch_layer(x, keep, weights):
        return torch_encoder_layer(x, keep, weights, heads)

    return layer, inputs, torch_layer


build.sequence_param = "tokens"
