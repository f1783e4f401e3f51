"""Prices from the per-signature plans (``weft.cost.model.nest_plan``, ``weft.cost.facts.TileLayout``)
are bit-identical to the cycle model worked out loop by loop, as it read before the plans.

``reference_price`` below is that loop-by-loop model, kept here on purpose: for every loop k
of a nest, outermost first, each access's footprint in the loops k.. (its suffix) from the
trips of ``nest_loops``; the body of each loop; the layer condition per level; then the bytes
per level, the in-core work and the overheads. It must agree to the last bit with
``price_function`` on every price the pricing phase asks for (each member unfused, each fused
form in each of its tilings, at the region's homes and none, 1 and 2 threads, both
contracts) over every built-in workload. A change to the model's formula changes both."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pytest
from plans.profiles import fixed_profile

from weft.cost import model
from weft.cost.facts import loop_shape, nest_loops
from weft.cost.model import price_function
from weft.workloads import WORKLOADS

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from pricer_speed import corpus  # noqa: E402 (every price the pricing phase can ask for)
from pricing import ACCURACY_WORKLOADS  # noqa: E402


def reference_nest(nest, extent, numbers, homes, threads, tile=None, overlapped=frozenset()):
    """(compute, data, overhead, read, write, exposed) of one nest, loop by loop."""
    if nest.contraction is not None and tile is None:
        return (*model.price_contraction(nest.contraction, numbers, homes, threads), 0.0)
    tile_count, tiled, tile_bytes = tile or (1, frozenset(), 0.0)
    shape = loop_shape(nest, tiled)
    trips = [tile_count] + [trip for _, trip in nest_loops(nest, extent)]
    count, line = len(trips), numbers.line

    def suffix(access, k):  # bytes the access touches in loops k..
        moving = [j for j in range(k, count) if access.moves[j]]
        points = math.prod(trips[j] for j in moving)
        run = math.prod(trips[j] for j in moving if access.unit[j])
        if run > 1:
            return points / run * (-(-run * access.itemsize // line) * line)
        return points * (line if points > 1 and access.has_unit else access.itemsize)

    body = [sum(suffix(access, k + 1) for access in shape.accesses) for k in range(count)]
    if tile is not None:
        body[0] = max(body[0], tile_bytes)
    fits = [next((k for k in range(count) if body[k] <= capacity), count) for capacity in numbers.capacities]
    served = {"read": [0.0] * 4, "write": [0.0] * 4, "hidden": [0.0] * 4}
    gathered = 0.0
    for access in shape.accesses:
        core = access.itemsize * math.prod(trips[k] for k in range(count) if access.counted[k])
        gathered += core / access.itemsize if access.gather else 0.0
        kind = "write" if access.store else "hidden" if access.buffer in overlapped else "read"
        missed = [float(core)]  # bytes that miss L1, L2, L3 in turn
        for level, split in enumerate(fits):
            reach = math.prod(trips[:split]) * suffix(access, split)
            if level >= homes.get(access.buffer, 3):
                reach = max(0.0, reach - suffix(access, 0))
            missed.append(min(reach, missed[-1]))
        for level in range(4):
            served[kind][level] += missed[level] - (missed[level + 1] if level < 3 else 0.0)
    read, write = served["read"], served["write"]
    exposed_read = read
    if overlapped:
        read = [a + b for a, b in zip(read, served["hidden"], strict=True)]
    data = model.transfer_cycles(read, write, numbers, threads, (0, 1, 2, 3))
    waiting = 0.0
    if nest.library and nest.register_tile[0]:
        compute = model._register_tile_cycles(nest, extent, tile_count, numbers)
    elif nest.library:
        compute = 2.0 * math.prod(extent(a) for a, _ in nest.extents) * tile_count / numbers.gemm_flops_per_cycle
        compute *= max(1, threads)
    else:
        vectors = math.prod(trips) / nest.lanes if nest.lanes > 1 else math.prod(trips)
        if nest.lanes > 1 and shape.vector_blocks > 0:
            along, lanes = extent(nest.vector_axis), nest.lanes
            vectors *= (along // lanes + along % lanes) * lanes / (trips[shape.vector_blocks] * trips[-1])
        ops = nest.ops
        per_vector = (ops.arithmetic / model.ARITHMETIC_PER_CYCLE + ops.exp * numbers.exp_cycles
                      + ops.log * numbers.log_cycles + ops.divide * numbers.divide_cycles)
        compute = vectors * per_vector + gathered * (model.TRANSPOSE_CYCLES if nest.transposed else model.GATHER_CYCLES)
        if nest.fold_axes:  # the chains' wait hides as much of the transfers from beyond L1
            latency = math.prod(trips[: shape.register_from]) * model.FOLD_LATENCY
            waiting, compute = max(0.0, latency - compute), max(compute, latency)
    beyond = 0.0 if nest.library else model.transfer_cycles(exposed_read, write, numbers, threads, (1, 2, 3))
    if waiting > 0.0:
        beyond = max(0.0, beyond - waiting / max(1, threads))
    items = math.prod(trips[1: 1 + shape.outer])
    if shape.vector_blocks > 0 and nest.blocks_per_item:
        items *= -(-trips[shape.vector_blocks] // nest.blocks_per_item)
    if tile is not None:
        overhead = (model.NEST_IN_TILE_CYCLES + model.ITEM_IN_TILE_CYCLES * items) * tile_count
    else:
        overhead = model.NEST_CYCLES + model.ITEM_CYCLES * items
    return compute / max(1, threads), data, overhead / max(1, threads), read, write, beyond


def reference_price(facts, numbers, homes, sizes=None):
    """``price_function``, loop by loop (``parallel_tiles`` left on)."""
    totals = {"compute": 0.0, "data": 0.0, "overhead": 0.0, "busy": 0.0, "streamed": 0.0}
    read_total, write_total = [0.0] * 4, [0.0] * 4
    if not facts.fused:
        for nest in facts.nests:
            threads = numbers.threads if nest.parallel else 1
            c, d, o, r, w, e = reference_nest(nest, dict(nest.extents).__getitem__, numbers, homes, threads)
            o += numbers.parallel_region_cycles if threads > 1 else 0.0
            totals["compute"] += c
            totals["data"] += d
            totals["overhead"] += o
            totals["busy"] = totals["busy"] + max(c + e, d) + o  # in this order, as the model adds them
            read_total = [a + b for a, b in zip(read_total, r, strict=True)]
            write_total = [a + b for a, b in zip(write_total, w, strict=True)]
        served = tuple(a + b for a, b in zip(read_total, write_total, strict=True))
        return model.Price(totals["busy"], totals["compute"], totals["data"], totals["overhead"], served, 0, "unfused")
    sizes = sizes or {}
    anchor_of = {(member, axis): anchor for member, axis, anchor in facts.carried}
    whole: dict[str, int] = {}
    for nest in facts.nests:
        for (member, axis), anchor in anchor_of.items():
            if member == nest.member:
                whole.setdefault(anchor, nest.extent(axis))
    tile = {anchor: max(1, min(sizes.get(anchor, extent), extent)) for anchor, extent in whole.items()}
    tile_count = math.prod(-(-whole[anchor] // tile[anchor]) for anchor in whole)
    tile_points = math.prod(tile.values())
    threads = numbers.threads if tile_count >= 2 else 1
    extents_of = [{axis: tile[anchor_of[nest.member, axis]] if (nest.member, axis) in anchor_of else extent
                   for axis, extent in nest.extents} for nest in facts.nests]
    footprint: dict[str, float] = {}
    for nest, extents in zip(facts.nests, extents_of, strict=True):
        for access in nest.accesses:
            size = access.itemsize * math.prod(extents[a] for a in access.axes if a in extents)
            footprint[access.buffer] = max(footprint.get(access.buffer, 0.0), size)
    tile_bytes = sum(footprint.values())
    tile_home = next((level for level, capacity in enumerate(numbers.capacities) if tile_bytes <= capacity), 3)
    overlapped = facts.prefetched if facts.prefetched and tile_count >= 2 else frozenset()
    seen: set[str] = set()
    for nest, extents in zip(facts.nests, extents_of, strict=True):
        local = dict(homes)
        for access in nest.accesses:
            if access.buffer in seen:
                local[access.buffer] = min(homes.get(access.buffer, 3), tile_home)
            elif access.scratch:
                local[access.buffer] = tile_home
        tiled = frozenset(axis for member, axis in anchor_of if member == nest.member)
        c, d, o, r, w, e = reference_nest(nest, extents.__getitem__, numbers, local, threads,
                                          (tile_count, tiled, tile_bytes), overlapped)
        seen.update(access.buffer for access in nest.accesses)
        totals["compute"] += c
        totals["data"] += d
        totals["overhead"] += o
        if overlapped:
            beyond = model.transfer_cycles(r, w, numbers, threads, (1, 2, 3))
            totals["streamed"] += beyond
            totals["busy"] += max(c + e, d - (beyond - e)) if not nest.library else max(c + e, d)
        else:
            totals["busy"] += max(c + e, d)
        read_total = [a + b for a, b in zip(read_total, r, strict=True)]
        write_total = [a + b for a, b in zip(write_total, w, strict=True)]
    busy = max(totals["busy"], totals["streamed"]) if overlapped else totals["busy"]
    overhead = totals["overhead"] + (model.TILE_CYCLES * tile_count / threads
                                     + (numbers.parallel_region_cycles if threads > 1 else 0.0))
    scratch = int(facts.scratch_bytes * tile_points / facts.scratch_points) * threads
    served = tuple(a + b for a, b in zip(read_total, write_total, strict=True))
    cut = ", ".join(f"{anchor}:{size}" for anchor, size in tile.items() if size < whole[anchor]) or "one tile"
    return model.Price(busy + overhead, totals["compute"], totals["data"], overhead, served, scratch,
                       f"{'one pass' if facts.one_pass else 'fused'} tiles {cut} ({tile_count} tiles)")


CASES = [(name, {}) for name in WORKLOADS] + list(ACCURACY_WORKLOADS.items())  # its sizes: other cache fits


@pytest.mark.parametrize("contract", ["strict", "inference"])
@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{n}-{'small' if p else 'default'}" for n, p in CASES])
def test_every_price_of_a_built_in_workload_is_the_loop_by_loop_price_to_the_bit(name, params, contract):
    profile = fixed_profile()
    profiles = (profile, dataclasses.replace(profile, line_bytes=128))  # the plans are derived per line size
    checked = 0
    for label, facts, numbers, homes, sizes in corpus((name,), {name: params}, profiles, (contract,)):
        expected = reference_price(facts, numbers, homes, sizes)
        for _ in range(2):  # the first price derives the plans, the second reads them back
            price = price_function(facts, numbers, homes, sizes)
            assert price == expected, label
        checked += 1
    assert checked > 0
