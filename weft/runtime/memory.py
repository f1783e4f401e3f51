"""Memory planning: one arena for every intermediate of a plan.

Each intermediate lives from the function that writes it to the last function
that reads it. Two intermediates whose lifetimes do not overlap may share bytes.
Placement is greedy, largest first, at the lowest 64-byte-aligned offset that
does not collide with an already placed buffer whose lifetime overlaps::

    t1 [0, 2]  64 KiB  -> offset 0
    t2 [1, 3]  64 KiB  -> offset 65536     (overlaps t1)
    t3 [3, 4]  64 KiB  -> offset 0         (t1 is dead by then)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from weft.ir import Plan, Role
from weft.lower.contraction_prepack import packed_buffers
from weft.lower.nest import LoweredPlan

ALIGNMENT = 64


@dataclass(frozen=True, slots=True)
class Placement:
    buffer: str
    offset: int
    nbytes: int
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class ArenaPlan:
    placements: tuple[Placement, ...]
    nbytes: int

    def offset(self, buffer: str) -> int:
        for placement in self.placements:
            if placement.buffer == buffer:
                return placement.offset
        raise KeyError(buffer)


def _align(value: int) -> int:
    return (value + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def lifetimes(plan: Plan, lowered: LoweredPlan) -> dict[str, tuple[int, int]]:
    """Intermediate buffer -> (index of writing function, index of last reading function)."""
    outside = set(plan.inputs) | set(plan.outputs)
    spans: dict[str, list[int]] = {}
    for position, function in enumerate(lowered.functions):
        for member in function.members:
            if member not in outside and member not in function.private:
                spans.setdefault(member, [position, position])
        for member in function.members:
            for name in plan.kernel(member).reads:
                if name in spans:
                    spans[name][1] = max(spans[name][1], position)
    return {name: (span[0], span[1]) for name, span in spans.items()}


def plan_arena(plan: Plan, lowered: LoweredPlan) -> ArenaPlan:
    """Offsets for every intermediate; lifetimes that do not overlap share space."""
    buffers = plan.buffer_map()
    spans = lifetimes(plan, lowered)
    order = sorted(spans, key=lambda name: (-buffers[name].nbytes, spans[name][0], name))
    placed: list[Placement] = []
    for name in order:
        first, last = spans[name]
        size = _align(max(buffers[name].nbytes, 1))
        busy = sorted(
            (p.offset, p.offset + _align(p.nbytes)) for p in placed if not (p.last < first or last < p.first)
        )
        offset = 0
        for start, stop in busy:
            if offset + size <= start:
                break
            offset = max(offset, stop)
        placed.append(Placement(name, offset, buffers[name].nbytes, first, last))
    total = max((p.offset + _align(p.nbytes) for p in placed), default=0)
    # weights packed at bind (weft.lower.contraction_prepack): written once, read by every call
    for name, nbytes in packed_buffers(lowered).items():
        placed.append(Placement(name, total, nbytes, 0, len(lowered.functions)))
        total += _align(nbytes)
    return ArenaPlan(tuple(sorted(placed, key=lambda p: p.offset)), total)


def aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """``numpy.empty`` whose data starts on an ALIGNMENT boundary (NumPy guarantees 16 bytes):
    a full vector store never splits a cache line, and the contraction's non-temporal
    stores (which require it) can serve a plan's outputs."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = max(1, count) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes].view(dtype)[:count].reshape(shape)


def intermediate_bytes_unshared(plan: Plan) -> int:
    """What the arena would need without sharing (for reports)."""
    outside = set(plan.inputs) | set(plan.outputs)
    return sum(
        _align(b.nbytes) for b in plan.buffers if b.name not in outside and b.role is not Role.INPUT
    )
