"""The cycle model on cases whose bytes per level can be worked out by hand.

A fixed profile (round bandwidths, 48 KiB L1, 1 MiB L2, 32 MiB L3, 4 GHz) makes every
expected number a closed form. ``served`` is the bytes served by L1, L2, L3, memory."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from model_cases import READ, WRITE, copy_plan, fixed_profile, load, matmul_plan, row_sum_plan  # noqa: E402

from weft.cost.distance import plan_homes  # noqa: E402
from weft.cost.facts import function_facts  # noqa: E402
from weft.cost.model import machine_numbers, price_function  # noqa: E402
from weft.ir import (  # noqa: E402
    Axis,
    AxisIndex,
    Buffer,
    DType,
    IndexAdd,
    IndexFloorDiv,
    IndexMul,
    Kernel,
    Load,
    Plan,
    Role,
)
from weft.lower import Target, lower_plan  # noqa: E402
from weft.lower.access import address_step  # noqa: E402

F32 = DType.FLOAT32

CLOCK = 4e9


def price(plan, threads=1, contract="strict"):
    numbers = machine_numbers(fixed_profile(), threads)
    # the plain nests' model (the contraction microkernel is priced as a library body)
    function = lower_plan(plan, None, Target(16, contract, microkernel=False)).functions[0]
    homes = plan_homes(plan, numbers.capacities)[plan.kernels[0].output]
    return price_function(function_facts(function, contract), numbers, homes), homes


def test_streaming_copy_from_memory_reads_and_writes_each_byte_once():
    n = 1 << 24  # 64 MiB in, 64 MiB out: twice the L3
    result, homes = price(copy_plan(n))
    assert homes == {"x": 3, "y": 3}
    assert result.served == (0.0, 0.0, 0.0, 8.0 * n)
    expected = (4 * n / READ["memory"] + 4 * n / WRITE["memory"]) * CLOCK
    assert result.data == pytest.approx(expected)
    assert result.compute == 0.0  # a copy has no operations, only moves
    assert result.cycles == pytest.approx(expected + result.overhead)


def test_small_copy_stays_in_l1():
    result, homes = price(copy_plan(1024))  # 8 KiB in all: the whole plan lives in L1
    assert homes == {"x": 0, "y": 0}
    assert result.served == (8192.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("rows", "cols", "level"),
    [(64, 64, 0), (256, 256, 1), (4096, 4096, 3)],  # 16 KiB fits L1, 256 KiB L2, 64 MiB none
)
def test_row_reduction_is_served_by_the_level_it_fits(rows, cols, level):
    result, homes = price(row_sum_plan(rows, cols))
    assert homes["x"] == level
    expected = [0.0, 0.0, 0.0, 0.0]
    expected[level] = rows * cols * 4 + rows * 4  # the matrix read once, the row sums written once
    assert result.served == pytest.approx(tuple(expected))


def test_row_reduction_in_memory_is_memory_bound_and_costs_its_bytes():
    rows = cols = 4096
    result, _ = price(row_sum_plan(rows, cols))
    expected = (rows * cols * 4 / READ["memory"] + rows * 4 / WRITE["memory"]) * CLOCK
    assert result.data == pytest.approx(expected)
    assert result.data > result.compute  # one add per 4 bytes: far below the ridge point


def test_blocked_contraction_rereads_its_panel_from_l2_once_per_row_block():
    m = n = k = 512
    plan = matmul_plan(m, n, k)
    function = lower_plan(plan, None, Target(16, "strict", microkernel=False)).functions[0]
    nest = function.nests[0]
    assert (nest.block_axis, nest.block_rows, nest.block_vectors * nest.lanes) == ("i", 6, 64)
    result, homes = price(plan)
    assert homes == {"a": 2, "b": 2, "c": 2}  # 3 MiB in all: the plan lives in L3
    # the packed panel of b (k x 64 floats = 128 KiB) misses L1 and is read from L2 by every
    # block of 6 rows; its first read of each panel comes from L3 (where b lives)
    row_blocks = math.ceil(m / 6)
    assert result.served[1] == pytest.approx((row_blocks - 1) * k * n * 4)
    # from L3: b once, a once per 64-column block (a's 1 MiB plus a panel is over the L2
    # share), c written once
    assert result.served[2] == pytest.approx((1 + n // 64 + 1) * m * k * 4, rel=0.02)
    assert result.served[3] == 0.0
    # Strict: a multiply and an add per point (rows padded to whole blocks), two per cycle, 16 lanes
    assert result.compute == pytest.approx(row_blocks * 6 * n * k / 16 * 2 / 2)
    # compute-bound, and its in-core work waits on the transfers from beyond L1 (the model's
    # ECM combination): the panel from L2, a and b from L3, c written to L3
    exposed = ((row_blocks - 1) * k * n * 4 / READ["l2"] + (1 + n // 64) * m * k * 4 / READ["l3"]
               + m * n * 4 / WRITE["l3"]) * CLOCK
    assert result.cycles == pytest.approx(result.compute + exposed + result.overhead, rel=0.01)


def test_two_threads_halve_a_parallel_streaming_nest():
    one, _ = price(copy_plan(1 << 24), threads=1)
    two, _ = price(copy_plan(1 << 24), threads=2)
    assert two.data == pytest.approx(one.data / 2)  # the fixed profile doubles bandwidth at 2 threads


def test_unfused_members_pay_for_their_intermediate_at_the_plan_distance():
    """Two members through a 64 MiB intermediate: the reader finds it in memory."""
    from weft.compose.regions import grow
    from weft.cost.bridge import PlanPricing
    from weft.cost.search import Pricer

    n = 1 << 24
    plan = _negate_chain(n)
    numbers = machine_numbers(fixed_profile(), 1)
    homes = plan_homes(plan, numbers.capacities)
    assert homes["y"]["t"] == 3  # 64 MiB since it was written: gone from the 32 MiB L3
    region = grow(plan, "y").candidates[-1]
    from weft.fuse import _PricingLowering

    pricing = PlanPricing(plan, Pricer(numbers, "strict"), _PricingLowering(Target(16, "strict"), None), 10.0)
    verdict = pricing.verdict(region)
    assert verdict.status == "priced"
    # unfused: x read, t written, t read, y written: 4 x 64 MiB from memory; fused: 2 x 64 MiB
    assert verdict.unfused.served[3] == pytest.approx(4 * 4.0 * n)
    assert verdict.fused.served[3] == pytest.approx(2 * 4.0 * n)
    assert verdict.pays()


def test_memory_term_counts_the_arena_unfused_and_scratch_fused():
    """Layer norm's private intermediates need arena space unfused, a tile of scratch fused."""
    from weft.compose import choose_regions
    from weft.config import config_from_env
    from weft.cost.search import first_touch_cycles
    from weft.fuse import region_pricing
    from weft.workloads import get_workload

    plan = get_workload("layernorm").plan(rows=1024, dim=256)
    config = config_from_env(contract="strict", threads=1, fusion="priced", budget_s=60)
    pricing = region_pricing(plan, config, Target(16, "strict"), profile=fixed_profile())
    partition = choose_regions(plan, "priced", "strict", pricing=pricing)
    verdict = partition.decisions[-1].verdicts[-1][1]
    region = partition.growths[-1].candidates[-1]
    arena = sum(plan.buffer(name).nbytes for name in region.private)
    assert verdict.unfused.memory_bytes == arena
    assert 0 < verdict.fused.memory_bytes < arena
    lowering = pricing.region_lowering(region)
    pages = -(-arena // 4096)
    assert first_touch_cycles(verdict.unfused, lowering) == pytest.approx(pages * 1e-6 * CLOCK)


def _one_load_plan(index, shape, out_axes, padding=None):
    """y[out_axes] = x[index] (pad ``padding``), every index in range."""
    axes = tuple(Axis(name, extent) for name, extent in out_axes)
    return Plan((Buffer("x", shape, F32, Role.INPUT), Buffer("y", tuple(e for _, e in out_axes), F32, Role.OUTPUT)),
                (Kernel("y", axes, Load("x", index, padding)),), ("x",), ("y",), "one_load")


def test_a_padded_unit_stride_copy_is_priced_as_the_vector_loads_the_c_does():
    # the C loads a halo read by vectors wherever every lane is in range (codegen
    # ``padded_vector_load``): a copy through padding is a copy, no element assembled by lanes
    n = 1024
    padded, _ = price(_one_load_plan((AxisIndex("i"),), (n,), (("i", n),), padding=0.0))
    plain, _ = price(copy_plan(n))
    assert padded.compute == 0.0
    assert padded.served == plain.served == (8.0 * n, 0.0, 0.0, 0.0)


def test_a_grouped_head_read_steps_by_one_along_its_lanes():
    # y[h, e] = x[(h // 2) * 64 + e]: the head group is constant along e, so the lanes read
    # 16 contiguous floats (qwen's grouped V entry), not 16 lanes assembled one by one
    index = (IndexAdd(IndexMul(IndexFloorDiv(AxisIndex("h"), 2), 64), AxisIndex("e")),)
    plan = _one_load_plan(index, (128,), (("h", 4), ("e", 64)))
    assert address_step(plan.kernels[0].body, (1,), "e") == 1
    result, _ = price(plan)
    assert result.compute == 0.0


def test_two_threads_find_an_intermediate_in_the_whole_l3_not_in_one_threads_share():
    """A plan's reuse distance is the bytes the whole plan touched, so it is held by the whole
    L3 (both threads' shares), not by one thread's share. Found on the pricing benchmark: a
    layer norm tail of 32 MiB priced memory-bound at 2 threads (0.96 ms) ran at L3 rates (0.48)."""
    from weft.cost.bridge import PlanPricing
    from weft.cost.search import Pricer
    from weft.fuse import _PricingLowering

    n = 3 << 20  # 12 MiB each: x, t and y (36 MiB, the whole plan) spread over a 32 MiB L3
    plan = _negate_chain(n)
    one, two = machine_numbers(fixed_profile(), 1), machine_numbers(fixed_profile(), 2)
    assert two.capacities[2] == pytest.approx(one.capacities[2] / 2)  # the layer condition: one thread's share
    for numbers in (one, two):
        pricing = PlanPricing(plan, Pricer(numbers, "strict"), _PricingLowering(Target(16, "strict"), None), 10.0)
        assert pricing.member_homes["y"]["t"] == 2  # t read back 12 MiB after it was written: in L3


def _negate_chain(n: int):
    """x -> t = -x -> y = -t, each n floats: t is written, then read back by the next member."""
    from weft.ir import Axis, Buffer, DType, Kernel, Plan, Role, Unary, UnaryOp

    f32 = DType.FLOAT32
    return Plan(
        (Buffer("x", (n,), f32, Role.INPUT), Buffer("t", (n,), f32, Role.INTERMEDIATE), Buffer("y", (n,), f32, Role.OUTPUT)),
        (Kernel("t", (Axis("i", n),), Unary(UnaryOp.NEG, load("x", "i"))),
         Kernel("y", (Axis("i", n),), Unary(UnaryOp.NEG, load("t", "i")))),
        ("x",), ("y",), "chain",
    )


@pytest.mark.parametrize(("rows", "cols", "level"), [(4096, 4096, "memory"), (16, 1 << 16, "l3")])
def test_a_latency_bound_fold_overlaps_its_transfers_instead_of_adding_them(rows, cols, level):
    """Strict folds a row per lane in the oracle's order: each lane's chain waits FOLD_LATENCY
    cycles an add. Its loads do not depend on the chains, so they stream while the chains wait:
    the nest takes max(chain latency, throughput + transfers from beyond L1), not their sum
    (measured on Zen 4: softmax's Strict row sum 4096 x 1024 from memory, 0.56 ms; chains
    0.30 ms, the read 0.51 ms; priced 0.80 ms as their sum)."""
    from weft.cost.machine import LEVELS
    from weft.cost.model import ARITHMETIC_PER_CYCLE, FOLD_LATENCY, TRANSPOSE_CYCLES

    result, homes = price(row_sum_plan(rows, cols))
    assert homes["x"] == homes["y"] == LEVELS.index(level)  # 64 MiB: memory; 4 MiB: the L3
    elements = rows * cols
    latency = rows / 16 * cols * FOLD_LATENCY  # one chain per lane, a vector of rows per chain step
    throughput = elements / 16 / ARITHMETIC_PER_CYCLE + elements * TRANSPOSE_CYCLES  # adds, lanes transposed
    transfers = (elements * 4 / READ[level] + rows * 4 / WRITE[level]) * CLOCK
    assert result.compute == pytest.approx(max(latency, throughput))
    assert result.cycles == pytest.approx(max(latency, throughput + transfers) + result.overhead)
    assert result.cycles < latency + transfers  # not the sum of the chains' wait and the transfers
