"""Regions grown backwards from anchors (docs/design.md §5).

An *anchor* is a member whose output something outside its region sees. A region
grows backwards through the producers of what it reads. A producer joins only when

* every reader of its output is already inside (the output becomes private), and
* the grown set still shares a *common tile axis*: an output axis of the anchor
  that every member can be tiled along, followed through the index maps.

The tile axis follows a producer ``P`` of buffer ``X`` like this: if the region is
tiled along the reader's axis ``t``, ``X`` can be tiled along its dimension ``d``
iff every load of ``X`` inside the region indexes dimension ``d`` with exactly
``t`` (and no other dimension mentions ``t``). ``P``'s output axis ``d`` is then
``P``'s tile axis. Fold axes never carry the tile axis (a fold needs all of them).

Worked example (attention; tile axis ``i``)::

    O[i,e] = sum_j P[i,j] * V[j,e]    anchor; P read as P[i, j]   -> P tiles on its axis 0
    P[a,b] = E[a,b] / L[a]            E read as E[a, b], L as L[a] -> both tile on axis 0
    ...                                                            -> one region, six members

Every growth step is a candidate boundary; ``grow`` returns them in growth order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from weft.ir import OUTSIDE, AxisIndex, Kernel, Plan, index_axes


@dataclass(frozen=True, slots=True)
class Region:
    """A set of members that lowers as one nest, tiled along one common axis.

    ``tile_axes`` pairs each member with its own axis name that carries the tile
    (empty when the anchor has no output axis, e.g. a scalar loss).
    ``anchor_axes`` lists every anchor axis still common to all members; the
    first one is the tile axis this region lowers with. ``tile_maps`` gives, for
    each of them (in the anchor's axis order), every member's axis carrying it.
    """

    anchor: str
    members: tuple[str, ...]
    tile_axes: tuple[tuple[str, str], ...]
    anchor_axes: tuple[str, ...]
    private: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    tile_maps: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    def tile_map(self, anchor_axis: str) -> dict[str, str]:
        """member -> its axis carrying ``anchor_axis`` (any common anchor axis, not only the first)."""
        return dict(dict(self.tile_maps)[anchor_axis])

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def tile_axis(self) -> str | None:
        """The anchor's axis the region is tiled along (None: untileable)."""
        return self.anchor_axes[0] if self.anchor_axes else None

    def tile_axis_of(self, member: str) -> str | None:
        return dict(self.tile_axes).get(member)

    @property
    def is_fused(self) -> bool:
        return len(self.members) > 1


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why ``member`` did not join the region grown from ``anchor``."""

    member: str
    anchor: str
    reason: str


@dataclass(frozen=True, slots=True)
class Growth:
    """Everything one growth from an anchor found: candidates in order, and refusals."""

    anchor: str
    candidates: tuple[Region, ...]
    refusals: tuple[Refusal, ...]

    @property
    def largest(self) -> Region:
        return self.candidates[-1]


def cover_by_anchors(
    plan: Plan,
    grow_from: Callable[[str, frozenset[str]], Growth],
    take: Callable[[Growth, frozenset[str]], Region],
) -> list[tuple[Growth, Region]]:
    """Cover ``plan``'s members from the last one back: each member no region holds yet anchors
    a growth (``grow_from(anchor, the members still uncovered)``), and ``take(growth, those
    members)`` names the region it covers. The (growth, region) steps in order of discovery;
    every policy (greedy, off, priced, the pricing phase's survey) differs only in ``take``."""
    uncovered = {kernel.output for kernel in plan.kernels}
    steps: list[tuple[Growth, Region]] = []
    for kernel in reversed(plan.kernels):
        if kernel.output not in uncovered:
            continue
        available = frozenset(uncovered)
        growth = grow_from(kernel.output, available)
        region = take(growth, available)
        steps.append((growth, region))
        uncovered -= set(region.members)
    return steps


def plan_anchors(plan: Plan) -> tuple[str, ...]:
    """Members whose output the plan's caller sees (the first anchors)."""
    return tuple(kernel.output for kernel in plan.kernels if kernel.output in plan.outputs)


class _Extents:
    """member -> {axis: extent}, computed for the members a growth actually visits."""

    def __init__(self, kernels: dict[str, Kernel]) -> None:
        self._kernels = kernels
        self._extents: dict[str, dict[str, int]] = {}

    def __getitem__(self, member: str) -> dict[str, int]:
        if member not in self._extents:
            self._extents[member] = {axis.name: axis.extent for axis in self._kernels[member].axes}
        return self._extents[member]


def map_tile_axis(
    producer: Kernel, readers: tuple[Kernel, ...], tile_of: dict[str, str], extents
) -> tuple[str | None, str]:
    """The producer's output axis that carries the readers' tile axes, or (None, why not)."""
    buffer = producer.output
    dimension: int | None = None
    for reader in readers:
        tile = tile_of[reader.output]
        for load in reader.loads:
            if load.buffer != buffer:
                continue
            touching = [d for d, index in enumerate(load.index) if tile in index_axes(index)]
            if len(touching) != 1 or load.index[touching[0]] != AxisIndex(tile):
                return None, f"{reader.output} reads {buffer} without indexing one dimension by exactly its tile axis {tile}"
            if dimension is not None and dimension != touching[0]:
                return None, f"loads of {buffer} put the tile axis in different dimensions"
            dimension = touching[0]
            if producer.axes[dimension].extent != extents[reader.output][tile]:
                return None, (
                    f"{buffer} dimension {dimension} has extent {producer.axes[dimension].extent}"
                    f" but {reader.output}'s tile axis {tile} has {extents[reader.output][tile]}"
                )
    if dimension is None:
        return None, f"no reader of {buffer} indexes it by its tile axis"
    return producer.axes[dimension].name, ""


MAX_REGION_MEMBERS = 32
"""Growth stops at this many members. Without a limit a plan whose members all tile along
one axis (a stack of row-wise layers with no attention between them) grows every anchor
back through the whole plan: quadratic candidates, each asked whether it lowers (issue 13:
region_fit called 1,248 times for a 6-layer encoder). The largest region any built-in
workload chooses has 12 members (a decode step's attention with its projections)."""


def grow(
    plan: Plan, anchor: str, available: frozenset[str] | None = None, limit: int | None = MAX_REGION_MEMBERS
) -> Growth:
    """Grow every candidate region from ``anchor``; ``available`` limits who may join, ``limit``
    the members of the largest candidate (None: no limit)."""
    index = plan.index
    kernels = index.kernels
    if anchor not in kernels:
        raise KeyError(f"{anchor} is not a member of plan {plan.name}")
    order = index.position
    readers = index.readers
    extents = _Extents(kernels)

    members = [anchor]
    # one tiling option per anchor output axis: member -> its axis carrying that tile
    options: dict[str, dict[str, str]] = {axis.name: {anchor: axis.name} for axis in kernels[anchor].axes}
    candidates = [_region(plan, kernels, members, options)]
    refusals: list[Refusal] = []
    seen: set[str] = {anchor}
    heap: list[tuple[int, str]] = []

    def push_producers(member: str) -> None:
        for name in kernels[member].reads:
            if name in kernels and name not in seen:
                seen.add(name)
                heapq.heappush(heap, (-order[name], name))

    push_producers(anchor)
    # Latest producer first: a refused producer's outside reader is always later
    # than it, so it can never join afterwards; one pass decides each producer.
    while heap:
        _, name = heapq.heappop(heap)
        if limit is not None and len(members) >= limit:
            refusals.append(Refusal(name, anchor, f"the region has reached {limit} members (the growth limit)"))
            continue
        if available is not None and name not in available:
            refusals.append(Refusal(name, anchor, "already in another region"))
            continue
        # The plan's caller reads only after every region has run, so a plan output
        # may join as an extra output of the region; a member outside may not.
        outside = [reader for reader in readers.get(name, ()) if reader not in members and reader != OUTSIDE]
        if outside:
            refusals.append(Refusal(name, anchor, f"a reader outside: {', '.join(outside)}"))
            continue
        region_readers = tuple(kernels[r] for r in readers[name] if r != OUTSIDE)
        surviving: dict[str, dict[str, str]] = {}
        reasons: list[str] = []
        for anchor_axis, tile_of in options.items():
            axis, why = map_tile_axis(kernels[name], region_readers, tile_of, extents)
            if axis is None:
                reasons.append(f"tiling along {anchor}.{anchor_axis}: {why}")
            else:
                surviving[anchor_axis] = {**tile_of, name: axis}
        if not surviving:
            detail = "; ".join(reasons) if reasons else f"{anchor} has no output axis to tile along"
            refusals.append(Refusal(name, anchor, f"no common tile axis ({detail})"))
            continue
        options = surviving
        members.append(name)
        candidates.append(_region(plan, kernels, members, options))
        push_producers(name)
    return Growth(anchor, tuple(candidates), tuple(refusals))


def grow_from_anchor(plan: Plan, anchor: str, available: frozenset[str] | None = None) -> tuple[Region, ...]:
    """Every candidate region from ``anchor``, in growth order (the anchor alone first)."""
    return grow(plan, anchor, available).candidates


def _region(plan: Plan, kernels: dict[str, Kernel], members: list[str], options: dict[str, dict[str, str]]) -> Region:
    inside = set(members)
    ordered = tuple(sorted(members, key=plan.index.position.__getitem__))
    anchor = members[0]
    # Preferred tile axis first: the longest common axis (ties: the innermost), so
    # attention tiles over queries rather than over a batch axis of extent 1.
    common = [(axis.extent, position, axis.name) for position, axis in enumerate(kernels[anchor].axes) if axis.name in options]
    anchor_axes = tuple(name for _, _, name in sorted(common, reverse=True))
    tile_of = options[anchor_axes[0]] if anchor_axes else {}
    reads: dict[str, None] = {}
    for name in ordered:
        for buffer in kernels[name].reads:
            if buffer not in inside:
                reads[buffer] = None
    return Region(
        anchor=anchor,
        members=ordered,
        tile_axes=tuple((name, tile_of[name]) for name in ordered if name in tile_of),
        anchor_axes=anchor_axes,
        private=tuple(name for name in ordered if name != anchor and name not in plan.index.outputs),
        inputs=tuple(reads),
        outputs=tuple(name for name in ordered if name == anchor or name in plan.index.outputs),
        tile_maps=tuple(
            (axis.name, tuple((name, options[axis.name][name]) for name in ordered))
            for axis in kernels[anchor].axes if axis.name in options
        ),
    )
