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
from collections.abc import Callable
from dataclasses import dataclass

from weft.decide.library.adam import LibraryMatch, match_adam, price_adam
from weft.decide.library.cross_entropy import match_cross_entropy, price_cross_entropy, propose_cross_entropy
from weft.decide.library.norm import match_layer_norm, price_layer_norm
from weft.ir import Binary, Plan, Unary, walk_expr


@dataclass(frozen=True, slots=True)
class Body:
    """A library body. ``pattern`` names the census matcher that admits it (the generic fused
    lowering serves it: a label); a *built* body has its own ``match`` (plan, members) ->
    ``LibraryMatch`` | None, which proves it legal, and ``price`` (match, machine numbers,
    homes: the level the plan leaves each buffer at, as the generic forms are priced) -> cycles;
    its lowering is ``weft.lower.library`` and its C ``weft.codegen.library``."""

    name: str
    pattern: str  # the matcher that admits it
    contracts: tuple[str, ...]
    reorders_folds: bool
    note: str
    match: Callable[[Plan, tuple[str, ...]], LibraryMatch | None] | None = None
    price: Callable[[LibraryMatch, object, dict | None], float] | None = None
    propose: Callable | None = None  # (plan, anchor, available) -> a region growth cannot offer, or None

    @property
    def built(self) -> bool:
        return self.match is not None


BODIES = (
    Body("fused attention", "attention", ("inference",), True, "one pass over keys, running max and sum (online softmax)"),
    Body("exact attention", "attention", ("strict", "inference"), False,
         "tile of score rows in scratch, the three row folds in the oracle's order"),
    Body("softmax rows", "softmax", ("strict", "inference"), False, "max, exp, sum, divide per row tile"),
    Body("row norm", "norm", ("strict", "inference"), False, "exact two-pass statistics from a cached row tile"),
    Body("BLAS GEMM", "gemm", ("inference",), True, "SciPy's sgemm (blocked, reassociated)"),
    Body("fused adam", "adam", ("strict", "inference"), False,
         "one pass: p, g, m, v read once, p', m', v' written once, vectorised, parallel chunks",
         match_adam, price_adam),
    Body("chunked cross-entropy", "cross-entropy", ("inference",), True,
         "projection and loss per vocabulary chunk, online max and sum: the (N, V) logits never exist",
         match_cross_entropy, price_cross_entropy, propose_cross_entropy),
    Body("welford layer norm", "norm", ("inference",), True,
         "one read of each row for mean and variance (Welford per lane, Chan's merge), the output from cache",
         match_layer_norm, price_layer_norm),
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
    """Every library body whose matcher admits ``members`` under ``contract`` (built bodies first)."""
    built = tuple(body for body, _ in admissions(plan, members, contract))
    pattern = match_pattern(plan, members)
    if pattern is None:
        return built
    return built + tuple(body for body in BODIES
                         if not body.built and body.pattern == pattern and contract in body.contracts)


def admissions(plan: Plan, members: tuple[str, ...], contract: str) -> tuple[tuple[Body, LibraryMatch], ...]:
    """(body, what its matcher proved) for every *built* body admitted for ``members``."""
    found = []
    for body in BODIES:
        if body.built and contract in body.contracts:
            match = body.match(plan, members)
            if match is not None:
                found.append((body, match))
    return tuple(found)


def proposed_regions(plan: Plan, anchor: str, available: frozenset[str], contract: str) -> tuple:
    """Regions built bodies propose for ``anchor`` that growth cannot offer (each then needs
    its matcher's admission like any other candidate)."""
    found = []
    for body in BODIES:
        if body.propose is not None and contract in body.contracts:
            region = body.propose(plan, anchor, available)
            if region is not None and all(region.members != other.members for other in found):
                found.append(region)
    return tuple(found)


def body_named(name: str) -> Body:
    return next(body for body in BODIES if body.name == name)
