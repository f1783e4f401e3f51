"""Reuse distances the plan gives each buffer, as the cache level that serves it.

Members run in plan order, over and over (a step of a model). When member ``m``
touches buffer ``b``, the bytes touched since ``b`` was last touched decide where
``b`` still is: the smallest cache level that holds that distance, else memory. A
buffer not touched earlier in the run was last touched by the previous run, a whole
plan's footprint ago (the steady state a benchmark measures)::

    x (4 MB) -> m1: y = f(x) (4 MB) -> m2: z = g(y)
    m2 reads y at distance 4 MB (y itself; nothing else between): L3 on a 32 MB L3, memory on a 2 MB one
"""

from __future__ import annotations

from weft.ir import Plan

MEMORY = 3


def level_of(distance: float, capacities: tuple[float, ...]) -> int:
    """0 (L1), 1 (L2), 2 (L3) or 3 (memory): the first level whose capacity holds ``distance``."""
    for level, capacity in enumerate(capacities):
        if distance <= capacity:
            return level
    return MEMORY


def plan_homes(plan: Plan, capacities: tuple[float, ...]) -> dict[str, dict[str, int]]:
    """member -> {buffer it touches: the level serving its first touch in that member}."""
    sizes = {buffer.name: buffer.nbytes for buffer in plan.buffers}
    total = float(sum(sizes.values()))
    position = 0.0
    last: dict[str, float] = {}
    result: dict[str, dict[str, int]] = {}
    for kernel in plan.kernels:
        touched = (*kernel.reads, kernel.output)
        homes = {}
        for name in touched:
            distance = position - last[name] + sizes[name] if name in last else total
            homes[name] = level_of(distance, capacities)
        for name in dict.fromkeys(touched):
            position += sizes[name]
            last[name] = position
        result[kernel.output] = homes
    return result


def region_homes(member_homes: dict[str, dict[str, int]], members: tuple[str, ...]) -> dict[str, int]:
    """A fused region's homes: each buffer where its first toucher in the region finds it."""
    homes: dict[str, int] = {}
    for member in members:
        for name, level in member_homes.get(member, {}).items():
            homes.setdefault(name, level)
    return homes
