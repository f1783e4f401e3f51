"""Timing in one process: warm up, then palindrome blocks of rounds.

A *round* is ``inner`` consecutive calls of one arm, timed together and divided by
``inner`` (so a microsecond step is timed over milliseconds); every arm uses the same
``inner``. Warm-up blocks (compile, first-touch page faults, cache fill) run in the
same order as the timed ones and are discarded.
"""

from __future__ import annotations

import gc
import math
import statistics
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


def calibrate_inner(calls: Mapping[str, Callable[[], object]], target_round_s: float, max_inner: int = 100_000) -> int:
    """Calls per round so the fastest arm's round lasts about ``target_round_s``."""
    fastest = min(statistics.median(time_round(call, 1) for _ in range(3)) for call in calls.values())
    return max(1, min(max_inner, math.ceil(target_round_s / max(fastest, 1e-9))))


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
