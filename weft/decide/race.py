"""The race: where the model's margin is thin, time the contenders on this machine.

A region whose predicted margin (fused against its members unfused) is below
``Config.race_margin`` is raced when the compile's race share has time left. The
contenders are built by the caller (``weft.compile`` passes a builder in: this package
never imports the lowering or the C driver), each a callable that runs the region once
on the same random inputs of its real shapes (never zeros).

Timing follows docs/benchmarking.md in miniature: warm-up calls dropped, then blocks of
ABBA and BAAB alternately, the median of each contender's times, and a spread: per
contender, the gap between the medians of its two positions, as a fraction. The
verdict (``judge``) is a pure function of the timings:

    measured margin = (unfused - fused) / unfused
    spread > |measured margin|  -> keep the model's choice, "inconclusive"
    otherwise                   -> the faster contender
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

WARMUPS = 2
MAX_BLOCKS = 8
MIN_BLOCKS = 2
PRIOR_BUILD_S = 0.3
"""Expected wall time to build a race's two contenders (two C compiles side by side) before
one has been measured; after that, the last measured build is the estimate."""
MIN_TIMING_S = 0.02
"""A race is started only when the share left holds the build plus at least this much timing."""


@dataclass
class RaceBudget:
    """The compile's race share, in seconds, spent as races run (building included).
    ``build_s``: the expected time to build one race's contenders (``PRIOR_BUILD_S``, then
    the last measured): a race that cannot fit its build and some timing is not started,
    so the share is not spent on C compiles whose race never runs."""

    seconds: float
    spent: float = 0.0
    races: int = 0
    build_s: float = PRIOR_BUILD_S
    running_since: float | None = None  # perf_counter start of the race under way (not yet in spent)

    def left(self) -> float:
        running = 0.0 if self.running_since is None else time.perf_counter() - self.running_since
        return self.seconds - self.spent - running

    def can_race(self, timing_s: float = 0.0) -> bool:
        """Whether the share left holds a build and the timing: ``timing_s``, the calls a race
        makes at the model's predicted times (``timing_estimate``), else ``MIN_TIMING_S``."""
        return self.left() >= self.build_s + max(MIN_TIMING_S, timing_s)


def timing_estimate(seconds_per_call: tuple[float, ...]) -> float:
    """Seconds the fewest blocks a race judges take at the given times per call of its
    contenders: ``WARMUPS`` calls of each, then ``MIN_BLOCKS`` blocks of two calls each. A race
    of sam3-encoder's window attention (a call of ~0.1 s) built its contenders, 0.78 s, and then
    could not time two blocks in what was left."""
    return sum(seconds_per_call) * (WARMUPS + 2 * MIN_BLOCKS)


@dataclass(frozen=True, slots=True)
class RaceOutcome:
    """What a race measured and decided (stored in the decision record as a dict)."""

    medians: dict  # contender -> median seconds
    rounds: dict  # contender -> every timed call, in order
    spread: float
    measured_margin: float  # (baseline - challenger) / baseline: (unfused - fused) / unfused
    choice: str  # fused | unfused | library:NAME
    kept_model: bool  # the spread exceeded the measured margin: the model's choice stands
    note: str
    seconds: float = 0.0  # wall time of the race, building included

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        times = ", ".join(f"{name} {median * 1e6:,.1f} us" for name, median in self.medians.items())
        return f"race: {times}; spread {self.spread:.1%}, measured margin {self.measured_margin:+.1%}: {self.note}"


def position_spread(positions: dict[str, tuple[list[float], list[float]]]) -> float:
    """Per contender, the median of its outer-position times (first and last of a block) and
    of its inner-position times (the middle): the largest relative gap between the two
    (docs/benchmarking.md rule 4)."""
    worst = 0.0
    for outer_times, inner_times in positions.values():
        if not outer_times or not inner_times:
            continue
        outer, inner = statistics.median(outer_times), statistics.median(inner_times)
        worst = max(worst, abs(outer - inner) / max(min(outer, inner), 1e-12))
    return worst


def judge(model_choice: str, unfused_s: float, fused_s: float, spread: float,
          names: tuple[str, str] = ("unfused", "fused")) -> tuple[str, bool, str]:
    """(choice, kept the model's choice, note) from the medians and spread (module doc).
    ``names``: (baseline, challenger), the contenders whose medians are ``unfused_s`` and
    ``fused_s`` (a library body races as either)."""
    baseline, challenger = names
    measured = (unfused_s - fused_s) / unfused_s if unfused_s > 0 else 0.0
    if spread > abs(measured):
        return model_choice, True, (f"spread {spread:.1%} exceeds the measured margin {measured:+.1%}:"
                                    f" inconclusive, the model's choice ({model_choice}) stands")
    choice = challenger if measured > 0 else baseline
    agree = "agrees with" if choice == model_choice else "overrules"
    return choice, False, f"{choice} is faster by {abs(measured):.1%}; the race {agree} the model ({model_choice})"


def race_roles(names, model_choice: str) -> tuple[str, str]:
    """(baseline, challenger) of two contenders: the members unfused are the baseline when
    they race; else the contender the model did not choose."""
    names = list(names)
    if "unfused" in names:
        return "unfused", next(name for name in names if name != "unfused")
    other = next(name for name in names if name != model_choice)
    return other, model_choice


def time_abba(contenders: dict[str, Callable[[], None]], seconds: float, clock=time.perf_counter,
              warmups: int = WARMUPS, max_blocks: int = MAX_BLOCKS):
    """Blocks of ABBA, BAAB, ... (two contenders) inside ``seconds``, after ``warmups`` calls
    of each (dropped). Returns (positions, rounds), or None when not even ``MIN_BLOCKS``
    blocks fit: positions maps contender -> (outer-position times, inner-position times),
    rounds maps contender -> every timed call in order."""
    names = list(contenders)
    if len(names) != 2:
        raise ValueError("a race times exactly two contenders")
    start = clock()
    slowest = 0.0
    for _ in range(warmups):
        for name in names:
            before = clock()
            contenders[name]()
            slowest = max(slowest, clock() - before)
    blocks_fit = int((seconds - (clock() - start)) / max(4 * slowest, 1e-9))
    if blocks_fit < MIN_BLOCKS:
        return None
    positions: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in names}
    rounds: dict[str, list[float]] = {name: [] for name in names}
    for number in range(min(blocks_fit, max_blocks)):
        first, second = names if number % 2 == 0 else names[::-1]
        times = []
        for name in (first, second, second, first):
            before = clock()
            contenders[name]()
            times.append(clock() - before)
            rounds[name].append(times[-1])
        positions[first][0].extend((times[0], times[3]))
        positions[second][1].extend((times[1], times[2]))
        if number + 1 >= MIN_BLOCKS and clock() - start > seconds:
            break
    return positions, rounds


def run_race(contenders: dict[str, Callable[[], None]], model_choice: str, seconds: float,
             clock=time.perf_counter) -> RaceOutcome | None:
    """Time two ``contenders`` ({"unfused": run, "fused": run}, or a library body
    ``"library:NAME"`` against either) and judge; None when the time given cannot hold
    ``MIN_BLOCKS`` blocks (the model's choice stands, unraced)."""
    start = clock()
    timed = time_abba(contenders, seconds, clock)
    if timed is None:
        return None
    positions, rounds = timed
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    spread = position_spread(positions)
    baseline, challenger = race_roles(contenders, model_choice)
    choice, kept, note = judge(model_choice, medians[baseline], medians[challenger], spread, (baseline, challenger))
    measured = (medians[baseline] - medians[challenger]) / medians[baseline] if medians[baseline] > 0 else 0.0
    return RaceOutcome(medians, rounds, spread, measured, choice, kept, note, clock() - start)


RANDOM_BLOCK = 65521
"""Values drawn per float input at most; a larger input repeats them (a prime count, so the
repeat does not line up with a row). Drawing every value of a region's inputs cost 0.72 s
for one race of sam3-encoder (window attention's scores, 48 M floats: more than the whole
race share); repeating a block costs a copy. Timing needs no fresh value per element."""


@dataclass
class RaceInputs:
    """Random inputs of a plan's real shapes: floats normal, never zeros (at most
    ``RANDOM_BLOCK`` distinct values per input, repeated); integers small (valid indices for
    any table of two rows or more); booleans mixed."""

    seed: int = 0
    arrays: list = field(default_factory=list)

    def for_plan(self, plan) -> list[np.ndarray]:
        from weft.oracle.interpreter import NUMPY_DTYPE

        rng = np.random.default_rng(self.seed)
        buffers = plan.buffer_map()
        arrays = []
        for name in plan.inputs:
            buffer = buffers[name]
            dtype = NUMPY_DTYPE[buffer.dtype]
            if buffer.dtype.is_float:
                size = math.prod(buffer.shape)
                block = rng.standard_normal(min(size, RANDOM_BLOCK), dtype=dtype)  # float32 drawn directly
                block[block == 0] = 1.0
                array = block if size <= RANDOM_BLOCK else np.resize(block, size)
                array = array.reshape(buffer.shape)
            elif buffer.dtype.is_int:
                array = rng.integers(0, 2, buffer.shape).astype(dtype)
            else:
                array = rng.integers(0, 2, buffer.shape).astype(bool)
            arrays.append(np.asarray(array, order="C"))  # ascontiguousarray would make a 0-d array 1-d
        return arrays
