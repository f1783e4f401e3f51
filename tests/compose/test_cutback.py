"""Greedy and the lowering agree: a candidate whose tile-local scratch cannot fit the
budget even at a tile of one is not taken; a smaller one is, the cut is explained,
and the members left out anchor regions of their own (no silent member-by-member
fallback)."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.compose import choose_regions
from weft.errors import CompileError
from weft.explain import explain_plan
from weft.lower.fused import SCRATCH_BUDGET, lower_partition, region_fits
from weft.lower.schedule import Target
from weft.oracle.interpreter import run_all
from weft.testing import assert_strict_equal

COLS = 40_000  # one row of float32: 160,000 B; two live rows: 320,000 B > 262,144 B


def chain_plan():
    """t0 = x + 1; t1 = t0 * 2; t2 = t1 - 3; s = sum_j t2 (rows x COLS).

    [t1 t2 s] needs t1 and t2 live together in a row (320,000 B): too big; [t2 s]
    fits, so greedy cuts back to it; t1 then anchors [t0 t1] (t0 one row: fits).
    """
    return nn.trace(lambda x: nn.sum((x + 1.0) * 2.0 - 3.0, axis=-1), nn.spec((3, COLS)))


def test_greedy_takes_the_largest_candidate_that_lowers_and_regrows_the_rest():
    plan = chain_plan()
    assert 2 * COLS * 4 > SCRATCH_BUDGET > COLS * 4
    target = Target(lanes=16, contract="strict")
    unchecked = choose_regions(plan, "greedy", "strict")
    assert len(unchecked.fused) == 1 and unchecked.fused[0].size == 4
    partition = choose_regions(plan, "greedy", "strict", fits=region_fits(plan, target))
    sizes = sorted(region.size for region in partition.regions)
    assert sizes == [2, 2], [r.members for r in partition.regions]
    (cut,) = partition.cutbacks
    assert (cut.taken, cut.count) == (2, 4) and len(cut.left_out) == 2
    assert "exceeds the 262,144 B budget" in cut.describe() and "took candidate 2 of 4" in cut.describe()
    # every chosen region lowers fused: one function per region, each with a tile loop
    lowered = lower_partition(plan, partition, target)
    assert [len(f.members) for f in lowered.functions] == [2, 2]
    assert all(f.tile_loop is not None for f in lowered.functions)


def test_a_partition_the_lowering_cannot_emit_raises_instead_of_falling_back():
    plan = chain_plan()
    with pytest.raises(CompileError, match="cannot be lowered fused: scratch .* exceeds"):
        lower_partition(plan, choose_regions(plan, "greedy", "strict"), Target(lanes=16))


def test_explain_shows_the_cut_and_the_compile_matches_it(fused_config, capsys):
    plan = chain_plan()
    text = explain_plan(plan, "greedy", "strict").text()
    assert "cut back: candidate 4: scratch 320,000 B per tile row" in text
    assert "took candidate 2 of 4 instead" in text
    compiled = weft.compile(plan, config=fused_config("strict"))
    assert sorted(len(group) for group in compiled.groups) == [2, 2]
    compiled.explain()
    shown = capsys.readouterr().out
    assert "cut back:" in shown and shown.count("one pass") == 0
    x = np.random.default_rng(3).standard_normal((3, COLS)).astype(np.float32)
    expected = run_all(plan, x)[plan.outputs[0]]
    assert_strict_equal(compiled(x), expected)
    reference = (((x.astype(np.float64) + 1) * 2) - 3).sum(axis=-1)
    np.testing.assert_allclose(compiled(x), reference, rtol=1e-4, atol=1e-2)


def test_an_anchor_cut_back_to_itself_says_why_it_is_alone():
    # one row of any elementwise member is 280,000 B: the sum keeps nothing; the three
    # elementwise members it left out fuse on their own (tiled along the columns)
    plan = nn.trace(lambda x: nn.sum(nn.exp(x * 2.0) + 1.0, axis=-1), nn.spec((2, 70_000)))
    partition = explain_plan(plan, "greedy", "strict").partition
    assert [region.size for region in partition.regions] == [3, 1]
    (reasons,) = dict(partition.unfused).values()
    assert "exceeds the 262,144 B budget; took candidate 1 of 4" in reasons[0]


def test_explain_reports_a_contraction_that_loses_its_blas_body():
    # x @ W.T + b: greedy fuses the product with its bias; under Inference the product alone would call sgemm
    plan = nn.trace(lambda x, w, b: nn.linear(x, w, b), nn.spec((32, 64)), nn.spec((96, 64)), nn.spec((96,)))
    explanation = explain_plan(plan, "greedy", "inference")
    (report,) = [r for r in explanation.reports if r.region.is_fused]
    assert len(report.blas_lost) == 1
    assert f"BLAS: contraction member {report.blas_lost[0]} loses its BLAS body inside region" in explanation.text()
    assert "BLAS:" not in explain_plan(plan, "greedy", "strict").text()  # Strict never calls BLAS


def _linear_bias(rows: int, inner: int, outs: int):
    return nn.trace(lambda x, w, b: nn.linear(x, w, b), nn.spec((rows, inner)), nn.spec((outs, inner)), nn.spec((outs,)))


def test_a_region_with_a_contraction_tiles_rows_so_the_weight_is_reused():
    # 1 MB weight: tiles of rows keep every output column inside a tile, so each weight
    # element is used by a whole tile of rows (not re-read for each single row)
    from weft.lower.fused import choose_tiling, starved_contraction

    plan = _linear_bias(rows=1024, inner=256, outs=1024)
    (region,) = choose_regions(plan, "greedy", "inference").fused
    tiling = choose_tiling(plan, region, 16)
    (anchor_axis, extent, size) = tiling.axes[-1]
    rows = plan.kernel(region.anchor).axes[0].name
    assert (anchor_axis, size, tiling.count) == (rows, 64, 16)  # tiles of rows, not of the 1024 columns
    assert starved_contraction(plan, region, tiling, 16) is None
    from weft.lower.fused import region_tiling

    columns = next(name for name, _ in region.tile_maps if name != anchor_axis)
    starved = starved_contraction(plan, region, region_tiling(plan, region, 64, columns), 16)
    assert starved is not None and starved[2] == 1024 * 256 * 4  # one row per tile: the weight per row


def test_a_contraction_no_tiling_can_feed_is_cut_back_with_the_reason(fused_config):
    # one row of output is 8192 floats (32 KiB): only 8 rows fit the budget, too few to reuse
    # an 8 MiB weight; greedy leaves the product alone and says why
    # (without the contraction microkernel, whose epilogue takes the bias on the register tile)
    plan = _linear_bias(rows=64, inner=256, outs=8192)
    target = Target(lanes=16, contract="strict", microkernel=False)
    partition = choose_regions(plan, "greedy", "strict", fits=region_fits(plan, target))
    assert not partition.fused
    (cut,) = partition.cutbacks
    assert "would use each element of" in cut.describe() and "fewer than 64 times per read" in cut.describe()
    # with it, the product and its bias fuse and keep the microkernel
    partition = choose_regions(plan, "greedy", "strict", fits=region_fits(plan, Target(lanes=16, contract="strict")))
    assert partition.fused and not partition.cutbacks
    compiled = weft.compile(plan, config=fused_config("strict"))
    assert "epilogue" in compiled.describe()
    rng = np.random.default_rng(5)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((64, 256), (8192, 256), (8192,)))
    assert_strict_equal(compiled(x, w, b), run_all(plan, x, w, b)[plan.outputs[0]])
