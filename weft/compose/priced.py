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

from weft.compose.regions import Growth, Region, cover_by_anchors, grow
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


class _ReadersOnce(Plan):
    """The same plan, its ``readers()`` computed once: ``grow`` asks for them at every
    anchor, and on a 650-member plan that walk is most of the policy's time."""

    def readers(self) -> dict[str, tuple[str, ...]]:
        found = self.__dict__.get("_readers")
        if found is None:
            found = Plan.readers(self)
            self.__dict__["_readers"] = found
        return found


def _readers_once(plan: Plan) -> Plan:
    return _ReadersOnce(plan.buffers, plan.kernels, plan.inputs, plan.outputs, plan.name)


class _Growths:
    """``grow`` memoised by (anchor, members still available): the survey and the decisions
    usually see the same availability, and growing is the costly part on a large plan."""

    def __init__(self, plan: Plan) -> None:
        self.plan = _readers_once(plan)
        self.found: dict[tuple[str, frozenset[str]], Growth] = {}

    def __call__(self, anchor: str, available: frozenset[str]) -> Growth:
        key = (anchor, available)
        if key not in self.found:
            self.found[key] = grow(self.plan, anchor, available)
        return self.found[key]


def survey_candidates(plan: Plan, growths: _Growths | None = None, fits=None) -> list[Region]:
    """Every fused candidate a first pass of growth sees (each anchor with what greedy would
    leave available): what the pricing phase prices, in order of expected gain.

    ``fits(region)`` (None: every candidate) is None for a candidate that can be emitted fused
    (the lowering's generic forms or an admitted library body): the others are neither priced
    nor taken as the anchor's reach, so the survey's anchors fall where the regions can. (A
    post-norm encoder layer grows, over its batch axis, one candidate through every member back
    into the layer before: no layer's anchors then lined up with the next one's, and six layers
    of MiniLM held 164 signatures where 11 can be lowered.)"""
    found: list[Region] = []

    def take(growth: Growth, available: frozenset[str]) -> Region:
        fused = _emittable(growth.candidates, fits)
        found.extend(fused)
        return fused[-1] if fused else growth.largest

    cover_by_anchors(plan, growths or _Growths(plan), take)
    return found


def _emittable(candidates, fits) -> list[Region]:
    """The fused candidates ``fits`` accepts (every one without it)."""
    return [region for region in candidates if region.is_fused and (fits is None or fits(region) is None)]


def choose_priced(plan: Plan, pricing, margin: float = PRICED_MARGIN) -> tuple[list[Region], list[Growth], list[PricedDecision]]:
    """(chosen regions in anchor order of discovery, growths, decisions) under prices."""
    memo = _Growths(plan)
    fits = getattr(pricing, "fits", None)  # the lowering's (and library bodies') answer, passed in
    pricing.survey(survey_candidates(plan, memo, fits))
    decisions: list[PricedDecision] = []
    proposals = getattr(pricing, "proposals", None)  # regions library bodies propose (growth cannot offer)

    def take(growth: Growth, available: frozenset[str]) -> Region:
        region = growth.candidates[0]
        verdicts = []
        best_saving = 0.0
        proposed = tuple(proposals(growth.anchor, available)) if proposals is not None else ()
        for candidate in (*_emittable(growth.candidates[1:], fits), *proposed):
            verdict = pricing.verdict(candidate)
            verdicts.append((candidate.members, verdict))
            if verdict.pays(margin) and verdict.saving > best_saving:
                region, best_saving = candidate, verdict.saving
        decisions.append(PricedDecision(growth.anchor, tuple(verdicts), region.members))
        return region

    steps = cover_by_anchors(plan, memo, take)
    return [region for _, region in steps], [growth for growth, _ in steps], decisions


def priced_reasons(member: str, decisions: list[PricedDecision]) -> list[str]:
    """Why the prices kept ``member`` out of every region that could have taken it."""
    reasons = []
    for decision in decisions:
        for members, verdict in decision.verdicts:
            if member not in members or members == decision.taken:
                continue
            if verdict.status == "budget":
                reasons.append(f"unpriced in {decision.anchor}'s candidate of {len(members)}: {verdict.reason}")
            elif verdict.status == "priced" and verdict.pays(PRICED_MARGIN):
                reasons.append(f"{decision.anchor}'s candidate of {len(members)} priced at {verdict.margin:+.1%},"
                               " but another candidate saves more cycles")
            elif verdict.status == "priced":
                reasons.append(f"{decision.anchor}'s candidate of {len(members)} priced at {verdict.margin:+.1%}"
                               f" (fusing must save over {PRICED_MARGIN:.0%})")
            else:
                reasons.append(f"{decision.anchor}'s candidate of {len(members)}: {verdict.reason}")
            break
    return reasons
