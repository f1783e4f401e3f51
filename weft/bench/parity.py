"""Output parity before any time is reported (docs/benchmarking.md rule 1).

The reference is the oracle's output when the plan is small enough to interpret
(``ORACLE_POINT_LIMIT`` body evaluations), else the first Strict Weft arm's output.
Strict Weft arms must match it byte for byte; Inference arms and peers must lie
within ``TOLERANCE`` of it, measured as the largest absolute difference over the
largest magnitude of the reference output. A failure is an error, never a footnote.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from weft.bench.arms import BenchError, Runner
from weft.bench.roofline import points
from weft.ir import output_digest

TOLERANCE = 2e-3
ORACLE_POINT_LIMIT = 2e8


@dataclass(frozen=True, slots=True)
class ParityCheck:
    label: str
    digest: str
    mode: str  # exact | tolerance
    max_relative_error: float
    ok: bool

    def to_json(self) -> dict:
        return {"label": self.label, "digest": self.digest, "mode": self.mode,
                "max_relative_error": self.max_relative_error, "ok": self.ok}


def oracle_affordable(plan) -> bool:
    return sum(points(kernel) for kernel in plan.kernels) <= ORACLE_POINT_LIMIT


def relative_error(outputs, reference) -> float:
    worst = 0.0
    for out, ref in zip(outputs, reference, strict=True):
        out64, ref64 = np.asarray(out, np.float64), np.asarray(ref, np.float64)
        if out64.shape != ref64.shape:
            return float("inf")
        if out64.size == 0:
            continue
        if not np.array_equal(np.isnan(out64), np.isnan(ref64)):
            return float("inf")
        finite = ~np.isnan(ref64)
        scale = max(float(np.max(np.abs(ref64[finite]), initial=0.0)), 1e-30)
        worst = max(worst, float(np.max(np.abs(out64[finite] - ref64[finite]), initial=0.0)) / scale)
    return worst


def check_parity(runners: list[Runner], reference: tuple[np.ndarray, ...], reference_name: str) -> list[ParityCheck]:
    """Check every runner against the reference; raise BenchError on any mismatch."""
    reference_digest = output_digest(tuple(reference))
    checks, failures = [], []
    for runner in runners:
        digest = output_digest(runner.outputs)
        error = relative_error(runner.outputs, reference) if len(runner.outputs) == len(reference) else float("inf")
        if runner.spec.exact:
            ok, mode = digest == reference_digest, "exact"
        else:
            ok, mode = error <= TOLERANCE, "tolerance"
        checks.append(ParityCheck(runner.spec.label, digest, mode, error, ok))
        if not ok:
            wanted = f"digest {reference_digest}" if mode == "exact" else f"relative error <= {TOLERANCE:g}"
            failures.append(f"{runner.spec.label}: digest {digest}, max relative error {error:.3g} (wanted {wanted})")
    if failures:
        raise BenchError(
            f"output parity failed against the {reference_name}; no time is reported for arms that compute"
            " something else:\n  " + "\n  ".join(failures)
        )
    return checks
