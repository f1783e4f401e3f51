"""An Inference-only speed-up of the one-pass lowering, checked for its shape and against
a float64 NumPy attention: a streamed sum fold's constant factor (the scores' ``scale``)
is applied in the pass, once per score, instead of at every point of the fold; on the
packed register tile, once per packed query element instead."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.fuzz.reference64 import attention64
from weft.ir import Const, walk_expr
from weft.oracle.interpreter import run
from weft.testing import assert_inference_close, assert_strict_equal


def _passes(compiled):
    return [n for f in compiled.lowered.functions for n in f.nests if type(n).__name__ == "OnlinePass"]


@pytest.mark.parametrize("head_dim", [16, 32, 48])  # one, two, three vectors of outputs
def test_scale_is_factored_out_of_the_streamed_scores(fused_config, head_dim):
    # 12 keys, fewer than the lanes: the scores run as their own member nest, not the register tile
    rng = np.random.default_rng(head_dim)
    q = rng.standard_normal((2, 150, head_dim)).astype(np.float32)
    k, v = (rng.standard_normal((2, 12, head_dim)).astype(np.float32) for _ in range(2))
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c), nn.spec(q.shape), nn.spec(k.shape), nn.spec(v.shape))
    compiled = weft.compile(plan, config=fused_config("inference"))
    (online,) = _passes(compiled)
    assert online.scores is None
    (scores,) = online.streamed_nests
    assert not any(isinstance(node, Const) for node in walk_expr(scores.kernel.body))  # q·k only
    assert any(isinstance(node, Const) for node in walk_expr(online.online.reference_term))  # s * scale
    expected = attention64(q, k, v, scale=1.0 / np.sqrt(head_dim))
    assert_inference_close(compiled(q, k, v), expected)


@pytest.mark.parametrize("head_dim", [16, 32, 48])
def test_on_the_register_tile_the_scale_goes_into_the_packed_queries(fused_config, head_dim):
    # the packed tile multiplies each packed q element by the scale once per tile (a score is
    # then its FMA chain alone), so the pass reads the scores as they are: no s * scale per score
    rng = np.random.default_rng(head_dim)
    q, k, v = (rng.standard_normal((2, 150, head_dim)).astype(np.float32) for _ in range(3))
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c), *[nn.spec((2, 150, head_dim))] * 3)
    compiled = weft.compile(plan, config=fused_config("inference"))
    (online,) = _passes(compiled)
    assert online.scores is not None and online.scores.scale == pytest.approx(1.0 / np.sqrt(head_dim))
    assert not any(isinstance(node, Const) for node in walk_expr(online.online.reference_term))  # s alone
    expected = attention64(q, k, v, scale=1.0 / np.sqrt(head_dim))
    assert_inference_close(compiled(q, k, v), expected)


def test_strict_keeps_the_scale_inside_the_fold(fused_config):
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 40, 16)).astype(np.float32) for _ in range(3))
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c), *[nn.spec((1, 40, 16))] * 3)
    compiled = weft.compile(plan, config=fused_config("strict"))
    assert not _passes(compiled)  # the one pass (and its reassociations) is Inference only
    assert_strict_equal(compiled(q, k, v), run(plan, q, k, v))  # bit-identical
