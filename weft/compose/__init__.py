"""The composition engine (docs/design.md §5): regions grown from anchors, signatures,
the rescaling rewrite derived from member bodies. No fusion pattern is written
anywhere here, and nothing here imports the lowering: what the engine must know
about it (can this region be emitted fused?) is passed in as ``fits``
(``choose_regions(plan, policy, contract, fits=...)``); ``weft.fuse`` binds it
to ``weft.lower.fused.region_fits`` and lowers the partition.
"""

from weft.compose.partition import POLICIES, Cutback, Partition, choose_regions
from weft.compose.regions import Growth, Refusal, Region, grow, grow_from_anchor, plan_anchors
from weft.compose.rescale import OnePass, OnlineFold, RewriteRefusal, derive_online_fold, one_pass
from weft.compose.signature import canonical_region, region_signature

__all__ = [
    "POLICIES", "Cutback", "Growth", "OnePass", "OnlineFold", "Partition", "Refusal", "Region", "RewriteRefusal",
    "canonical_region", "choose_regions", "derive_online_fold", "grow", "grow_from_anchor", "one_pass", "plan_anchors",
    "region_signature",
]
