"""The flat tile loop of a fused region: every tile of every common axis visited exactly once."""

from __future__ import annotations

import ast
import itertools
import operator

import weft.nn as nn
from weft.codegen.values import c_value
from weft.compose import choose_regions
from weft.lower.fused import Tiling, region_tiling

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def evaluate(value, tile: int) -> int:
    """Evaluate one of the tiling's loop values as the C it prints to (+ - * / % and wfc_minl on longs)."""
    expression = c_value(value)

    def walk(node):
        match node:
            case ast.Expression(body):
                return walk(body)
            case ast.Constant(value):
                return value
            case ast.Name("wf_tile"):
                return tile
            case ast.BinOp(left, op, right):
                return _OPERATORS[type(op)](walk(left), walk(right))
            case ast.Call(ast.Name("wfc_minl"), [a, b]):
                return min(walk(a), walk(b))
        raise AssertionError(f"unexpected C expression: {expression}")

    return walk(ast.parse(expression.replace("/", "//"), mode="eval"))


def test_flat_tiles_cover_every_point_once():
    tiling = Tiling((("b", 2, 1), ("h", 3, 1), ("i", 10, 4)), ())
    seen = []
    for tile in range(tiling.count):
        b = evaluate(tiling.start("b"), tile)
        h = evaluate(tiling.start("h"), tile)
        i0, i1 = evaluate(tiling.start("i"), tile), evaluate(tiling.stop("i"), tile)
        assert evaluate(tiling.stop("b"), tile) == b + 1
        seen += [(b, h, i) for i in range(i0, i1)]
    assert sorted(seen) == list(itertools.product(range(2), range(3), range(10)))
    assert tiling.count == 2 * 3 * 3


def test_attention_tiles_heads_by_one_and_queries_by_a_tile():
    plan = nn.trace(lambda q, k, v: nn.attention(q, k, v), *[nn.spec((2, 4, 64, 8))] * 3)
    region = choose_regions(plan, "greedy").fused[0]
    tiling = region_tiling(plan, region, 16)
    assert [(name, size) for name, _, size in tiling.axes] == [("b0", 1), ("h", 1), ("i", 16)]
    assert tiling.count == 2 * 4 * 4
    # every member's query and head axes are tiled; the key axis j and the value axis e are not
    assert set(tiling.ranges("attn_scores")) == {"b0", "h", "i"}
    assert set(tiling.ranges("attn_out")) == {"b0", "h", "i"}


def test_scratch_is_shared_by_members_with_disjoint_lifetimes():
    """Scores die once the exps are written, so the probabilities reuse their array (and the
    row sum reuses the row max's); the exps, alive until the probabilities, get their own."""
    from weft.lower.fused import share_scratch

    plan = nn.trace(lambda q, k, v: nn.attention(q, k, v), *[nn.spec((1, 2, 64, 8))] * 3)
    region = choose_regions(plan, "greedy").fused[0]
    slot_of, slots = share_scratch(plan, region, region_tiling(plan, region, 16))
    assert slot_of["attn_scores"] == slot_of["attn_probs"]
    assert slot_of["attn_max"] == slot_of["attn_sum"]
    assert len({slot_of["attn_scores"], slot_of["attn_max"], slot_of["attn_exp"]}) == 3
    assert sorted(elements for _, elements in slots) == [16, 16 * 64, 16 * 64]
