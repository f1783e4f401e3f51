"""A six-layer MiniLM-sized encoder stack (hidden 384, 12 heads, intermediate 1536)
written with ``weft.nn``, built from the BERT layer of ``examples/bert.py``.

    weft plan examples/minilm6.py:build --set tokens=32
    weft bench examples/minilm6.py:build --arms inference,torch-eager --threads 1

Inputs are named by path: ``weights_layer0_q_w`` ... ``weights_layer5_ln2_b`` (96
weights), beside ``x`` and the padding mask ``keep``.
"""

from __future__ import annotations

import numpy as np
from bert import encoder_layer, layer_weights, padding_mask, torch_encoder_layer

from weft import nn


def build(layers: int = 6, batch: int = 2, tokens: int = 128, hidden: int = 384, heads: int = 12,
          intermediate: int = 1536):
    """A MiniLM-sized stack of post-norm encoder layers, with a padding mask."""
    rng = np.random.default_rng(0)
    inputs = {
        "x": rng.standard_normal((batch, tokens, hidden)).astype(np.float32),
        "keep": padding_mask(batch, tokens),
        "weights": {f"layer{n}": layer_weights(rng, hidden, intermediate) for n in range(layers)},
    }

    def stack(x, keep, weights):
        for n in range(layers):
            with nn.name_scope(f"layer{n}"):
                x = encoder_layer(x, keep, weights[f"layer{n}"], heads)
        return x

    def torch_stack(x, keep, weights):
        for n in range(layers):
            x = torch_encoder_layer(x, keep, weights[f"layer{n}"], heads)
        return x

    return stack, inputs, torch_stack


build.sequence_param = "tokens"
