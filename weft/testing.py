"""The Strict contract as one comparison: ``assert_strict_equal(actual, expected)``.

Strict promises output byte-identical to the oracle for every value that is not NaN,
and NaN exactly where the oracle has NaN, with any payload (NumPy itself does not
define which NaN ``NaN + NaN`` keeps: it changes between its SIMD body and its tail).
So the comparison is:

- same number of outputs, same shapes, same dtypes;
- integers and bools: every byte equal;
- floats: NaN at the same positions; every other element byte-equal (``-0.0`` and
  ``+0.0`` differ, as do infinities of opposite sign).

Every Strict test in Weft compares through this helper, so the rule lives in one place.

The Inference contract is ``inference_mismatch(actual, reference)`` against a float64
reference: per output, ``|actual - ref| <= INFERENCE_RTOL * (|ref| + max|ref|)`` over the
finite reference values, and the non-finite ones matched exactly (NaN where NaN, an
infinity of the same sign where an infinity).
"""

from __future__ import annotations

import numpy as np

__all__ = ["INFERENCE_RTOL", "assert_inference_close", "assert_strict_equal", "inference_error",
           "inference_mismatch", "strict_mismatch"]

INFERENCE_RTOL = 1e-4

_SHOWN = 5


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(np.dtype(f"u{array.dtype.itemsize}")) if array.dtype.itemsize in (1, 2, 4, 8) else array


def _describe(array: np.ndarray, position: tuple[int, ...]) -> str:
    value = array[position]
    if array.dtype.kind == "f":
        return f"{value!r} (0x{int(_bits(np.asarray(value).reshape(1))[0]):0{2 * array.dtype.itemsize}x})"
    return repr(value)


def strict_mismatch(actual, expected) -> str | None:
    """Why ``actual`` breaks the Strict rule against ``expected`` (None when it keeps it).

    Both are one array or a sequence of arrays (a plan's outputs)."""
    actual_items, expected_items = _as_tuple(actual), _as_tuple(expected)
    if len(actual_items) != len(expected_items):
        return f"{len(actual_items)} outputs, expected {len(expected_items)}"
    problems = []
    for number, (got, want) in enumerate(zip(actual_items, expected_items, strict=True)):
        got, want = np.asarray(got), np.asarray(want)
        label = f"output {number}" if len(expected_items) > 1 else "output"
        if got.shape != want.shape or got.dtype != want.dtype:
            problems.append(f"{label}: shape {got.shape} dtype {got.dtype}, expected {want.shape} {want.dtype}")
            continue
        got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
        if got.dtype.kind == "f":
            got_nan, want_nan = np.isnan(got), np.isnan(want)
            differs = (got_nan != want_nan) | (~got_nan & ~want_nan & (_bits(got) != _bits(want)))
        else:
            differs = _bits(got) != _bits(want) if got.dtype.kind in "iub" else got != want
        if not np.any(differs):
            continue
        positions = [tuple(int(p) for p in where) for where in np.argwhere(differs)[:_SHOWN]]
        shown = "; ".join(f"at {p or '()'}: {_describe(got, p)} vs {_describe(want, p)}" for p in positions)
        problems.append(f"{label}: {int(np.count_nonzero(differs))} of {got.size} elements differ ({shown})")
    return "\n".join(problems) or None


def assert_strict_equal(actual, expected, context: str = "") -> None:
    """Raise AssertionError unless ``actual`` equals ``expected`` under the Strict rule
    (bytes of every non-NaN value, NaN positions; see the module docstring)."""
    problem = strict_mismatch(actual, expected)
    if problem is not None:
        raise AssertionError(f"{context + ': ' if context else ''}not Strict-equal:\n{problem}")


def inference_error(actual: np.ndarray, reference: np.ndarray) -> float:
    """The worst ``|actual - ref| / (|ref| + max|ref|)`` over finite reference values; ``inf``
    when the shapes differ or a non-finite value is not matched exactly (position and sign)."""
    got = np.asarray(actual, np.float64)
    want = np.asarray(reference, np.float64)
    if got.shape != want.shape:
        return float("inf")
    finite = np.isfinite(want)
    nonfinite_ok = np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(
        np.where(np.isinf(want), want, 0.0), np.where(np.isinf(got), got, 0.0))
    if not nonfinite_ok or not np.all(np.isfinite(got[finite])):
        return float("inf")
    if not finite.any():
        return 0.0
    scale = float(np.max(np.abs(want[finite])))
    denominator = np.abs(want[finite]) + scale
    difference = np.abs(got[finite] - want[finite])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(difference == 0, 0.0, difference / denominator)
    return float(np.max(ratio))


def inference_mismatch(actual, reference, rtol: float = INFERENCE_RTOL) -> str | None:
    """Why ``actual`` breaks the Inference contract against a float64 ``reference`` (None if not)."""
    actual_items, reference_items = _as_tuple(actual), _as_tuple(reference)
    if len(actual_items) != len(reference_items):
        return f"{len(actual_items)} outputs, expected {len(reference_items)}"
    problems = []
    for number, (got, want) in enumerate(zip(actual_items, reference_items, strict=True)):
        error = inference_error(got, want)
        if error > rtol:
            got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
            detail = "non-finite values or shapes differ" if error == float("inf") else f"error {error:.3g}"
            if got64.shape == want64.shape and error != float("inf"):
                with np.errstate(invalid="ignore"):
                    gaps = np.where(np.isfinite(want64), np.abs(got64 - want64), 0.0)
                worst = np.unravel_index(np.argmax(gaps), got64.shape)
                detail += f" (largest difference at {worst}: {got64[worst]!r} vs {want64[worst]!r})"
            problems.append(f"output {number}: {detail}, allowed {rtol:g}")
    return "\n".join(problems) or None


def assert_inference_close(actual, reference, context: str = "", rtol: float = INFERENCE_RTOL) -> None:
    """Raise AssertionError unless ``actual`` is within the Inference contract of ``reference``."""
    problem = inference_mismatch(actual, reference, rtol)
    if problem is not None:
        raise AssertionError(f"{context + ': ' if context else ''}outside the Inference tolerance:\n{problem}")
