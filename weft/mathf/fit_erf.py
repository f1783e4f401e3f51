"""Reproduces the erf coefficients in ``weft.mathf.definitions`` (a maintenance tool).

``python -m weft.mathf.fit_erf`` fits, in float64 against mpmath (30 digits):

- ``ERF_SMALL_POLY``: P(z) ~ erf(x)/x - 1 for z = x^2 on x in [0, 1], degree 6,
  uniform weight (erf = x + x*P, so P's absolute error is erf's relative error);
- ``ERF_LARGE_POLY``: R(t) ~ erfc(x)*exp(x^2) for t = x - 2 on x in [1, 4],
  degree 8, weighted by exp(-x^2) so the error of erfc, which is what
  erf = 1 - exp(-x^2)*R sees, is what gets minimised;

by Lawson's iteratively reweighted least squares (converges to the minimax fit),
then rounds each coefficient to float32 and prints both tuples, highest degree
first. Needs mpmath (not a runtime dependency of Weft).
"""

from __future__ import annotations

import numpy as np


def lawson_fit(
    nodes: np.ndarray, target: np.ndarray, degree: int, weight: np.ndarray, iterations: int = 200
) -> tuple[np.ndarray, float]:
    """Near-minimax polynomial (lowest degree first) of max |fit - target| / weight."""
    vandermonde = np.vander(nodes, degree + 1, increasing=True)
    lawson_weights = np.full(nodes.size, 1.0 / nodes.size)
    for _ in range(iterations):
        scale = np.sqrt(lawson_weights) / weight
        coefficients, *_ = np.linalg.lstsq(vandermonde * scale[:, None], target * scale, rcond=None)
        error = np.abs(vandermonde @ coefficients - target) / weight
        lawson_weights = lawson_weights * error
        lawson_weights /= lawson_weights.sum()
    return coefficients, float(error.max())


def fit() -> tuple[tuple[float, ...], tuple[float, ...]]:
    try:
        import mpmath
    except ImportError as error:
        raise SystemExit("fit_erf needs mpmath: pip install mpmath") from error
    mpmath.mp.dps = 30
    small_x = np.linspace(1e-4, 1.0, 4000)
    small_target = np.array([float(mpmath.erf(mpmath.mpf(v)) / mpmath.mpf(v)) for v in small_x]) - 1.0
    small, small_error = lawson_fit(small_x * small_x, small_target, 6, np.ones_like(small_x))
    large_x = np.linspace(1.0, 4.0, 4000)
    large_target = np.array(
        [float(mpmath.erfc(mpmath.mpf(v)) * mpmath.exp(mpmath.mpf(v) ** 2)) for v in large_x]
    )
    large, large_error = lawson_fit(large_x - 2.0, large_target, 8, np.exp(large_x * large_x))
    print(
        f"small: max abs error of erf(x)/x - 1: {small_error:.3g}; large: max error of erfc: {large_error:.3g}"
    )
    as_float32 = lambda c: tuple(float(np.float32(v)) for v in c[::-1])  # noqa: E731
    return as_float32(small), as_float32(large)


if __name__ == "__main__":
    small_poly, large_poly = fit()
    print("ERF_SMALL_POLY =", small_poly)
    print("ERF_LARGE_POLY =", large_poly)
