"""Reads whose lanes fall in a constant order inside one span of 16 elements (an interleaved
rotary's partner ``x[d ^ 1]``, its table per pair ``t[d // 2]``, the pair's index value):
one masked load and one permutation where the vector starts at a multiple of the lanes,
lane by lane elsewhere (``weft.lower.access.lane_pattern``). The lanes are the lane-by-lane
loop's, so Strict keeps the oracle's bytes at every head size, tails included."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.ir import AxisIndex
from weft.lower.access import lane_pattern
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal, at_line_offset

I, J = AxisIndex("i"), AxisIndex("j")


def test_lane_patterns_of_rotary_indices():
    assert lane_pattern((I // 2) * 2 + (I + 1) % 2, "i", 16) == (0, -1, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13)
    assert lane_pattern(J * 64 + (I // 2) % 16, "i", 16) == tuple(lane // 2 for lane in range(16))
    assert lane_pattern(I * 3 + 5, "i", 8) == tuple(3 * lane for lane in range(8))


def test_lane_patterns_that_change_from_vector_to_vector_are_refused():
    assert lane_pattern(I % 24, "i", 16) is None  # wraps at a different lane in each vector
    assert lane_pattern((I + J) % 2, "i", 16) is None  # the pattern depends on another axis
    assert lane_pattern((I // 2) % 12, "i", 16) is None


def _rope_inputs(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("depth", [64, 48, 20])
@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_interleaved_rotaries_keep_their_bytes(depth, contract):
    tokens, side = 12, (3, 4)
    x = at_line_offset(_rope_inputs((2, tokens, depth), depth), 1)
    cos, sin = (_rope_inputs((tokens, depth // 2), depth + n) for n in (1, 2))
    tables = [_rope_inputs((n, depth // 4), depth + 3 + n) for n in (side[1], side[1], side[0], side[0])]

    def program(x, cos, sin, cc, sc, cr, sr):
        return nn.rope(x, cos, sin, interleaved=True), nn.rope_2d(x, cc, sc, cr, sr)

    specs = [weft.spec(a.shape) for a in (x, cos, sin, *tables)]
    plan = weft.trace(program, *specs)
    compiled = weft.compile(plan, contract=contract)
    arrays = (x, cos, sin, *tables)
    if depth % 16 == 0:  # whole vectors along the pairs: the permuted form is emitted
        assert "_mm512_permutexvar_ps" in compiled.source_path.read_text()
    if contract == "strict":
        assert_strict_equal(compiled(*arrays), run(plan, *arrays), f"rope depth {depth}")
    else:
        want = run(plan, *(a.astype(np.float32) for a in arrays))
        for got, reference in zip(compiled(*arrays), want, strict=True):
            assert_inference_close(got, reference, f"rope depth {depth}")
