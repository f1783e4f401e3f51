"""The cycle model: the price of a lowered function, from its nests' facts and a tiling.

For every nest the loops run, outermost first (``nest_loops``)::

    outer axes | vector blocks | row blocks | fold axes | rows of the block | lanes of the block

(a fused region puts its tile loop in front). Each access (``weft.cost.facts``) moves
with some of those loops. Its traffic through a cache of ``C`` bytes is a closed form,
the layer condition: the data of a loop's body is reused across that loop's
iterations when the body's footprint (every access of the nest, or of the region's
tile) fits ``C``; the outermost loop whose body fits splits the nest in two, and the
access costs its footprint inside that loop times the trips of every loop outside it.
The first touch of a buffer in a run (its *compulsory* bytes) is served by the level
its *home* says (how far back the plan last touched it: ``weft.cost.distance``), so
unfused members pay for writing and re-reading their intermediates at the distances
the plan gives them, and a fused region's private scratch stays where its tile fits.

Bytes are served by exactly one level each: L1 serves what the core loads but that
did not have to come from further away, L2 what missed L1, and so on. Time is an
execution-cache-memory combination: the transfers add up (each at the measured
read or write bandwidth from its level, at the thread count the nest runs with);
the in-core work (vector operations at the measured FMA peak, exp/log/divide at
their measured rates) overlaps the L1 traffic but
not the transfers from beyond L1::

    cycles = beyond + max(in-core, L1 bytes / L1 bandwidth) + overheads
    beyond = sum over L2, L3, memory of bytes / bandwidth

A fold whose chains wait on their adds (Strict keeps one in-order chain per lane) is
the exception: its loads do not depend on the chains and stream while they wait, so the
nest takes ``max(chain latency, throughput + beyond)`` (softmax's Strict row sum 4096 x
1024 from memory on Zen 4: chains 0.30 ms, the read 0.51 ms, measured 0.56 ms; their sum
0.80 ms). (A generated nest; the contraction microkernel and a BLAS call keep their own
formulas; a library body is combined as a generated nest, ``body_cycles``). Measured on
the accuracy benchmark's 228 programs (both contracts, 1 and 2 threads, Zen 4):
overlapping every level (``max(in-core, all bytes)``) ranks them with Spearman 0.890
(Strict) and 0.867 (Inference), 0.80 / 0.76 at 2 threads; this combination 0.932 and
0.923, 0.89 / 0.88 at 2 threads.

One exception, a lowering fact: a row chain tiled along its rows prefetches the next
tile's inputs while this tile computes (``weft.lower.row_prefetch``; ``FunctionFacts.prefetched``).
Those reads are issued a tile ahead: the row's compute does not wait on them, and they
still take the memory's time. So the tile loop takes the longer of its in-core path and
all its transfers from beyond L1::

    tiles = max(sum over nests of (beyond without the prefetched reads + max(in-core, L1)),
                sum over nests of beyond)

Layer norm 8192 x 1024, Inference, one thread (per row: in-core work about 500 cycles, the
4 KiB row read from memory about 390, written about 480): measured 2.06 ms, priced 3.4 ms
as the sum of each nest's time, now 2.56 ms. The Welford body (``body_cycles``), which
prefetches nothing, measured 2.41 ms: priced 1.85 ms from its memory traffic alone (so
priced took it, 1.17-1.31x slower than greedy), now 3.59 ms with its chains waiting on its
transfers (too high: its loop's loads run ahead of its latency-bound chain).

Speed: what a tiling does not change is derived once, with the facts: each loop's trips
rule and each access's loops (``weft.cost.facts.LoopShape``), a fused function's anchors,
tile footprints and homes (``TileLayout``), and per line size each nest's ``NestPlan`` (the
suffix footprints over its fixed loops, its fixed body, its in-core constants). A price for
one tiling then sets the trips the tiling cuts and finishes those numbers: about 2x faster
per price than working every suffix out loop by loop (``benchmarks/pricer_speed.py``).
Every byte count is a whole number below 2**53, exact in a float, so the prices are the
loop-by-loop model's to the bit (``tests/cost/test_price_plans.py`` keeps that model).

Overheads: a fixed cost per nest and per work item, per tile of a fused region, and a
parallel region per parallel loop. A worked example (a streaming copy of n floats,
memory-resident): compute n/16 vector moves; L1 serves nothing, memory serves 4n read
bytes and 4n written bytes, all of them beyond L1, and the copy computes nothing, so
cycles = 4n/read_bw + 4n/write_bw (bytes per cycle).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from weft.cost.facts import (
    CEILING,
    PLAIN,
    ContractionFacts,
    FunctionFacts,
    LoopShape,
    NestFacts,
    OpCounts,
    loop_shape,
    loop_trips,
    tile_layout,
)
from weft.cost.machine import LEVELS, MachineProfile

CACHE_SHARE = (0.75, 0.75, 0.6)
"""The part of L1, L2 and (per thread) L3 a working set may use and still be reused
(associativity, other data, prefetchers): the layer condition's safety factor."""

FOLD_LATENCY = 4.0  # cycles of one dependent float add/FMA: a fold with few chains waits on it
GATHER_CYCLES = 0.5  # per element assembled lane by lane
TRANSPOSE_CYCLES = 0.125  # per element of a lanes x lanes tile transposed in registers
NEST_CYCLES = 60.0  # entering a nest (loop setup, the function call in the runner)
ITEM_CYCLES = 12.0  # decoding one work item
TILE_CYCLES = 4.0  # one tile of a fused region (range set-up, scratch pointers)
NEST_IN_TILE_CYCLES = 2.0  # entering a member's nest inside a tile (no call: loop set-up only)
ITEM_IN_TILE_CYCLES = 2.0  # a work item of a nest inside a tile: one iteration of a plain loop
# (measured: Adam's three members fused in tiles of 16 floats, 125k tiles, ran no slower than in
# tiles of 64, so a tile costs a few cycles, not tens)
ARITHMETIC_PER_CYCLE = 2.0  # vector add/mul/max per cycle (the FMA ports)


@dataclass(frozen=True, slots=True)
class MachineNumbers:
    """A profile at one thread count, in cycles: what every price formula multiplies by."""

    profile_id: str
    threads: int
    clock_hz: float
    capacities: tuple[float, float, float]  # usable L1, L2 and this thread's share of L3 (the layer condition)
    shared_capacities: tuple[float, float, float]  # usable L1, L2 and the whole L3 (a plan's reuse distances)
    read_bytes_per_cycle: tuple[float, float, float, float]  # served from L1, L2, L3, memory
    write_bytes_per_cycle: tuple[float, float, float, float]
    serial_read: tuple[float, float, float, float]  # one thread
    serial_write: tuple[float, float, float, float]
    exp_cycles: float  # per vector
    log_cycles: float
    divide_cycles: float
    gemm_flops_per_cycle: float
    fma_flops_per_cycle: float  # one core's FMA peak (FLOPs per cycle): the microkernel's rate
    parallel_region_cycles: float
    line: int
    lanes: int


@functools.lru_cache(maxsize=64)
def machine_numbers(profile: MachineProfile, threads: int) -> MachineNumbers:
    clock = profile.clock_hz or 3.0e9
    threads = max(1, min(threads, profile.logical_cpus))
    l3 = profile.l3_bytes or 8 * 1024**2
    l3_share = profile.l3_bytes / threads if profile.l3_bytes else l3
    private = (CACHE_SHARE[0] * (profile.l1d_bytes or 32768), CACHE_SHARE[1] * (profile.l2_bytes or 2**19))

    def per_cycle(kind: str, count: int) -> tuple[float, ...]:
        return tuple(profile.level_bandwidth(level, kind, count) / clock for level in LEVELS)

    def unary(kind: str, default: float) -> float:
        rate = profile.unary_rate(kind)
        return clock / rate if rate else default

    return MachineNumbers(
        profile_id=profile.profile_id,
        threads=threads,
        clock_hz=clock,
        capacities=(*private, CACHE_SHARE[2] * l3_share),
        shared_capacities=(*private, CACHE_SHARE[2] * l3),
        read_bytes_per_cycle=per_cycle("read", threads),
        write_bytes_per_cycle=per_cycle("write", threads),
        serial_read=per_cycle("read", 1),
        serial_write=per_cycle("write", 1),
        exp_cycles=unary("exp", 15.0),
        log_cycles=unary("log", 20.0),
        divide_cycles=unary("divide", 2.5),
        gemm_flops_per_cycle=profile.peak_flops(threads) / clock,
        fma_flops_per_cycle=profile.fma_peak(1) / clock,
        parallel_region_cycles=profile.parallel_region_s * clock if threads > 1 else 0.0,
        line=profile.line_bytes or 64,
        lanes=profile.lanes,
    )


@dataclass(frozen=True, slots=True)
class Price:
    """Predicted cycles of one lowered function (or a sum of them), and where they go.

    ``served`` holds the bytes served by L1, L2, L3 and memory (reads + writes);
    ``memory_bytes`` the scratch (every thread's) and arena bytes the form needs."""

    cycles: float
    compute: float
    data: float
    overhead: float
    served: tuple[float, float, float, float]
    memory_bytes: int = 0
    detail: str = ""

    def __add__(self, other: Price) -> Price:
        return Price(
            self.cycles + other.cycles, self.compute + other.compute, self.data + other.data,
            self.overhead + other.overhead, tuple(a + b for a, b in zip(self.served, other.served, strict=True)),
            self.memory_bytes + other.memory_bytes, self.detail or other.detail,
        )

    def seconds(self, numbers: MachineNumbers) -> float:
        return self.cycles / numbers.clock_hz


ZERO = Price(0.0, 0.0, 0.0, 0.0, (0.0, 0.0, 0.0, 0.0))


def price_nest(
    nest: NestFacts, extent, numbers: MachineNumbers, homes: dict[str, int], parallel_threads: int,
    tile: tuple[int, frozenset[str], float] | None = None, overlapped: frozenset[str] = frozenset(),
) -> tuple[float, float, float, list[float], list[float]]:
    """(compute, data, overhead cycles, bytes read per level, bytes written per level, exposed
    cycles) of one nest; ``exposed``: the part of ``data`` the compute cannot overlap (a
    generated nest's transfers from beyond L1; 0 for the microkernel and BLAS), so the nest
    takes ``max(compute + exposed, data)``.

    ``tile`` is (tile count, carried member axes, the tile's working set in bytes) for a
    nest inside a fused region's tile loop; ``homes`` the level (0 L1 .. 3 memory) whose
    copy serves each buffer's compulsory bytes; reads of an ``overlapped`` buffer (prefetched
    a tile ahead) are left out of ``exposed`` (they stay in ``data``)."""
    if nest.contraction is not None and tile is None:
        return (*price_contraction(nest.contraction, numbers, homes, parallel_threads), 0.0)
    tile_count, tiled, tile_bytes = tile if tile is not None else (1, frozenset(), 0.0)
    shape = nest.shape if nest.shape is not None and nest.shape.tiled == tiled else loop_shape(nest, tiled)
    trips = loop_trips(shape, extent, tile_count)
    plan = nest_plan(nest, shape, trips, frozenset(), numbers.line)
    along = extent(nest.vector_axis) if not nest.library and nest.lanes > 1 and shape.vector_blocks > 0 else 0
    return _price_loops(nest, shape, plan, trips, extent, along, numbers, homes, parallel_threads, tile is not None,
                        tile_bytes, overlapped)


@dataclass(frozen=True, slots=True)
class NestPlan:
    """The part of a nest's traffic that its fixed trips settle, worked out once: per access a
    tuple ``(buffer, itemsize, store, gather, has_unit, values, elements, run, steps, held,
    grows, core, counted)``: ``values[i]`` its footprint inside the loops that hold the
    first ``i`` loops moving it (innermost first; ``AccessShape.held`` says how many each
    suffix k.. holds) as far as the fixed loops go, ``elements``/``run`` the points and
    unit-stride run there, ``steps`` the moving loops left for a tiling's trips, ``grows`` the
    (k, i) whose body[k] holds its ``values[i]`` from those steps; ``core`` its
    core bytes over the fixed counted loops and ``counted`` the counted loops a tiling sets.
    ``body[k]``: the footprint of loop k's body, as far as the fixed loops settle it.

    Every byte count is a whole number below 2**53, so a float holds it exactly and sums and
    products of them do not round, in any order: a price from a plan is bit-identical to one
    worked out loop by loop."""

    accesses: tuple[tuple, ...]
    body: tuple[float, ...]
    # what the in-core and overhead terms read of the nest and its loops: (register tile, lanes,
    # vector-block loop, arithmetic / ARITHMETIC_PER_CYCLE, exp, log and divide per point,
    # transposed, folds, register_from, outer, blocks_per_item)
    core: tuple = ()
    dynamic: bool = True  # whether a tiling sets a loop that moves some access (else ``values`` is every one's)
    values: tuple[tuple, ...] = ()


def nest_plan(nest: NestFacts, shape: LoopShape, trips, varying: frozenset[int], line: int) -> NestPlan:
    """The plan of ``nest`` (its ``shape``) at ``trips`` (those of the loops in ``varying`` are
    set later)."""
    body = [0] * len(trips)
    accesses = []
    for access in shape.accesses:
        size = access.itemsize
        elements = run = 1
        values = [size]
        steps = access.steps
        for index, (k, unit) in enumerate(steps):
            if k in varying:
                steps = steps[index:]
                break
            elements *= trips[k]
            if unit:
                run *= trips[k]
            values.append(_suffix_bytes(elements, run, size, line, access.has_unit))
        else:
            steps = ()
        core = size
        counted = []
        for k in access.counted_loops:
            if k in varying:
                counted.append(k)
            else:
                core *= trips[k]
        known = len(values)  # values[known:] come with a tiling's trips
        grows = tuple((k, held) for k, held in enumerate(access.inner_held) if held >= known)
        body = [total + values[held] if held < known else total for total, held in zip(body, access.inner_held,
                                                                                      strict=True)]
        accesses.append((access.buffer, size, access.store, access.gather, access.has_unit, tuple(values), elements,
                         run, steps, access.held, grows, core, tuple(counted)))
    ops = nest.ops
    core_terms = (bool(nest.register_tile[0]), nest.lanes, shape.vector_blocks, ops.arithmetic / ARITHMETIC_PER_CYCLE,
                  ops.exp, ops.log, ops.divide, nest.transposed, bool(nest.fold_axes), shape.register_from, shape.outer,
                  nest.blocks_per_item)
    return NestPlan(tuple(accesses), tuple(body), core_terms, any(access[8] for access in accesses),
                    tuple(access[5] for access in accesses))


def _suffix_bytes(elements: int, run: int, size: int, line: int, has_unit: bool) -> float:
    """Bytes an access touches over ``elements`` points whose unit-stride runs are ``run`` long:
    whole lines per run; with no run, a line per point if it has a unit axis, else its size."""
    if run > 1:
        return elements / run * (-(-run * size // line) * line)
    return elements * (line if elements > 1 and has_unit else size)


def nest_traffic(plan: NestPlan, trips: list[int], numbers: MachineNumbers, homes: dict[str, int],
                 tile_bytes: float | None, overlapped: frozenset[str]):
    """(bytes read, written, read of the ``overlapped`` buffers per level, elements gathered) of
    a nest's accesses at ``trips``, from its ``plan``: the layer condition of the module doc."""
    line = numbers.line
    body = plan.body
    copied = False
    values_of = [] if plan.dynamic else plan.values
    for _, size, _, _, has_unit, values, elements, run, steps, _, grows, _, _ in plan.accesses if plan.dynamic else ():
        if steps:  # the loops a tiling sets: as ``_suffix_bytes``, inline
            values = list(values)
            for k, unit in steps:
                trip = trips[k]
                elements *= trip
                if unit:
                    run *= trip
                if run > 1:
                    values.append(elements / run * (-(-run * size // line) * line))
                else:
                    values.append(elements * (line if elements > 1 and has_unit else size))
            if grows:  # the bodies of the loops inside one it moves with that a tiling sets
                if not copied:
                    body, copied = list(body), True
                for k, held in grows:
                    body[k] += values[held]
        values_of.append(values)
    if tile_bytes is not None and tile_bytes > body[0]:
        if not copied:
            body = list(body)
        body[0] = tile_bytes
    # the layer condition per level: the outermost loop whose body fits, and the trips outside it
    count = len(trips)
    splits = []
    for capacity in numbers.capacities:
        outside = 1.0
        split = count
        for k, footprint in enumerate(body):
            if footprint <= capacity:
                split = k
                break
            outside *= trips[k]
        splits.append((split, outside))
    read = [0.0, 0.0, 0.0, 0.0]
    write = [0.0, 0.0, 0.0, 0.0]
    hidden = [0.0, 0.0, 0.0, 0.0]  # reads of the overlapped buffers
    gathered = 0.0
    for (buffer, size, store, gather, _, _, _, _, _, held, _, core, counted), values in zip(
            plan.accesses, values_of, strict=True):
        core = float(core)
        for k in counted:
            core *= trips[k]
        if gather:
            gathered += core / size
        compulsory = values[-1]
        home = homes.get(buffer, 3)
        target = write if store else hidden if buffer in overlapped else read
        previous = core  # L1, L2, L3 in turn: what misses a level moves from the next
        for level, (split, outside) in enumerate(splits):
            moved = outside * values[held[split]]
            if level >= home:  # the compulsory bytes already sit in this level: they do not miss it
                moved = moved - compulsory if moved > compulsory else 0.0
            if moved < previous:  # (else the level serves nothing)
                target[level] += previous - moved
                previous = moved
        target[3] += previous  # memory serves the rest
    return read, write, hidden, gathered


def _price_loops(nest: NestFacts, shape: LoopShape, plan: NestPlan, trips: list[int], extent, along: int,
                 numbers: MachineNumbers, homes: dict[str, int], parallel_threads: int, in_tile: bool, tile_bytes: float,
                 overlapped: frozenset[str]):
    """``price_nest`` at known trips (the tile loop's first), from the nest's plan; ``along``: the
    points of its vector axis (read only for a generated nest with lanes and a vector-block
    loop), ``extent`` read only by a library nest."""
    read, write, hidden, gathered = nest_traffic(plan, trips, numbers, homes, tile_bytes if in_tile else None,
                                                 overlapped)
    exposed_read = read  # the reads the in-core work waits on (module doc)
    if overlapped:
        read = [a + b for a, b in zip(read, hidden, strict=True)]
    serial = parallel_threads <= 1
    read_bw = numbers.serial_read if serial else numbers.read_bytes_per_cycle
    write_bw = numbers.serial_write if serial else numbers.write_bytes_per_cycle
    read_cycles = (read[0] / read_bw[0], read[1] / read_bw[1], read[2] / read_bw[2], read[3] / read_bw[3])
    write_cycles = (write[0] / write_bw[0], write[1] / write_bw[1], write[2] / write_bw[2], write[3] / write_bw[3])
    data = sum(read_cycles) + sum(write_cycles)
    tile_count = trips[0]
    library = nest.library
    (register_tile, lanes, vector_blocks, arithmetic, exp, log, divide, transposed, folds, register_from, outer,
     blocks_per_item) = plan.core
    waiting = 0.0  # cycles a fold's chains wait on their adds beyond the nest's throughput
    if library and register_tile:
        compute = _register_tile_cycles(nest, extent, tile_count, numbers)
    elif library:
        flops = 2.0 * math.prod(extent(axis) for axis, _ in nest.extents) * tile_count
        compute = flops / numbers.gemm_flops_per_cycle * max(1, parallel_threads)
    else:
        points = math.prod(trips)
        vectors = points / lanes if lanes > 1 else points
        if lanes > 1 and vector_blocks > 0:
            # the points of the vector axis past its last whole vector run as scalar columns
            # (a tile narrower than the lanes runs every point scalar)
            padded = trips[vector_blocks] * trips[-1]
            vectors *= (along // lanes + along % lanes) * lanes / padded
        compute = vectors * (arithmetic + exp * numbers.exp_cycles + log * numbers.log_cycles
                             + divide * numbers.divide_cycles)
        if gathered:
            compute += gathered * (TRANSPOSE_CYCLES if transposed else GATHER_CYCLES)
        if folds:  # the chains wait on their adds
            throughput, compute = compute, max(compute, math.prod(trips[:register_from]) * FOLD_LATENCY)
            waiting = compute - throughput
    # a generated nest's in-core work waits on its transfers from beyond L1 (module doc)
    if library:
        beyond = 0.0
    elif overlapped:
        beyond = sum((exposed_read[1] / read_bw[1], exposed_read[2] / read_bw[2], exposed_read[3] / read_bw[3])) + sum(
            write_cycles[1:])
    else:
        beyond = sum(read_cycles[1:]) + sum(write_cycles[1:])
    if waiting > 0.0:  # loads do not wait on the chains: the transfers run while the chains wait (module doc)
        beyond = max(0.0, beyond - waiting / max(1, parallel_threads))
    items = math.prod(trips[1: 1 + outer])
    if vector_blocks > 0:
        items *= -(-trips[vector_blocks] // blocks_per_item) if blocks_per_item else 1
    if in_tile:
        overhead = (NEST_IN_TILE_CYCLES + ITEM_IN_TILE_CYCLES * items) * tile_count
    else:
        overhead = NEST_CYCLES + ITEM_CYCLES * items
    share = max(1, parallel_threads)
    return compute / share, data, overhead / share, read, write, beyond


ALL_LEVELS, BEYOND_L1 = (0, 1, 2, 3), (1, 2, 3)


def transfer_cycles(read: list[float], write: list[float], numbers: MachineNumbers, threads: int,
                    levels: tuple[int, ...]) -> float:
    """Cycles to move ``read`` and ``write`` (bytes per level) at the bandwidth of each of
    ``levels`` for a nest running ``threads`` (one thread: the serial bandwidths), reads first."""
    read_bw = numbers.serial_read if threads <= 1 else numbers.read_bytes_per_cycle
    write_bw = numbers.serial_write if threads <= 1 else numbers.write_bytes_per_cycle
    return sum(read[level] / read_bw[level] for level in levels) + sum(write[level] / write_bw[level] for level in levels)


SCALAR_PACK_CYCLES = 1.5
"""Per element a one pass packs for its register tile, a scalar load and a scalar store across
the panel (K transposed into key blocks): measured on vit-block's window attention (36 heads x
64 keys x 64), 58 us for 147 456 elements at 3.7 GHz (perf), where a gather is 0.5."""
TRANSPOSED_PACK_CYCLES = 0.4
"""Per element packed by lanes x lanes tiles (a vector load per key, an in-register transpose,
a vector store per fold step): the same K, 15.6 us (perf), 3.7x the element-by-element rate."""
MICRO_TILE_CYCLES = 8.0  # entering one register tile for one fold block (pointers, loop set-up)


def _register_tile_cycles(nest: NestFacts, extent, tile_count: int, numbers: MachineNumbers) -> float:
    """Compute cycles of a nest run on the microkernel's register tile (the one pass's scores:
    rows x columns accumulators over the fold): one core's vector FMAs at its peak, as
    ``price_contraction`` prices the register tile, plus each tile's entry and the store of its
    accumulators; not the BLAS rate, which the pass never calls. Per thread: the caller shares
    it among the threads running tiles."""
    lanes = max(1, numbers.lanes)
    rows, columns = nest.register_tile
    fold = math.prod(extent(axis) for axis in nest.fold_axes)
    outputs = math.prod(extent(axis) for axis in nest.output_axes) * tile_count
    vectors = max(1, columns // lanes)
    fma_per_cycle = max(1e-9, numbers.fma_flops_per_cycle / (2.0 * lanes))
    tiles = outputs / (rows * columns)
    return (tiles * (rows * vectors * fold / fma_per_cycle + MICRO_TILE_CYCLES + rows * vectors)
            + nest.packed_elements * SCALAR_PACK_CYCLES + nest.transposed_elements * TRANSPOSED_PACK_CYCLES)


def _op_cycles(ops: OpCounts, numbers: MachineNumbers) -> float:
    """Cycles of one vector evaluation of ``ops``."""
    return (ops.arithmetic / ARITHMETIC_PER_CYCLE + ops.exp * numbers.exp_cycles + ops.log * numbers.log_cycles
            + ops.divide * numbers.divide_cycles)


def body_cycles(in_core: float, l1: float, exposed: float) -> float:
    """A library body's cycles from its parts, combined as a generated nest's (module doc):
    its in-core work overlaps its L1 traffic, not its transfers from beyond L1 (``exposed``),
    which it issues with no prefetch ahead: ``exposed + max(in_core, l1)``, the nest's
    ``max(compute + exposed, data)``. So the two sides of a choice between a body and a
    generated form are priced alike."""
    return exposed + max(in_core, l1)


def _fitting_level(size: float, numbers: MachineNumbers) -> int:
    """The nearest level (0 L1 .. 3 memory) whose usable capacity holds ``size`` bytes."""
    return next((level for level, capacity in enumerate(numbers.capacities) if size <= capacity), 3)


def price_contraction(
    c: ContractionFacts, numbers: MachineNumbers, homes: dict[str, int], threads: int,
) -> tuple[float, float, float, list[float], list[float]]:
    """(compute, data, overhead cycles, bytes read per level, bytes written per level) of the
    contraction microkernel, from its own blocking (``weft.lower.contraction``)::

        for batch point:  for jc in N by nc:  pack y (K x nc)
            for row block ic in M by mc (parallel):  for pc in K by kc:  pack x (mc x kc)
                for jr in nc by nr:  for ir in mc by mr:  mr x nr accumulators over kc steps

    Compute: the register tile's vector FMAs at the core's FMA peak (Strict: a multiply and
    an add per term, twice the operations), a fixed entry per tile and fold block plus its
    accumulators' stores (and reloads after the first fold block), the epilogue once per
    output vector, and packing as the codegen packs: y by vectors (the factor's operations per
    vector), by transposed vectors, or element by element; x element by element, so a
    prologue's operations (a GELU while packing) cost once per element of x, scalar. Data:
    x read once per column panel (the first time from its home, then from where it fits),
    y once, the packed panels streamed by the tile from L1/L2 (the y micro-panel once per row
    tile, the x block once per column tile), the output written once per fold block (and
    re-read between them) and the epilogue's operands once. Worked example: a 96 x 64 x 64
    Inference product, tile 6 x 64, one fold block, one thread: 16 tiles of 6 x 4 vectors x
    64 steps = 24,576 vector FMAs, at 2 per cycle 12,288 cycles, plus 16 x (8 + 24) tile cycles."""
    lanes = max(1, numbers.lanes)
    batches, rows, columns, fold = c.batches, c.rows, c.columns, c.fold
    row_tiles, column_tiles = -(-rows // c.mr), -(-columns // c.nr)
    vectors = c.nr // lanes if c.nr >= lanes else 1
    fold_blocks = -(-fold // max(1, c.kc))
    panels = -(-columns // max(1, c.nc))
    padded_rows, padded_columns = row_tiles * c.mr, column_tiles * c.nr
    fma_per_cycle = max(1e-9, numbers.fma_flops_per_cycle / (2.0 * lanes))
    terms = batches * padded_rows * column_tiles * vectors * fold
    compute = terms * (1.0 if c.fma else 2.0) / fma_per_cycle
    tiles = batches * row_tiles * column_tiles * fold_blocks
    compute += tiles * (MICRO_TILE_CYCLES + c.mr * vectors) + batches * row_tiles * column_tiles * max(
        0, fold_blocks - 1) * c.mr * vectors
    output_vectors = batches * rows * -(-columns // lanes)
    compute += output_vectors * _op_cycles(c.epilogue_ops, numbers)

    read, write = [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]

    def operand_reads(operands, passes: float) -> None:
        for operand in operands:  # the first pass from its home, the others from where it fits
            read[homes.get(operand.buffer, 3)] += operand.bytes
            if passes > 1:
                read[_fitting_level(operand.bytes, numbers)] += operand.bytes * (passes - 1)

    def packing(elements: float, ops: OpCounts, kind: str) -> float:
        if kind == "vector":  # the factor evaluated per vector, one store
            return elements * (1.0 + _op_cycles(ops, numbers)) / lanes
        if kind == "transposed":  # vectors along the fold, transposed in registers
            return elements * (1.0 / lanes + TRANSPOSE_CYCLES)
        # element by element: a scalar load and store, and each operation once per element
        return elements * (GATHER_CYCLES + _op_cycles(ops, numbers))

    packed_bytes = 4.0
    panel_level = _fitting_level(fold * min(c.nc, padded_columns) * packed_bytes, numbers)
    if not c.packed_y:
        operand_reads(c.y, 1)
        compute += packing(batches * fold * columns, c.y_ops, c.y_packing)
        write[panel_level] += batches * fold * padded_columns * packed_bytes
    micro_panel = c.kc * c.nr * packed_bytes
    y_stream = batches * row_tiles * fold * padded_columns * packed_bytes
    row_blocks = -(-rows // max(1, c.mc))
    first = min(y_stream, batches * row_blocks * fold * padded_columns * packed_bytes)
    read[panel_level] += first
    read[_fitting_level(micro_panel, numbers)] += y_stream - first
    if c.pack_x:
        operand_reads(c.x, panels)
        compute += packing(batches * rows * fold * panels, c.x_ops, "scalar")
        block_level = _fitting_level(c.mc * c.kc * packed_bytes, numbers)
        write[block_level] += batches * padded_rows * fold * panels * packed_bytes
        read[block_level] += batches * padded_rows * fold * column_tiles * packed_bytes
    else:  # read in place by every column tile
        operand_reads(c.x, column_tiles)
        compute += batches * rows * fold * column_tiles * _op_cycles(c.x_ops, numbers) / lanes
    out = batches * rows * columns * 4.0
    block_out = _fitting_level(c.mc * min(c.nc, padded_columns) * 4.0, numbers)
    write[3 if c.stream_output else homes.get(c.output, 3)] += out
    write[block_out] += out * (fold_blocks - 1)
    read[block_out] += out * (fold_blocks - 1)
    operand_reads(c.epilogue_loads, 1)

    serial = threads <= 1
    read_bw = numbers.serial_read if serial else numbers.read_bytes_per_cycle
    write_bw = numbers.serial_write if serial else numbers.write_bytes_per_cycle
    data = sum(read[level] / read_bw[level] + write[level] / write_bw[level] for level in range(4))
    items = (batches if c.parallel_batches else 1) * row_blocks * max(1, c.column_groups)
    share = 1.0
    if threads > 1:  # whole work items per thread: the last round may leave threads idle
        share = threads * items / (-(-items // threads) * threads)
    syncs = 1 if c.parallel_batches else batches * panels
    overhead = NEST_CYCLES + ITEM_CYCLES * items * (1 if c.parallel_batches else batches) / max(1.0, share) + (
        syncs * numbers.parallel_region_cycles if threads > 1 else 0.0)
    return compute / max(1.0, share), data, overhead, read, write


def _price_alone(nest: NestFacts, numbers: MachineNumbers, homes: dict[str, int], threads: int):
    """``price_nest`` of a nest run alone at its own extents: its trips and its whole plan are
    fixed, derived once per nest (and line size)."""
    if nest.contraction is not None or nest.shape is None or nest.shape.tiled:
        return price_nest(nest, dict(nest.extents).__getitem__, numbers, homes, threads)
    shape = nest.shape
    known = shape.plans.get(numbers.line)
    if known is None or known[0] is not nest:  # (a nest replaced after its shape was set keeps the shape)
        extent = dict(nest.extents).__getitem__
        trips = loop_trips(shape, extent, 1)
        along = extent(nest.vector_axis) if not nest.library and nest.lanes > 1 and shape.vector_blocks > 0 else 0
        known = (nest, trips, nest_plan(nest, shape, trips, frozenset(), numbers.line), extent, along)
        shape.plans[numbers.line] = known
    _, trips, plan, extent, along = known
    return _price_loops(nest, shape, plan, trips, extent, along, numbers, homes, threads, False, 0.0, frozenset())


def price_function(
    facts: FunctionFacts, numbers: MachineNumbers, homes: dict[str, int], sizes: dict[str, int] | None = None,
    parallel_tiles: bool = True,
) -> Price:
    """The price of a lowered function: unfused (one nest per member, each with its own
    parallel loop) or fused (every nest inside the tile loop, tiles of ``sizes`` along the
    carried anchor axes; an anchor axis not in ``sizes`` is one whole tile)."""
    if facts.fused:
        return _price_fused(facts, numbers, homes, sizes or {}, parallel_tiles)
    compute = data = overhead = cycles = 0.0
    served = [0.0, 0.0, 0.0, 0.0]  # whole bytes: exact in any order (``NestPlan``)
    for nest in facts.nests:
        run_threads = numbers.threads if nest.parallel else 1
        c, d, o, r, w, e = _price_alone(nest, numbers, homes, run_threads)
        o += numbers.parallel_region_cycles if run_threads > 1 else 0.0
        compute, data, overhead, cycles = compute + c, data + d, overhead + o, cycles + max(c + e, d) + o
        served[0] += r[0] + w[0]
        served[1] += r[1] + w[1]
        served[2] += r[2] + w[2]
        served[3] += r[3] + w[3]
    return Price(cycles, compute, data, overhead, tuple(served), 0, "unfused")


def _price_fused(facts: FunctionFacts, numbers: MachineNumbers, homes: dict[str, int], sizes: dict[str, int],
                 parallel_tiles: bool) -> Price:
    layout = tile_layout(facts)  # everything the tiling does not change, derived with the facts
    tile_of = {}
    tile_count = tile_points = 1
    cut = []  # the anchors cut into tiles smaller than the axis, for the detail
    for anchor, extent in layout.anchors:
        size = max(1, min(sizes.get(anchor, extent), extent))
        tile_of[anchor] = size
        tile_count *= -(-extent // size)
        tile_points *= size
        if size < extent:
            cut.append(f"{anchor}:{size}")
    threads = numbers.threads if parallel_tiles and tile_count >= 2 else 1
    # the tile's working set: every buffer's footprint inside one tile, counted once
    tile_bytes = 0
    for entries in layout.footprints:
        largest = 0.0
        for size, anchors in entries:
            for anchor in anchors:
                size *= tile_of[anchor]
            if size > largest:
                largest = size
        tile_bytes += largest
    # a buffer touched by an earlier nest of the same tile is served where the tile's working set fits
    tile_home = 3
    for level, capacity in enumerate(numbers.capacities):
        if tile_bytes <= capacity:
            tile_home = level
            break
    compute = data = overhead = 0.0
    served = [0.0, 0.0, 0.0, 0.0]  # whole bytes: exact in any order (``NestPlan``)
    busy = 0.0
    # the next tile's inputs prefetched while this tile computes (where the lowering emits the
    # prefetch: many tiles of one row or of several): their transfers overlap the tile's in-core work
    overlapped = facts.prefetched if facts.prefetched and tile_count >= 2 else frozenset()
    streamed = 0.0  # every transfer from beyond L1, overlapped or not: the tile loop's floor
    line = numbers.line
    plans = layout.plans.get(line)
    if plans is None:
        plans = layout.plans[line] = tuple(
            nest_plan(member.nest, member.shape, member.trips, frozenset((0, *(k for k, *_ in member.varying))), line)
            for member in layout.members)
    for member, plan in zip(layout.members, plans, strict=True):
        nest = member.nest
        extent = None
        if nest.library:  # a library nest reads its axes' points in the tile
            extents = dict(nest.extents)
            for axis, anchor in member.carried:
                extents[axis] = tile_of[anchor]
            extent = extents.__getitem__
        vector_anchor, along = member.vector
        if vector_anchor is not None:
            along = tile_of[vector_anchor]
        local_homes = homes
        if member.local:
            local_homes = dict(homes)
            for buffer, earlier in member.local:
                local_homes[buffer] = min(homes.get(buffer, 3), tile_home) if earlier else tile_home
        trips = list(member.trips)
        trips[0] = tile_count
        for k, anchor, rule, n in member.varying:
            points = tile_of[anchor]
            trips[k] = points if rule == PLAIN else -(-points // n) if rule == CEILING else min(n, points)
        c, d, o, r, w, e = _price_loops(nest, member.shape, plan, trips, extent, along, numbers, local_homes,
                                        threads, True, tile_bytes, overlapped)
        compute, data, overhead = compute + c, data + d, overhead + o
        if overlapped:
            beyond = transfer_cycles(r, w, numbers, threads, BEYOND_L1)
            streamed += beyond
            # the nest's own path leaves its overlapped reads out (they arrived during the tile before)
            busy += max(c + e, d - (beyond - e)) if not nest.library else max(c + e, d)
        else:
            busy += max(c + e, d)
        served[0] += r[0] + w[0]
        served[1] += r[1] + w[1]
        served[2] += r[2] + w[2]
        served[3] += r[3] + w[3]
    if overlapped:
        busy = max(busy, streamed)
    overhead += TILE_CYCLES * tile_count / threads + (numbers.parallel_region_cycles if threads > 1 else 0.0)
    scratch = int(facts.scratch_bytes * tile_points / facts.scratch_points) * threads
    tiling = ", ".join(cut) or "one tile"
    return Price(busy + overhead, compute, data, overhead, tuple(served), scratch,
                 f"{'one pass' if facts.one_pass else 'fused'} tiles {tiling} ({tile_count} tiles)")
