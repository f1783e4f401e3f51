"""PyTorch's semantics adopted by weft.nn (docs/unsupported.md), each against PyTorch itself
(or float64 NumPy where PyTorch is not the reference), and the compiled paths against the
oracle: Strict byte-identical, Inference against float64, fusion off and greedy."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.errors import DTypeError
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal

torch = pytest.importorskip("torch", reason="these tests compare weft.nn with PyTorch")
F = torch.nn.functional


def _traced(fn, *arrays):
    plan = weft.trace(fn, *(weft.spec(a.shape, a.dtype) for a in arrays))
    return plan, run(plan, *arrays)


INT = np.array([[1, -2, 3], [2**30, 2**30, 2**30]], np.int32)


@pytest.mark.parametrize("expression", [
    lambda x: x + 2.5, lambda x: x + 2, lambda x: x * 0.5, lambda x: x - 1, lambda x: x < 1.5,
    lambda x: 3.0 - x, lambda x: (x > 0) + 1, lambda x: (x > 0) * 1.5,
])
def test_python_numbers_promote_as_in_pytorch(expression):
    plan, got = _traced(expression, INT)
    want = expression(torch.from_numpy(INT)).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_tensor_dtypes_promote_as_in_pytorch():
    a, b = INT[:1], np.array([[1, 2, 3]], np.int64)
    f, flag = np.array([[0.5, -1.0, 2.0]], np.float32), np.array([[True, False, True]])
    for fn in (nn.add, nn.mul, nn.maximum, nn.less):
        for x, y in ((a, b), (a, f), (flag, a), (flag, f), (b, f)):
            _, got = _traced(fn, x, y)
            want = {nn.add: torch.add, nn.mul: torch.mul, nn.maximum: torch.maximum, nn.less: torch.lt}[fn](
                torch.from_numpy(x), torch.from_numpy(y)).numpy()
            assert got.dtype == want.dtype and np.array_equal(got, want), (fn, x.dtype, y.dtype)
    _, got = _traced(lambda c, x, y: nn.where(c, x, y), flag, a, f)
    assert got.dtype == np.float32 and np.array_equal(got, torch.where(*map(torch.from_numpy, (flag, a, f))).numpy())
    # a 0-d tensor of a higher category decides; of the same category it does not
    _, got = _traced(nn.add, a, np.array(2, np.int64))
    assert got.dtype == np.int32
    _, got = _traced(nn.add, a, np.array(2.5, np.float32))
    assert got.dtype == np.float32


def test_unary_float_ops_and_logical_ops_take_integers():
    _, got = _traced(lambda x: (nn.exp(nn.cast(x, "int32") * 0), nn.logical_not(x), nn.logical_and(x, 2.0)), INT)
    t = torch.from_numpy(INT)
    assert got[0].dtype == np.float32 and np.array_equal(got[0], torch.exp(t * 0).numpy())
    assert np.array_equal(got[1], torch.logical_not(t).numpy())
    assert np.array_equal(got[2], torch.logical_and(t, torch.tensor(2.0)).numpy())


def test_integer_sum_accumulates_in_int64():
    plan, got = _traced(lambda x: (nn.sum(x), nn.sum(x, 1), nn.sum(x > 0, 0)), INT)
    t = torch.from_numpy(INT)
    for got_item, want in zip(got, (t.sum(), t.sum(1), (t > 0).sum(0)), strict=True):
        assert got_item.dtype == np.int64 and np.array_equal(got_item, want.numpy())
    assert got[1][1] == 3 * 2**30  # an int32 accumulator wraps here
    assert_strict_equal(weft.compile(plan, "strict", threads=1)(INT), got)


def test_sum_over_no_dims_reduces_everything_and_zero_d_dims():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _, got = _traced(lambda x: nn.sum(x, ()), x)
    assert got.shape == () and got == torch.from_numpy(x).sum(dim=()).item()
    s = np.array(3.0, np.float32)
    _, got = _traced(lambda s: (nn.sum(s, 0), nn.mean(s, -1), nn.max(s, 0), nn.softmax(s, 0), nn.log_softmax(s, -1),
                                nn.squeeze(s, 0), nn.flatten(s)), s)
    t = torch.from_numpy(s)
    wants = (t.sum(0), t.mean(-1), t.amax(0), torch.softmax(t, 0), torch.log_softmax(t, -1), t.squeeze(0), t.flatten())
    for got_item, want in zip(got, wants, strict=True):
        assert got_item.shape == tuple(want.shape) and np.array_equal(got_item, want.numpy())


def test_squeeze_of_a_dim_that_is_not_1_is_a_no_op():
    x = np.ones((2, 1, 3), np.float32)
    _, got = _traced(lambda x: (nn.squeeze(x, 0), nn.squeeze(x, (0, 1))), x)
    assert got[0].shape == torch.from_numpy(x).squeeze(0).shape
    assert got[1].shape == torch.from_numpy(x).squeeze((0, 1)).shape == (2, 3)


def _attention_inputs(seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, 5, 8), np.float32)  # 3-D q against 4-D k/v: batch dims broadcast
    k = rng.standard_normal((1, 2, 7, 8), np.float32)
    v = rng.standard_normal((1, 2, 7, 4), np.float32)
    keep = rng.random((5, 7)) < 0.6
    keep[1] = False  # a fully masked row
    keep[3] = False
    keep[0, 0] = True
    return q, k, v, keep


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_fully_masked_attention_rows_give_zero_as_pytorch(kind):
    q, k, v, keep = _attention_inputs()
    mask = keep if kind == "bool" else np.where(keep, 0.0, -np.inf).astype(np.float32)
    plan, got = _traced(lambda q, k, v, m: nn.attention(q, k, v, mask=m), q, k, v, mask)
    want = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), attn_mask=torch.from_numpy(mask)).numpy()
    assert got.shape == want.shape == (1, 2, 5, 4)
    assert np.array_equal(got[..., [1, 3], :], np.zeros_like(got[..., [1, 3], :]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


def _attention64(q, k, v, keep):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    scores = np.where(keep, q[None] @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)
    top = scores.max(-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = weights.sum(-1, keepdims=True)
    return np.where(total > 0, (weights / np.where(total > 0, total, 1.0)) @ v, 0.0)


@pytest.mark.parametrize("fusion", ["off", "greedy"])
@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_fully_masked_attention_rows_compiled(contract, fusion):
    q, k, v, keep = _attention_inputs(1)
    plan, oracle = _traced(lambda q, k, v, m: nn.attention(q, k, v, mask=m), q, k, v, keep)
    got = weft.compile(plan, contract, threads=1, fusion=fusion)(q, k, v, keep)
    if contract == "strict":
        assert_strict_equal(got, oracle)
    else:
        assert_inference_close(got, _attention64(q, k, v, keep))
    assert np.array_equal(got[..., [1, 3], :], np.zeros_like(got[..., [1, 3], :]))


def test_layer_norm_of_huge_values_normalises():
    x = np.array([[1e20, -1e20, 3e20, 2e19], [1.0, 2.0, 3.0, 4.0], [4e28, 0.0, -4e28, 1e28]], np.float32)
    w, b = np.full(4, 2.0, np.float32), np.full(4, 0.5, np.float32)
    plan, got = _traced(lambda x, w, b: nn.layer_norm(x, 4, w, b), x, w, b)
    x64 = x.astype(np.float64)
    centered = x64 - x64.mean(1, keepdims=True)
    want = centered / np.sqrt((centered**2).mean(1, keepdims=True) + 1e-5) * 2.0 + 0.5
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    for fusion in ("off", "greedy"):
        assert_strict_equal(weft.compile(plan, "strict", threads=1, fusion=fusion)(x, w, b), got)
    # ordinary rows agree with PyTorch
    small = x[1:2]
    np.testing.assert_allclose(got[1:2], F.layer_norm(torch.from_numpy(small), (4,), torch.from_numpy(w),
                                                      torch.from_numpy(b)).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("eps", [1e-6, 1e-5, 1e-3])
def test_rms_norm_of_huge_values_normalises(eps):
    """Fuzzer seed 7 program 58: the mean square of |x| ~ 1e30 overflowed float32 and the
    output was 0 (as PyTorch's is beyond ~1.8e19); float64 gives x / rms. Rows with rms up
    to 2**(64 + k) (k = rms_norm_shift(eps): 38 for eps 1e-6) normalise, ordinary rows keep
    PyTorch's bytes-level agreement, tiny rows keep eps's share."""
    x = np.array([[1e30, -1e30, 3e30, 2e29], [1.0, 2.0, 3.0, 4.0], [4e28, 0.0, -4e28, 1e28],
                  [1e-30, -2e-30, 3e-30, 0.0], [1e20, 1e19, -1e20, 5e19]], np.float32)
    w = np.array([2.0, -1.0, 0.5, 1.0], np.float32)
    plan, got = _traced(lambda x, w: nn.rms_norm(x, w, eps=eps), x, w)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64**2).mean(1, keepdims=True) + eps) * w
    assert_inference_close(got, want)
    for contract, fusion in (("strict", "off"), ("strict", "greedy"), ("inference", "off"), ("inference", "greedy")):
        compiled = weft.compile(plan, contract, threads=1, fusion=fusion)(x, w)
        if contract == "strict":
            assert_strict_equal(compiled, got)
        else:
            assert_inference_close(compiled, want)
    ordinary = torch.from_numpy(x[1:2])
    np.testing.assert_allclose(got[1:2], F.rms_norm(ordinary, (4,), torch.from_numpy(w), eps).numpy(),
                               rtol=1e-6, atol=1e-6)


def test_rms_norm_without_eps_keeps_pytorchs_range():
    """eps = 0: no shift (k = 0), so tiny rows normalise exactly as PyTorch's do."""
    x = np.array([[1e-18, -2e-18, 3e-18, 5e-19], [1.0, 2.0, 3.0, 4.0]], np.float32)
    plan, got = _traced(lambda x: nn.rms_norm(x, eps=0.0), x)
    x64 = x.astype(np.float64)
    assert_inference_close(got, x64 / np.sqrt((x64**2).mean(1, keepdims=True)))
    np.testing.assert_allclose(got, F.rms_norm(torch.from_numpy(x), (4,), eps=0.0).numpy(), rtol=1e-6)


def test_float64_is_refused_naming_the_cast():
    with pytest.raises(DTypeError, match=r"float64.*astype\(numpy.float32\)"):
        weft.spec((2,), np.float64)
