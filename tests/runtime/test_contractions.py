"""Contractions through every nest variant: the packed microkernel, transposed tiles, BLAS bodies."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.lower import GemmCall, MemberNest
from weft.lower.contraction import ContractionNest
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal


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
    kinds = {name: n.transpose_fold for name, n in nests.items() if isinstance(n, MemberNest)}
    assert any(kinds.values()), kinds
    assert sum(isinstance(n, ContractionNest) for n in nests.values()) == 3, nests
    got, want = compiled(*arrays), run(plan, *arrays)
    assert_strict_equal(got, want)


@pytest.mark.parametrize("blas", [True, False])
def test_inference_matches_float64(traced, make_config, blas):
    plan, arrays = traced
    compiled = weft.compile(plan, config=make_config("inference"), blas=blas)
    assert compiled.provenance["blas"] is blas
    assert any(isinstance(n, GemmCall) for n in _nests(compiled).values()) is blas
    a, b, bt, q, k, x = (arr.astype(np.float64) for arr in arrays)
    want = (a @ b, a @ bt.T, q @ k.transpose(0, 2, 1), x.sum((1, 2)), x.transpose(2, 1, 0).max(2))
    for got, expected in zip(compiled(*arrays), want, strict=True):
        assert_inference_close(got, expected)


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_conv2d_halo_across_lanes(make_config, contract, monkeypatch):
    """Rows of 37 and 20 points: vectors that sit inside the image, straddle its edge, or
    are the scalar tail; padding 1 and 2 (with dilation). The direct conv2d member (the
    microkernel reading the padded window), as depthwise convolutions run."""
    monkeypatch.setattr("weft.nn.conv.PATCHES_MIN_GROUP_CHANNELS", 10**9)
    x, w = _f32((2, 3, 20, 37), 11), _f32((5, 3, 3, 3), 12)
    plan = weft.trace(lambda x, w: (nn.conv2d(x, w, None, 1, 1), nn.conv2d(x, w, None, 1, 2, 2)),
                      weft.spec(x.shape), weft.spec(w.shape))
    compiled = weft.compile(plan, config=make_config(contract))
    assert all(isinstance(f.nests[0], ContractionNest) for f in compiled.lowered.functions)
    got = compiled(x, w)
    if contract == "strict":
        assert_strict_equal(got, run(plan, x, w))
        return
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for g, (pad, dil) in zip(got, [(1, 1), (2, 2)], strict=True):
        padded = np.pad(x64, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        want = np.zeros((2, 5, 20, 37))
        for ky in range(3):
            for kx in range(3):
                window = padded[:, :, ky * dil: ky * dil + 20, kx * dil: kx * dil + 37]
                want += np.einsum("nchw,oc->nohw", window, w64[:, :, ky, kx])
        assert_inference_close(g, want)


def test_blas_batches_with_a_shared_operand(make_config):
    """(B, M, K) @ (K, N) and (M, K) @ (B, K, N): one operand has batch stride 0."""
    a, w = _f32((3, 29, 18), 20), _f32((18, 21), 21)
    a2, w2 = _f32((29, 18), 22), _f32((3, 18, 21), 23)
    plan = weft.trace(lambda a, w, a2, w2: (nn.matmul(a, w), nn.matmul(a2, w2)),
                      *[weft.spec(x.shape) for x in (a, w, a2, w2)])
    compiled = weft.compile(plan, config=make_config("inference"), blas=True)
    assert all(isinstance(n, GemmCall) for n in _nests(compiled).values())
    got = compiled(a, w, a2, w2)
    for g, want in zip(got, (a.astype(np.float64) @ w, a2.astype(np.float64) @ w2), strict=True):
        assert_inference_close(g, want)


@pytest.mark.parametrize("lanes", [None, 8])
def test_chunked_folds_down_matrix_rows_are_exact(make_config, lanes):
    """One-row x @ W, column sums and maxima over 600 rows of 300: the fold runs in
    chunks with the partial results waiting in the output (Strict bytes unchanged)."""
    x, w = _f32((1, 600), 30), _f32((600, 300), 31)
    w[5, 7], w[9, 8] = np.nan, np.inf
    plan = weft.trace(lambda x, w: (nn.matmul(x, w), nn.sum(w, 0), nn.max(w, 0), nn.min(w, 0)),
                      weft.spec(x.shape), weft.spec(w.shape))
    compiled = weft.compile(plan, config=make_config("strict"), lanes=lanes)
    assert all(n.fold_chunk for n in _nests(compiled).values())
    assert_strict_equal(compiled(x, w), run(plan, x, w))


@pytest.mark.parametrize("m,k,n", [(27, 37, 576), (31, 19, 520), (26, 23, 200)])
def test_packed_register_block_width_is_exact(make_config, m, k, n):
    """The microkernel's 6 x 4-vector register tile (and its row and column tails) keeps each
    output's ascending k sum: byte-identical to the oracle, close to float64."""
    plan = weft.trace(nn.matmul, weft.spec((m, k)), weft.spec((k, n)), name=f"mm{m}x{k}x{n}")
    a, b = _f32((m, k), 1), _f32((k, n), 2)
    compiled = weft.compile(plan, config=make_config("strict"))
    nest = next(iter(_nests(compiled).values()))
    assert isinstance(nest, ContractionNest) and nest.blocking.mr == 6 and nest.blocking.nr == 64
    got, want = compiled(a, b), run(plan, a, b)
    got, want = (x[0] if isinstance(x, (tuple, list)) else x for x in (got, want))
    assert_strict_equal(got, want)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cols,peeled", [(64, True), (40, False)])
def test_row_sum_alignment_peel_is_exact(make_config, cols, peeled):
    """Strict row sums step to a 64-byte line before their transposed tiles (rows whose
    stride is a multiple of 64 bytes): at every start offset the sums stay byte-identical
    to the oracle's ascending fold."""
    rows = 35
    plan = weft.trace(lambda x: nn.sum(x, (1,)), weft.spec((rows, cols)), name=f"rowsum{cols}")
    compiled = weft.compile(plan, config=make_config("strict"))
    nest = next(iter(_nests(compiled).values()))
    assert isinstance(nest, MemberNest) and nest.transpose_fold
    assert ("_peel" in compiled.source_path.read_text()) is peeled
    storage = _f32(rows * cols + 16, 7)
    for offset in range(16):
        x = storage[offset:offset + rows * cols].reshape(rows, cols)
        got, want = compiled(x), run(plan, x)
        got, want = (v[0] if isinstance(v, (tuple, list)) else v for v in (got, want))
        assert_strict_equal(got, want, f"offset {offset}")
        np.testing.assert_allclose(got, x.astype(np.float64).sum(1), rtol=1e-4, atol=1e-4)
