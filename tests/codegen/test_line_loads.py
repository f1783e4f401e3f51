"""A member nest's contiguous float loads read whole 64-byte lines on AVX-512
(``wfc_load_lines_f``: two aligned loads and a permute): the lanes are the plain load's,
so every output's bytes are the same wherever the inputs start (each 4-byte offset of a
line), and Strict stays the oracle's. Odd row lengths put rows at every offset of a line;
the scalar tails, tiny rows and non-finite values ride along."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.oracle import run
from weft.testing import assert_strict_equal, at_line_offset


def _program(x, y):
    return nn.softmax(x), nn.add(nn.mul(x, y), nn.sum(x, -1, keepdims=True)), nn.layer_norm(x, x.shape[-1])


@pytest.mark.parametrize("contract", ["strict", "inference"])
@pytest.mark.parametrize(("rows", "cols"), [(5, 1037), (3, 100), (7, 16), (4, 5)])
def test_outputs_do_not_depend_on_where_inputs_start(contract, rows, cols):
    rng = np.random.default_rng(rows * cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = rng.standard_normal((rows, cols)).astype(np.float32)
    x[1, cols // 3] = np.inf
    x[2, 0] = np.nan
    plan = weft.trace(_program, weft.spec((rows, cols), "float32"), weft.spec((rows, cols), "float32"))
    compiled = weft.compile(plan, contract, threads=1, fusion="greedy")
    first = compiled(at_line_offset(x, 0), at_line_offset(y, 0))
    if contract == "strict":
        assert_strict_equal(first, run(plan, x, y))
    for offset in (4, 16, 36, 60):
        again = compiled(at_line_offset(x, offset), at_line_offset(y, 64 - offset))
        for a, b in zip(again, first, strict=True):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), (contract, offset)
