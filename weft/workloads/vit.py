"""``vit-block``: one SAM 3 image-encoder block (ViTDet style) as plain members.

    x -> LN -> [window partition] -> qkv linear -> 2-D RoPE(q, k) -> attention
      -> proj linear -> [window unpartition] -> + x -> LN -> fc1 -> GELU -> fc2 -> + residual

72x72 tokens of width 1024, 16 heads of 64; windowed attention over 24x24 windows
(``window=24``) or global attention (``window=0``). RoPE is axial (SAM 2/3
``compute_axial_cis``): the first quarter of each head's dims rotates by the
token's column in the attention grid, the second by its row; the cos/sin tables
are inputs computed in NumPy.
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
INPUT_NAMES = (
    "x", "norm1_weight", "norm1_bias", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias",
    "norm2_weight", "norm2_bias", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",
    "cos_col", "sin_col", "cos_row", "sin_row",
)


def attention_grid(tokens_side: int, window: int) -> int:
    """The side of the attention grid: the window, or the whole token grid (global attention)."""
    return window if window else tokens_side


def _shapes(batch, tokens_side, dim, heads, window, mlp_dim):
    grid, quarter = attention_grid(tokens_side, window), dim // heads // 4
    return (
        (batch, tokens_side, tokens_side, dim), (dim,), (dim,), (3 * dim, dim), (3 * dim,), (dim, dim), (dim,),
        (dim,), (dim,), (mlp_dim, dim), (mlp_dim,), (dim, mlp_dim), (dim,),
        (grid, quarter), (grid, quarter), (grid, quarter), (grid, quarter),
    )


BLOCK_WEIGHTS = INPUT_NAMES[1:13]
"""The per-block parameters, in order (``INPUT_NAMES`` without ``x`` and the RoPE tables)."""


def block_body(x, weights, tables, *, tokens_side: int, dim: int, heads: int, window: int):
    """One block over traced tensors: ``weights`` in ``BLOCK_WEIGHTS`` order, ``tables`` the
    RoPE (cos_col, sin_col, cos_row, sin_row) of its attention grid (``window`` or the side)."""
    n1w, n1b, qkv_w, qkv_b, proj_w, proj_b, n2w, n2b, fc1_w, fc1_b, fc2_w, fc2_b = weights
    grid, head_dim = attention_grid(tokens_side, window), dim // heads
    with nn.name_scope("norm1"):
        h = nn.layer_norm(x, dim, n1w, n1b, eps=EPS)
    if window:
        h = nn.window_partition(h, window)
    groups = h.shape[0]
    with nn.name_scope("qkv"):
        qkv = nn.linear(h.reshape(groups, grid * grid, dim), qkv_w, qkv_b)
    qkv = qkv.reshape(groups, grid * grid, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    with nn.name_scope("q"):
        q = nn.rope_2d(qkv[0], *tables)
    with nn.name_scope("k"):
        k = nn.rope_2d(qkv[1], *tables)
    attended = nn.attention(q, k, qkv[2])
    attended = attended.permute(0, 2, 1, 3).reshape(groups, grid, grid, dim)
    with nn.name_scope("proj"):
        attended = nn.linear(attended, proj_w, proj_b)
    if window:
        attended = nn.window_unpartition(attended, window, tokens_side, tokens_side)
    with nn.name_scope("residual1"):
        x = x + attended
    with nn.name_scope("norm2"):
        h = nn.layer_norm(x, dim, n2w, n2b, eps=EPS)
    with nn.name_scope("mlp"):
        h = nn.linear(nn.gelu(nn.linear(h, fc1_w, fc1_b)), fc2_w, fc2_b)
    with nn.name_scope("residual2"):
        return x + h


def block_shapes(dim: int, mlp_dim: int) -> tuple[tuple[int, ...], ...]:
    """Shapes of ``BLOCK_WEIGHTS``."""
    return ((dim,), (dim,), (3 * dim, dim), (3 * dim,), (dim, dim), (dim,),
            (dim,), (dim,), (mlp_dim, dim), (mlp_dim,), (dim, mlp_dim), (dim,))


def block_weights(rng, dim: int, mlp_dim: int) -> tuple[np.ndarray, ...]:
    """Random ``BLOCK_WEIGHTS`` (layer-norm scales near one, unit-variance-keeping weights)."""
    return (
        normal(rng, (dim,), 0.1, 1.0), normal(rng, (dim,), 0.1),
        weight(rng, 3 * dim, dim), normal(rng, (3 * dim,), 0.1),
        weight(rng, dim, dim), normal(rng, (dim,), 0.1),
        normal(rng, (dim,), 0.1, 1.0), normal(rng, (dim,), 0.1),
        weight(rng, mlp_dim, dim), normal(rng, (mlp_dim,), 0.1),
        weight(rng, dim, mlp_dim), normal(rng, (dim,), 0.1),
    )


def _plan(batch: int, tokens_side: int, dim: int, heads: int, window: int, mlp_dim: int, rope_theta: float) -> Plan:
    def block(x, *rest):
        return block_body(x, rest[:12], rest[12:], tokens_side=tokens_side, dim=dim, heads=heads, window=window)

    shapes = _shapes(batch, tokens_side, dim, heads, window, mlp_dim)
    params = {n for n in INPUT_NAMES if n != "x" and not n.startswith(("cos", "sin"))}
    specs = [spec(shape, param=name in params) for name, shape in zip(INPUT_NAMES, shapes, strict=True)]
    return trace_named(block, INPUT_NAMES, specs, "vit_block")


def _inputs(rng, batch, tokens_side, dim, heads, window, mlp_dim, rope_theta):
    grid, quarter = attention_grid(tokens_side, window), dim // heads // 4
    cos_axis, sin_axis = rope_tables(np.arange(grid), quarter, rope_theta)
    x = normal(rng, (batch, tokens_side, tokens_side, dim))
    return (x, *block_weights(rng, dim, mlp_dim), cos_axis, sin_axis, cos_axis.copy(), sin_axis.copy())


def torch_block(torch, x, weights, tables, *, tokens_side: int, dim: int, heads: int, window: int):
    """``block_body`` in PyTorch (the twin): the same weights and RoPE tables, as torch tensors."""
    functional = torch.nn.functional
    n1w, n1b, qkv_w, qkv_b, proj_w, proj_b, n2w, n2b, fc1_w, fc1_b, fc2_w, fc2_b = weights
    cc, sc, cr, sr = tables
    grid, head_dim, batch = attention_grid(tokens_side, window), dim // heads, x.shape[0]

    def rotate(t, cos, sin):
        pairs = t.reshape(*t.shape[:-1], head_dim // 2, 2)
        even, odd = pairs[..., 0], pairs[..., 1]
        return torch.stack((even * cos - odd * sin, odd * cos + even * sin), -1).flatten(-2)

    token = torch.arange(grid * grid)
    cos = torch.cat((cc[token % grid], cr[token // grid]), -1)
    sin = torch.cat((sc[token % grid], sr[token // grid]), -1)
    h = functional.layer_norm(x, (dim,), n1w, n1b, eps=EPS)
    if window:
        padded = -(-tokens_side // window) * window
        h = functional.pad(h, (0, 0, 0, padded - tokens_side, 0, padded - tokens_side))
        cells = padded // window
        h = h.view(batch, cells, window, cells, window, dim).permute(0, 1, 3, 2, 4, 5).reshape(-1, window, window, dim)
    groups = h.shape[0]
    qkv = functional.linear(h, qkv_w, qkv_b).reshape(groups, grid * grid, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    attended = functional.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v)
    attended = functional.linear(attended.permute(0, 2, 1, 3).reshape(groups, grid, grid, dim), proj_w, proj_b)
    if window:
        attended = attended.view(batch, cells, cells, window, window, dim).permute(0, 1, 3, 2, 4, 5)
        attended = attended.reshape(batch, padded, padded, dim)[:, :tokens_side, :tokens_side]
    x = x + attended
    h = functional.layer_norm(x, (dim,), n2w, n2b, eps=EPS)
    return x + functional.linear(functional.gelu(functional.linear(h, fc1_w, fc1_b)), fc2_w, fc2_b)


def _torch(batch, tokens_side, dim, heads, window, mlp_dim, rope_theta):
    torch = lazy_torch()

    def block(x, *rest):
        return torch_block(torch, x, rest[:12], rest[12:], tokens_side=tokens_side, dim=dim, heads=heads,
                           window=window)

    return block


def _check(p):
    positive("vit-block", p, "batch", "tokens_side", "dim", "heads", "mlp_dim")
    require("vit-block", p["window"] >= 0, f"window must be >= 0 (0 = global attention), got {p['window']}")
    require("vit-block", p["dim"] % p["heads"] == 0, f"dim {p['dim']} must be a multiple of heads {p['heads']}")
    require("vit-block", (p["dim"] // p["heads"]) % 4 == 0,
            f"head dim {p['dim'] // p['heads']} must be a multiple of 4 for 2-D RoPE")


VIT_BLOCK = Workload(
    name="vit-block",
    description="One SAM 3 image-encoder block: 72x72 tokens, dim 1024, 16 heads, 24x24 windowed"
                " (window=24) or global (window=0) attention, 2-D RoPE, layer norms, GELU MLP",
    defaults={"batch": 1, "tokens_side": 72, "dim": 1024, "heads": 16, "window": 24, "mlp_dim": 4096,
              "rope_theta": 10000.0},
    small={"batch": 1, "tokens_side": 6, "dim": 16, "heads": 2, "window": 4, "mlp_dim": 32, "rope_theta": 10000.0},
    sequence_param="tokens_side",
    build=_plan,
    make_inputs=_inputs,
    make_torch=_torch,
    check=_check,
)
