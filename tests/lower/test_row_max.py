"""A row chain's max by compare-select where a dropped NaN still reaches every output
(``weft.lower.row_max``, Inference): which maxes take it, the C it becomes, and that the row's
outputs are the same bytes as with the NaN-propagating max, NaN rows and infinities included."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import weft
from weft import nn
from weft.ir import AxisIndex, Binary, BinaryOp, IndexConst, Load, Unary, UnaryOp
from weft.lower import fused, row_max
from weft.testing import assert_inference_close, at_line_offset


def _softmax(rows: int, cols: int, axis: int = -1):
    return weft.trace(lambda x: nn.softmax(x, axis=axis), weft.spec((rows, cols)), name="softmax")


def _tiled(compiled):
    (function,) = [f for f in compiled.lowered.functions if f.tile_loop is not None]
    return function


def _plain(compiled) -> list[str]:
    return [nest.name for nest in _tiled(compiled).nests if nest.plain_max]


def _member_c(source: str, member: str) -> str:
    start = source.index(f"/* member {member} */")
    return source[start:source.index("/* member ", start + 10)]


def test_softmax_rows_fold_their_max_by_compare_select_from_l1(make_config):
    compiled = weft.compile(_softmax(64, 1024), config=make_config("inference", threads=1, fusion="greedy"))
    assert _plain(compiled) == ["softmax_max"]
    (max_nest, *_rest) = _tiled(compiled).nests
    assert max_nest.l1_reads  # the exps prefetch the next row: the max finds it in L1
    body = _member_c(compiled.source_path.read_text(), "softmax_max")
    assert "wfc_pmax_f(" in body and "wfc_max_f(" not in body  # the steps and the lanes' tree
    assert "wfc_load_lines_f(" not in body
    assert "compare-select max" in compiled.describe()


def test_strict_keeps_the_nan_propagating_max(make_config):
    compiled = weft.compile(_softmax(64, 1024), config=make_config("strict", threads=1, fusion="greedy"))
    assert _plain(compiled) == []
    assert "wfc_pmax_f(" not in _member_c(compiled.source_path.read_text(), "softmax_max")


def test_log_softmax_whose_output_reads_the_max_keeps_the_propagating_max(make_config):
    plan = weft.trace(lambda x: nn.log_softmax(x, axis=-1), weft.spec((64, 1024)), name="log_softmax")
    compiled = weft.compile(plan, config=make_config("inference", threads=1, fusion="greedy"))
    assert _plain(compiled) == []  # (x - max) - log(sum): a dropped NaN would leave the row finite
    x = np.random.default_rng(7).standard_normal((64, 1024), dtype=np.float32)
    x[5, 100] = np.nan
    out = np.asarray(compiled(x))
    assert np.isnan(out[5]).all() and not np.isnan(np.delete(out, 5, axis=0)).any()


def _rebody(nest, body):
    return dataclasses.replace(nest, kernel=dataclasses.replace(nest.kernel, body=body))


def test_the_rule_needs_every_intermediate_private_and_every_read_at_its_own_point(make_config):
    """``plain_max_members`` on softmax's own nests: a max, exps or sum the outside sees; an exp
    reading another row of x or another row's max; a divide that is not by the row's sum."""
    compiled = weft.compile(_softmax(64, 1024), config=make_config("inference", threads=1, fusion="greedy"))
    function = _tiled(compiled)
    nests, private = function.nests, function.private
    assert row_max.plain_max_members(nests, private) == {"softmax_max"}
    for seen in ("softmax_max", "softmax_exp", "softmax_sum"):
        assert row_max.plain_max_members(nests, tuple(p for p in private if p != seen)) == set(), seen
    maximum, exps, total, divide = nests
    shift = exps.kernel.body.operand
    other_row = Load("x", (IndexConst(0), AxisIndex("i1")))
    other_max = Load("softmax_max", (IndexConst(0),))
    for body in (Unary(UnaryOp.EXP, Binary(BinaryOp.SUB, other_row, shift.right)),
                 Unary(UnaryOp.EXP, Binary(BinaryOp.SUB, shift.left, other_max)),
                 Unary(UnaryOp.NEG, shift)):
        assert row_max.plain_max_members((maximum, _rebody(exps, body), total, divide), private) == set(), body
    by_max = Binary(BinaryOp.MAX, divide.kernel.body.left, divide.kernel.body.right)  # max(e, NaN) can drop it
    assert row_max.plain_max_members((maximum, exps, total, _rebody(divide, by_max)), private) == set()
    other_sum = Binary(BinaryOp.DIV, divide.kernel.body.left, Load("softmax_sum", (IndexConst(0),)))
    assert row_max.plain_max_members((maximum, exps, total, _rebody(divide, other_sum)), private) == set()


@pytest.mark.parametrize("rows,cols", [(16, 1024), (13, 1003), (9, 77), (4, 4099)])
def test_rows_with_nans_and_infinities_are_the_propagating_maxs_bytes(rows, cols, make_config, monkeypatch, tmp_path):
    """NaN at the first, a middle, the last vector's and the scalar tail's points, +inf, a row of
    -inf, -0 against +0: the same bytes as the chain with the NaN-propagating max (NaN where
    that has NaN), at one and two threads and odd input offsets; close to float64."""
    rng = np.random.default_rng(rows * cols)
    x = rng.standard_normal((rows, cols), dtype=np.float32) * 5
    x[0, 0] = np.nan
    x[1, cols // 2] = np.nan
    x[2, cols - 1] = np.nan
    x[3, (cols // 16) * 16 - 1] = np.nan  # the last whole vector's last lane
    if rows > 8:
        x[4, 3] = np.inf
        x[5, :] = -np.inf
        x[6, :] = 0.0
        x[6, ::3] = -0.0
        x[7, 10] = np.inf
        x[7, 11] = np.nan
    plan = _softmax(rows, cols)
    results = []
    for threads in (1, 2):
        compiled = weft.compile(plan, config=make_config("inference", threads=threads, fusion="greedy"))
        assert _plain(compiled) == ["softmax_max"]
        for offset in (0, 16, 36):
            results.append(np.asarray(compiled(at_line_offset(x, offset))).copy())
    monkeypatch.setattr(fused, "with_plain_max", lambda nests, *rest: nests)
    # a cache of its own: the compile record would hand back the first compile
    without = weft.compile(plan, config=dataclasses.replace(make_config("inference", threads=1, fusion="greedy"),
                                                            cache_dir=tmp_path))
    assert _plain(without) == []
    expected = np.asarray(without(x))
    nan = np.isnan(expected)
    assert nan[:4].all(axis=-1).all()  # a NaN row is NaN throughout
    for result in results:
        np.testing.assert_array_equal(np.isnan(result), nan)
        np.testing.assert_array_equal(result[~nan].view(np.uint32), expected[~nan].view(np.uint32))
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
        reference = e / e.sum(axis=-1, keepdims=True)
    np.testing.assert_array_equal(np.isnan(reference), nan)
    finite = ~np.isnan(reference).any(axis=-1)
    assert_inference_close(results[0][finite], reference[finite], f"softmax {rows}x{cols}")
