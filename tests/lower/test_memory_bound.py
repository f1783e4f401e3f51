"""Memory-bound schedules: the fold-laned matrix-vector peel, L1-sized tiles of row-wise
chains, 64-byte-aligned outputs. Each against the oracle (Strict: bytes) or float64 NumPy
(Inference), at odd sizes with remainders and at every misalignment of the streamed operand."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.lower.fused import ROW_SCRATCH_BUDGET, SCRATCH_BUDGET
from weft.oracle import run as oracle_run
from weft.runtime.memory import aligned_empty
from weft.testing import assert_inference_close, assert_strict_equal


def offset_copy(array: np.ndarray, floats: int) -> np.ndarray:
    """``array`` copied to an address ``floats`` float32 past a 64-byte line."""
    raw = np.empty(array.size + 32, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + floats
    out = raw[start:start + array.size].reshape(array.shape)
    out[...] = array
    assert out.ctypes.data % 64 == 4 * floats
    return out


def matvec_plan(in_features: int, out_features: int):
    return weft.trace(lambda x, w: nn.linear(x, w), weft.spec((1, in_features)), weft.spec((out_features, in_features)),
                      name="matvec")


@pytest.mark.parametrize("in_features,out_features", [(133, 37), (896, 48), (1003, 21)])
def test_matvec_peel_every_misalignment(in_features, out_features):
    rng = np.random.default_rng(in_features)
    x = rng.standard_normal((1, in_features), dtype=np.float32)
    w = rng.standard_normal((out_features, in_features), dtype=np.float32)
    plan = matvec_plan(in_features, out_features)
    inference = weft.compile(plan, contract="inference")
    strict = weft.compile(plan, contract="strict")
    source = inference.source_path.read_text()
    assert "_peel = (long)(((uintptr_t)0 - (uintptr_t)(&b_w" in source  # the weight stream is peeled
    reference = x.astype(np.float64) @ w.astype(np.float64).T
    expected = oracle_run(plan, x, w)
    for offset in range(16):
        for x_offset in (0, offset, 3):
            moved_w, moved_x = offset_copy(w, offset), offset_copy(x, x_offset)
            assert_inference_close(inference(moved_x, moved_w), reference, f"weight offset {offset}, x {x_offset}")
            assert_strict_equal(strict(moved_x, moved_w), expected, f"weight offset {offset}, x {x_offset}")


def test_short_folds_and_row_reductions_do_not_peel():
    short = weft.compile(matvec_plan(64, 40), contract="inference")
    assert "_peel" not in short.source_path.read_text()  # 4 vectors: the peel would not pay
    rowmax = weft.trace(lambda x: nn.max(x, axis=-1), weft.spec((9, 1024)), name="rowmax")
    compiled = weft.compile(rowmax, contract="inference")
    assert "_peel" not in compiled.source_path.read_text()
    x = offset_copy(np.random.default_rng(1).standard_normal((9, 1024), dtype=np.float32), 4)
    assert_strict_equal(compiled(x), oracle_run(rowmax, x))


@pytest.mark.parametrize("cols,budget", [(1003, ROW_SCRATCH_BUDGET), (4099, SCRATCH_BUDGET)])
def test_row_chain_tiles_fit_l1_else_the_scratch_budget(cols, budget):
    plan = weft.trace(lambda x: nn.softmax(x, axis=-1), weft.spec((67, cols)), name="softmax")
    compiled = weft.compile(plan, contract="inference", fusion="greedy")
    (function,) = [f for f in compiled.lowered.functions if f.tile_loop is not None]
    scratch = sum(s.elements * s.dtype.itemsize for s in function.scratch)
    rows = function.tile_loop.tiles[0][2]
    assert 0 < scratch <= budget
    assert scratch // rows * (rows + 1) > ROW_SCRATCH_BUDGET  # the largest tile in L1 (or one row)
    x = offset_copy(np.random.default_rng(cols).standard_normal((67, cols), dtype=np.float32), 4)
    assert_strict_equal(weft.compile(plan, contract="strict", fusion="greedy")(x), oracle_run(plan, x))


@pytest.mark.parametrize("rows,cols", [(13, 1003), (67, 257), (5, 4099)])
@pytest.mark.parametrize("which", ["softmax", "layer_norm"])
def test_row_chains_match_under_both_contracts(rows, cols, which):
    rng = np.random.default_rng(rows * cols)
    x = rng.standard_normal((rows, cols), dtype=np.float32) * 3
    if which == "softmax":
        plan = weft.trace(lambda x: nn.softmax(x, axis=-1), weft.spec((rows, cols)), name="softmax")
        x64 = x.astype(np.float64)
        e = np.exp(x64 - x64.max(axis=1, keepdims=True))
        reference = e / e.sum(axis=1, keepdims=True)
        arrays = (x,)
    else:
        plan = weft.trace(lambda x, g, b: nn.layer_norm(x, cols, g, b), weft.spec((rows, cols)), weft.spec((cols,)),
                          weft.spec((cols,)), name="layer_norm")
        g = rng.standard_normal(cols, dtype=np.float32)
        b = rng.standard_normal(cols, dtype=np.float32)
        x64 = x.astype(np.float64)
        centered = x64 - x64.mean(axis=1, keepdims=True)
        reference = centered / np.sqrt((centered ** 2).mean(axis=1, keepdims=True) + 1e-5) * g + b
        arrays = (x, g, b)
    moved = (offset_copy(arrays[0], 4), *arrays[1:])
    for fusion in ("greedy", "off"):
        strict = weft.compile(plan, contract="strict", fusion=fusion)
        assert_strict_equal(strict(*moved), oracle_run(plan, *arrays), f"{which} {fusion}")
        inference = weft.compile(plan, contract="inference", fusion=fusion)
        assert_inference_close(inference(*moved), reference, f"{which} {fusion}")


def test_outputs_start_on_a_cache_line():
    plan = weft.trace(lambda x: nn.softmax(x, axis=-1), weft.spec((7, 300)), name="softmax")
    compiled = weft.compile(plan)
    x = np.random.default_rng(2).standard_normal((7, 300), dtype=np.float32)
    out = compiled(x)
    assert out.ctypes.data % 64 == 0 and out.flags.c_contiguous and out.flags.writeable
    assert_strict_equal(out, oracle_run(plan, x))
    for shape, dtype in (((3, 5), np.float32), ((), np.int64), ((9,), np.bool_)):
        array = aligned_empty(shape, dtype)
        assert array.shape == shape and array.dtype == dtype and array.ctypes.data % 64 == 0


def _cross_entropy_reference(logits: np.ndarray, targets: np.ndarray, reduction: str) -> np.ndarray:
    x = logits.astype(np.float64)
    top = x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(x - top).sum(axis=1)) + top[:, 0]
    losses = lse - x[np.arange(len(targets)), targets]
    return losses if reduction == "none" else np.asarray(losses.mean())


@pytest.mark.parametrize("tokens,vocab", [(5, 2048), (7, 3001), (3, 4096 + 17), (9, 2 * 1024 + 15)])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_cross_entropy_pipelined_pass(tokens, vocab, reduction):
    rng = np.random.default_rng(vocab + tokens)
    logits = (rng.standard_normal((tokens, vocab), dtype=np.float32) * 4).astype(np.float32)
    logits[0, -1] = 60.0  # the row max in the last (partial) block: a late rescale
    logits[1 % tokens, 1030] = 45.0  # and in the second block
    targets = rng.integers(0, vocab, tokens).astype(np.int64)
    plan = weft.trace(lambda x, t: nn.cross_entropy(x, t, reduction=reduction), weft.spec((tokens, vocab)),
                      weft.spec((tokens,), "int64"), name="ce")
    inference = weft.compile(plan, contract="inference", fusion="greedy")
    assert "pipelined blocks of 1024" in inference.source_path.read_text()
    moved = offset_copy(logits, 4)
    assert_inference_close(inference(moved, targets), _cross_entropy_reference(logits, targets, reduction))
    strict = weft.compile(plan, contract="strict", fusion="greedy")
    assert_strict_equal(strict(moved, targets), oracle_run(plan, logits, targets))


def test_short_rows_keep_the_blocked_pass():
    plan = weft.trace(lambda x, t: nn.cross_entropy(x, t, reduction="none"), weft.spec((4, 2047)),
                      weft.spec((4,), "int64"), name="ce")
    inference = weft.compile(plan, contract="inference", fusion="greedy")
    assert "pipelined" not in inference.source_path.read_text()
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 2047), dtype=np.float32)
    targets = rng.integers(0, 2047, 4).astype(np.int64)
    assert_inference_close(inference(logits, targets), _cross_entropy_reference(logits, targets, "none"))


@pytest.mark.parametrize("which", ["softmax", "layer_norm"])
def test_strict_row_chains_take_a_vector_of_rows_per_tile(which):
    """Under Strict a row's fold is one add chain in the oracle's order: with one row per tile
    (the L1 rule that serves Inference) greedy layer norm ran 1.9x slower than unfused. A
    vector of rows per tile runs one row per lane; the last tile is partial (149 = 9 x 16 + 5)."""
    rows, cols = 149, 257
    rng = np.random.default_rng(7)
    x = rng.standard_normal((rows, cols), dtype=np.float32) * 3
    if which == "softmax":
        plan = weft.trace(lambda x: nn.softmax(x, axis=-1), weft.spec((rows, cols)), name="softmax")
        arrays = (x,)
    else:
        plan = weft.trace(lambda x, g, b: nn.layer_norm(x, cols, g, b), weft.spec((rows, cols)), weft.spec((cols,)),
                          weft.spec((cols,)), name="layer_norm")
        arrays = (x, rng.standard_normal(cols, dtype=np.float32), rng.standard_normal(cols, dtype=np.float32))
    strict = weft.compile(plan, contract="strict", fusion="greedy")
    (function,) = [f for f in strict.lowered.functions if f.tile_loop is not None]
    assert function.tile_loop.tiles[0][2] == strict.lowered.lanes
    assert_strict_equal(strict(offset_copy(arrays[0], 4), *arrays[1:]), oracle_run(plan, *arrays), which)
    inference = weft.compile(plan, contract="inference", fusion="greedy")
    (function,) = [f for f in inference.lowered.functions if f.tile_loop is not None]
    assert sum(s.elements * s.dtype.itemsize for s in function.scratch) <= ROW_SCRATCH_BUDGET
