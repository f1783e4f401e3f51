"""The lowering, seen by the pricer: a region's unfused and fused forms as facts.

``weft.compile`` builds a ``PlanPricing`` with the lowering's functions and hands its
``survey``/``verdict`` to the priced policy (``weft.compose.priced``), which never
imports the lowering. Everything here is cached per region signature: a region is
lowered (unfused members, the plain tiled form once, the one-pass form once) the
first time its signature is seen; every other occurrence and every tiling reuses it.

A region is lowered against a *sub-plan* of its own members and buffers, so the cost
does not grow with the size of the whole plan.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from weft.compose.regions import Region
from weft.compose.signature import region_signature
from weft.cost.distance import plan_homes, region_homes
from weft.cost.facts import FunctionFacts, function_facts, tile_sizes_of
from weft.cost.search import Budget, BudgetExhausted, FusedForm, Pricer, RegionLowering, RegionPrice
from weft.ir import Plan, expr_loads
from weft.ir.canonical import canonical_tiled_group


@dataclass
class PricingReport:
    """What the pricing phase did, for ``explain`` and the benchmark."""

    budget_s: float
    seconds: float = 0.0
    signatures: int = 0
    priced: int = 0
    unpriced: list[str] = field(default_factory=list)  # signatures the budget left unpriced
    order: list[tuple[str, float]] = field(default_factory=list)  # (signature, expected gain), as priced
    overrun_s: float = 0.0  # how far the phase ran past its share (0: on time)
    cpu_seconds: float = 0.0  # this process's CPU time in the phase (wall minus waiting for a core)


class PlanPricing:
    """Region prices for one plan (see module doc); ``lowering`` holds the lowering's functions:

    ``views(plan)``, ``lower_member(plan, member, views)`` -> LoweredFunction,
    ``lower_contraction(plan, region, views)`` -> LoweredFunction | None (optional: the
    microkernel with the region's tail as epilogue; where it serves it is the only fused form),
    ``tilings(plan, region)`` -> [Tiling-like with ``axes`` ((anchor, extent, size), ...)],
    lowering's own first, ``default_tiling(plan, region)``, ``lower_fused(plan, region, views, tiling)``
    -> LoweredFunction | None, ``lower_one_pass(plan, region, views)`` -> LoweredFunction | None.
    """

    def __init__(self, plan: Plan, pricer: Pricer, lowering, budget_s: float, page_seconds: float = 0.0,
                 page_bytes: int = 4096, fits=None) -> None:
        self.plan = plan
        self.fits = fits  # the policy's ``fits`` (weft.compose.priced): which candidates can be emitted fused
        self.page_seconds = page_seconds  # the profile's first-touch cost of a fresh page
        self.page_bytes = page_bytes
        self.pricer = pricer
        self.lowering = lowering
        self.kernels = {kernel.output: kernel for kernel in plan.kernels}
        self.buffers = plan.buffer_map()
        self.member_homes = plan_homes(plan, pricer.numbers.shared_capacities)
        self.budget = Budget(budget_s)
        self.exhausted = False  # the budget refused a step: the phase is over, whatever time is left
        self.report = PricingReport(budget_s)
        self.signatures: dict[tuple[str, ...], str] = {}
        self.local_signatures: dict[tuple, str] = {}  # plan-local canonical key -> signature
        self.lowerings: dict[tuple[str, ...], RegionLowering] = {}  # region members -> what the pricer sees
        self.orders: dict[tuple[str, ...], tuple[str, ...]] = {}  # region members -> buffer_order
        self.loads: dict[str, tuple[str, ...]] = {}  # member -> the buffers it loads, in walk order
        self.facts: dict[tuple[str, str], object] = {}  # (signature, what) -> facts, shared by occurrences
        self.occurrences: dict[str, int] = {}

    # ------------------------------------------------------------------ per region

    def signature(self, region: Region) -> str:
        key = region.members
        found = self.signatures.get(key)
        if found is None:
            # the plan-local canonical key (member forms by number, each computed once per member
            # of the plan) finds a signature already digested; only a new one is digested
            local = canonical_tiled_group(self.plan, region.members, region.private, region.anchor,
                                          region.anchor_axes, region.tile_maps, (self.pricer.contract,)).key
            found = self.local_signatures.get(local)
            if found is None:
                found = self.local_signatures[local] = region_signature(self.plan, region, self.pricer.contract)
            self.signatures[key] = found
        return found

    def subplan(self, region: Region) -> Plan:
        names: dict[str, None] = {}
        for member in region.members:
            names.update(dict.fromkeys(self.kernels[member].reads))
            names[member] = None
        buffers = tuple(self.buffers[name] for name in names)
        kernels = tuple(self.kernels[member] for member in region.members)
        return Plan(buffers, kernels, tuple(region.inputs), tuple(region.outputs), f"{self.plan.name}:{region.anchor}")

    def buffer_order(self, region: Region) -> tuple[str, ...]:
        found = self.orders.get(region.members)
        if found is None:
            names: dict[str, None] = {}
            for member in region.members:  # as ``buffer_order``, each member's loads walked once
                loads = self.loads.get(member)
                if loads is None:
                    loads = self.loads[member] = tuple(dict.fromkeys(
                        load.buffer for load in expr_loads(self.kernels[member].body)))
                names.update(dict.fromkeys(loads))
                names.setdefault(member, None)
            found = self.orders[region.members] = tuple(names)
        return found

    def buffer_homes(self, region: Region) -> dict[str, int]:
        """The level (0 L1 .. 3 memory) serving the first touch of each of ``region``'s buffers
        fused, by the plan's own names (a library body's price reads it)."""
        return region_homes(self.member_homes, region.members)

    def region_lowering(self, region: Region) -> RegionLowering:
        found = self.lowerings.get(region.members)
        if found is None:
            found = self.lowerings[region.members] = self._region_lowering(region)
        return found

    def _region_lowering(self, region: Region) -> RegionLowering:
        signature = self.signature(region)
        lowering = self.lowering

        def cached(what: str, build: Callable[[], object]):
            key = (signature, what)
            if key not in self.facts:
                with self.budget.step():  # lowering a large candidate is the longest step: interruptible
                    built = build()
                self.facts[key] = built
            return self.facts[key]

        def unfused() -> tuple[FunctionFacts, ...]:
            def build():
                sub = self.subplan(region)
                views = lowering.views(sub)
                result = []
                for member in region.members:
                    self.budget.check()
                    result.append(function_facts(lowering.lower_member(sub, member, views), self.pricer.contract))
                return tuple(result)
            return cached("unfused", build)

        def forms() -> tuple[FusedForm, ...]:
            return cached("forms", lambda: self._forms(region))

        # the cached facts name the buffers of the signature's first occurrence: translate
        # this occurrence's homes into those names, position by position
        names = self.buffer_order(region)
        first = self.facts.setdefault((signature, "names"), names)
        rename = dict(zip(names, first, strict=True)) if len(first) == len(names) else {n: n for n in names}
        homes = region_homes(self.member_homes, region.members)
        compulsory = tuple(
            (self.buffers[name].nbytes, homes.get(name, 3)) for name in (*region.inputs, *region.outputs)
        )
        member_homes = {
            rename[member]: {rename.get(b, b): level for b, level in self.member_homes.get(member, {}).items()}
            for member in region.members
        }
        numbers = self.pricer.numbers
        return RegionLowering(
            signature, self.occurrences.get(signature, 1), unfused, forms,
            {rename.get(b, b): level for b, level in homes.items()}, member_homes, compulsory,
            arena_bytes=sum(self.buffers[name].nbytes for name in region.private),
            page_cycles=self.page_seconds * numbers.clock_hz, page_bytes=self.page_bytes,
        )

    def _forms(self, region: Region) -> tuple[FusedForm, ...]:
        lowering = self.lowering
        sub = self.subplan(region)
        views = lowering.views(sub)
        carried = tuple(
            (member, axis, anchor_axis)
            for anchor_axis, mapping in (region.tile_maps or ((region.tile_axis, region.tile_axes),))
            for member, axis in mapping
        )
        result = []
        contraction = getattr(lowering, "lower_contraction", None)
        if contraction is not None:
            self.budget.check()
            function = contraction(sub, region, views)
            if function is not None:  # the lowering emits this form whenever it serves: price only it
                return (FusedForm("microkernel", function_facts(function, self.pricer.contract), ((),)),)
        if lowering.lower_one_pass is not None:
            self.budget.check()
            function = lowering.lower_one_pass(sub, region, views)
            if function is not None:
                sizes = tile_sizes_of(function, carried)
                facts = function_facts(function, self.pricer.contract, carried, math.prod(sizes.values()) or 1)
                result.append(FusedForm("one pass", facts, (tuple(sorted(sizes.items())),)))
        self.budget.check()
        default = lowering.default_tiling(sub, region)
        if default is not None:
            function = lowering.lower_fused(sub, region, views, default)
            if function is not None:
                points = math.prod(size for _, _, size in default.axes) or 1
                facts = function_facts(function, self.pricer.contract, carried, points)
                tilings = [tiling_key(default)]
                for tiling in lowering.tilings(sub, region):
                    self.budget.check()
                    key = tiling_key(tiling)
                    if key not in tilings:
                        tilings.append(key)
                result.append(FusedForm("fused", facts, tuple(tilings)))
        return tuple(result)

    # ------------------------------------------------------------------ the phase

    def survey(self, regions: list[Region]) -> None:
        """Price every distinct signature among ``regions`` in order of expected gain
        (upper bound of the saving x occurrences) until the budget is spent."""
        start, start_cpu = time.perf_counter(), time.process_time()
        self.budget = Budget(self.budget.seconds)  # the pricing share starts now, not at construction
        self.exhausted = False
        by_signature: dict[str, Region] = {}
        gains = []
        try:
            with self.budget.step():
                for region in regions:
                    if not region.is_fused:
                        continue
                    self.budget.check()
                    signature = self.signature(region)
                    self.occurrences[signature] = self.occurrences.get(signature, 0) + 1
                    by_signature.setdefault(signature, region)
                for signature, region in by_signature.items():
                    unfused, bound = self.pricer.estimate(self.region_lowering(region), self.budget)
                    gains.append((max(0.0, unfused - bound) * self.occurrences[signature], signature, region))
                gains.sort(key=lambda item: -item[0])
                for gain, signature, region in gains:
                    verdict = self.pricer.price_region(self.region_lowering(region), self.budget)
                    self.report.order.append((signature, gain))
                    if verdict.status == "budget":
                        self.exhausted = True
                        break
        except BudgetExhausted:
            self.exhausted = True
        self.report.signatures = len(by_signature)
        priced = {verdict.signature for verdict in self.pricer.verdicts.values()}
        self.report.unpriced = [signature for signature in by_signature if signature not in priced]
        self.report.seconds += time.perf_counter() - start
        self.report.cpu_seconds += time.process_time() - start_cpu
        self._account()

    def verdict(self, region: Region) -> RegionPrice:
        """The memoised verdict of ``region`` (priced now if the budget allows; once it is
        spent, nothing more is computed and the time of the lookup is the policy's, not the
        pricing phase's)."""
        if self._spent():
            lowering = self.lowerings.get(region.members)
            known = self.pricer.known(lowering) if lowering is not None else None
            return known or RegionPrice(self.signatures.get(region.members, ""), "budget",
                                        reason=f"pricing budget of {self.budget.seconds * 1e3:.0f} ms spent")
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            with self.budget.step():
                lowering = self.region_lowering(region)
                verdict = self.pricer.known(lowering) or self.pricer.price_region(lowering, self.budget)
            self.exhausted = verdict.status == "budget"
        except BudgetExhausted as error:
            self.exhausted = True
            verdict = RegionPrice(self.signatures.get(region.members, ""), "budget", reason=str(error))
        self.report.seconds += time.perf_counter() - start
        self.report.cpu_seconds += time.process_time() - start_cpu
        self._account()
        return verdict

    def _spent(self) -> bool:
        """The phase is over: its time is gone, or the budget refused a step (the time left is
        shorter than a step: asking again per region cost qwen-decode-step's 400 regions 4-10 ms
        past a 100 ms share, each refusal a step of its own)."""
        return self.exhausted or self.budget.left() <= 0

    def _account(self) -> None:
        self.report.overrun_s = max(0.0, self.report.seconds - self.report.budget_s)
        self.report.priced = len({verdict.signature for verdict in self.pricer.verdicts.values()})


def tiling_key(tiling) -> tuple[tuple[str, int], ...]:
    return tuple((axis, size) for axis, _, size in tiling.axes)


def buffer_order(kernels: dict, region: Region) -> tuple[str, ...]:
    """The region's buffers in first-appearance order (as ``region_signature`` numbers them)."""
    from weft.ir import expr_loads

    names: dict[str, None] = {}
    for member in region.members:
        for load in expr_loads(kernels[member].body):
            names.setdefault(load.buffer, None)
        names.setdefault(member, None)
    return tuple(names)
