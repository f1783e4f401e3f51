"""Contractions through every nest variant: packed panels, transposed tiles, BLAS bodies."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.lower import GemmCall, MemberNest
from weft.oracle import run


def _f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def contractions(a, b, bt, q, k, x):
    """a @ b (packed panel), a @ bt^T (strided B), batched q @ k^T, a two-axis fold."""
    return (
        nn.matmul(a, b),
        nn.matmul(a, nn.transpose(bt, 0, 1)),
        nn.bmm(q, nn.transpose(k, 1, 2)),
        nn.sum(x, (1, 2)),
        nn.max(nn.transpose(x, 0, 2), 2),
    )


SHAPES = [(50, 37), (37, 45), (45, 37), (3, 29, 18), (3, 21, 18), (33, 5, 19)]


@pytest.fixture(scope="module")
def traced():
    arrays = [_f32(shape, n) for n, shape in enumerate(SHAPES)]
    return weft.trace(contractions, *[weft.spec(s) for s in SHAPES], name="contractions"), arrays


def _nests(compiled):
    return {f.members[0]: f.nests[0] for f in compiled.lowered.functions}


def test_strict_nests_are_bit_identical(traced, make_config):
    plan, arrays = traced
    compiled = weft.compile(plan, config=make_config("strict"))
    nests = _nests(compiled)
    kinds = {name: (n.packed != (), n.transpose_fold) for name, n in nests.items() if isinstance(n, MemberNest)}
    assert any(packed for packed, _ in kinds.values()), kinds
    assert any(transposed for _, transposed in kinds.values()), kinds
    got, want = compiled(*arrays), run(plan, *arrays)
    for name, g, w in zip(plan.outputs, got, want, strict=False):
        assert g.tobytes() == w.tobytes(), name


@pytest.mark.parametrize("blas", [True, False])
def test_inference_matches_float64(traced, make_config, blas):
    plan, arrays = traced
    compiled = weft.compile(plan, config=make_config("inference"), blas=blas)
    assert compiled.provenance["blas"] is blas
    assert any(isinstance(n, GemmCall) for n in _nests(compiled).values()) is blas
    a, b, bt, q, k, x = (arr.astype(np.float64) for arr in arrays)
    want = (a @ b, a @ bt.T, q @ k.transpose(0, 2, 1), x.sum((1, 2)), x.transpose(2, 1, 0).max(2))
    for got, expected in zip(compiled(*arrays), want, strict=False):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
