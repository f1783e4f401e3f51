"""The composition engine (DESIGN.md §5): regions grown from anchors, signatures,
the rescaling rewrite derived from member bodies, and the explanation of it all.
No fusion pattern is written anywhere here."""

from weft.compose.partition import POLICIES, Partition, choose_regions
from weft.compose.regions import Growth, Refusal, Region, grow, grow_from_anchor, plan_anchors

__all__ = [
    "POLICIES", "Growth", "Partition", "Refusal", "Region", "choose_regions", "grow", "grow_from_anchor",
    "plan_anchors",
]
