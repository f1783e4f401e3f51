"""A contraction whose elementwise tail reads it through a reshape view keeps the microkernel:
the tail runs as its epilogue (weft.lower.contraction_epilogue). The convolution is the case
that matters: its patch contraction writes (N, G, O/G, OH*OW) and the bias add reads it as
(N, O, OH, OW), so under fusion the bias is added on the register tile before the store, one
function, no pass over the output of its own. Strict stays byte-identical to the oracle (the
sum complete, then + bias, once per element); Inference within the contract."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.fuzz.reference64 import outputs64
from weft.ir import AxisIndex, IndexConst
from weft.ir.indexing import simplify_index
from weft.lower.contraction import ContractionNest
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal


def _f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CONV_CASES = [  # input, weight, keywords: odd sizes, groups, stride 2, "same", unbatched
    ((2, 6, 11, 13), (10, 3, 3, 3), dict(padding="same", groups=2)),
    ((1, 5, 23, 19), (12, 5, 3, 3), dict(stride=2, padding=1)),
    ((7, 9, 11), (6, 7, 3, 3), dict(padding=1)),  # unbatched
    ((9, 8, 13), (12, 3, 3, 2), dict(groups=3, padding="same")),  # unbatched, grouped, even kernel
    ((2, 30, 13, 21), (20, 30, 3, 3), dict(padding=1)),  # K = 270: the sum spans two fold blocks
    ((1, 4, 9, 30), (300, 4, 3, 3), dict(stride=(2, 1), padding=(1, 0))),  # 300 rows: two row blocks
]


def _contraction_nests(compiled):
    return [nest for function in compiled.lowered.functions for nest in function.nests
            if isinstance(nest, ContractionNest)]


@pytest.mark.parametrize("shapes", CONV_CASES, ids=[f"{c[0]}-{c[2]}" for c in CONV_CASES])
@pytest.mark.parametrize("fusion", ["off", "greedy", "priced"])
def test_conv_bias_strict_equal_and_inference_close(make_config, shapes, fusion):
    x_shape, w_shape, kwargs = shapes
    plan = weft.trace(lambda x, w, b: nn.conv2d(x, w, b, **kwargs), weft.spec(x_shape), weft.spec(w_shape),
                      weft.spec((w_shape[0],)), name="conv_bias")
    arrays = (_f32(x_shape, 1), _f32(w_shape, 2), _f32((w_shape[0],), 3))
    strict = weft.compile(plan, config=make_config("strict", threads=1, fusion=fusion))
    assert_strict_equal(strict(*arrays), run(plan, *arrays))
    inference = weft.compile(plan, config=make_config("inference", threads=1, fusion=fusion))
    assert_inference_close(inference(*arrays), outputs64(plan, *arrays)[0])
    # one function: the patch contraction with the bias add as its epilogue. Not yet grouped:
    # the add reads the (N, G, O/G, P) contraction as (o // Og, o % Og, ...), so no dimension
    # is indexed by exactly one of its axes and the region has no common tile axis to grow by
    if fusion == "greedy" and kwargs.get("groups", 1) == 1:
        for compiled in (strict, inference):
            assert len(compiled.lowered.functions) == 1, compiled.describe()
            (nest,) = _contraction_nests(compiled)
            assert nest.epilogue is not None and nest.y_split is not None, compiled.describe()


def test_conv_bias_relu_epilogue_strict(make_config):
    """A longer tail through the reshape (bias, then ReLU, then a residual of the output's
    shape): all of it rides on the tile, still byte-identical."""
    def fn(x, w, b, r):
        return nn.relu(nn.conv2d(x, w, b, stride=2, padding=1)) + r

    shapes = [(1, 6, 15, 17), (8, 6, 3, 3), (8,), (1, 8, 8, 9)]
    plan = weft.trace(fn, *(weft.spec(s) for s in shapes), name="conv_bias_relu")
    arrays = [_f32(s, n) for n, s in enumerate(shapes)]
    compiled = weft.compile(plan, config=make_config("strict", threads=1, fusion="greedy"))
    (nest,) = _contraction_nests(compiled)
    assert nest.epilogue is not None and len(compiled.lowered.functions) == 1, compiled.describe()
    assert_strict_equal(compiled(*arrays), run(plan, *arrays))


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_matmul_tail_through_a_reshape(make_config, contract):
    """Not only convolutions: a product reshaped, then a bias of the reshaped shape."""
    def fn(x, w, b):
        return nn.reshape(x @ w, (6, 4, 5)) + b

    shapes = [(6, 33), (33, 20), (4, 5)]
    plan = weft.trace(fn, *(weft.spec(s) for s in shapes), name="mm_reshape_bias")
    arrays = [_f32(s, n) for n, s in enumerate(shapes)]
    compiled = weft.compile(plan, config=make_config(contract, threads=1, fusion="greedy"))
    (nest,) = _contraction_nests(compiled)
    assert nest.epilogue is not None, compiled.describe()
    if contract == "strict":
        assert_strict_equal(compiled(*arrays), run(plan, *arrays))
    else:
        assert_inference_close(compiled(*arrays), outputs64(plan, *arrays)[0])


def test_a_tail_reading_another_position_is_no_epilogue(make_config):
    """A tail that reads the product transposed reads other points than the one on the tile:
    no epilogue (the plain fused form or the members unfused), and the bytes still match."""
    def fn(x, w, b):
        return nn.reshape(nn.transpose(x @ w, 0, 1), (4, 5, 6)) + b

    shapes = [(6, 33), (33, 20), (6,)]
    plan = weft.trace(fn, *(weft.spec(s) for s in shapes), name="mm_transposed_tail")
    arrays = [_f32(s, n) for n, s in enumerate(shapes)]
    compiled = weft.compile(plan, config=make_config("strict", threads=1, fusion="greedy"))
    assert all(nest.epilogue is None for nest in _contraction_nests(compiled)), compiled.describe()
    assert_strict_equal(compiled(*arrays), run(plan, *arrays))


def test_quotient_and_remainder_recombine():
    """``28*(p // 28) + p % 28`` is ``p`` (a reshape read back through its inverse)."""
    p, o = AxisIndex("p"), AxisIndex("o")
    extents = {"p": 784, "o": 128}
    assert simplify_index((p // 28) * 28 + p % 28, extents) == p
    assert simplify_index(((p // 28) * 28 + p % 28) * 3 + o, extents) == simplify_index(p * 3 + o, extents)
    assert simplify_index((p // 28) * 56 + (p % 28) * 2 + 1, extents) == simplify_index(p * 2 + 1, extents)
    assert simplify_index((p // 28) * 27 + p % 28, extents) != p  # not the inverse: kept
    assert simplify_index(p % 28 - p % 28, extents) == IndexConst(0)
