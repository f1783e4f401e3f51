"""``sam3-encoder``: the SAM 3 image encoder (ViTDet style) as plain members.

    image (1, 3, 1008, 1008) -> patch embedding (14x14 convolution, stride 14) -> (1, 72, 72, 1024)
      -> + positional embedding (1, 72, 72, 1024)
      -> 32 x vit-block: windowed 24x24 attention, global attention in blocks 7, 15, 23 and 31

Every block is ``weft.workloads.vit.block_body`` with its own weights; windowed blocks
share one set of RoPE tables (24x24 grid), global blocks another (72x72 grid). A
block is global when ``(index + 1) % global_every == 0`` (SAM 3: every 8th of 32).
Output: the last block's tokens (1, 72, 72, 1024).

Inputs: the image, the patch weight (dim, 3, patch, patch) and bias, the positional
embedding, the RoPE tables (window cos/sin col/row, then global), then each block's
twelve weights (``vit.BLOCK_WEIGHTS``) prefixed ``b{index}_``.
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
from weft.workloads.vit import BLOCK_WEIGHTS, block_body, block_shapes, block_weights, torch_block

TABLES = ("cos_col", "sin_col", "cos_row", "sin_row")


def is_global(block: int, global_every: int) -> bool:
    """Whether block ``block`` (0-based) attends globally (SAM 3: blocks 7, 15, 23, 31)."""
    return global_every > 0 and (block + 1) % global_every == 0


def _names_and_shapes(blocks, image_size, patch, dim, heads, window, mlp_dim):
    side, quarter = image_size // patch, dim // heads // 4
    named = [("image", (1, 3, image_size, image_size)), ("patch_weight", (dim, 3, patch, patch)),
             ("patch_bias", (dim,)), ("pos_embed", (1, side, side, dim))]
    named += [(f"window_{t}", (window, quarter)) for t in TABLES]
    named += [(f"global_{t}", (side, quarter)) for t in TABLES]
    for block in range(blocks):
        named += [(f"b{block}_{n}", shape) for n, shape in zip(BLOCK_WEIGHTS, block_shapes(dim, mlp_dim), strict=True)]
    return named


def _plan(blocks, image_size, patch, dim, heads, window, mlp_dim, global_every, rope_theta) -> Plan:
    side = image_size // patch
    named = _names_and_shapes(blocks, image_size, patch, dim, heads, window, mlp_dim)
    activations = {"image", "window_cos_col", "window_sin_col", "window_cos_row", "window_sin_row",
                   "global_cos_col", "global_sin_col", "global_cos_row", "global_sin_row"}
    specs = [spec(shape, param=name not in activations) for name, shape in named]

    def encoder(image, patch_weight, patch_bias, pos_embed, *rest):
        window_tables, global_tables, weights = rest[:4], rest[4:8], rest[8:]
        with nn.name_scope("patch_embed"):
            x = nn.conv2d(image, patch_weight, patch_bias, stride=patch).permute(0, 2, 3, 1)
        with nn.name_scope("pos_embed"):
            x = x + pos_embed
        for block in range(blocks):
            glob = is_global(block, global_every)
            with nn.name_scope(f"b{block}"):
                x = block_body(x, weights[12 * block: 12 * block + 12], global_tables if glob else window_tables,
                               tokens_side=side, dim=dim, heads=heads, window=0 if glob else window)
        return x

    return trace_named(encoder, [name for name, _ in named], specs, "sam3_encoder")


def _inputs(rng, blocks, image_size, patch, dim, heads, window, mlp_dim, global_every, rope_theta):
    side, quarter = image_size // patch, dim // heads // 4
    window_cos, window_sin = rope_tables(np.arange(window), quarter, rope_theta)
    global_cos, global_sin = rope_tables(np.arange(side), quarter, rope_theta)
    arrays = [normal(rng, (1, 3, image_size, image_size)), weight(rng, dim, 3 * patch * patch).reshape(dim, 3, patch, patch),
              normal(rng, (dim,), 0.1), normal(rng, (1, side, side, dim), 0.1),
              window_cos, window_sin, window_cos.copy(), window_sin.copy(),
              global_cos, global_sin, global_cos.copy(), global_sin.copy()]
    for _ in range(blocks):
        arrays += block_weights(rng, dim, mlp_dim)
    return tuple(arrays)


def _torch(blocks, image_size, patch, dim, heads, window, mlp_dim, global_every, rope_theta):
    torch = lazy_torch()
    side = image_size // patch

    def encoder(image, patch_weight, patch_bias, pos_embed, *rest):
        window_tables, global_tables, weights = rest[:4], rest[4:8], rest[8:]
        x = torch.nn.functional.conv2d(image, patch_weight, patch_bias, stride=patch).permute(0, 2, 3, 1)
        x = x + pos_embed
        for block in range(blocks):
            glob = is_global(block, global_every)
            x = torch_block(torch, x, weights[12 * block: 12 * block + 12], global_tables if glob else window_tables,
                            tokens_side=side, dim=dim, heads=heads, window=0 if glob else window)
        return x

    return encoder


def _check(p):
    name = "sam3-encoder"
    positive(name, p, "blocks", "image_size", "patch", "dim", "heads", "window", "mlp_dim")
    require(name, p["global_every"] >= 0, f"global_every must be >= 0 (0: no global block), got {p['global_every']}")
    require(name, p["image_size"] % p["patch"] == 0,
            f"image_size {p['image_size']} must be a multiple of patch {p['patch']}")
    require(name, p["dim"] % p["heads"] == 0, f"dim {p['dim']} must be a multiple of heads {p['heads']}")
    require(name, (p["dim"] // p["heads"]) % 4 == 0,
            f"head dim {p['dim'] // p['heads']} must be a multiple of 4 for 2-D RoPE")


SAM3_ENCODER = Workload(
    name="sam3-encoder",
    description="The SAM 3 image encoder: 1008x1008 image, 14x14 patches (72x72 tokens), positional embedding,"
                " 32 vit-blocks (dim 1024, 16 heads, MLP 4096), 24x24 windowed attention, global in blocks"
                " 7, 15, 23, 31",
    defaults={"blocks": 32, "image_size": 1008, "patch": 14, "dim": 1024, "heads": 16, "window": 24,
              "mlp_dim": 4096, "global_every": 8, "rope_theta": 10000.0},
    small={"blocks": 2, "image_size": 24, "patch": 4, "dim": 16, "heads": 2, "window": 4, "mlp_dim": 32,
           "global_every": 2, "rope_theta": 10000.0},
    sequence_param="image_size",
    build=_plan,
    make_inputs=_inputs,
    make_torch=_torch,
    check=_check,
)
