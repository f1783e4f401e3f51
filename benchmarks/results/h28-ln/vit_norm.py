"""vit-block's norm alone: layer norm over (1, 24, 24, 256) with weight and bias."""
import numpy as np

from weft import nn


def build(side: int = 24, dim: int = 256):
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal((1, side, side, dim)).astype(np.float32),
              "w": rng.standard_normal(dim).astype(np.float32), "b": rng.standard_normal(dim).astype(np.float32)}

    def norm(x, w, b):
        return nn.layer_norm(x, dim, w, b, eps=1e-6)

    return norm, inputs
