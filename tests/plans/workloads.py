"""Workload-shaped objects around hand-built plans (the interface of ``weft.workloads``:
name, defaults, sequence_param, plan, inputs, torch_fn), for bench and diagnose tests; and
the check that a compiled workload agrees with the oracle."""

from __future__ import annotations

import numpy as np

from plans.handmade import attention, layer_norm_gain


class HandAttention:
    """The six-member attention of ``plans.handmade.attention`` over (tokens, dim) q, k, v."""

    name = "attention"
    description = "hand-built six-member attention"
    sequence_param = "tokens"

    def __init__(self, tokens: int = 64, dim: int = 8) -> None:
        self.defaults = {"tokens": tokens, "dim": dim}
        self.small = {"tokens": max(1, tokens // 2), "dim": dim}

    def plan(self, tokens, dim):
        return attention(tokens, dim, dim)

    def inputs(self, seed=0, tokens=None, dim=None):
        tokens, dim = tokens or self.defaults["tokens"], dim or self.defaults["dim"]
        rng = np.random.default_rng(seed)
        return tuple(rng.standard_normal((tokens, dim), dtype=np.float32) for _ in range(3))

    def torch_fn(self, tokens, dim):
        try:
            import torch
        except ImportError:
            return None
        return lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]


class HandLayerNorm:
    """``plans.handmade.layer_norm_gain`` over a (rows, width) input and a (width,) gain."""

    name = "layernorm"
    sequence_param = "rows"

    def __init__(self, rows: int = 64, width: int = 32) -> None:
        self.defaults = {"rows": rows, "width": width}

    def plan(self, rows, width):
        return layer_norm_gain(rows, width)

    def inputs(self, seed=0, rows=None, width=None):
        rows, width = rows or self.defaults["rows"], width or self.defaults["width"]
        rng = np.random.default_rng(seed)
        return (rng.standard_normal((rows, width), dtype=np.float32), rng.standard_normal(width, dtype=np.float32))


def assert_agrees_with_oracle(compiled, plan, inputs, contract: str) -> None:
    """Every output of ``compiled`` on ``inputs`` against ``weft.oracle.run``: equal (NaN where
    NaN) under Strict, within rtol 1e-3 / atol 1e-4 under Inference."""
    from weft.oracle import run

    got, want = compiled(*inputs), run(plan, *inputs)
    for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), strict=True):
        if contract == "strict":
            assert np.array_equal(a, b, equal_nan=True)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
