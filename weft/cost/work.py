"""FLOPs and bytes counted from IR shapes, and the roofline floor of a time.

Counting rules (stated, so a reader can redo them by hand):

- **FLOPs** of a member = points x (operations in the body + 1 if it folds), where
  points = product of its output and fold extents. Each add, sub, mul, div, max, min,
  neg, abs, comparison, logical op and select counts 1; sqrt and rsqrt count 1; a
  transcendental (exp, log, tanh, erf, sigmoid) counts ``TRANSCENDENTAL_FLOPS``
  (Weft's own float32 sequences: range reduction plus a polynomial, about ten
  vector operations). Loads, casts, constants and index arithmetic count 0. So a
  matmul ``sum_k a[i,k]*b[k,j]`` counts 2·M·N·K.
- **Bytes** of a member = unique bytes read of each buffer it loads + bytes written.
  The unique elements read of a buffer are bounded by the product of the extents of
  the axes its index uses (a broadcast row ``m[i]`` inside an ``i, j`` member reads
  ``I`` elements, not ``I x J``), summed over its loads and capped at the buffer size.
  Exact for broadcasts, transposes, slices and plain reads; an upper bound otherwise.
- **Floor** of a time = max(bytes / bandwidth, FLOPs / peak); the fraction achieved
  is floor / measured time (1.0 means at the roof).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from weft.ir import (
    TRANSCENDENTAL,
    Binary,
    Cast,
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    Where,
    index_axes,
    walk_expr,
)

TRANSCENDENTAL_FLOPS = 10


@dataclass(frozen=True, slots=True)
class Work:
    """FLOPs and bytes of a member or a group of members."""

    flops: float
    bytes_read: float
    bytes_written: float

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes if self.bytes else math.inf


def body_ops(kernel: Kernel) -> int:
    ops = 0
    for node in walk_expr(kernel.body):
        if isinstance(node, Unary):
            ops += TRANSCENDENTAL_FLOPS if node.op in TRANSCENDENTAL else 1
        elif isinstance(node, Binary | Where):
            ops += 1
        elif isinstance(node, Cast):
            ops += 0
    return ops


def points(kernel: Kernel) -> int:
    return math.prod(axis.extent for axis in kernel.all_axes)


def member_flops(kernel: Kernel) -> float:
    return float(points(kernel) * (body_ops(kernel) + (1 if kernel.fold else 0)))


def unique_elements_read(kernel: Kernel, buffer_name: str, buffer_size: int) -> int:
    extents = {axis.name: axis.extent for axis in kernel.all_axes}
    total = 0
    for node in walk_expr(kernel.body):
        if isinstance(node, Load) and node.buffer == buffer_name:
            axes: set[str] = set()
            for index in node.index:
                axes |= index_axes(index)
            total += math.prod(extents.get(axis, 1) for axis in axes)
    return min(total, buffer_size)


def member_work(plan: Plan, kernel: Kernel) -> Work:
    buffers = plan.buffer_map()
    read = sum(
        unique_elements_read(kernel, name, buffers[name].size) * buffers[name].dtype.itemsize for name in kernel.reads
    )
    return Work(member_flops(kernel), float(read), float(buffers[kernel.output].nbytes))


def group_work(plan: Plan, members: tuple[str, ...] | list[str]) -> Work:
    """Work of members run as one fused group: FLOPs add up; bytes are the group's
    external reads (buffers produced outside it) plus the outputs read outside it."""
    inside = set(members)
    buffers = plan.buffer_map()
    readers = plan.readers()
    flops = sum(member_flops(plan.kernel(name)) for name in members)
    read: dict[str, int] = {}
    for name in members:
        kernel = plan.kernel(name)
        for source in kernel.reads:
            if source not in inside:
                count = unique_elements_read(kernel, source, buffers[source].size)
                read[source] = min(buffers[source].size, read.get(source, 0) + count)
    read_bytes = sum(count * buffers[name].dtype.itemsize for name, count in read.items())
    written = sum(
        buffers[name].nbytes for name in members if any(reader not in inside for reader in readers.get(name, ()))
    )
    return Work(float(flops), float(read_bytes), float(written))


def plan_work(plan: Plan) -> Work:
    """The plan's compulsory work: every member's FLOPs; bytes of its inputs and outputs."""
    buffers = plan.buffer_map()
    flops = sum(member_flops(kernel) for kernel in plan.kernels)
    read = sum(buffers[name].nbytes for name in plan.inputs)
    written = sum(buffers[name].nbytes for name in plan.outputs)
    return Work(float(flops), float(read), float(written))


def unfused_work(plan: Plan) -> Work:
    """What the unfused plan moves: every member's reads and writes."""
    works = [member_work(plan, kernel) for kernel in plan.kernels]
    return Work(sum(w.flops for w in works), sum(w.bytes_read for w in works), sum(w.bytes_written for w in works))


@dataclass(frozen=True, slots=True)
class Floor:
    seconds: float
    memory_seconds: float
    compute_seconds: float

    @property
    def bound(self) -> str:
        return "memory" if self.memory_seconds >= self.compute_seconds else "compute"


def floor(work: Work, bandwidth: float, peak_flops: float) -> Floor:
    memory_seconds = work.bytes / bandwidth
    compute_seconds = work.flops / peak_flops
    return Floor(max(memory_seconds, compute_seconds), memory_seconds, compute_seconds)


def fraction_of_floor(floor_seconds: float, measured_seconds: float) -> float:
    return floor_seconds / measured_seconds if measured_seconds > 0 else 0.0


def intermediate_bytes(plan: Plan) -> dict[str, int]:
    return {b.name: b.nbytes for b in plan.buffers if b.role is Role.INTERMEDIATE}
