"""Tile scratch layout: a private member whose producer and readers read no global buffer
along its inner axis keeps the tile's rows innermost (attention's scores, exps and
probabilities: the row folds then run lane-wise, one row per lane); softmax's exps, which
read ``x`` along its rows, keep row-major scratch. Strict stays bit-identical either way."""

from __future__ import annotations

import numpy as np

import weft
import weft.nn as nn
from weft.fuzz.reference64 import attention64
from weft.oracle.interpreter import run
from weft.testing import assert_strict_equal


def _scratch_strides(compiled) -> dict[str, tuple[int, ...]]:
    found = {}
    for function in compiled.lowered.functions:
        for nest in function.nests:
            for view in getattr(nest, "views", ()):
                if view.buffer in function.private:
                    found[view.buffer] = view.strides
    return found


def test_attention_scratch_keeps_rows_innermost_and_strict_is_exact(fused_config):
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((2, 90, 16)).astype(np.float32) for _ in range(3))
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c), *[nn.spec((2, 90, 16))] * 3)
    compiled = weft.compile(plan, config=fused_config("strict"))
    strides = _scratch_strides(compiled)
    two_d = {name: s for name, s in strides.items() if len(plan.buffer(name).shape) == 3}
    assert two_d, strides
    for name, s in two_d.items():  # (h, i, j): rows i are the unit stride
        assert s[1] == 1 and s[2] > 1, (name, s)
    assert_strict_equal(compiled(q, k, v), run(plan, q, k, v))
    expected = attention64(q, k, v)
    np.testing.assert_allclose(compiled(q, k, v), expected, rtol=1e-4, atol=1e-5)


def test_softmax_scratch_stays_row_major(fused_config):
    plan = nn.trace(lambda x: nn.softmax(x), nn.spec((40, 300)))
    compiled = weft.compile(plan, config=fused_config("strict"))
    for name, s in _scratch_strides(compiled).items():
        if len(s) == 2:
            assert s[1] == 1, (name, s)
    x = (3 * np.random.default_rng(1).standard_normal((40, 300))).astype(np.float32)
    assert_strict_equal(compiled(x), run(plan, x))
