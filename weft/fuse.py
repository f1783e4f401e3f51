"""The fusion stage of a compile: regions chosen by ``weft.compose``, lowered by ``weft.lower``.

The one place both are called, so neither imports the other (docs/design.md section 7)::

    fusion="off"  ->  weft.lower.lower_plan(plan, None, target)        one function per member
    otherwise     ->  weft.compose.choose_regions(plan, policy, contract, fits=region_fits(...))
                  ->  weft.lower.fused.lower_partition(plan, partition, target, online_lowering=...)

Greedy asks the lowering which candidates it can emit (``fits``), so every chosen
region is lowered fused and ``explain`` shows every cut-back. ``fusion="priced"``
builds the pricer (``region_pricing``: ``weft.cost`` prices the lowering's forms and
tilings, handed in as ``_PricingLowering``) and lowers each region in the form and
tiling that won (``lower_priced``); ``weft.compile`` adds the decision record and the
races (``lower_decided``, handed the race's builder, which compiles). ``fusion="matchers"``
(the legacy mode) fuses what a matcher admits (``lower_matched``). ``weft.compile`` and
``weft explain`` both lower through here.
"""

from __future__ import annotations

from weft.compose import Partition, choose_regions, one_pass
from weft.config import Config
from weft.cost.bridge import PlanPricing
from weft.cost.machine import machine_profile
from weft.cost.model import machine_numbers
from weft.cost.search import Pricer
from weft.ir import Plan
from weft.lower import Target, fused, lower_plan
from weft.lower.fused import lower_partition, region_fits, region_tiling
from weft.lower.nest import LoweredPlan
from weft.lower.online import lower_online_region
from weft.lower.schedule import PARALLEL_MIN_WORK, default_views, lower_group


def online_lowering_for(contract: str):
    """The one-pass lowering under Inference, given each region's pass by ``weft.compose.one_pass``
    (None under Strict: the rewrite reorders folds)."""
    if contract != "inference":
        return None

    def lower_online(plan: Plan, region, views, target: Target, taken: set[str]):
        return lower_online_region(plan, region, one_pass(plan, region, contract), views, target, taken)

    return lower_online


PRICING_SHARE = 0.5
"""The part of ``Config.budget_s`` the pricing phase may spend (the rest: race, lowering, C)."""


class _PricingLowering:
    """The lowering's functions the pricer needs (``weft.cost.bridge.PlanPricing``): passed
    in, so neither ``weft.compose`` nor the search imports the lowering's choices."""

    def __init__(self, target: Target, online_lowering) -> None:
        self.target = target
        self.fused = fused
        self.lower_one_pass = None if online_lowering is None else (
            lambda plan, region, views: online_lowering(plan, region, views, target, {v.pointer for v in views.values()})
        )

    def views(self, plan: Plan):
        return default_views(plan)

    def lower_member(self, plan: Plan, member: str, views):
        return lower_group(plan, (member,), views, self.target, set())

    def default_tiling(self, plan: Plan, region):
        if self.fused.microkernel_lost(plan, region, default_views(plan), self.target):
            return None  # the plain fused form is not emitted (weft.lower.fused.region_fit)
        return self.fused.choose_tiling(plan, region, self.target.lanes, contract=self.target.contract)

    def tilings(self, plan: Plan, region):
        """Every tiling ``lower_region`` can emit: each common anchor axis (extent > 1) as the
        primary, each tile size ``choose_tiling`` tries, within the scratch budget and with no
        starved contraction. Scratch grows linearly with the primary tile (every private
        member is tiled along it), so it is measured once per primary axis at a tile of one."""
        fused, lanes = self.fused, self.target.lanes
        if fused.microkernel_lost(plan, region, default_views(plan), self.target):
            return
        extents = {axis.name: axis.extent for axis in plan.kernel(region.anchor).axes}
        common = [name for name, _ in region.tile_maps] if region.tile_maps else [region.tile_axis]
        contraction = any(plan.kernel(member).is_contraction for member in region.members)
        for primary in (name for name in extents if name in common and extents[name] > 1):
            per_point = fused.shared_scratch_bytes(plan, region, fused.region_tiling(plan, region, 1, primary))
            for size in (4 * lanes, 2 * lanes, lanes, 8, 4, 2, 1):
                if per_point * min(size, extents[primary]) > fused.SCRATCH_BUDGET:
                    continue
                tiling = fused.region_tiling(plan, region, size, primary)
                if not contraction or fused.starved_contraction(plan, region, tiling, lanes) is None:
                    yield tiling

    def lower_contraction(self, plan: Plan, region, views):
        """The microkernel with the region's tail as epilogue (or its producers as prologue),
        or None: when it serves, it is the fused form ``lower_partition`` emits."""
        if not self.target.microkernel:
            return None
        return self.fused.lower_contraction_region(plan, region.members, region.outputs, views, self.target.lanes,
                                                   self.target.contract, PARALLEL_MIN_WORK, lambda: "priced")

    def lower_fused(self, plan: Plan, region, views, tiling):
        return self.fused.lower_region(plan, region, views, self.target, {v.pointer for v in views.values()},
                                       tiling=tiling)


def region_pricing(plan: Plan, config: Config, target: Target, profile=None):
    """The pricer of ``fusion="priced"``: region verdicts for ``plan`` on this machine (its
    calibrated profile), at ``config.threads``, inside ``PRICING_SHARE`` of ``config.budget_s``."""
    profile = profile or machine_profile(config.cache_dir, cc=config.cc)
    pricer = Pricer(machine_numbers(profile, config.threads), config.contract)
    lowering = _PricingLowering(target, online_lowering_for(config.contract))
    return PlanPricing(plan, pricer, lowering, config.budget_s * PRICING_SHARE, profile.first_touch_s_per_page,
                       profile.page_bytes, fits=candidate_fits(plan, target, config.contract))


def candidate_fits(plan: Plan, target: Target, contract: str):
    """``fits`` of the priced policy: None for a candidate the lowering can emit fused or a
    library body's matcher admits, else why not (``weft.compose.priced.survey_candidates``)."""
    from weft.decide.library import admissions

    generic = region_fits(plan, target, online_lowering_for(contract))  # remembers its answers
    admitted: dict[tuple[str, ...], bool] = {}

    def fits(region):
        why = generic(region)
        if why is not None and region.members not in admitted:
            admitted[region.members] = bool(admissions(plan, region.members, contract))
        return None if why is None or admitted[region.members] else why

    return fits


def _unrecorded(pricing, config: Config):
    """``pricing`` behind the deciding layer without a record or a race (library bodies are
    priced there, beside the generic forms), unless it already is one."""
    from weft.decide.verdicts import DecidedPricing

    if isinstance(pricing, DecidedPricing):
        return pricing
    key_base = {"contract": config.contract, "threads": config.threads,
                "profile_id": pricing.pricer.numbers.profile_id, "deciding": "", "compiler": ""}
    return DecidedPricing(pricing, None, key_base, config.race_margin)


def chosen_bodies(plan: Plan, partition: Partition, contract: str, names: dict[str, str]) -> dict[str, object]:
    """anchor -> the matcher's proof for each region whose verdict chose a library body
    (``names``: anchor -> body name), for ``lower_partition(bodies=...)``."""
    from weft.decide.library import admissions

    found = {}
    for anchor, name in names.items():
        region = partition.region_of(anchor)
        match = next((match for body, match in admissions(plan, region.members, contract) if body.name == name), None)
        if match is not None:
            found[anchor] = match
    return found


def lower_priced(plan: Plan, config: Config, target: Target, pricing=None):
    """(LoweredPlan, Partition) under ``fusion="priced"``: regions whose best fused price (the
    generic forms' or an admitted library body's) beats their members unfused, each lowered
    in the form, tiling or body that won."""
    pricing = _unrecorded(pricing or region_pricing(plan, config, target), config)
    partition = choose_regions(plan, "priced", config.contract, pricing=pricing)
    tilings, body_names = {}, {}
    for decision in partition.decisions:
        verdict = decision.chosen
        if verdict is not None and getattr(verdict, "body", None):
            body_names[decision.anchor] = verdict.body
        elif verdict is not None and verdict.form == "fused" and verdict.tiling:
            region = partition.region_of(decision.anchor)
            primary, size = verdict.tiling[-1]
            tilings[decision.anchor] = region_tiling(plan, region, size, primary)
    lowered = lower_partition(plan, partition, target, online_lowering=online_lowering_for(config.contract),
                              tilings=tilings, bodies=chosen_bodies(plan, partition, config.contract, body_names))
    return lowered, partition


def choose_partition(plan: Plan, config: Config, target: Target) -> Partition:
    """The regions ``config.fusion`` chooses under ``config.contract``, asking the lowering for ``target``."""
    fits = region_fits(plan, target, online_lowering_for(config.contract))
    return choose_regions(plan, config.fusion, config.contract, fits=fits)


def has_empty_buffer(plan: Plan) -> bool:
    """A buffer with an extent of 0 (an empty tensor): nothing to fuse, no traffic to save."""
    return any(0 in buffer.shape for buffer in plan.buffers)


def lower_decided(plan: Plan, config: Config, target: Target, contenders, compiler: str, pricing=None,
                  record=None, survey: bool = True):
    """(LoweredPlan, Partition, DecideReport) under ``fusion="priced"`` with the decision
    record (``weft.decide``): recorded verdicts are reused (no price, no race), the rest are
    priced, thin margins raced inside ``config.race_share`` of the budget, and every new
    verdict written back. ``contenders``: the race's builder (``weft.compile.race_contenders``,
    which compiles each form); ``compiler``: the C compiler's identity, part of a verdict's key;
    ``record``: a ``DecisionRecord`` (default: the one in the cache); ``survey=False``: no
    pricing ahead of the policy (a partition decided again from the record for explain: each
    verdict is asked for, and only one the record lacks is priced)."""
    from weft.decide.race import RaceBudget
    from weft.decide.record import DecisionRecord
    from weft.decide.verdicts import DecidedPricing

    pricing = pricing or region_pricing(plan, config, target)
    record = record if record is not None else DecisionRecord.in_cache(config.cache_dir)
    key_base = decision_key_base(config, compiler, pricing.pricer.numbers.profile_id)
    decided = DecidedPricing(pricing, record, key_base, config.race_margin,
                             RaceBudget(config.budget_s * config.race_share), contenders(pricing), survey=survey)
    lowered, partition = lower_priced(plan, config, target, decided)
    report = decided.decide_report
    report.rests_on, report.undecided = decided.used(), tuple(decided.undecided)
    return lowered, partition, report


def decision_key_base(config: Config, compiler: str, profile_id: str | None = None) -> dict:
    """The fields of a ``weft.decide.record.RecordKey`` shared by every region of one compile
    (all but the signature and context); ``profile_id``: None for this machine's profile."""
    from weft.decide.record import deciding_code

    if profile_id is None:
        profile_id = machine_profile(config.cache_dir, cc=config.cc).profile_id
    return {"contract": config.contract, "threads": config.threads, "profile_id": profile_id,
            "deciding": deciding_code(), "compiler": compiler}


def still_recorded(rests_on: tuple, cache_dir, undecided: tuple = ()) -> bool:
    """Whether every verdict a recorded priced compile rested on is still in the decision
    record as it was, and none it left ``undecided`` (their keys) has been recorded since
    (then the same regions come out, with no price and no race; else another compile, a
    concurrent one, has decided more, and deciding again from the record agrees with it)."""
    from weft.decide.record import DecisionRecord

    record = DecisionRecord.in_cache(cache_dir)
    try:
        if any(record.get(key) is not None for key in undecided):
            return False
        for decision in rests_on:
            found = record.get(decision.key)
            if found is None or (found.choice, found.form, found.tiling) != (decision.choice, decision.form,
                                                                              decision.tiling):
                return False
    finally:
        record.close()
    return True


def lower_matched(plan: Plan, config: Config, target: Target):
    """(LoweredPlan, Partition, bodies) under ``fusion="matchers"``: every region a matcher
    admits fuses on sight (``weft.decide.legacy``): no price, no race, no record."""
    from weft.decide.legacy import choose_matched
    from weft.decide.library import admissions

    online = online_lowering_for(config.contract)
    partition, bodies = choose_matched(plan, config.contract, region_fits(plan, target, online))
    built = {}
    for region in partition.fused:  # a built body admitted: taken on sight; else the generic fused form
        found = admissions(plan, region.members, config.contract)
        if found:
            built[region.anchor] = found[0][1]
    lowered = lower_partition(plan, partition, target, online_lowering=online, bodies=built)
    return lowered, partition, bodies


def admitted_in(plan: Plan, partition: Partition) -> dict[str, tuple]:
    """anchor -> library bodies a matcher admits for each chosen fused region (for explain)."""
    from weft.decide.library import admitted_bodies

    found = {region.anchor: admitted_bodies(plan, region.members, partition.contract) for region in partition.fused}
    return {anchor: bodies for anchor, bodies in found.items() if bodies}


def fuse(plan: Plan, config: Config, target: Target) -> tuple[LoweredPlan, Partition | None]:
    """``plan`` lowered under ``config``, and the partition of ``fusion="priced"`` (whose
    prices ``explain`` shows) or ``"matchers"``; None for the others: unfused for
    ``fusion="off"`` (and for a plan holding an empty tensor), else by the regions the policy
    chooses. Priced here prices every region (no decision record, no race: ``weft.compile``
    adds those through ``lower_decided``)."""
    if config.fusion == "off" or has_empty_buffer(plan):
        return lower_plan(plan, None, target), None
    if config.fusion == "priced":
        return lower_priced(plan, config, target)
    if config.fusion == "matchers":
        return lower_matched(plan, config, target)[:2]
    partition = choose_partition(plan, config, target)
    return lower_partition(plan, partition, target, online_lowering=online_lowering_for(config.contract)), None


def fuse_and_lower(plan: Plan, config: Config, target: Target) -> LoweredPlan:
    """``plan`` lowered under ``config`` (``fuse`` without the partition)."""
    return fuse(plan, config, target)[0]
