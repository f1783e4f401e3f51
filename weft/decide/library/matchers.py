"""Matchers: which library body a region's members are, from their structure alone.

A matcher reads the members' census (per member: contraction or not, fold combiner,
elementwise ops used) and names a body when the region is exactly that pattern:

    attention   QKᵀ (contraction), row max, exp, row sum, divide, PV (contraction)
                -> "fused attention" (one pass, Inference) / "exact attention" (Strict)
    softmax     row max, exp, row sum, divide
    norm        one or two sum folds over the same rows, then a normalise by rsqrt/sqrt
    gemm        a single plain contraction (BLAS under Inference)

Each body declares the contracts it honours: one that reorders a fold (BLAS, the online
softmax) is Inference-only; under Strict only bodies that keep the oracle's order apply.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from weft.ir import Binary, Plan, Unary, walk_expr


@dataclass(frozen=True, slots=True)
class Body:
    name: str
    pattern: str  # the matcher that admits it
    contracts: tuple[str, ...]
    reorders_folds: bool
    note: str


BODIES = (
    Body("fused attention", "attention", ("inference",), True, "one pass over keys, running max and sum (online softmax)"),
    Body("exact attention", "attention", ("strict", "inference"), False,
         "tile of score rows in scratch, the three row folds in the oracle's order"),
    Body("softmax rows", "softmax", ("strict", "inference"), False, "max, exp, sum, divide per row tile"),
    Body("row norm", "norm", ("strict", "inference"), False, "exact two-pass statistics from a cached row tile"),
    Body("BLAS GEMM", "gemm", ("inference",), True, "SciPy's sgemm (blocked, reassociated)"),
)


def census(plan: Plan, members: tuple[str, ...]) -> list[tuple[str, str | None, frozenset[str]]]:
    """(kind, fold combiner, ops) per member; kind is contraction | fold | map."""
    found = []
    for member in members:
        kernel = plan.kernel(member)
        ops = frozenset(node.op.value for node in walk_expr(kernel.body) if isinstance(node, Unary | Binary))
        combiner = kernel.fold.combiner.value if kernel.fold else None
        kind = "contraction" if kernel.is_contraction else "fold" if kernel.fold else "map"
        found.append((kind, combiner, ops))
    return found


def _softmax_core(items) -> bool:
    kinds = Counter((kind, combiner) for kind, combiner, _ in items)
    has_exp = any("exp" in ops and kind == "map" for kind, _, ops in items)
    has_div = any("div" in ops and kind == "map" for kind, _, ops in items)
    return kinds[("fold", "max")] == 1 and kinds[("fold", "sum")] == 1 and has_exp and has_div


def match_pattern(plan: Plan, members: tuple[str, ...]) -> str | None:
    """The pattern ``members`` form exactly (see module doc), or None."""
    items = census(plan, members)
    contractions = [item for item in items if item[0] == "contraction"]
    rest = [item for item in items if item[0] != "contraction"]
    if len(items) == 6 and len(contractions) == 2 and len(rest) == 4 and _softmax_core(rest):
        first, last = plan.kernel(members[0]), plan.kernel(members[-1])
        if first.is_contraction and last.is_contraction:
            return "attention"
    if len(items) == 4 and not contractions and _softmax_core(items):
        return "softmax"
    if 2 <= len(items) <= 5 and not contractions:
        sums = [item for item in items if item[:2] == ("fold", "sum")]
        last_ops = items[-1][2]
        if 1 <= len(sums) <= 2 and not any(item[1] == "max" for item in items) and (
                {"rsqrt", "sqrt"} & last_ops or any({"rsqrt", "sqrt"} & ops for _, _, ops in items[1:])):
            return "norm"
    if len(items) == 1 and contractions:
        return "gemm"
    return None


def admitted_bodies(plan: Plan, members: tuple[str, ...], contract: str) -> tuple[Body, ...]:
    """Every library body whose matcher admits ``members`` under ``contract``."""
    pattern = match_pattern(plan, members)
    if pattern is None:
        return ()
    return tuple(body for body in BODIES if body.pattern == pattern and contract in body.contracts)
