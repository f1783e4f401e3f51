"""Row chains tiled one row at a time prefetch the next row (``weft.lower.row_prefetch``): the
model prices those reads overlapping the tile's in-core work, and the library body that
prefetches nothing (Welford layer norm) is combined as a generated nest without a prefetch.

The fixed profile (``model_cases``): 4 GHz; memory 32 GB/s read, 16 GB/s write (8 and 4 bytes
per cycle at one thread); L1 256 / 128 GB/s (64 and 32 bytes per cycle)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from model_cases import READ, WRITE, fixed_profile, load  # noqa: E402

from weft.compose.regions import grow  # noqa: E402
from weft.config import config_from_env  # noqa: E402
from weft.cost.model import (  # noqa: E402
    ARITHMETIC_PER_CYCLE,
    FOLD_LATENCY,
    ITEM_CYCLES,
    NEST_CYCLES,
    machine_numbers,
    price_function,
)
from weft.decide.library.adam import LibraryMatch  # noqa: E402
from weft.decide.library.norm import price_layer_norm  # noqa: E402
from weft.decide.verdicts import DecidedPricing  # noqa: E402
from weft.fuse import region_pricing  # noqa: E402
from weft.ir import Axis, Binary, BinaryOp, Buffer, Combiner, Const, DType, Fold, Kernel, Plan, Role  # noqa: E402
from weft.lower import Target  # noqa: E402
from weft.workloads import get_workload  # noqa: E402

F32 = DType.FLOAT32
CLOCK = 4e9


def scaled_rows_plan(rows: int, cols: int) -> Plan:
    """e = 2x; s[i] = sum_j e[i, j]; y = e * s[i]: a row chain with a row-sized intermediate."""
    e = Kernel("e", (Axis("i", rows), Axis("j", cols)), Binary(BinaryOp.MUL, load("x", "i", "j"), Const(2.0, F32)))
    s = Kernel("s", (Axis("i", rows),), load("e", "i", "k"), Fold((Axis("k", cols),), Combiner.SUM))
    y = Kernel("y", (Axis("i", rows), Axis("j", cols)), Binary(BinaryOp.MUL, load("e", "i", "j"), load("s", "i")))
    buffers = (Buffer("x", (rows, cols), F32, Role.INPUT), Buffer("e", (rows, cols), F32, Role.INTERMEDIATE),
               Buffer("s", (rows,), F32, Role.INTERMEDIATE), Buffer("y", (rows, cols), F32, Role.OUTPUT))
    return Plan(buffers, (e, s, y), ("x",), ("y",), "scaled_rows")


def _fused_form(plan: Plan, anchor: str, threads: int = 1):
    config = config_from_env(contract="inference", threads=threads, fusion="priced", budget_s=60)
    pricing = region_pricing(plan, config, Target(16, "inference"), profile=fixed_profile())
    members = tuple(kernel.output for kernel in plan.kernels)
    region = next(r for r in grow(plan, anchor, frozenset(members)).candidates if r.members == members)
    return pricing, region, {form.name: form for form in pricing.region_lowering(region).forms()}["fused"]


def test_a_row_chain_prefetching_its_next_row_is_priced_at_its_transfers_when_they_dominate():
    """Per row of 1024 floats (4 KiB): x from memory 512 cycles, y to memory 1024; in-core
    (e to L1 scratch 128, s from L1 64, y's read of e 64, the multiplies under those) far less.
    The read of x is issued a row ahead (the prefetch rides on s's loop), so the tile loop is
    the longer of the in-core path (y's write + about 256) and the transfers: the transfers.
    Priced as if x's read waited for the row's compute (512 + 128 + 64 + 64 + 1024 = 1792 a
    row), the row chain was dearer than its memory floor by the compute it overlaps."""
    rows, cols = 4096, 1024
    _, _, form = _fused_form(scaled_rows_plan(rows, cols), "y")
    assert form.tilings[0] == (("i", 1),)  # one row per tile: the lowering prefetches the next row
    numbers = machine_numbers(fixed_profile(), 1)
    price = price_function(form.facts, numbers, {"x": 3, "y": 3}, dict(form.tilings[0]))
    transfers = rows * cols * 4 * (1 / READ["memory"] + 1 / WRITE["memory"]) * CLOCK  # 1536 cycles a row
    assert price.cycles == pytest.approx(transfers + price.overhead, rel=1e-3)
    assert form.facts.prefetched == frozenset({"x"})
    # tiles of 16 rows carry no prefetch: every nest's transfers are exposed, as before
    sixteen = price_function(form.facts, numbers, {"x": 3, "y": 3}, {"i": 16})
    assert sixteen.cycles > price.cycles * 1.1


def test_the_welford_body_waits_on_its_transfers_as_a_nest_without_a_prefetch():
    """8192 x 1024 from and to memory, one thread: x read (4 Mi cycles) and the output written
    (8 Mi) are exposed; in-core, per row, 64 dependent updates of two operations and a 16-lane
    merge of two per lane (160 x 4 cycles), and 64 output vectors of 5 operations (160)."""
    rows, dim = 8192, 1024
    roles = (("x", "x"), ("out", "out"), ("weight", "w"), ("bias", "b"))
    match = LibraryMatch("welford layer norm", roles, (), (rows, dim), ("out",))
    numbers = machine_numbers(fixed_profile(), 1)
    size = rows * dim * 4
    exposed = size * (1 / READ["memory"] + 1 / WRITE["memory"]) * CLOCK
    in_core = rows * ((2 * 64 + 2 * 16) * FOLD_LATENCY + 64 * 5 / ARITHMETIC_PER_CYCLE)
    expected = exposed + in_core + NEST_CYCLES + ITEM_CYCLES * rows
    assert price_layer_norm(match, numbers, {"x": 3, "out": 3}) == pytest.approx(expected)


@pytest.mark.parametrize("threads", [1, 2])
def test_priced_layer_norm_takes_the_generic_row_chain_over_the_welford_body(threads):
    """Layer norm 8192 x 1024, Inference (memory_bound.py's case): the generic fused form (one
    row per tile, the next row prefetched) ran 2.06 ms and the Welford body 2.41 ms (1 thread,
    this machine); the model priced them 3.4 and 1.89 ms (the body's memory traffic alone,
    the nest's compute added to its exposed transfers), so priced took the body, 1.165x
    slower than greedy. Both are now combined alike, and the generic form is cheaper."""
    plan = get_workload("layernorm").plan(rows=8192, dim=1024)
    pricing, region, _ = _fused_form(plan, plan.kernels[-1].output, threads)
    decided = DecidedPricing(pricing, None, {"contract": "inference", "threads": threads, "profile_id": "fixed",
                                              "deciding": "", "compiler": ""}, 0.0)
    body = decided.body_prices(region)["welford layer norm"]
    verdict = pricing.verdict(region)
    assert verdict.form == "fused" and verdict.tiling == (("i0", 1),)
    assert verdict.fused.cycles < body
