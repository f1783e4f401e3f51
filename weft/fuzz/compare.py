"""The two contracts as comparisons of one output array.

Strict (docs/design.md section 3): bytes identical to the oracle for every non-NaN value,
NaN exactly where the oracle has NaN (any payload); ints and bools byte-identical.

Inference: the contract's one rule, ``weft.testing.inference_within`` (docs/contracts.md),
against the float64 evaluator (``weft.fuzz.reference64``), which also gives each value an
error magnitude ``m``. With ``o`` the oracle (float32, Strict order), ``r`` the float64
value and ``g`` the compiled value, per element:

- ints and bools equal ``r`` exactly;
- where ``o`` and ``r`` are both NaN (NaN in the mathematics: ``0/0``, a fully masked
  row), ``g`` is NaN; where ``o`` is an infinity, ``g`` is the same infinity or keeps the
  rule;
- otherwise ``|g - r| <= 1e-4 |r| + 1e-4 max|r| + 16 * 2**-24 * m + 1e-37`` (the rule,
  with the magnitude: an ill-conditioned value, ``m`` much larger than ``|r|``, may differ
  by sixteen float32 roundings per unit of it). A NaN or an infinity in ``g`` that
  float32 and float64 do not both give fails;
- not checked, and counted as unchecked (what a float64 evaluator cannot judge): where
  ``r`` is NaN but ``o`` is not (float32 and float64 disagree on the domain, e.g. ``sqrt``
  of a difference that rounds to either side of 0); where ``o`` is NaN but ``r`` is not
  (float32 overflowed on the way: ``inf - inf``); and where ``g`` is not finite and ``m``
  exceeds float32's range (terms beyond it overflow in some orders of a fold and not in
  others; an infinite sum whose finite terms' reassociation magnitude, ``(n - 1) sum |t|``,
  passes float32's range gets ``m = inf``: the one pass, online softmax, sums the weights'
  numerators before dividing by their total, so ``3e38 + 3e38`` may meet the ``-inf``; as do
  a quotient by a value whose allowed error reaches it, which may round to 0 or flip sign,
  and an exact zero times a value with ``m`` past float32's range, 0 * inf).
- where the oracle itself breaks the bound against float64 (the definition is off float64:
  a documented range limit such as ``rms_norm`` of rows beyond ~5e30) and the compiled
  output agrees with the oracle, the element is unchecked (``weft.fuzz.check``); a compiled
  output that agrees with neither is reported as "the oracle itself disagrees".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from weft.testing import inference_bound, inference_within, strict_mismatch

SHOWN = 4


@dataclass(frozen=True)
class Verdict:
    """One output's comparison: ``problem`` is None when it keeps the contract."""

    problem: str | None
    unchecked: int = 0


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(np.dtype(f"u{array.dtype.itemsize}"))


def _shape_problem(got: np.ndarray, want_shape: tuple[int, ...], want_dtype: np.dtype) -> str | None:
    if got.shape != tuple(want_shape) or got.dtype != want_dtype:
        return f"shape {got.shape} dtype {got.dtype}, expected {tuple(want_shape)} {want_dtype}"
    return None


def _show(differs: np.ndarray, *columns: tuple[str, np.ndarray]) -> str:
    positions = [tuple(int(p) for p in at) for at in np.argwhere(differs)[:SHOWN]]
    parts = []
    for position in positions:
        values = ", ".join(f"{label}={np.asarray(array)[position]!r}" for label, array in columns)
        parts.append(f"at {position or '()'}: {values}")
    return f"{int(np.count_nonzero(differs))} of {differs.size} elements differ (" + "; ".join(parts) + ")"


def strict(got: np.ndarray, oracle: np.ndarray) -> Verdict:
    """The Strict rule, decided by ``weft.testing.strict_mismatch`` (the one place it lives);
    the positions shown are for the report."""
    if strict_mismatch(got, oracle) is None:
        return Verdict(None)
    problem = _shape_problem(got, oracle.shape, oracle.dtype)
    if problem:
        return Verdict(problem)
    got, oracle = np.ascontiguousarray(got), np.ascontiguousarray(oracle)
    if got.dtype.kind == "f":
        got_nan, want_nan = np.isnan(got), np.isnan(oracle)
        differs = (got_nan != want_nan) | (~got_nan & ~want_nan & (_bits(got) != _bits(oracle)))
    else:
        differs = _bits(got) != _bits(oracle)
    return Verdict(_show(differs, ("compiled", got), ("oracle", oracle)))


def inference(got: np.ndarray, oracle: np.ndarray, reference: np.ndarray, magnitude: np.ndarray | None) -> Verdict:
    """The Inference rule (module docstring)."""
    problem = _shape_problem(got, oracle.shape, oracle.dtype)
    if problem:
        return Verdict(problem)
    if got.dtype.kind != "f":
        differs = got != np.asarray(reference).astype(got.dtype)
        if not np.any(differs):
            return Verdict(None)
        return Verdict(_show(differs, ("compiled", got), ("float64 reference", reference), ("oracle", oracle)))
    g = got.astype(np.float64)
    o = oracle.astype(np.float64)
    r = np.asarray(reference, np.float64)
    m = np.asarray(magnitude, np.float64)
    within = inference_within(g, r, m)
    oracle_nan, reference_nan = np.isnan(o), np.isnan(r)
    float32_range = np.finfo(np.float32).max
    unchecked = (reference_nan != oracle_nan) | (~np.isfinite(g) & (m > float32_range))
    same_infinity = np.isinf(o) & (g == o)
    ok = unchecked | np.where(oracle_nan, np.isnan(g), same_infinity | within)
    if np.all(ok):
        return Verdict(None, int(np.count_nonzero(unchecked)))
    return Verdict(_show(~ok, ("compiled", g), ("float64", r), ("bound", inference_bound(r, m)), ("oracle", o)),
                   int(np.count_nonzero(unchecked)))
