"""Choosing a set of disjoint regions that covers every member of a plan.

Until the cost model lands, two placeholder policies exist (a compile parameter,
never a global):

* ``"greedy"``: the largest legal candidate per anchor;
* ``"off"``: every member alone (the unfused plan).

Anchors are taken in reverse topological order. The plan's outputs are anchors;
so is every member left outside the regions grown so far (its output is then seen
by another region, i.e. from outside its own). Because only an anchor's output
leaves a region and every member precedes its anchor, ordering the regions by
anchor gives a valid execution order.
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.compose.regions import Growth, Refusal, Region, grow
from weft.config import CONTRACTS
from weft.errors import ConfigError
from weft.ir import Plan

POLICIES = ("off", "greedy")


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

    def region_of(self, member: str) -> Region:
        for region in self.regions:
            if member in region.members:
                return region
        raise KeyError(member)

    @property
    def fused(self) -> tuple[Region, ...]:
        return tuple(region for region in self.regions if region.is_fused)


def choose_regions(plan: Plan, policy: str = "greedy", contract: str = "strict") -> Partition:
    """Partition ``plan``'s members into regions under ``policy`` (see module doc)."""
    if policy not in POLICIES:
        raise ConfigError(
            f"fusion={policy!r}: choose_regions knows {POLICIES}; 'priced' and 'matchers' need the cost"
            " model and library bodies, which are not built yet: use fusion='greedy' or fusion='off'"
        )
    if contract not in CONTRACTS:
        raise ConfigError(f"contract={contract!r} is not one of {CONTRACTS}")
    uncovered = {kernel.output for kernel in plan.kernels}
    chosen: list[Region] = []
    growths: list[Growth] = []
    for kernel in reversed(plan.kernels):
        if kernel.output not in uncovered:
            continue
        growth = grow(plan, kernel.output, frozenset(uncovered))
        growths.append(growth)
        region = growth.largest if policy == "greedy" else growth.candidates[0]
        chosen.append(region)
        uncovered -= set(region.members)
    order = {kernel.output: position for position, kernel in enumerate(plan.kernels)}
    chosen.sort(key=lambda region: order[region.anchor])
    growths.reverse()
    return Partition(
        plan_name=plan.name,
        policy=policy,
        contract=contract,
        regions=tuple(chosen),
        growths=tuple(growths),
        unfused=_unfused_reasons(plan, chosen, growths, policy),
    )


def _unfused_reasons(
    plan: Plan, chosen: list[Region], growths: list[Growth], policy: str
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
