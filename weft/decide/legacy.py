"""``fusion="matchers"`` (and ``WEFT_GENERIC_FUSION=off``): the legacy policy, fuse on sight.

Anchors are taken in reverse topological order as under the other policies. Per anchor,
the largest grown candidate that a matcher admits (``weft.decide.library``) and the
lowering can emit (``fits``, passed in) is taken at once: no price, no race, no record.
An anchor no matcher admits stays alone. It exists so the priced engine can be compared
with fuse-on-sight side by side.
"""

from __future__ import annotations

from weft.compose.partition import Partition, RegionFit, _unfused_reasons
from weft.compose.regions import Growth, Region, grow
from weft.decide.library.matchers import admitted_bodies, proposed_regions
from weft.ir import Plan


def choose_matched(plan: Plan, contract: str, fits: RegionFit | None = None) -> tuple[Partition, dict[str, tuple]]:
    """(partition, anchor -> bodies admitted for its chosen region) under fuse-on-sight."""
    uncovered = {kernel.output for kernel in plan.kernels}
    chosen: list[Region] = []
    growths: list[Growth] = []
    bodies: dict[str, tuple] = {}
    for kernel in reversed(plan.kernels):
        if kernel.output not in uncovered:
            continue
        growth = grow(plan, kernel.output, frozenset(uncovered))
        growths.append(growth)
        region = growth.candidates[0]
        proposed = proposed_regions(plan, kernel.output, frozenset(uncovered), contract)
        for candidate in (*proposed, *reversed(growth.candidates[1:])):
            admitted = admitted_bodies(plan, candidate.members, contract)
            if admitted and (candidate in proposed or fits is None or fits(candidate) is None):
                region, bodies[candidate.anchor] = candidate, admitted
                break
        else:
            admitted = admitted_bodies(plan, region.members, contract)
            if admitted:
                bodies[region.anchor] = admitted
        chosen.append(region)
        uncovered -= set(region.members)
    order = {kernel.output: position for position, kernel in enumerate(plan.kernels)}
    chosen.sort(key=lambda region: order[region.anchor])
    growths.reverse()
    unfused = tuple(
        (member, tuple(reason for reason in reasons if not reason.startswith("no producer"))
         + ("no matcher admits a region holding it (fusion='matchers' fuses only matched patterns)",))
        for member, reasons in _unfused_reasons(plan, chosen, growths, "matchers")
    )
    return Partition(plan.name, "matchers", contract, tuple(chosen), tuple(growths), unfused), bodies


def describe_bodies(bodies: dict[str, tuple]) -> str:
    """One line per region a matcher admitted: the bodies and the contracts they honour."""
    lines = ["library bodies admitted by matchers:" if bodies else "library bodies admitted by matchers: none"]
    for anchor, admitted in bodies.items():
        text = "; ".join(f"{body.name} ({'/'.join(body.contracts)}: {body.note})" for body in admitted)
        lines.append(f"  {anchor}: {text}")
    return "\n".join(lines)
