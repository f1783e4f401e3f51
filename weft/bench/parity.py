"""Output parity before any time is reported (docs/benchmarking.md rule 1).

The reference is the oracle's output when the plan is small enough to interpret
(``ORACLE_POINT_LIMIT`` body evaluations), else the first Strict Weft arm's output.
Strict Weft arms must match it under the Strict rule (``weft.testing.strict_mismatch``:
bytes of every non-NaN value, NaN at the same positions); Inference arms and peers must
keep the Inference contract's one rule (``weft.testing.inference_error``, docs/contracts.md:
``|out - ref| <= 1e-4 |ref| + 1e-4 max|ref| + 1e-37`` per element, the reference carrying
no error magnitude), with every non-finite value matched exactly (same positions, same signs). A failure is an error, never a footnote.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from weft.bench.arms import BenchError, Runner
from weft.cost.work import points
from weft.ir import output_digest
from weft.testing import INFERENCE_RTOL, inference_error, strict_mismatch

TOLERANCE = INFERENCE_RTOL
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
    """The worst Inference error over the outputs (``inf`` on a count, shape or non-finite mismatch)."""
    if len(outputs) != len(reference):
        return float("inf")
    return max((inference_error(out, ref) for out, ref in zip(outputs, reference, strict=True)), default=0.0)


def check_parity(runners: list[Runner], reference: tuple[np.ndarray, ...], reference_name: str) -> list[ParityCheck]:
    """Check every runner against the reference; raise BenchError on any mismatch."""
    reference_digest = output_digest(tuple(reference))
    checks, failures = [], []
    for runner in runners:
        digest = output_digest(runner.outputs)
        error = relative_error(runner.outputs, reference)
        if runner.spec.exact:
            ok, mode = strict_mismatch(tuple(runner.outputs), tuple(reference)) is None, "exact"
        else:
            ok, mode = error <= TOLERANCE, "tolerance"
        checks.append(ParityCheck(runner.spec.label, digest, mode, error, ok))
        if not ok:
            wanted = (f"Strict-equal to digest {reference_digest}" if mode == "exact"
                      else f"relative error <= {TOLERANCE:g}, non-finite values exact")
            failures.append(f"{runner.spec.label}: digest {digest}, max relative error {error:.3g} (wanted {wanted})")
    if failures:
        raise BenchError(
            f"output parity failed against the {reference_name}; no time is reported for arms that compute"
            " something else:\n  " + "\n  ".join(failures)
        )
    return checks
