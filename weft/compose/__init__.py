"""The composition engine (docs/design.md §5): regions grown from anchors, signatures,
the rescaling rewrite derived from member bodies, and the explanation of it all.
No fusion pattern is written anywhere here.

``lower_fused(plan, config, target)`` is the seam ``weft.compile`` calls for any
policy other than ``fusion="off"``: it chooses regions with ``config.fusion`` and
``config.contract`` and lowers each region as one tiled nest (``weft.lower.fused``;
under Inference a region the rescaling rewrite applies to is lowered as one pass,
``weft.lower.online``).
"""

from weft.compose.explain import Explanation, explain_partition, explain_plan
from weft.compose.partition import POLICIES, Cutback, Partition, choose_regions
from weft.compose.regions import Growth, Refusal, Region, grow, grow_from_anchor, plan_anchors
from weft.compose.rescale import OnlineFold, RewriteRefusal, derive_online_fold
from weft.compose.signature import canonical_region, region_signature


def lower_fused(plan, config, target):
    """The partition chosen by ``config.fusion`` under ``config.contract``, lowered.

    Greedy asks the lowering which candidates it can emit (``region_fits``), so
    every chosen region is lowered fused and ``explain`` shows every cut-back.
    """
    from weft.lower.fused import lower_partition, region_fits

    online = online_lowering_for(config.contract)
    partition = choose_regions(plan, config.fusion, config.contract, fits=region_fits(plan, target, online))
    return lower_partition(plan, partition, target, online_lowering=online)


def online_lowering_for(contract: str):
    """The one-pass lowering under Inference (None under Strict: the rewrite reorders folds)."""
    if contract != "inference":
        return None
    from weft.lower.online import lower_online_region

    return lower_online_region


__all__ = [
    "POLICIES", "Cutback", "Explanation", "Growth", "OnlineFold", "Partition", "Refusal", "Region", "RewriteRefusal",
    "canonical_region", "choose_regions", "derive_online_fold", "explain_partition", "explain_plan", "grow",
    "grow_from_anchor", "lower_fused", "online_lowering_for", "plan_anchors", "region_signature",
]
