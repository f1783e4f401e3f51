"""The fusion hooks of the loop-nest IR, exercised by hand: two members inside one
tile loop (c), each restricted to the tile's rows (a), the intermediate re-mapped to
tile-local scratch (b). The rendered C must agree with the oracle bit for bit."""

from __future__ import annotations

import dataclasses

import numpy as np

from weft.codegen import build, render_source
from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    Const,
    DType,
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    UnaryOp,
)
from weft.lower import AxisRange, BufferView, LoweredFunction, LoweredPlan, Scratch, Target, TileLoop
from weft.lower.schedule import default_views, lower_member
from weft.lower.values import Minimum, Sum, Var
from weft.oracle import run
from weft.runtime import NativeRunner, plan_arena, pointer_array
from weft.testing import assert_strict_equal

ROWS, COLS, TILE = 20, 37, 8


def _plan():
    i, j = Axis("i", ROWS), Axis("j", COLS)
    index = (AxisIndex("i"), AxisIndex("j"))
    kernels = (
        Kernel("a", (i, j), Unary(UnaryOp.EXP, Load("x", index))),
        Kernel("y", (i, j), Binary(BinaryOp.MUL, Load("a", index), Const(2.0))),
    )
    buffers = (Buffer("x", (ROWS, COLS), DType.FLOAT32, Role.INPUT), Buffer("a", (ROWS, COLS), DType.FLOAT32,
               Role.INTERMEDIATE), Buffer("y", (ROWS, COLS), DType.FLOAT32, Role.OUTPUT))
    return Plan(buffers, kernels, ("x",), ("y",), name="hooks")


def test_tile_loop_ranges_and_scratch_views(tmp_path):
    plan = _plan()
    target = Target(lanes=16)
    views = default_views(plan)
    tile = Var("tile_i")
    scratch_view = BufferView("a", "s_a", DType.FLOAT32, (TILE, COLS), (COLS, 1), (tile, 0))
    rows = AxisRange("i", tile, Minimum(Sum(tile, TILE), ROWS))
    nests = []
    for name in ("a", "y"):
        nest = lower_member(plan.kernel(name), views, target)
        remapped = tuple(scratch_view if v.buffer == "a" else v for v in nest.views)
        ranges = tuple(rows if r.axis == "i" else r for r in nest.ranges)
        nests.append(dataclasses.replace(nest, views=remapped, ranges=ranges, parallel=False))
    function = LoweredFunction(
        name="k_fused", members=("a", "y"), nests=tuple(nests), params=(views["x"], views["y"]),
        tile_loop=TileLoop("tile_i", ROWS, TILE, parallel=True),
        scratch=(Scratch("s_a", DType.FLOAT32, TILE * COLS),), private=("a",),
    )
    lowered = LoweredPlan((function,), plan.buffers, 16, "strict")
    arena = plan_arena(plan, lowered)
    assert arena.nbytes == 0  # the intermediate lives in scratch only
    artifact = build(render_source(plan, lowered, arena), "cc", tmp_path, "strict")
    runner = NativeRunner(artifact.so_path, arena.nbytes, 1)
    x = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32)
    y = np.empty((ROWS, COLS), np.float32)
    assert runner.run(pointer_array([x]), pointer_array([y]), 2) == 0
    assert_strict_equal(y, run(plan, x))
