"""Explain states the axis the lowering actually tiles, not only the region's preferred one.

The truth is read here from the lowered function itself (the nests' ranges whose start
uses the tile loop's variable), independently of ``weft.explain.lowered_tiling``.
"""

from __future__ import annotations

import io
import math

import pytest

import weft
from weft.cli import main
from weft.explain import describe_tiling, explain_plan
from weft.lower.fused import TILE_VARIABLE
from weft.lower.values import uses
from weft.workloads import get_workload


def tiled_anchor_axes(plan, region, function) -> list[str]:
    """Anchor axes whose range start, in any nest of ``function``, uses the tile variable."""
    carries = {}
    for anchor_axis, mapping in region.tile_maps:
        for member, axis in mapping:
            carries[member, axis] = anchor_axis
    found = set()
    for nest in function.nests:
        ranges = [(nest.kernel.name, r.axis, r.start) for r in getattr(nest, "ranges", ())]
        if hasattr(nest, "rows"):
            ranges += [(nest.reference.name, axis, start) for axis, _, start, _ in nest.rows]
        found |= {carries[m, a] for m, a, start in ranges if uses(start, TILE_VARIABLE) and (m, a) in carries}
    return [axis.name for axis in plan.kernel(region.anchor).axes if axis.name in found]


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_compiled_explain_names_the_axis_actually_tiled(contract, tmp_path, monkeypatch):
    monkeypatch.setenv("WEFT_CACHE_DIR", str(tmp_path))
    # head_dim 16: the scores (8 x 32 x 32) outgrow the output, so Strict fuses them too
    plan = get_workload("attention").plan(tokens=32, heads=8, head_dim=16)
    compiled = weft.compile(plan, contract, threads=1, fusion="greedy")
    out = io.StringIO()
    compiled.explain(file=out)
    text = out.getvalue()

    explanation = explain_plan(plan, "greedy", contract, lowered=compiled.lowered)
    region = next(r.region for r in explanation.reports if r.region.is_fused)
    function = next(f for f in compiled.lowered.functions if f.members == region.members)
    tiled = tiled_anchor_axes(plan, region, function)
    assert tiled, "the lowered attention region has more than one tile along some axis"
    actual = tiled[-1]
    assert f"tiled along {actual} (tiles of " in text
    # with 8 heads the lowering tiles the heads, not the preferred query rows
    assert actual != region.tile_axis
    assert f", preferred {region.tile_axis};" in text
    assert "preferred tile axis per member" not in text
    # the tile sizes read back multiply out to the tile loop's count
    reported = explanation.tiling_for(region.anchor)
    assert [axis for axis, _ in reported] == tiled
    extents = {axis.name: axis.extent for axis in plan.kernel(region.anchor).axes}
    assert math.prod(-(-extents[a] // s) for a, s in reported) == function.tile_loop.extent


def test_explain_without_lowering_says_preferred(capsys):
    assert main(["explain", "--fusion", "greedy", "attention", "--set", "tokens=32", "--set", "heads=8",
                 "--set", "head_dim=16"]) == 0
    text = capsys.readouterr().out
    assert "(preferred tile axis i;" in text and "preferred tile axis per member: attn_scores.i" in text
    assert "tiled along" not in text


def test_cli_lowering_says_what_was_tiled(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("WEFT_CACHE_DIR", str(tmp_path))
    assert main(["explain", "--fusion", "greedy", "attention", "--lowering", "--set", "tokens=32", "--set", "heads=8",
                 "--set", "head_dim=16"]) == 0
    text = capsys.readouterr().out
    assert "tiled along " in text and "lowered:" in text
    assert "(preferred tile axis" not in text


def test_describe_tiling():
    assert describe_tiling((("h", 1),), "i") == "tiled along h (tiles of 1), preferred i"
    assert describe_tiling((("h", 1), ("i", 16)), "i") == "tiled along h (tiles of 1), i (tiles of 16)"
    assert describe_tiling((), "i") == "one tile: nothing tiled (preferred tile axis i)"
