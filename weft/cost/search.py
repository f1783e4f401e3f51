"""Pricing a candidate region: unfused members vs every tiling the lowering can emit.

The lowering is *passed in* (``RegionLowering``): this module never decides what can
be emitted, it prices what it is shown. Per region signature it derives, once:

* the unfused members' facts (each member's own nest) and their price at the homes
  the plan gives their buffers;
* an admissible lower bound of any fused form: the region's compulsory bytes (inputs
  and outputs once, from where the plan leaves them, at the bandwidth of that level)
  or its operations at peak, whichever is larger, plus one nest entry per member;
* the fused forms' facts (the plain tiled form, and the one-pass form under
  Inference), each lowered once; a tiling is then a formula (``price_function``).

Branch and bound: a region whose bound cannot beat its unfused price by the margin
stops there (no lowering at all); a tiling whose compute and tile overheads alone
exceed the best price so far is skipped. Inside one form the lowering's own tiling (its
first) stands unless another is cheaper by more than ``TILING_RESOLUTION``: the model
cannot tell tilings apart closer than that (softmax 8192 x 1024: rows 1 and 2 per tile
priced 0.4% apart, measured 17% apart the other way), so a sub-resolution difference is
no reason to leave the tiling the lowering would emit on its own. Prices are memoised per (signature, form,
tiling, threads, profile id, homes). A ``Budget`` is checked between every step, so
no price overruns it by more than one nest's formula.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from weft.cost.facts import FunctionFacts
from weft.cost.model import ARITHMETIC_PER_CYCLE, MachineNumbers, Price, price_function

DEFAULT_MARGIN = 0.05
TILING_RESOLUTION = 0.03
"""A tiling other than the lowering's own must be priced this much cheaper to replace it."""
"""A fused form must be predicted at least this much cheaper than its members unfused."""


class BudgetExhausted(Exception):
    """The pricing budget ran out; whatever is not priced stays unfused."""


@dataclass
class Budget:
    """A hard deadline, in seconds of ``clock`` (``time.perf_counter``; a test passes a fake).

    ``check`` raises once the time left is less than the longest step seen recently (the
    time between two checks), so the phase stops *before* a step that would overrun it.
    ``step()`` guards a step that cannot check itself (lowering a candidate's forms, a
    whole price): it checks first, then, on the real clock in the main thread, arms an
    interval timer at the deadline whose signal raises ``BudgetExhausted`` inside the step,
    so no step runs past the deadline by more than the interpreter takes to see a signal.
    The step is abandoned (nothing it computed is kept) and its region stays unpriced.
    While the timer is armed, every object alive when the step began is frozen out of the
    cyclic collector's reach (``gc.freeze``): a full collection of the whole heap runs in C
    for 10-30 ms and a signal waits for it, which put a 10 ms phase at 2-3x its share half
    the time; the collections inside the step scan only what the step allocated (pausing the
    collector instead moved its catch-up, 0.5-1 ms, to the end of the phase). A process that
    froze objects itself (a pre-fork server) is left as it is."""

    seconds: float
    clock: Callable[[], float] = time.perf_counter
    start: float | None = None
    checks: int = 0
    last: float = 0.0
    steps: list = field(default_factory=list)
    interrupted: int = 0  # steps the timer cut short

    def __post_init__(self) -> None:
        if self.start is None:
            self.start = self.clock()

    @property
    def deadline(self) -> float:
        return self.start + self.seconds

    def check(self) -> None:
        now = self.clock()
        if self.checks:
            self.steps.append(now - self.last)
            del self.steps[:-8]
        self.checks += 1
        self.last = now
        step = max(self.steps) if self.steps else 0.0
        if now + step > self.deadline:
            raise BudgetExhausted(f"pricing budget of {self.seconds * 1e3:.0f} ms spent")

    def left(self) -> float:
        return self.deadline - self.clock()

    def exclude(self, seconds: float) -> None:
        """``seconds`` just spent on something else (a race, which has its own share) count
        neither against this budget nor as a pricing step."""
        self.start += seconds
        self.last += seconds

    @contextlib.contextmanager
    def step(self):
        """Run the block as one interruptible step (see class doc)."""
        self.check()
        if self.clock is not time.perf_counter or not _timer_free():
            yield  # a fake clock, another thread, or a timer already armed (an enclosing step)
            return
        left = self.left()
        if left <= 0:
            raise BudgetExhausted(f"pricing budget of {self.seconds * 1e3:.0f} ms spent")

        fired = []
        ours = (_WEFT_ROOT, sys._getframe(2).f_code.co_filename)  # weft's code and the step's caller

        def interrupt(signum, frame):
            # raise only in the step's own code: elsewhere (a gc callback, a warnings or
            # unraisable hook) Python would swallow the exception or break the hook; the timer
            # repeats, so the next signal lands back in the step
            if frame is None or not frame.f_code.co_filename.startswith(ours):
                return
            if not fired:
                self.interrupted += 1
            fired.append(signum)
            raise BudgetExhausted(f"pricing budget of {self.seconds * 1e3:.0f} ms spent (a step was cut short)")

        previous = signal.signal(signal.SIGALRM, interrupt)
        freezing = gc.get_freeze_count() == 0
        if freezing:
            gc.freeze()  # every object alive now: out of the collector's reach until the step ends
        try:
            # repeating every millisecond after the deadline: a signal handled inside a callback
            # whose exceptions Python swallows (a gc callback, a __del__) is raised again
            signal.setitimer(signal.ITIMER_REAL, left, REPEAT_S)
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if freezing:
                gc.unfreeze()


REPEAT_S = 0.001
_WEFT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""After the deadline the budget's timer fires again this often until its step has ended."""


def _timer_free() -> bool:
    """True when this thread may arm the process's real-time interval timer: the main thread,
    on a system that has one, with no timer armed and no SIGALRM handler installed by others."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return False
    if signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        return False
    return signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)


@dataclass(frozen=True, slots=True)
class FusedForm:
    """One way the lowering can emit a region: its facts and the tilings it accepts
    (anchor axis -> tile size; one dict per tiling, the lowering's own choice first)."""

    name: str
    facts: FunctionFacts
    tilings: tuple[tuple[tuple[str, int], ...], ...]


@dataclass(frozen=True, slots=True)
class RegionLowering:
    """What the lowering tells the pricer about a region (built in ``weft.compile``).

    ``unfused()``: facts of each member lowered alone; ``forms()``: the fused forms it can
    emit (empty: it cannot emit the region fused); ``homes`` and ``member_homes``: the level
    serving each buffer's first touch, for the region fused and per member unfused."""

    signature: str
    occurrences: int
    unfused: Callable[[], tuple[FunctionFacts, ...]]
    forms: Callable[[], tuple[FusedForm, ...]]
    homes: dict[str, int]
    member_homes: dict[str, dict[str, int]]
    compulsory: tuple[tuple[int, int], ...]  # (bytes, home level) of each region input and output
    arena_bytes: int = 0  # the region's private intermediates: arena space they need unfused
    page_cycles: float = 0.0  # first touch of one fresh page, in cycles
    page_bytes: int = 4096


@dataclass(frozen=True, slots=True)
class RegionPrice:
    """The verdict of pricing one region signature."""

    signature: str
    status: str  # priced | bound (could not beat unfused) | unlowerable | budget
    unfused: Price | None = None
    fused: Price | None = None
    form: str = ""
    tiling: tuple[tuple[str, int], ...] = ()
    bound: float = 0.0
    explored: int = 0
    pruned: int = 0
    seconds: float = 0.0
    reason: str = ""

    @property
    def saving(self) -> float:
        if self.fused is None or self.unfused is None:
            return 0.0
        return self.unfused.cycles - self.fused.cycles

    @property
    def margin(self) -> float:
        """Predicted saving as a fraction of the unfused price (negative: fusing loses)."""
        if self.fused is None or self.unfused is None or self.unfused.cycles <= 0:
            return 0.0
        return self.saving / self.unfused.cycles

    def pays(self, margin: float = DEFAULT_MARGIN) -> bool:
        return self.status == "priced" and self.fused is not None and self.margin > margin

    def describe(self) -> str:
        unfused = f"{self.unfused.cycles:,.0f}" if self.unfused else "-"
        if self.status != "priced" or self.fused is None:
            return f"unfused {unfused} cycles; {self.status}: {self.reason}"
        tiling = ", ".join(f"{axis}:{size}" for axis, size in self.tiling) or "one tile"
        return (f"unfused {unfused} cycles, fused {self.fused.cycles:,.0f} cycles ({self.form}, tiles {tiling}),"
                f" margin {self.margin:+.1%}; memory {_bytes(self.unfused.memory_bytes)} arena unfused,"
                f" {_bytes(self.fused.memory_bytes)} scratch fused; {self.explored} tilings priced,"
                f" {self.pruned} cut by the bound")


def unfused_price(lowering: RegionLowering, numbers: MachineNumbers, budget: Budget | None) -> Price:
    """The members one by one; the memory term is the arena their private outputs need."""
    from dataclasses import replace

    total = None
    for facts in lowering.unfused():
        if budget is not None:
            budget.check()
        homes = lowering.member_homes.get(facts.members[0], {})
        price = price_function(facts, numbers, homes)
        total = price if total is None else total + price
    return replace(total, memory_bytes=lowering.arena_bytes)


def first_touch_cycles(price: Price, lowering: RegionLowering) -> float:
    """Cycles of faulting in the memory term's pages on a first call (not in steady state)."""
    return -(-price.memory_bytes // max(1, lowering.page_bytes)) * lowering.page_cycles


def lower_bound(lowering: RegionLowering, unfused: tuple[FunctionFacts, ...], numbers: MachineNumbers) -> float:
    """Admissible: no fused form moves fewer bytes than its inputs and outputs once, from
    where the plan leaves them, nor runs fewer vector operations than its members."""
    threads = numbers.threads
    data = sum(size / numbers.read_bytes_per_cycle[min(home, 3)] for size, home in lowering.compulsory)
    operations = 0.0
    lanes = max(1, numbers.lanes)
    for facts in unfused:
        for nest in facts.nests:
            points = 1
            for _, extent in nest.extents:
                points *= extent
            if nest.contraction is not None:  # one FMA per term (Strict: a multiply and an add) at the FMA peak
                operations += points / lanes * (1.0 if nest.contraction.fma else 2.0) / max(
                    1e-9, numbers.fma_flops_per_cycle / (2.0 * lanes))
            else:
                operations += points / lanes * nest.ops.arithmetic / ARITHMETIC_PER_CYCLE
    from weft.cost.model import NEST_IN_TILE_CYCLES

    members = sum(len(facts.nests) for facts in unfused)
    return max(data, operations / threads) + NEST_IN_TILE_CYCLES * members / threads


class Pricer:
    """Prices regions against one machine profile at one thread count, with memos."""

    def __init__(self, numbers: MachineNumbers, contract: str, margin: float = DEFAULT_MARGIN) -> None:
        self.numbers = numbers
        self.contract = contract
        self.margin = margin
        self.verdicts: dict[tuple, RegionPrice] = {}
        self.prices: dict[tuple, Price] = {}
        self.price_calls = 0
        self.price_seconds = 0.0

    def key(self, lowering: RegionLowering) -> tuple:
        homes = tuple(sorted(lowering.homes.items()))
        return (lowering.signature, self.contract, self.numbers.threads, self.numbers.profile_id, homes)

    def known(self, lowering: RegionLowering) -> RegionPrice | None:
        return self.verdicts.get(self.key(lowering))

    def estimate(self, lowering: RegionLowering, budget: Budget | None = None) -> tuple[float, float]:
        """(unfused cycles, lower bound of fused cycles): the cheap first look, for ordering."""
        unfused = unfused_price(lowering, self.numbers, budget)
        return unfused.cycles, lower_bound(lowering, lowering.unfused(), self.numbers)

    def price_tiling(self, lowering: RegionLowering, form: FusedForm, tiling, budget: Budget | None) -> Price:
        key = (lowering.signature, form.name, tiling, self.numbers.threads, self.numbers.profile_id,
               tuple(sorted(lowering.homes.items())))
        cached = self.prices.get(key)
        if cached is not None:
            return cached
        if budget is not None:
            budget.check()
        start = time.perf_counter()
        price = price_function(form.facts, self.numbers, lowering.homes, dict(tiling))
        self.price_seconds += time.perf_counter() - start
        self.price_calls += 1
        self.prices[key] = price
        return price

    def price_region(self, lowering: RegionLowering, budget: Budget | None = None) -> RegionPrice:
        """Branch and bound over the region's fused forms and tilings (see module doc)."""
        key = self.key(lowering)
        if key in self.verdicts:
            return self.verdicts[key]
        start = time.perf_counter()
        try:
            verdict = self._search(lowering, budget)
        except BudgetExhausted as error:
            return RegionPrice(lowering.signature, "budget", reason=str(error), seconds=time.perf_counter() - start)
        verdict = _with_seconds(verdict, time.perf_counter() - start)
        self.verdicts[key] = verdict
        return verdict

    def _search(self, lowering: RegionLowering, budget: Budget | None) -> RegionPrice:
        unfused_facts = lowering.unfused()
        unfused = unfused_price(lowering, self.numbers, budget)
        bound = lower_bound(lowering, unfused_facts, self.numbers)
        target = unfused.cycles * (1.0 - self.margin)
        if bound >= target:
            return RegionPrice(lowering.signature, "bound", unfused, bound=bound,
                               reason=f"its lower bound {bound:,.0f} cycles cannot beat unfused by {self.margin:.0%}")
        if budget is not None:
            budget.check()
        forms = lowering.forms()
        if not forms:
            return RegionPrice(lowering.signature, "unlowerable", unfused, bound=bound,
                               reason="the lowering can emit no fused form of it")
        best: Price | None = None
        best_form, best_tiling = "", ()
        explored = pruned = 0
        for form in forms:
            own: Price | None = None  # the best of this form, its first (the lowering's own) tiling first
            own_tiling = ()
            for tiling in form.tilings:
                if best is not None and _tiling_floor(form, tiling, self.numbers) >= best.cycles:
                    pruned += 1
                    continue
                price = self.price_tiling(lowering, form, tiling, budget)
                explored += 1
                if own is None or price.cycles < own.cycles * (1.0 - TILING_RESOLUTION):
                    own, own_tiling = price, tiling
            if own is not None and (best is None or own.cycles < best.cycles):
                best, best_form, best_tiling = own, form.name, own_tiling
        if best is None:
            return RegionPrice(lowering.signature, "unlowerable", unfused, bound=bound,
                               reason="no tiling of it fits the scratch budget")
        return RegionPrice(lowering.signature, "priced", unfused, best, best_form, best_tiling, bound, explored, pruned)


def _tiling_floor(form: FusedForm, tiling, numbers: MachineNumbers) -> float:
    """A cheap floor of one tiling: its tiles' fixed costs (more, smaller tiles cost more)."""
    from weft.cost.model import NEST_IN_TILE_CYCLES, TILE_CYCLES

    extents: dict[str, int] = {}
    for nest in form.facts.nests:
        for member, axis, anchor in form.facts.carried:
            if member == nest.member:
                extents.setdefault(anchor, nest.extent(axis))
    sizes = dict(tiling)
    tiles = 1
    for anchor, extent in extents.items():
        tiles *= -(-extent // max(1, sizes.get(anchor, extent)))
    return (TILE_CYCLES + NEST_IN_TILE_CYCLES * len(form.facts.nests)) * tiles / numbers.threads


def _bytes(count: int) -> str:
    for unit, size in (("MiB", 1024**2), ("KiB", 1024)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def _with_seconds(verdict: RegionPrice, seconds: float) -> RegionPrice:
    from dataclasses import replace

    return replace(verdict, seconds=seconds)
