"""Choosing a set of disjoint regions that covers every member of a plan.

Until the cost model lands, two placeholder policies exist (a compile parameter,
never a global):

* ``"greedy"``: the largest legal candidate per anchor *that the lowering can emit*
  (``fits``: a region whose tile-local scratch exceeds the budget even at a tile of
  one is not taken; the next smaller candidate is, and the cut is recorded as a
  ``Cutback`` so ``explain`` shows it. Partition and lowering therefore agree: the
  lowering never quietly compiles a chosen region member by member);
* ``"off"``: every member alone (the unfused plan).

Anchors are taken in reverse topological order. The plan's outputs are anchors;
so is every member left outside the regions grown so far (its output is then seen
by another region, i.e. from outside its own). Because only an anchor's output
leaves a region and every member precedes its anchor, ordering the regions by
anchor gives a valid execution order. Members a cut-back region left out stay
uncovered, so they become anchors in turn and grow regions of their own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from weft.compose.regions import Growth, Refusal, Region, cover_by_anchors, grow
from weft.config import CONTRACTS
from weft.errors import ConfigError
from weft.ir import Plan

POLICIES = ("off", "greedy", "priced")

RegionFit = Callable[[Region], "str | None"]
"""``fits(region)``: None when the lowering can emit ``region`` fused, else why not."""


@dataclass(frozen=True, slots=True)
class Cutback:
    """Greedy took candidate ``taken`` (1-based) of ``count`` from ``anchor``, not the largest.

    ``reasons`` says, per larger candidate tried, why the lowering could not emit it
    (largest first); ``left_out`` are the members of the largest candidate not taken
    (they anchor regions of their own).
    """

    anchor: str
    taken: int
    count: int
    reasons: tuple[str, ...]
    left_out: tuple[str, ...]

    def describe(self) -> str:
        why = self.reasons[0] if self.reasons else "the lowering could not emit it"
        text = f"{why}; took candidate {self.taken} of {self.count} instead"
        if len(self.reasons) > 1:
            text += f" ({len(self.reasons)} larger candidates did not fit)"
        if self.left_out:
            text += f" (left out: {', '.join(self.left_out)})"
        return text


@dataclass(frozen=True, slots=True)
class Partition:
    """Disjoint regions covering every member (in execution order), and why.

    ``growths`` holds, per anchor, every candidate boundary and every refusal seen
    while growing (the explanation); ``unfused`` holds, per member left alone,
    the reasons it joined no region.
    """

    plan_name: str
    policy: str
    contract: str
    regions: tuple[Region, ...]
    growths: tuple[Growth, ...]
    unfused: tuple[tuple[str, tuple[str, ...]], ...]
    cutbacks: tuple[Cutback, ...] = ()
    decisions: tuple = ()  # fusion="priced": one weft.compose.priced.PricedDecision per anchor
    pricing: object | None = None  # fusion="priced": the pricing phase's report (budget, counts)

    def cutback_for(self, anchor: str) -> Cutback | None:
        return next((cut for cut in self.cutbacks if cut.anchor == anchor), None)

    def region_of(self, member: str) -> Region:
        for region in self.regions:
            if member in region.members:
                return region
        raise KeyError(member)

    @property
    def fused(self) -> tuple[Region, ...]:
        return tuple(region for region in self.regions if region.is_fused)


def choose_regions(
    plan: Plan, policy: str = "greedy", contract: str = "strict", fits: RegionFit | None = None, pricing=None
) -> Partition:
    """Partition ``plan``'s members into regions under ``policy`` (see module doc).

    ``fits`` is the lowering's check (``weft.lower.fused.region_fit``); without it
    every legal candidate counts as lowerable (the IR-level answer, used by tests
    that lower with an explicit tile size). ``pricing`` (``fusion="priced"`` only) is
    the pricer ``weft.fuse.region_pricing`` builds (see ``weft.compose.priced``).
    """
    if policy not in POLICIES:
        raise ConfigError(
            f"fusion={policy!r}: choose_regions knows {POLICIES}; 'matchers' needs library bodies,"
            " which are not built yet: use fusion='priced', 'greedy' or 'off'"
        )
    if contract not in CONTRACTS:
        raise ConfigError(f"contract={contract!r} is not one of {CONTRACTS}")
    if policy == "priced":
        return _choose_priced(plan, contract, pricing)
    cutbacks: list[Cutback] = []

    def take(growth: Growth, available: frozenset[str]) -> Region:
        if policy != "greedy":
            return growth.candidates[0]
        region, cut = _largest_fitting(growth, fits)
        if cut is not None:
            cutbacks.append(cut)
        return region

    steps = cover_by_anchors(plan, functools.partial(grow, plan), take)
    growths = [growth for growth, _ in steps]
    chosen = [region for _, region in steps]
    order = {kernel.output: position for position, kernel in enumerate(plan.kernels)}
    chosen.sort(key=lambda region: order[region.anchor])
    growths.reverse()
    return Partition(
        plan_name=plan.name,
        policy=policy,
        contract=contract,
        regions=tuple(chosen),
        growths=tuple(growths),
        unfused=_unfused_reasons(plan, chosen, growths, policy, cutbacks),
        cutbacks=tuple(sorted(cutbacks, key=lambda cut: order[cut.anchor])),
    )


def _choose_priced(plan: Plan, contract: str, pricing) -> Partition:
    """The hook for ``fusion="priced"`` (the policy itself lives in ``weft.compose.priced``)."""
    from weft.compose.priced import choose_priced, priced_reasons

    if pricing is None:
        raise ConfigError("fusion='priced' needs a pricer: weft.fuse builds one (weft.fuse.region_pricing)")
    chosen, growths, decisions = choose_priced(plan, pricing)
    order = {kernel.output: position for position, kernel in enumerate(plan.kernels)}
    chosen.sort(key=lambda region: order[region.anchor])
    growths.reverse()
    unfused = []
    for member, reasons in _unfused_reasons(plan, chosen, growths, "priced"):
        extra = priced_reasons(member, decisions)
        kept = tuple(dict.fromkeys((*extra, *(r for r in reasons if not r.startswith("no producer")))))
        unfused.append((member, kept or reasons))
    return Partition(plan.name, "priced", contract, tuple(chosen), tuple(growths), tuple(unfused), (),
                     tuple(decisions), getattr(pricing, "report", None))


def _largest_fitting(growth: Growth, fits: RegionFit | None) -> tuple[Region, Cutback | None]:
    """The largest candidate the lowering can emit (the anchor alone always can)."""
    reasons: list[str] = []
    for position in range(len(growth.candidates) - 1, -1, -1):
        region = growth.candidates[position]
        why = None if fits is None or not region.is_fused else fits(region)
        if why is None:
            if not reasons:
                return region, None
            left = tuple(m for m in growth.largest.members if m not in region.members)
            return region, Cutback(growth.anchor, position + 1, len(growth.candidates), tuple(reasons), left)
        reasons.append(f"candidate {position + 1}: {why}")
    raise AssertionError("the anchor alone always lowers")  # pragma: no cover


def _unfused_reasons(
    plan: Plan, chosen: list[Region], growths: list[Growth], policy: str, cutbacks: list[Cutback] = ()
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """For each member alone in its region: every refusal that kept it out of a larger one."""
    alone = {region.anchor for region in chosen if not region.is_fused}
    refusals: dict[str, list[Refusal]] = {}
    for growth in growths:
        for refusal in growth.refusals:
            refusals.setdefault(refusal.member, []).append(refusal)
    result = []
    for kernel in plan.kernels:
        if kernel.output not in alone:
            continue
        reasons: list[str] = []
        if policy == "off":
            result.append((kernel.output, ("fusion='off'",)))
            continue
        for cut in cutbacks:
            if cut.anchor == kernel.output:
                reasons.append(cut.describe())
            elif kernel.output in cut.left_out:
                reasons.append(f"left out of {cut.anchor}'s region ({cut.reasons[0]}) and grew no region of its own")
        for refusal in refusals.get(kernel.output, []):
            if refusal.reason != "already in another region":
                reasons.append(f"refused by {refusal.anchor}: {refusal.reason}")
        for growth in growths:
            if growth.anchor == kernel.output:
                for refusal in growth.refusals:
                    if refusal.reason != "already in another region":
                        reasons.append(f"could not take {refusal.member}: {refusal.reason}")
        if not reasons:
            reasons.append("no producer could join it and no consumer region could take it")
        result.append((kernel.output, tuple(dict.fromkeys(reasons))))
    return tuple(result)
