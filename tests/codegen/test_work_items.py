"""A nest's flat work item splits into its outer axes without a division it does not need
(``weft.codegen.render``): an axis of one point is its start, and the outermost axis of more
points takes what is left of the item (it is below that axis's count there). Decode's score
nest (one head of a tile x one query x a key block whose length is known at run time) had
paid a 64-bit division per score. Every point is still visited once: the outputs are the
oracle's bytes (Strict) and float64's within tolerance (Inference)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import weft
from weft import nn
from weft.oracle import run as oracle_run
from weft.testing import assert_inference_close, assert_strict_equal


def _batched(batch: int, rows: int, depth: int, columns: int):
    return weft.trace(lambda a, b: nn.matmul(a, b), weft.spec((batch, rows, depth)),
                      weft.spec((batch, depth, columns)), name="batched")


def _decomposition(source: str) -> dict[str, str]:
    """Each outer axis variable -> the C that sets it from the work item."""
    return dict(re.findall(r"const long (a_x\d+_\w+) = (\([^;]*\)[^;]*);", source))


@pytest.mark.parametrize("contract", ["strict", "inference"])
@pytest.mark.parametrize("batch,rows,depth,columns", [(3, 1, 64, 38), (2, 5, 7, 3), (1, 1, 33, 1)])
def test_work_items_split_without_needless_divisions(contract, batch, rows, depth, columns):
    plan = _batched(batch, rows, depth, columns)
    rng = np.random.default_rng(batch * 100 + rows * 10 + columns)
    a = rng.standard_normal((batch, rows, depth), dtype=np.float32)
    b = rng.standard_normal((batch, depth, columns), dtype=np.float32)
    compiled = weft.compile(plan, contract=contract, fusion="off")
    set_from = _decomposition(compiled.source_path.read_text())
    assert any(variable.endswith("_b0") for variable in set_from), set_from
    for variable, code in set_from.items():
        if variable.endswith("_i") and rows == 1:
            assert "wf_rem" not in code, (variable, code)  # one point: its start
        if variable.endswith("_b0"):
            assert "%" not in code, (variable, code)  # the outermost axis: what is left of the item
    if contract == "strict":
        assert_strict_equal(compiled(a, b), oracle_run(plan, a, b), f"{batch}x{rows}x{depth}x{columns}")
    else:
        assert_inference_close(compiled(a, b), a.astype(np.float64) @ b.astype(np.float64), "batched")
