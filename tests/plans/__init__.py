"""Plans for tests, in one place: built member by member (``build``, ``handmade``),
traced whole models (``models``) and random plans (``random_plans``: a seeded generator
of fold chains for region tests, a hypothesis strategy of views and contractions for
compiled-code tests).

``import plans`` gives the builder helpers and the hand-built plans by name."""

from plans.build import F32, Builder, add, ax, buffer, const, div, exp, load, mul, sub
from plans.handmade import (
    attention,
    cofolds,
    cross_entropy,
    ffn,
    late_input,
    layer_norm,
    layer_norm_gain,
    linear_bias_gelu,
    matmul,
    matmul_softmax,
    scaled_sum,
    softmax,
)

__all__ = [
    "F32", "Builder", "add", "attention", "ax", "buffer", "cofolds", "const", "cross_entropy", "div", "exp", "ffn",
    "late_input", "layer_norm", "layer_norm_gain", "linear_bias_gelu", "load", "matmul", "matmul_softmax", "mul",
    "scaled_sum", "softmax", "sub",
]
