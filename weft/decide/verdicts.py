"""Deciding a region: the record first, then the price, then (thin margins) the race.

``DecidedPricing`` wraps the pricer ``weft.compile`` builds (``weft.cost.bridge.PlanPricing``)
and offers the priced policy the same two calls (``survey``, ``verdict``):

1. a candidate whose key is in the decision record gets the recorded verdict: no price,
   no race (a warm compile prices nothing);
2. otherwise it is priced; if the model's margin is below ``race_margin`` and the race
   share has time left, the contenders are raced (``weft.decide.race``);
3. the verdict is written to the record and the *recorded* row is used (another process
   may have written first: then its verdict is taken, so concurrent compiles agree).

A candidate the pricing budget left unpriced is not recorded (it stays unfused and is
priced on a later compile that has the time).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from weft.compose.priced import PRICED_MARGIN
from weft.cost.distance import region_homes
from weft.decide.library import admissions, proposed_regions
from weft.decide.race import MIN_TIMING_S, RaceBudget, RaceOutcome, run_race, timing_estimate
from weft.decide.record import Decision, DecisionRecord, RecordKey, context_digest

DEFAULT_RACE_MARGIN = 0.10
"""Race a region when the model's predicted margin (either way) is smaller than this."""


@dataclass(frozen=True, slots=True)
class DecidedVerdict:
    """A verdict the policy can take (``status``, ``pays``, ``saving``, ``margin``,
    ``describe``, ``form``, ``tiling``), backed by a recorded ``Decision``.

    ``origin`` is where it came from in *this* compile: ``model``, ``race`` or ``record``;
    ``priced`` is the pricer's own verdict when it was priced now (None from the record)."""

    decision: Decision
    origin: str
    priced: object | None = None

    @property
    def status(self) -> str:
        return self.decision.status

    @property
    def form(self) -> str:
        return self.decision.form

    @property
    def tiling(self):
        return self.decision.tiling

    @property
    def reason(self) -> str:
        return self.decision.reason

    @property
    def body(self) -> str | None:
        """The library body chosen (``library:NAME``), else None."""
        choice = self.decision.choice
        return choice.split(":", 1)[1] if choice.startswith("library:") else None

    @property
    def chosen_cycles(self) -> float | None:
        """The price of the fused program this verdict takes: the chosen body's, else the generic form's."""
        d = self.decision
        return d.bodies.get(self.body, d.fused_cycles) if self.body else d.fused_cycles

    @property
    def saving(self) -> float:
        d, chosen = self.decision, self.chosen_cycles
        return 0.0 if chosen is None or d.unfused_cycles is None else d.unfused_cycles - chosen

    @property
    def margin(self) -> float:
        d, chosen = self.decision, self.chosen_cycles
        if chosen is None or not d.unfused_cycles:
            return 0.0
        return (d.unfused_cycles - chosen) / d.unfused_cycles

    @property
    def unfused(self):
        return getattr(self.priced, "unfused", None)

    @property
    def fused(self):
        return getattr(self.priced, "fused", None)

    def pays(self, margin: float = PRICED_MARGIN) -> bool:
        """The recorded choice (the margin was applied, or the race settled it, when decided):
        the generic fused form or a library body."""
        return self.decision.choice != "unfused"

    def source_text(self) -> str:
        d = self.decision
        decided = "race" if d.source == "race" else "model"
        text = f"verdict from {self.origin}" + (f" (decided by the {decided})" if self.origin == "record" else "")
        if d.race:
            outcome = d.race
            times = ", ".join(f"{name} {median * 1e6:,.1f} us" for name, median in outcome["medians"].items())
            text += f"; race: {times}, spread {outcome['spread']:.1%}: {outcome['note']}"
        elif d.source == "model" and d.reason.startswith("not raced"):
            text += f"; {d.reason}"
        return text

    def bodies_text(self) -> str:
        """Each library body admitted, with its price (empty when none was)."""
        d = self.decision
        if not d.bodies:
            return ""
        return "; bodies admitted: " + ", ".join(
            f"{name} {cycles:,.0f} cycles" + (" (chosen)" if name == self.body else "")
            for name, cycles in sorted(d.bodies.items(), key=lambda item: item[1]))

    def describe(self) -> str:
        d = self.decision
        unfused = f"{d.unfused_cycles:,.0f}" if d.unfused_cycles is not None else "-"
        if d.fused_cycles is None:
            body = f"unfused {unfused} cycles; {d.status}: {d.reason}"
        else:
            tiling = ", ".join(f"{axis}:{size}" for axis, size in d.tiling) or "one tile"
            body = (f"unfused {unfused} cycles, fused {d.fused_cycles:,.0f} cycles ({d.form}, tiles {tiling}),"
                    f" margin {d.margin:+.1%}")
        return f"{body}{self.bodies_text()}; choice {d.choice}; {self.source_text()}"


@dataclass
class DecideReport:
    """What deciding did in one compile (counts, for explain, tests and the benchmark)."""

    recorded: int = 0  # verdicts taken from the record
    priced: int = 0  # verdicts the pricer computed now
    raced: int = 0  # races run
    race_skipped: int = 0  # thin margins left unraced (race share spent or too small)
    written: int = 0  # rows this compile wrote
    taken_from_others: int = 0  # rows another process wrote first
    price_calls: int = 0  # the pricer's tiling prices (zero on a warm compile)
    rests_on: tuple = ()  # the recorded verdicts the regions came from
    undecided: tuple = ()  # the keys the pricing budget left unpriced (their candidates stay unfused)
    from_compile_record: bool = False  # the whole compile reused (weft.runtime.record): nothing decided again

    def describe(self) -> str:
        if self.from_compile_record:
            return (f"decisions: {self.recorded} from the record, 0 priced now, 0 raced (the compile record of this"
                    " plan reused whole: every verdict it rests on is still recorded as it was"
                    + (f"; {len(self.undecided)} verdicts its budget left undecided stay unfused, as then)"
                       if self.undecided else ")"))
        return (f"decisions: {self.recorded} from the record, {self.priced} priced now, {self.raced} raced"
                f" ({self.race_skipped} thin margins unraced), {self.written} written to the record"
                + (f", {self.taken_from_others} taken from another compile" if self.taken_from_others else "")
                + (f", {len(self.undecided)} verdicts left undecided by the pricing budget" if self.undecided else ""))


class DecidedPricing:
    """The priced policy's pricer, behind the decision record (see module doc).

    ``key_base``: contract, threads, profile_id, deciding, compiler (``RecordKey`` fields but
    signature and context). ``contenders(region, decision)`` -> {"unfused": run, "fused": run}
    (built by ``weft.compile``), or None when the region cannot be raced."""

    def __init__(self, pricing, record: DecisionRecord | None, key_base: dict, race_margin: float = DEFAULT_RACE_MARGIN,
                 race_budget: RaceBudget | None = None, contenders=None, survey: bool = True) -> None:
        self.pricing = pricing
        self.surveys = survey  # False: no pricing ahead of the policy (``weft.fuse.lower_decided``)
        self.record = record
        self.key_base = key_base
        self.race_margin = race_margin
        self.race_budget = race_budget or RaceBudget(0.0)
        self.contenders = contenders
        self.decide_report = DecideReport()
        self.memo: dict[RecordKey, DecidedVerdict] = {}
        self.keys: dict[tuple[str, ...], RecordKey] = {}  # region members -> key (the key is costly)
        self.undecided: dict[RecordKey, None] = {}  # verdicts asked for that the budget left unpriced (not recorded)
        self.proposed: set[tuple[str, ...]] = set()

    @property
    def report(self):
        return self.pricing.report

    @property
    def fits(self):
        """The pricing's ``fits`` (which candidates can be emitted fused), or None."""
        return getattr(self.pricing, "fits", None)

    def key(self, region) -> RecordKey:
        known = self.keys.get(region.members)
        if known is None:
            known = self.keys[region.members] = self._key(region)
        return known

    def used(self) -> tuple[Decision, ...]:
        """Every recorded verdict this compile's choices rested on (for the compile record:
        a warm compile may reuse the plan while each of these rows is still recorded as it was)."""
        return tuple(verdict.decision for verdict in self.memo.values())

    def _key(self, region) -> RecordKey:
        pricing = self.pricing
        names = pricing.buffer_order(region)
        position = {name: number for number, name in enumerate(names)}
        homes = region_homes(pricing.member_homes, region.members)
        context = context_digest({str(position[name]): level for name, level in homes.items() if name in position})
        return RecordKey(signature=pricing.signature(region), context=context, **self.key_base)

    def recorded(self, region) -> DecidedVerdict | None:
        key = self.key(region)
        if key in self.memo:
            return self.memo[key]
        decision = self.record.get(key) if self.record is not None else None
        if decision is None:
            return None
        verdict = DecidedVerdict(decision, "record")
        self.memo[key] = verdict
        self.decide_report.recorded += 1
        return verdict

    def survey(self, regions) -> None:
        """Price, in order of expected gain, only the candidates the record does not know."""
        fresh = [region for region in regions if not region.is_fused or self.recorded(region) is None]
        if self.surveys and any(region.is_fused for region in fresh):
            self.pricing.survey(fresh)
        self._count()

    def proposals(self, anchor: str, available: frozenset[str]) -> tuple:
        """Regions library bodies propose for ``anchor`` (``weft.compose.priced`` prices them
        beside the grown candidates): only a body lowers them fused."""
        plan = getattr(self.pricing, "plan", None)
        if plan is None:
            return ()
        found = proposed_regions(plan, anchor, available, self.key_base["contract"])
        self.proposed.update(region.members for region in found)
        return found

    def _price_proposed(self, region):
        """A proposed region's verdict: its members unfused (no generic fused form exists)."""
        from weft.cost.search import BudgetExhausted, RegionPrice, unfused_price

        pricing = self.pricing
        try:
            lowering = pricing.region_lowering(region)
            unfused = unfused_price(lowering, pricing.pricer.numbers, pricing.budget)
        except BudgetExhausted as error:
            return RegionPrice(pricing.signature(region), "budget", reason=str(error))
        return RegionPrice(lowering.signature, "unlowerable", unfused=unfused,
                           reason="proposed by a library body: only the body lowers it fused")

    def verdict(self, region):
        known = self.recorded(region)
        if known is not None:
            return known
        key = self.key(region)
        if region.members in self.proposed:
            priced = self._price_proposed(region)
        else:
            priced = self.pricing.verdict(region)
        self._count()
        if priced.status == "budget":
            # another compile may have decided it meanwhile: its verdict keeps the plans equal
            self.memo.pop(key, None)
            known = self.recorded(region)
            if known is None:
                self.undecided[key] = None
            else:
                self.undecided.pop(key, None)
            return known or priced  # else undecided: stays unfused, not recorded
        self.decide_report.priced += 1
        decision = self._decide(key, region, priced)
        writing = time.perf_counter()
        stored = self.record.put(decision) if self.record is not None else decision
        self._not_pricing(time.perf_counter() - writing)  # a write to the record is not a pricing step
        mine = stored.created == decision.created and stored.choice == decision.choice
        if mine:
            self.decide_report.written += 1
        else:
            self.decide_report.taken_from_others += 1
        verdict = DecidedVerdict(stored, decision.source if mine else "record", priced)
        self.memo[key] = verdict
        # asked for once when the budget cut its step short, priced since (the pricer kept what the
        # survey learnt): decided, so not undecided (a warm compile would think another one decided it)
        self.undecided.pop(key, None)
        return verdict

    def body_prices(self, region) -> dict[str, float]:
        """Each built library body a matcher admits for ``region``, priced from the machine profile
        with its streams at the levels the plan leaves them (as the generic forms are priced)."""
        plan = getattr(self.pricing, "plan", None)
        numbers = self._numbers()
        if plan is None or numbers is None or not region.is_fused:
            return {}
        homes_of = getattr(self.pricing, "buffer_homes", None)
        homes = homes_of(region) if homes_of is not None else None
        return {body.name: float(body.price(match, numbers, homes))
                for body, match in admissions(plan, region.members, self.key_base["contract"])}

    def _decide(self, key: RecordKey, region, priced) -> Decision:
        """The lowest price among the members unfused, the generic fused form and every admitted
        body (a fused program must beat unfused by ``PRICED_MARGIN``); a race where the two
        best are within ``race_margin`` of each other."""
        fused = getattr(priced, "fused", None)
        unfused = getattr(priced, "unfused", None)
        bodies = self.body_prices(region) if unfused is not None else {}
        base = dict(key=key, status=priced.status, form=priced.form, tiling=tuple(priced.tiling),
                    unfused_cycles=None if unfused is None else float(unfused.cycles),
                    fused_cycles=None if fused is None else float(fused.cycles), reason=priced.reason,
                    created=time.time(), bodies=bodies)
        prices = {f"library:{name}": cycles for name, cycles in bodies.items()}
        if priced.status == "priced" and fused is not None:
            prices["fused"] = float(fused.cycles)
        if unfused is None or not prices:
            return Decision(choice="fused" if priced.pays(PRICED_MARGIN) else "unfused", source="model", **base)
        unfused_cycles = float(unfused.cycles)
        best = min(prices, key=prices.get)
        if best == "fused":
            pays = priced.pays(PRICED_MARGIN)
        else:
            pays = unfused_cycles > 0 and (unfused_cycles - prices[best]) / unfused_cycles > PRICED_MARGIN
        model_choice = best if pays else "unfused"
        prices["unfused"] = unfused_cycles
        ranked = sorted(prices, key=prices.get)
        runner_up = next(name for name in ranked if name != model_choice)
        # the gap relative to the members unfused when they are one of the two (the model's margin)
        slower = unfused_cycles if "unfused" in (model_choice, runner_up) else max(prices[model_choice],
                                                                                    prices[runner_up])
        thin = slower > 0 and abs(prices[model_choice] - prices[runner_up]) / slower < self.race_margin
        if not thin:
            return Decision(choice=model_choice, source="model", **base)
        clock = getattr(self._numbers(), "clock_hz", 0.0) or 0.0
        timing_s = timing_estimate((prices[model_choice] / clock, prices[runner_up] / clock)) if clock > 0 else 0.0
        outcome = self._race(region, model_choice, base, (model_choice, runner_up), timing_s)
        if outcome is None:
            self.decide_report.race_skipped += 1
            gap = (prices[runner_up] - prices[model_choice]) / slower
            base["reason"] = (f"not raced: {model_choice} leads {runner_up} by a thin {gap:+.1%} (under"
                              f" {self.race_margin:.0%}) but the race share had"
                              f" {max(0.0, self.race_budget.left()) * 1e3:.0f} ms left (building a race's"
                              f" contenders takes about {self.race_budget.build_s * 1e3:.0f} ms, timing"
                              f" these two about {max(MIN_TIMING_S, timing_s) * 1e3:.0f} ms)")
            return Decision(choice=model_choice, source="model", **base)
        self.decide_report.raced += 1
        return Decision(choice=outcome.choice, source="race", race=outcome.to_dict(), **base)

    def _race(self, region, model_choice: str, base: dict,
              names: tuple[str, str] = ("unfused", "fused"), timing_s: float = 0.0) -> RaceOutcome | None:
        budget = self.race_budget
        if self.contenders is None or not budget.can_race(timing_s):
            return None
        start = budget.running_since = time.perf_counter()
        try:
            contenders = self.contenders(region, base["form"], base["tiling"], budget, names)
            budget.build_s = time.perf_counter() - start
            if contenders is None:
                return None
            left = budget.left()
            return run_race(contenders, model_choice, left) if left > 0 else None
        finally:
            elapsed = time.perf_counter() - start
            budget.running_since = None
            budget.spent += elapsed
            budget.races += 1
            self._not_pricing(elapsed)  # the race has its own share: its time is not the pricer's

    def _numbers(self):
        """The pricer's machine numbers (None for a pricing without a pricer)."""
        return getattr(getattr(self.pricing, "pricer", None), "numbers", None)

    def _not_pricing(self, seconds: float) -> None:
        pricing_budget = getattr(self.pricing, "budget", None)
        if pricing_budget is not None:
            pricing_budget.exclude(seconds)

    def _count(self) -> None:
        self.decide_report.price_calls = getattr(getattr(self.pricing, "pricer", None), "price_calls", 0)
