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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from weft.ir import Plan, Role
from weft.lower.contraction_prepack import packed_buffers
from weft.lower.nest import LoweredPlan

ALIGNMENT = 64
PAGE = 4096
SKEW_MIN_BYTES = 64 * 1024  # smaller arrays live in L1/L2, where a 4K alias costs little


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
        # a large intermediate starts on a page (the arena does): every large stream of a
        # function then has one page offset, so none 4K-aliases another (store_page_offset)
        step = PAGE if size >= SKEW_MIN_BYTES else ALIGNMENT
        busy = sorted(
            (p.offset, p.offset + _align(p.nbytes)) for p in placed if not (p.last < first or last < p.first)
        )
        offset = 0
        for start, stop in busy:
            if offset + size <= start:
                break
            offset = -(-max(offset, stop) // step) * step
        placed.append(Placement(name, offset, buffers[name].nbytes, first, last))
    total = max((p.offset + _align(p.nbytes) for p in placed), default=0)
    # weights packed at bind (weft.lower.contraction_prepack): written once, read by every call
    for name, nbytes in packed_buffers(lowered).items():
        placed.append(Placement(name, total, nbytes, 0, len(lowered.functions)))
        total += _align(nbytes)
    return ArenaPlan(tuple(sorted(placed, key=lambda p: p.offset)), total)


def aligned_empty(shape: tuple[int, ...], dtype, beside: Sequence[int] = ()) -> np.ndarray:
    """``numpy.empty`` whose data starts on an ALIGNMENT boundary (NumPy guarantees 16 bytes):
    a full vector store never splits a cache line, and the contraction's non-temporal
    stores (which require it) can serve a plan's outputs.

    ``beside``: the page offsets (``page_offset``) of the large arrays the plan's kernels
    read while they write this one. An array of at least ``SKEW_MIN_BYTES`` then starts at
    the line-aligned page offset ``store_page_offset`` picks for them, so the stores do not
    4K-alias the loads running ahead of them."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = max(1, count) * dtype.itemsize
    if not beside or nbytes < SKEW_MIN_BYTES:
        raw = np.empty(nbytes + ALIGNMENT, np.uint8)
        start = -raw.ctypes.data % ALIGNMENT
    else:
        raw = np.empty(nbytes + PAGE, np.uint8)
        start = (store_page_offset(beside) - raw.ctypes.data) % PAGE
    return raw[start:start + nbytes].view(dtype)[:count].reshape(shape)


def page_offset(array: np.ndarray) -> int:
    """Where ``array``'s data starts within its 4 KiB page."""
    return array.ctypes.data % PAGE


def store_page_offset(loads: Sequence[int]) -> int:
    """The line-aligned page offset for an array written while arrays at page offsets
    ``loads`` stream in beside it.

    A core compares a load's address with the older stores still in its store buffer by
    the low 12 bits only; a match ("4K aliasing") makes the load wait for the store. A
    streaming loop issues its loads some iterations ahead of its stores, so the load of
    stream X at element j + k meets the store of stream Y at element j when
    ``(X - Y) mod 4096`` is just below 4096: Y starts slightly above X in the page, which
    is what rounding NumPy's +16 up to a 64-byte line gives (measured: Adam over 50 M
    parameters, 31.2 ms with the output at +64, 25.9 ms at +2048, one Zen 5 core). The
    safe place is at or just below every load stream: the offset that minimises the
    largest ``(X - Y) mod 4096``."""
    def largest_gap(offset: int) -> int:
        return max(((load - offset) % PAGE for load in loads), default=0)

    return min(range(0, PAGE, ALIGNMENT), key=lambda offset: (largest_gap(offset), offset))


def aligned_outputs(specs, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Fresh arrays for a plan's outputs (``(shape, dtype)`` each): line-aligned, and the
    large ones placed in their pages beside the large inputs and the outputs before them
    (``store_page_offset``), the arrays the kernels read while they write these."""
    beside = [page_offset(array) for array in inputs if array.nbytes >= SKEW_MIN_BYTES]
    outputs = []
    for shape, dtype in specs:
        array = aligned_empty(shape, dtype, beside)
        if array.nbytes >= SKEW_MIN_BYTES:
            beside.append(page_offset(array))
        outputs.append(array)
    return outputs


def intermediate_bytes_unshared(plan: Plan) -> int:
    """What the arena would need without sharing (for reports)."""
    outside = set(plan.inputs) | set(plan.outputs)
    return sum(
        _align(b.nbytes) for b in plan.buffers if b.name not in outside and b.role is not Role.INPUT
    )
