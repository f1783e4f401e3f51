"""The next tile's streams prefetched while a row chain computes (``weft.lower.row_prefetch``):
which members carry which stream, the C it becomes, and what it changes in the bytes (nothing
that follows threads or addresses: the same bytes at every thread count and input address, close
to the chain without it). Strict's tiles of several rows prefetch the next tile into L2 and keep
the oracle's bytes."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import weft
from weft import nn
from weft.lower import fused
from weft.oracle import run as oracle_run
from weft.testing import assert_inference_close, assert_strict_equal, at_line_offset


def _softmax(rows: int, cols: int):
    return weft.trace(lambda x: nn.softmax(x, axis=-1), weft.spec((rows, cols)), name="softmax")


def _layernorm(rows: int, cols: int):
    def layernorm(x, w, b):
        return nn.layer_norm(x, cols, w, b, eps=1e-5)

    return weft.trace(layernorm, weft.spec((rows, cols)), weft.spec(cols, param=True), weft.spec(cols, param=True),
                      name="layernorm")


def _reference(which: str, x, w=None, b=None) -> np.ndarray:
    x64 = x.astype(np.float64)
    if which == "softmax":
        e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    centered = x64 - x64.mean(axis=-1, keepdims=True)
    return centered / np.sqrt((centered**2).mean(axis=-1, keepdims=True) + 1e-5) * w + b


def _tiled(compiled):
    (function,) = [f for f in compiled.lowered.functions if f.tile_loop is not None]
    return function


def _carried(function) -> dict[str, list[str]]:
    """member -> the stream pointer of each prefetch it carries."""
    return {nest.name: [p.pointer for p in nest.prefetch] for nest in function.nests if nest.prefetch}


def test_softmax_rows_prefetch_the_next_input_row_in_the_exps(make_config):
    compiled = weft.compile(_softmax(64, 1024), config=make_config("inference", threads=1, fusion="greedy"))
    function = _tiled(compiled)
    assert function.tile_loop.tiles[0][2] == 1  # one row per tile
    assert _carried(function) == {"softmax_exp": ["b_x"]}
    source = compiled.source_path.read_text()
    # the next tile's row, clamped to the last one: never past the buffer; one per vector
    assert source.count("__builtin_prefetch(&b_x[(wfc_minl(wf_tile + 1, 63) * 1024) + (wf_v0 + ") == 2
    assert "b_softmax[(wfc_minl" not in source  # outputs are not prefetched (prefetchw cost)


def test_layer_norm_rows_prefetch_the_input_but_not_the_weights(make_config):
    compiled = weft.compile(_layernorm(64, 1024), config=make_config("inference", threads=1, fusion="greedy"))
    assert _tiled(compiled).tile_loop.tiles[0][2] == 1
    assert _carried(_tiled(compiled)) == {"ln_centered": ["b_x"]}  # ln_mean, the first member, is the read


@pytest.mark.parametrize("rows,cols", [(13, 1003), (67, 257), (9, 4099), (2, 64)])
@pytest.mark.parametrize("which", ["softmax", "layer_norm"])
def test_row_chain_bytes_follow_neither_threads_nor_addresses(rows, cols, which, make_config, monkeypatch, tmp_path):
    """The prefetches change no value, and the plain loads none that depends on a thread count or
    on where the input lies; against the same chain without either, within tolerance (FMA
    contraction may differ in the last bits), and both close to float64."""
    rng = np.random.default_rng(rows * cols)
    x = rng.standard_normal((rows, cols), dtype=np.float32) * 3
    x[rows // 2, cols // 3] = 1e4 if which == "layer_norm" else 80.0  # a row max far from the rest
    params = () if which == "softmax" else (rng.standard_normal(cols, dtype=np.float32),
                                            rng.standard_normal(cols, dtype=np.float32))
    plan = _softmax(rows, cols) if which == "softmax" else _layernorm(rows, cols)
    results = []
    for threads in (1, 2):
        compiled = weft.compile(plan, config=make_config("inference", threads=threads, fusion="greedy"))
        if _carried(_tiled(compiled)):
            assert "__builtin_prefetch" in compiled.source_path.read_text()
        for offset in (0, 16, 36):
            results.append(np.asarray(compiled(at_line_offset(x, offset), *params)).copy())
    for result in results[1:]:
        np.testing.assert_array_equal(result.view(np.uint32), results[0].view(np.uint32))
    expected = _reference(which, x, *params)
    assert_inference_close(results[0], expected, f"{which} {rows}x{cols}")
    monkeypatch.setattr(fused, "with_row_prefetch", lambda nests, *rest: nests)
    # a cache of its own: the compile record would hand back the first compile
    without = weft.compile(plan, config=dataclasses.replace(make_config("inference", threads=1, fusion="greedy"),
                                                            cache_dir=tmp_path))
    assert "__builtin_prefetch" not in without.source_path.read_text()
    assert_inference_close(results[0], np.asarray(without(x, *params)).astype(np.float64), f"{which} {rows}x{cols}")


@pytest.mark.parametrize("which", ["softmax", "layer_norm"])
def test_strict_tiles_of_rows_prefetch_the_next_tile_into_l2_and_keep_the_oracle_bytes(which, make_config):
    rows, cols = 67, 1003
    plan = _softmax(rows, cols) if which == "softmax" else _layernorm(rows, cols)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    params = () if which == "softmax" else (rng.standard_normal(cols, dtype=np.float32),
                                            rng.standard_normal(cols, dtype=np.float32))
    expected = oracle_run(plan, x, *params)
    for threads in (1, 2):
        compiled = weft.compile(plan, config=make_config("strict", threads=threads, fusion="greedy"))
        function = _tiled(compiled)
        size = function.tile_loop.tiles[0][2]
        assert size > 1  # Strict's transposed folds take tiles of rows
        carried = [p for nest in function.nests for p in nest.prefetch]
        assert carried and all(p.pointer == "b_x" and p.row_axis is not None for p in carried)
        source = compiled.source_path.read_text()
        # the carrier's own row plus the tile size, clamped to the last row; locality 2 (L2)
        assert re.search(rf"__builtin_prefetch\(&b_x\[\(wfc_minl\(a_x\d+_i0 \+ {size}, {rows - 1}\) \* {cols}\)"
                         rf" \+ \(wf_v0 \+ \d+\)\], 0, 2\);", source)
        for offset in (0, 16, 36):
            assert_strict_equal(compiled(at_line_offset(x, offset), *params), expected)


def test_one_row_or_a_batched_tiling_takes_no_prefetch(make_config):
    one = weft.compile(_softmax(1, 1024), config=make_config("inference", threads=1, fusion="greedy"))
    assert "__builtin_prefetch" not in one.source_path.read_text()
    batched = weft.trace(lambda x: nn.softmax(x, axis=-1), weft.spec((3, 5, 256)), name="softmax3")
    compiled = weft.compile(batched, config=make_config("inference", threads=1, fusion="greedy"))
    x = np.random.default_rng(4).standard_normal((3, 5, 256), dtype=np.float32)
    assert_inference_close(compiled(x), _reference("softmax", x), "softmax 3x5x256")


def test_the_exps_after_the_read_load_plain_vectors(make_config):
    compiled = weft.compile(_softmax(64, 1024), config=make_config("inference", threads=1, fusion="greedy"))
    function = _tiled(compiled)
    # the max, the row's read, loads plain vectors too now: its compare-select finds the row the
    # previous tile prefetched in L1 (weft.lower.row_max; tests/lower/test_row_max.py)
    assert [nest.l1_reads for nest in function.nests] == [True, True, False, False]
    layernorm = weft.compile(_layernorm(64, 1024), config=make_config("inference", threads=1, fusion="greedy"))
    assert not any(nest.l1_reads for nest in _tiled(layernorm).nests)  # nothing compute-bound
    source = compiled.source_path.read_text()
    body = source[source.index("/* member softmax_exp */"):source.index("/* member softmax_sum */")]
    assert "wfc_load_lines_f(&b_x" not in body and "wfc_load_f(&b_x" in body
    norm = layernorm.source_path.read_text()  # a norm's first read stays whole lines
    assert "wfc_load_lines_f(&b_x" in norm[norm.index("/* member ln_mean */"):norm.index("/* member ln_centered */")]
