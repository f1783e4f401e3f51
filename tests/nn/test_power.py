"""General ``pow``: float, negative and tensor exponents and number bases, against
float64 NumPy (C's pow semantics), and compiled Strict code bit-identical to the oracle."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn

SPECIAL = np.array([0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 10.0, np.inf, -np.inf, np.nan, 1e-3, 7.25],
                   dtype=np.float32)


def reference(x: np.ndarray, y) -> np.ndarray:
    """C's pow in float64; a scalar 0.5 / -0.5 is sqrt / 1/sqrt, as PyTorch's fast paths."""
    with np.errstate(all="ignore"):
        if np.ndim(y) == 0 and y in (0.5, -0.5):
            root = np.sqrt(x.astype(np.float64))
            return root if y > 0 else 1 / root
        return np.power(x.astype(np.float64), np.asarray(y, dtype=np.float64))


def assert_pow_close(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    with np.errstate(over="ignore"):
        want32 = want.astype(np.float32)  # overflow to inf where float32 does
    same_special = (np.isnan(got) == np.isnan(want32)).all() and (np.isinf(got) == np.isinf(want32)).all()
    assert same_special, (got, want32)
    finite = np.isfinite(want32)
    assert (np.sign(got[np.isinf(got)]) == np.sign(want32[np.isinf(want32)])).all()
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=1e-30)


def run_both(plan, *arrays):
    oracle = weft.oracle.run(plan, *arrays)
    compiled = weft.compile(plan, contract="strict", threads=1)(*arrays)
    assert compiled.tobytes() == oracle.tobytes()
    return oracle


@pytest.mark.parametrize("exponent", [2, 3, 5, 9, 13, 64, -1, -2, -3, -7, 0, 0.5, -0.5, 1.7, -2.5, 0.25, 3.0,
                                      100.0, 101.0, -101.0])
def test_scalar_exponents(exponent):
    rng = np.random.default_rng(0)
    x = np.concatenate([SPECIAL, rng.uniform(-3, 3, 64).astype(np.float32), rng.uniform(0, 1.2, 64).astype(np.float32)])
    plan = weft.trace(lambda x: x ** exponent, weft.spec(x.shape))
    got = run_both(plan, x)
    # exp(y log x) loses about |y log x| * 2^-24 relative; repeated multiplication a few ulp
    assert_pow_close(got, reference(x, exponent), rtol=2e-5 if abs(exponent) <= 64 else 2e-4)


def test_tensor_exponents_cover_every_case():
    x, y = np.meshgrid(SPECIAL, SPECIAL, indexing="ij")
    x, y = x.ravel().copy(), y.ravel().copy()
    plan = weft.trace(nn.pow, weft.spec(x.shape), weft.spec(y.shape))
    got = run_both(plan, x, y)
    want = reference(x, y)
    with np.errstate(invalid="ignore"):
        huge = np.abs(y.astype(np.float64) * np.log(np.abs(x.astype(np.float64)) + 1e-300)) > 80  # overflow
    assert_pow_close(got[~huge], want[~huge], rtol=1e-5)
    np.testing.assert_array_equal(np.isinf(got[huge]) | (got[huge] == 0), np.isinf(want[huge]) | (want[huge] == 0))


def test_a_number_base_and_broadcasting():
    y = np.linspace(-4, 4, 33, dtype=np.float32)
    plan = weft.trace(lambda y: 2 ** y, weft.spec(y.shape))
    assert_pow_close(run_both(plan, y), reference(np.float32(2), y), rtol=1e-6)
    x = np.abs(np.random.default_rng(1).standard_normal((3, 4))).astype(np.float32)
    e = np.array([0.5, 1.5, -1.0, 2.0], np.float32)
    plan = weft.trace(lambda x, e: x ** e, weft.spec(x.shape), weft.spec(e.shape))
    assert_pow_close(run_both(plan, x, e), reference(x, e), rtol=1e-5)


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = rng.uniform(-4, 4, 200).astype(np.float32)
    y = np.round(rng.uniform(-5, 5, 200)).astype(np.float32)
    y[::3] += 0.5
    plan = weft.trace(nn.pow, weft.spec(x.shape), weft.spec(y.shape))
    got = weft.compile(plan, contract="inference")(x, y)
    want = torch.pow(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    assert (np.isnan(got) == np.isnan(want)).all()
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-5)
