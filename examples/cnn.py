"""A small CNN classifier written with ``weft.nn``: a 3x3 convolution, inference batch
norm, ReLU and 2x2 max pooling; a second 3x3 convolution (stride 2) with ReLU; global
average pooling and a linear head.

    weft explain examples/cnn.py:build --fusion greedy
    weft bench examples/cnn.py:build --arms strict,inference,torch-eager
"""

from __future__ import annotations

import numpy as np

from weft import nn


def build(batch: int = 4, size: int = 32, channels: int = 16, classes: int = 10):
    """conv3x3(3->C) batchnorm relu maxpool2, conv3x3(C->2C, stride 2) relu, global average pool, linear."""
    rng = np.random.default_rng(0)

    def conv(out_channels: int, in_channels: int) -> np.ndarray:
        fan_in = in_channels * 9
        return (rng.standard_normal((out_channels, in_channels, 3, 3)) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    weights = {
        "conv1_w": conv(channels, 3), "conv1_b": (0.1 * rng.standard_normal(channels)).astype(np.float32),
        "bn_mean": (0.1 * rng.standard_normal(channels)).astype(np.float32),
        "bn_var": (0.5 + rng.random(channels)).astype(np.float32),
        "bn_w": (1.0 + 0.1 * rng.standard_normal(channels)).astype(np.float32),
        "bn_b": (0.1 * rng.standard_normal(channels)).astype(np.float32),
        "conv2_w": conv(2 * channels, channels), "conv2_b": (0.1 * rng.standard_normal(2 * channels)).astype(np.float32),
        "head_w": (rng.standard_normal((classes, 2 * channels)) / np.sqrt(2 * channels)).astype(np.float32),
        "head_b": np.zeros(classes, np.float32),
    }
    images = rng.standard_normal((batch, 3, size, size)).astype(np.float32)

    def cnn(images, weights):
        h = nn.conv2d(images, weights["conv1_w"], weights["conv1_b"], padding=1)
        h = nn.relu(nn.batch_norm(h, weights["bn_mean"], weights["bn_var"], weights["bn_w"], weights["bn_b"]))
        h = nn.max_pool2d(h, 2)
        h = nn.relu(nn.conv2d(h, weights["conv2_w"], weights["conv2_b"], stride=2, padding=1))
        pooled = nn.mean(h, axis=(2, 3))
        return nn.linear(pooled, weights["head_w"], weights["head_b"])

    def torch_cnn(images, weights):
        import torch.nn.functional as F

        h = F.conv2d(images, weights["conv1_w"], weights["conv1_b"], padding=1)
        h = F.relu(F.batch_norm(h, weights["bn_mean"], weights["bn_var"], weights["bn_w"], weights["bn_b"],
                                training=False))
        h = F.max_pool2d(h, 2)
        h = F.relu(F.conv2d(h, weights["conv2_w"], weights["conv2_b"], stride=2, padding=1))
        return F.linear(h.mean(dim=(2, 3)), weights["head_w"], weights["head_b"])

    return cnn, (images, weights), torch_cnn
