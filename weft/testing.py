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

The Inference contract is one rule, ``inference_within(actual, reference, magnitude)``,
against a float64 reference ``r`` of the same plan. Per element of each output::

    |out - r| <= 1e-4 |r| + 1e-4 max|r| + 16 * 2**-24 * m + 1e-37

- ``1e-4 |r|``: the contract's relative tolerance (``INFERENCE_RTOL``);
- ``1e-4 max|r|`` (max over the output's finite values): for values near zero, which
  carry the absolute error of the larger values they were computed with;
- ``16 * 2**-24 * m``: where the reference also carries a first-order error *magnitude*
  ``m >= |r|`` (the fuzzer's float64 evaluator, ``weft.fuzz.reference64``), sixteen
  float32 roundings per unit of it, so an ill-conditioned value (cancellation, a long
  fold, ``exp`` of a large argument) may differ as far as any correct reassociation, FMA
  or Weft's own transcendentals amplify an error, and no further. A reference without a
  magnitude (a float64 NumPy expression in a test, bench parity) has ``m = 0``;
- ``1e-37``: a result below float32's normal range may flush to zero;
- non-finite reference values are matched exactly: NaN where NaN, an infinity of the same
  sign where an infinity; a finite reference value needs a finite output.

``inference_error`` is the same rule as one number: the worst ``|out - r|`` in units of
the allowed error, times ``INFERENCE_RTOL`` (so it passes when ``<= INFERENCE_RTOL``, and
reads as a relative error).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FLOAT32_UNIT", "INFERENCE_RTOL", "INFERENCE_ULPS", "UNDERFLOW_FLOOR", "assert_inference_close",
           "assert_strict_equal", "at_line_offset", "inference_bound", "inference_error", "inference_mismatch", "inference_within",
           "strict_mismatch"]

INFERENCE_RTOL = 1e-4  # relative tolerance of the Inference contract
INFERENCE_ULPS = 16  # float32 roundings per unit of error magnitude (FMA, reassociation, own transcendentals)
FLOAT32_UNIT = 2.0**-24
UNDERFLOW_FLOOR = 1e-37  # results below float32's normal range may flush to zero

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


def inference_bound(reference, magnitude=None) -> np.ndarray:
    """The error each element of ``reference`` (float64) allows under the Inference rule
    (module docstring); ``magnitude`` is the reference's error magnitude, if it has one."""
    want = np.asarray(reference, np.float64)
    finite = np.isfinite(want)
    scale = float(np.max(np.abs(want[finite]))) if finite.any() else 0.0
    with np.errstate(invalid="ignore"):
        bound = INFERENCE_RTOL * (np.abs(want) + scale) + UNDERFLOW_FLOOR
    if magnitude is not None:
        bound = bound + INFERENCE_ULPS * FLOAT32_UNIT * np.asarray(magnitude, np.float64)
    return np.where(finite, bound, 0.0)


def inference_within(actual, reference, magnitude=None) -> np.ndarray:
    """Per element: does ``actual`` keep the Inference rule against ``reference``?
    Shapes must match (the caller checks them)."""
    got = np.asarray(actual, np.float64)
    want = np.asarray(reference, np.float64)
    bound = inference_bound(want, magnitude)
    with np.errstate(invalid="ignore"):
        close = np.isfinite(got) & (np.abs(got - want) <= bound)
    exact_non_finite = (np.isnan(got) & np.isnan(want)) | (np.isinf(want) & (got == want))
    return np.where(np.isfinite(want), close, exact_non_finite)


def inference_error(actual: np.ndarray, reference: np.ndarray, magnitude=None) -> float:
    """The worst ``|actual - ref|`` in units of the allowed error, times ``INFERENCE_RTOL``:
    ``<= INFERENCE_RTOL`` exactly when the Inference rule holds; ``inf`` when the shapes
    differ or a non-finite value is not matched exactly (position and sign)."""
    got = np.asarray(actual, np.float64)
    want = np.asarray(reference, np.float64)
    if got.shape != want.shape:
        return float("inf")
    finite = np.isfinite(want)
    if not np.all(inference_within(np.where(finite, want, got), want)) or not np.all(np.isfinite(got[finite])):
        return float("inf")
    if not finite.any():
        return 0.0
    bound = inference_bound(want, magnitude)[finite]
    difference = np.abs(got[finite] - want[finite])
    return float(np.max(difference / bound)) * INFERENCE_RTOL


def inference_mismatch(actual, reference, magnitude=None) -> str | None:
    """Why ``actual`` breaks the Inference rule against a float64 ``reference`` (None if not);
    ``magnitude``, when given, is one error-magnitude array per output (module docstring)."""
    actual_items, reference_items = _as_tuple(actual), _as_tuple(reference)
    if len(actual_items) != len(reference_items):
        return f"{len(actual_items)} outputs, expected {len(reference_items)}"
    magnitudes = _as_tuple(magnitude) if magnitude is not None else (None,) * len(reference_items)
    problems = []
    for number, (got, want, size) in enumerate(zip(actual_items, reference_items, magnitudes, strict=True)):
        error = inference_error(got, want, size)
        if error > INFERENCE_RTOL:
            got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
            detail = "non-finite values or shapes differ" if error == float("inf") else f"error {error:.3g}"
            if got64.shape == want64.shape and error != float("inf"):
                with np.errstate(invalid="ignore"):
                    gaps = np.where(np.isfinite(want64), np.abs(got64 - want64), 0.0)
                worst = np.unravel_index(np.argmax(gaps), got64.shape)
                detail += f" (largest difference at {worst}: {got64[worst]!r} vs {want64[worst]!r})"
            problems.append(f"output {number}: {detail}, allowed {INFERENCE_RTOL:g}")
    return "\n".join(problems) or None


def assert_inference_close(actual, reference, context: str = "", magnitude=None) -> None:
    """Raise AssertionError unless ``actual`` keeps the Inference rule against ``reference``."""
    problem = inference_mismatch(actual, reference, magnitude)
    if problem is not None:
        raise AssertionError(f"{context + ': ' if context else ''}outside the Inference tolerance:\n{problem}")


def at_page_offset(array: np.ndarray, offset: int) -> np.ndarray:
    """A C-contiguous copy of ``array`` whose data starts ``offset`` bytes into a 4 KiB page:
    for timing loops whose streams must sit alike in their pages in every arm (a load is
    checked against older stores by its low 12 bits, so where each stream starts in its
    page changes an in-place loop's speed)."""
    if not 0 <= offset < 4096:
        raise ValueError(f"offset {offset} must be in 0..4095 (bytes into a 4 KiB page)")
    raw = np.empty(array.nbytes + 4096, np.uint8)
    start = (offset - raw.ctypes.data) % 4096
    copy = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def at_line_offset(array: np.ndarray, offset: int) -> np.ndarray:
    """A C-contiguous copy of ``array`` whose data starts ``offset`` bytes past a 64-byte
    line (NumPy puts large arrays 16 bytes in): for outputs that must not depend on where
    the inputs start, and for timing the loads a real caller's arrays get."""
    if not 0 <= offset < 64:
        raise ValueError(f"offset {offset} must be in 0..63 (bytes past a 64-byte line)")
    raw = np.empty(array.nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + offset
    copy = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy
