"""max_pool2d, avg_pool2d and inference batch_norm: the oracle against float64 NumPy
written here, Strict compiled code against the oracle bit for bit, and PyTorch where installed."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.errors import ShapeError

RNG = np.random.default_rng(3)


def windows64(x: np.ndarray, k, s, p, d, fill: float) -> np.ndarray:
    """(N, C, OH, OW, KH, KW) windows of x in float64, padded with ``fill``."""
    (kh, kw), (sy, sx), (py, px), (dy, dx) = k, s, p, d
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (py, py), (px, px)), constant_values=fill)
    n, c, h, w = padded.shape
    oh, ow = (h - dy * (kh - 1) - 1) // sy + 1, (w - dx * (kw - 1) - 1) // sx + 1
    out = np.empty((n, c, oh, ow, kh, kw))
    for ky in range(kh):
        for kx in range(kw):
            out[..., ky, kx] = padded[:, :, ky * dy: ky * dy + sy * (oh - 1) + 1: sy,
                                      kx * dx: kx * dx + sx * (ow - 1) + 1: sx]
    return out


CASES = [  # kernel, stride, padding, dilation
    ((2, 2), (2, 2), (0, 0), (1, 1)),
    ((3, 3), (2, 2), (1, 1), (1, 1)),
    ((3, 2), (1, 2), (1, 0), (1, 1)),
    ((2, 2), (1, 1), (1, 1), (2, 2)),
]


def check(plan, arrays, want, rtol=1e-6):
    got = weft.oracle.run(plan, *arrays)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)
    compiled = weft.compile(plan, contract="strict", threads=1)
    assert compiled(*arrays).tobytes() == got.tobytes()
    return got


@pytest.mark.parametrize("k, s, p, d", CASES)
def test_max_pool2d(k, s, p, d):
    x = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
    plan = weft.trace(lambda x: nn.max_pool2d(x, k, s, p, d), weft.spec(x.shape))
    assert len(plan.members) == 1
    check(plan, [x], windows64(x, k, s, p, d, -np.inf).max(axis=(4, 5)))


@pytest.mark.parametrize("k, s, p, d", [case for case in CASES if case[3] == (1, 1)])
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(k, s, p, d, count_include_pad):
    x = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
    plan = weft.trace(lambda x: nn.avg_pool2d(x, k, s, p, count_include_pad=count_include_pad), weft.spec(x.shape))
    sums = windows64(x, k, s, p, d, 0.0).sum(axis=(4, 5))
    if count_include_pad:
        want = sums / (k[0] * k[1])
    else:
        counts = windows64(np.ones_like(x), k, s, p, d, 0.0).sum(axis=(4, 5))
        want = sums / counts
    check(plan, [x], want, rtol=1e-5)


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_avg_pool2d_tap_count_at_a_corner_past_the_vector_tail(contract):
    """Found by the fuzzer (seed 2026, program 4723): 3x3, padding 1, width 40 (two vectors
    and a scalar tail), ``count_include_pad=False``: the count at the top-right corner came out
    5 instead of 4 in the full plan. GCC 12.2 at -O3 miscompiled the vectorised scalar tail
    after loop unswitching; Weft now compiles with -fno-unswitch-loops (weft.codegen.driver)."""
    x = np.full((1, 1, 20, 40), 7.0, np.float32)
    plan = weft.trace(lambda x: nn.avg_pool2d(x, (3, 3), 1, 1, count_include_pad=False), weft.spec(x.shape))
    got = weft.compile(plan, contract=contract, threads=1)(x)
    np.testing.assert_array_equal(got, np.full(x.shape, 7.0, np.float32))


@pytest.mark.parametrize("shape", [(4, 6), (2, 6, 5, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_inference(shape, affine):
    channels = shape[1]
    x = RNG.standard_normal(shape).astype(np.float32)
    mean = RNG.standard_normal(channels).astype(np.float32)
    var = (0.5 + RNG.random(channels)).astype(np.float32)
    weight = RNG.standard_normal(channels).astype(np.float32)
    bias = RNG.standard_normal(channels).astype(np.float32)
    per = (channels,) + (1,) * (len(shape) - 2)
    want = (x.astype(np.float64) - mean.reshape(per)) / np.sqrt(var.astype(np.float64).reshape(per) + 1e-3)
    if affine:
        want = want * weight.reshape(per) + bias.reshape(per)
        plan = weft.trace(lambda x, m, v, w, b: nn.batch_norm(x, m, v, w, b, eps=1e-3),
                          *(weft.spec(a.shape) for a in (x, mean, var, weight, bias)))
        check(plan, [x, mean, var, weight, bias], want, rtol=1e-5)
    else:
        plan = weft.trace(lambda x, m, v: nn.batch_norm(x, m, v, eps=1e-3), *(weft.spec(a.shape) for a in (x, mean, var)))
        check(plan, [x, mean, var], want, rtol=1e-5)


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = RNG.standard_normal((2, 4, 11, 10)).astype(np.float32)
    mean, var = RNG.standard_normal(4).astype(np.float32), (1 + RNG.random(4)).astype(np.float32)

    def model(x, mean, var):
        h = nn.max_pool2d(x, 3, 2, 1)
        return nn.avg_pool2d(nn.batch_norm(h, mean, var), 2, count_include_pad=False)

    plan = weft.trace(model, weft.spec(x.shape), weft.spec((4,)), weft.spec((4,)))
    got = weft.compile(plan, contract="inference")(x, mean, var)
    tx, tm, tv = (torch.from_numpy(a) for a in (x, mean, var))
    want = F.avg_pool2d(F.batch_norm(F.max_pool2d(tx, 3, 2, 1), tm, tv, training=False), 2, count_include_pad=False)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_pool_errors_name_the_fix():
    with pytest.raises(ShapeError, match="rank 3.*unsqueeze"):
        weft.trace(lambda x: nn.max_pool2d(x, 2), weft.spec((3, 8, 8)))
    with pytest.raises(ShapeError, match="at most half the kernel"):
        weft.trace(lambda x: nn.avg_pool2d(x, 2, padding=2), weft.spec((1, 3, 8, 8)))
    with pytest.raises(ShapeError, match="ceil_mode"):
        weft.trace(lambda x: nn.max_pool2d(x, 2, ceil_mode=True), weft.spec((1, 3, 8, 8)))
    with pytest.raises(ShapeError, match=r"running_var has shape \(3,\), expected \(4,\)"):
        weft.trace(nn.batch_norm, weft.spec((1, 4, 2, 2)), weft.spec((4,)), weft.spec((3,)))
