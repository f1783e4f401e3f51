"""The fusion stage of a compile: regions chosen by ``weft.compose``, lowered by ``weft.lower``.

The one place both are called, so neither imports the other (DESIGN.md section 7)::

    fusion="off"  ->  weft.lower.lower_plan(plan, None, target)        one function per member
    otherwise     ->  weft.compose.choose_regions(plan, policy, contract, fits=region_fits(...))
                  ->  weft.lower.fused.lower_partition(plan, partition, target, online_lowering=...)

Greedy asks the lowering which candidates it can emit (``fits``), so every chosen
region is lowered fused and ``explain`` shows every cut-back. ``weft.compile`` and
``weft explain --lowering`` both lower through here.
"""

from __future__ import annotations

from weft.compose import Partition, choose_regions, one_pass
from weft.config import Config
from weft.ir import Plan
from weft.lower import Target, lower_plan
from weft.lower.fused import lower_partition, region_fits
from weft.lower.nest import LoweredPlan
from weft.lower.online import lower_online_region


def online_lowering_for(contract: str):
    """The one-pass lowering under Inference, given each region's pass by ``weft.compose.one_pass``
    (None under Strict: the rewrite reorders folds)."""
    if contract != "inference":
        return None

    def lower_online(plan: Plan, region, views, target: Target, taken: set[str]):
        return lower_online_region(plan, region, one_pass(plan, region, contract), views, target, taken)

    return lower_online


def choose_partition(plan: Plan, config: Config, target: Target) -> Partition:
    """The regions ``config.fusion`` chooses under ``config.contract``, asking the lowering for ``target``."""
    fits = region_fits(plan, target, online_lowering_for(config.contract))
    return choose_regions(plan, config.fusion, config.contract, fits=fits)


def fuse_and_lower(plan: Plan, config: Config, target: Target) -> LoweredPlan:
    """``plan`` lowered under ``config``: unfused for ``fusion="off"``, else by chosen regions."""
    if config.fusion == "off":
        return lower_plan(plan, None, target)
    partition = choose_partition(plan, config, target)
    return lower_partition(plan, partition, target, online_lowering=online_lowering_for(config.contract))
