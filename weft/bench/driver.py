"""Timing in one process: warm up, then palindrome blocks of rounds.

A *round* is ``inner`` consecutive calls of one arm, timed together and divided by
``inner`` (so a microsecond step is timed over milliseconds); every arm uses the same
``inner``. Warm-up blocks (compile, first-touch page faults, cache fill) run in the
same order as the timed ones and are discarded.

``inner`` comes from the fastest arm's time per call, measured after one warm-up call
over a batch of calls that lasts at least ``MIN_BATCH_S`` (a single call of a ~10 us
arm is at the mercy of the timer and of one interrupt, and its first calls pay page
faults: timed alone, they made ``inner`` too small and the rounds too short, and a
control could fail on noise). A round then lasts at least ``target_round_s`` and at
least ``MIN_ROUND_TICKS`` ticks of the clock (``round_calls``, a pure function).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Mapping

from weft.bench.schedule import block_order
from weft.bench.verdict import Block


def time_round(call: Callable[[], object], inner: int) -> float:
    """Seconds per call over ``inner`` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(inner):
        call()
    return (time.perf_counter() - start) / inner


MIN_BATCH_S = 0.002
"""A calibration batch lasts at least this (thousands of timer ticks, several scheduler slices)."""
MIN_ROUND_TICKS = 10_000
"""A round lasts at least this many ticks of the clock, so its resolution is below 0.01%."""


def round_calls(seconds_per_call: float, target_round_s: float, resolution_s: float, max_inner: int = 100_000) -> int:
    """Calls per round so a round lasts ``target_round_s`` and at least ``MIN_ROUND_TICKS``
    ticks of a clock of ``resolution_s`` (never more than ``max_inner``)."""
    round_s = max(target_round_s, MIN_ROUND_TICKS * resolution_s)
    return max(1, min(max_inner, math.ceil(round_s / max(seconds_per_call, resolution_s, 1e-12))))


def seconds_per_call(call: Callable[[], object], clock: Callable[[], float] = time.perf_counter,
                     min_batch_s: float = MIN_BATCH_S) -> float:
    """One warm-up call, then batches of doubling size until one lasts ``min_batch_s``:
    that batch's seconds per call."""
    call()
    count = 1
    while True:
        start = clock()
        for _ in range(count):
            call()
        elapsed = clock() - start
        if elapsed >= min_batch_s:
            return elapsed / count
        count *= 2


def calibrate_inner(calls: Mapping[str, Callable[[], object]], target_round_s: float, max_inner: int = 100_000,
                    clock: Callable[[], float] = time.perf_counter, resolution_s: float | None = None) -> int:
    """Calls per round so the fastest arm's round lasts about ``target_round_s`` (``round_calls``)."""
    if resolution_s is None:
        resolution_s = time.get_clock_info("perf_counter").resolution
    fastest = min(seconds_per_call(call, clock) for call in calls.values())
    return round_calls(fastest, target_round_s, resolution_s, max_inner)


def run_interleaved(
    calls: Mapping[str, Callable[[], object]],
    blocks: int,
    warmup_blocks: int = 1,
    inner: int = 1,
    on_round: Callable[[], None] | None = None,
) -> list[Block]:
    """Run ``warmup_blocks`` discarded blocks, then ``blocks`` timed palindrome blocks."""
    labels = tuple(calls)
    result = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside one arm's round would be charged to that arm
    try:
        for index in range(warmup_blocks + blocks):
            order = block_order(labels, index)
            seconds = []
            for label in order:
                seconds.append(time_round(calls[label], inner))
                if on_round:
                    on_round()
            if index >= warmup_blocks:
                result.append(Block(order, tuple(seconds)))
            gc.collect()
    finally:
        if gc_was_enabled:
            gc.enable()
    return result
