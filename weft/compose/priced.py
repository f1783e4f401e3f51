"""``fusion="priced"``: take a candidate region only when its price says it pays.

The pricing is passed in (built by ``weft.compile``; this module imports neither
the lowering nor the cost model). It offers two calls:

* ``pricing.survey(regions)``: price every distinct signature among the candidates,
  in order of expected gain, inside its budget (memoised);
* ``pricing.verdict(region)``: the verdict of one candidate (an object with
  ``status``, ``pays(margin)``, ``saving``, ``margin``, ``describe()``); a candidate
  the budget left unpriced comes back with status ``"budget"``.

Anchors are taken in reverse topological order as under greedy. Per anchor, every
fused candidate is asked for its verdict; the one with the largest predicted saving
among those that beat their members unfused by ``margin`` is taken, else the anchor
stays alone. Each decision is kept (``PricedDecision``) for ``explain``.
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.compose.regions import Growth, Region, grow
from weft.ir import Plan

PRICED_MARGIN = 0.05


@dataclass(frozen=True, slots=True)
class PricedDecision:
    """What the priced policy saw at one anchor: every fused candidate's verdict, and the choice."""

    anchor: str
    verdicts: tuple[tuple[tuple[str, ...], object], ...]  # (members, verdict) per fused candidate
    taken: tuple[str, ...]  # the members of the chosen region (the anchor alone: not fused)

    @property
    def chosen(self):
        return next((verdict for members, verdict in self.verdicts if members == self.taken), None)

    @property
    def unpriced(self) -> int:
        return sum(1 for _, verdict in self.verdicts if verdict.status == "budget")


def survey_candidates(plan: Plan) -> list[Region]:
    """Every fused candidate a first pass of growth sees (each anchor with what greedy would
    leave available): what the pricing phase prices, in order of expected gain."""
    uncovered = {kernel.output for kernel in plan.kernels}
    found: list[Region] = []
    for kernel in reversed(plan.kernels):
        if kernel.output not in uncovered:
            continue
        growth = grow(plan, kernel.output, frozenset(uncovered))
        found.extend(region for region in growth.candidates if region.is_fused)
        uncovered -= set(growth.largest.members)
    return found


def choose_priced(plan: Plan, pricing, margin: float = PRICED_MARGIN) -> tuple[list[Region], list[Growth], list[PricedDecision]]:
    """(chosen regions in anchor order of discovery, growths, decisions) under prices."""
    pricing.survey(survey_candidates(plan))
    uncovered = {kernel.output for kernel in plan.kernels}
    chosen: list[Region] = []
    growths: list[Growth] = []
    decisions: list[PricedDecision] = []
    for kernel in reversed(plan.kernels):
        if kernel.output not in uncovered:
            continue
        growth = grow(plan, kernel.output, frozenset(uncovered))
        growths.append(growth)
        region = growth.candidates[0]
        verdicts = []
        best_saving = 0.0
        for candidate in growth.candidates[1:]:
            verdict = pricing.verdict(candidate)
            verdicts.append((candidate.members, verdict))
            if verdict.pays(margin) and verdict.saving > best_saving:
                region, best_saving = candidate, verdict.saving
        decisions.append(PricedDecision(growth.anchor, tuple(verdicts), region.members))
        chosen.append(region)
        uncovered -= set(region.members)
    return chosen, growths, decisions


def priced_reasons(member: str, decisions: list[PricedDecision]) -> list[str]:
    """Why the prices kept ``member`` out of every region that could have taken it."""
    reasons = []
    for decision in decisions:
        for members, verdict in decision.verdicts:
            if member not in members or members == decision.taken:
                continue
            if verdict.status == "budget":
                reasons.append(f"unpriced in {decision.anchor}'s candidate of {len(members)}: {verdict.reason}")
            elif verdict.status == "priced":
                reasons.append(f"{decision.anchor}'s candidate of {len(members)} priced at {verdict.margin:+.1%}"
                               " (not the best that pays)")
            else:
                reasons.append(f"{decision.anchor}'s candidate of {len(members)}: {verdict.reason}")
            break
    return reasons
