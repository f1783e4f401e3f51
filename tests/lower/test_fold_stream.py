"""Fold-laned matrix-vector products (decode's linears, Inference): the peeled weight stream and
the staged x (``weft.lower.fold_stream``), head and tail as one masked vector each
(``weft.codegen.fold_lanes``). Every output's bytes are the same wherever the weight and x
start (each 4-byte offset of a line), within tolerance of float64, and Strict (which takes
none of this) stays the oracle's bytes. Odd sizes: folds not a multiple of the lanes, one
output, one fold step, several rows of x (the stage is filled again for each)."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import weft
from weft import nn
from weft.codegen.driver import find_compiler
from weft.codegen.prelude import prelude
from weft.lower.fold_stream import staged_loads
from weft.oracle import run as oracle_run
from weft.testing import assert_inference_close, assert_strict_equal, at_line_offset


def _matvec(rows: int, in_features: int, out_features: int):
    return weft.trace(lambda x, w: nn.linear(x, w), weft.spec((rows, in_features)),
                      weft.spec((out_features, in_features)), name="matvec")


def _nest(compiled, member: str = "linear"):
    for function in compiled.lowered.functions:
        for nest in function.nests:
            if nest.name == member:
                return nest
    raise KeyError(member)


def _bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(np.uint32)


@pytest.mark.parametrize("rows,in_features,out_features,staged", [
    (1, 896, 48, True),     # a row of the weight is 56 lines: one staged x serves every row
    (1, 1003, 21, False),   # rows start at every offset of a line: nothing to stage
    (1, 4864 + 5, 1, False),  # one output, a fold of 304 vectors and 5 steps
    (1, 130, 17, False),    # the shortest fold that peels, 2 steps past the last vector
    (3, 512, 9, True),      # three rows of x (no vector axis): the stage is filled for each
])
@pytest.mark.parametrize("threads", [1, 2])
def test_matvec_bytes_do_not_depend_on_where_weight_and_x_start(rows, in_features, out_features, staged, threads):
    rng = np.random.default_rng(in_features * 7 + out_features)
    x = rng.standard_normal((rows, in_features), dtype=np.float32)
    w = rng.standard_normal((out_features, in_features), dtype=np.float32)
    plan = _matvec(rows, in_features, out_features)
    inference = weft.compile(plan, contract="inference", threads=threads, fusion="off")
    nest = _nest(inference)
    assert nest.fold_lanes and bool(nest.staged) is staged
    source = inference.source_path.read_text()
    assert "wfc_load_span_f" in source and "wf_head" not in source and "wf_lanes" not in source
    reference = x.astype(np.float64) @ w.astype(np.float64).T
    first = inference(at_line_offset(x, 0), at_line_offset(w, 0))
    assert_inference_close(first, reference, "aligned")
    strict = weft.compile(plan, contract="strict", threads=threads, fusion="off")
    expected = oracle_run(plan, x, w)
    for w_offset in range(0, 64, 4):
        for x_offset in (0, w_offset, 12):
            moved = at_line_offset(x, x_offset), at_line_offset(w, w_offset)
            assert np.array_equal(_bits(inference(*moved)), _bits(first)), (w_offset, x_offset)
            assert_strict_equal(strict(*moved), expected, f"weight +{w_offset} B, x +{x_offset} B")


def test_one_fold_step_and_short_folds_take_no_peel():
    for in_features in (1, 15, 127):
        plan = _matvec(1, in_features, 33)
        rng = np.random.default_rng(in_features)
        x = rng.standard_normal((1, in_features), dtype=np.float32)
        w = rng.standard_normal((33, in_features), dtype=np.float32)
        compiled = weft.compile(plan, contract="inference", fusion="off")
        assert "_peel" not in compiled.source_path.read_text()
        assert not _nest(compiled).staged
        assert_inference_close(compiled(x, w), x.astype(np.float64) @ w.astype(np.float64).T, str(in_features))


def test_a_reshaped_x_is_staged_as_one_contiguous_run():
    """o_proj's x is attention's output reshaped (a floor-div/mod index along the fold): it is
    copied element by element into the stage, then read as whole lines; the bytes do not move."""
    heads, head_dim, out_features = 4, 64, 19
    plan = weft.trace(lambda a, w: nn.linear(a.reshape(1, heads * head_dim), w), weft.spec((heads, 1, head_dim)),
                      weft.spec((out_features, heads * head_dim)), name="o_proj")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((heads, 1, head_dim), dtype=np.float32)
    w = rng.standard_normal((out_features, heads * head_dim), dtype=np.float32)
    compiled = weft.compile(plan, contract="inference", fusion="off")
    nest = next(n for f in compiled.lowered.functions for n in f.nests if getattr(n, "fold_lanes", False))
    assert [load.buffer for load in nest.staged] == ["a"]
    reference = a.reshape(1, -1).astype(np.float64) @ w.astype(np.float64).T
    first = compiled(at_line_offset(a, 0), at_line_offset(w, 0))
    assert_inference_close(first, reference)
    for offset in (4, 16, 44):
        assert np.array_equal(_bits(compiled(at_line_offset(a, offset), at_line_offset(w, 64 - offset))), _bits(first))


@pytest.mark.parametrize("fusion", ["greedy", "off"])
def test_a_fused_norm_then_linear_stages_the_norm_and_keeps_the_bytes(fusion):
    """In a fused region the staged x is the norm's tile-local scratch."""
    hidden, out_features = 384, 40
    plan = weft.trace(lambda x, g, w: nn.linear(nn.rms_norm(x, g, eps=1e-6), w), weft.spec((1, hidden)),
                      weft.spec((hidden,)), weft.spec((out_features, hidden)), name="norm_linear")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, hidden), dtype=np.float32)
    g = rng.standard_normal(hidden, dtype=np.float32)
    w = rng.standard_normal((out_features, hidden), dtype=np.float32)
    compiled = weft.compile(plan, contract="inference", fusion=fusion, threads=2)
    assert any(nest.staged for f in compiled.lowered.functions for nest in f.nests if hasattr(nest, "staged"))
    x64 = x.astype(np.float64)
    normed = x64 / np.sqrt((x64 ** 2).mean(axis=-1, keepdims=True) + 1e-6) * g
    first = compiled(x, g, at_line_offset(w, 0))
    assert_inference_close(first, normed @ w.astype(np.float64).T)
    for offset in (4, 16):
        assert np.array_equal(_bits(compiled(at_line_offset(x, offset), g, at_line_offset(w, offset))), _bits(first))
    strict = weft.compile(plan, contract="strict", fusion=fusion)
    assert_strict_equal(strict(x, g, at_line_offset(w, 16)), oracle_run(plan, x, g, w))


def test_only_loads_that_stay_put_along_the_rows_are_staged():
    compiled = weft.compile(_matvec(1, 896, 40), contract="inference", fusion="off")
    nest = _nest(compiled)
    views = {view.buffer: view for view in nest.views}
    assert [load.buffer for load in nest.staged] == ["x"]
    assert staged_loads(nest.kernel, views, nest.lanes, ()) == ()  # no work-item axis: nothing to stage for


_HELPERS_CHECK = r"""
#include <stdio.h>
int main(void) {
    float src[48];
    for (int i = 0; i < 48; i++) src[i] = (float)(i + 1);
    float out[16];
    long cases[][2] = {{0, 16}, {0, 3}, {5, 11}, {12, 4}, {15, 1}, {4, 0}};
    for (int c = 0; c < 6; c++) {
        long first = cases[c][0], count = cases[c][1];
        wf_vf span = count ? wfc_load_span_f(src + 16 - first, first, count) : wfc_splat_f(0.0f);
        wf_vf kept = wfc_span_sel_f(first, count, span, wfc_splat_f(-1.0f));
        wfc_store_f(out, kept);
        for (int l = 0; l < 16; l++) printf("%g ", out[l]);
        printf("\n");
    }
    wfc_store_f(out, wfc_load_a_f(src + 16));
    for (int l = 0; l < 16; l++) printf("%g ", out[l]);
    printf("\n");
    wfc_store_f(out, wfc_load_held_f(src + 16));
    for (int l = 0; l < 16; l++) printf("%g ", out[l]);
    printf("\n");
    return 0;
}
"""


def test_span_helpers_agree_with_and_without_avx512(tmp_path):
    """``wfc_load_span_f`` / ``wfc_span_sel_f`` / ``wfc_load_a_f`` / ``wfc_load_held_f``: the AVX-512 forms and
    the portable lane loops give the same lanes (the span's read, the rest 0 / kept)."""
    compiler = find_compiler("cc")
    source = tmp_path / "helpers.c"
    source.write_text("#include <stdalign.h>\n" + prelude(16) + _HELPERS_CHECK.replace("float src[48];", "alignas(64) float src[48];"))
    outputs = []
    for flags in (["-march=native"], ["-march=x86-64-v3", "-mno-avx512f"]):
        binary = tmp_path / f"helpers{len(outputs)}"
        built = subprocess.run([compiler.path, "-O2", *flags, "-o", str(binary), str(source), "-lm"],
                               capture_output=True, text=True)
        if built.returncode != 0:
            pytest.skip(f"cannot build the helper check with {flags}: {built.stderr[-300:]}")
        outputs.append(subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout)
    assert outputs[0] == outputs[1]
    rows = [[float(v) for v in line.split()] for line in outputs[0].splitlines()]
    cases = [(0, 16), (0, 3), (5, 11), (12, 4), (15, 1), (4, 0)]
    for row, (first, count) in zip(rows, cases, strict=False):
        for lane, value in enumerate(row):
            inside = first <= lane < first + count
            assert value == (16 - first + lane + 1 if inside else -1.0), (first, count, lane)
    assert rows[-2] == rows[-1] == [float(v) for v in range(17, 33)]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_tiled_linear_with_a_residual_stages_once_per_thread_and_keeps_the_unfused_bytes(threads):
    """linear -> residual add fused (greedy, tiles along the outputs): the serial fold-laned nest
    inside the tile loop gets its staged x from its function, once per thread, not once per tile;
    its fold is the unfused one's, so the bytes are the unfused plan's."""
    hidden, out_features = 4864, 37
    plan = weft.trace(lambda h, w, r: nn.add(nn.linear(h, w), r), weft.spec((1, hidden)),
                      weft.spec((out_features, hidden)), weft.spec((1, out_features)), name="down_residual")
    rng = np.random.default_rng(5)
    h = rng.standard_normal((1, hidden), dtype=np.float32)
    w = rng.standard_normal((out_features, hidden), dtype=np.float32)
    r = rng.standard_normal((1, out_features), dtype=np.float32)
    fused = weft.compile(plan, contract="inference", fusion="greedy", threads=threads)
    unfused = weft.compile(plan, contract="inference", fusion="off", threads=threads)
    (function,) = [f for f in fused.lowered.functions if f.tile_loop is not None]
    assert any(getattr(nest, "staged", ()) and not nest.parallel for nest in function.nests)
    source = fused.source_path.read_text()
    assert re.search(r"wf_stage\d+_key = -1;\n\s*(#pragma omp for schedule\(static\)\n\s*)?for \(long wf_tile", source)
    reference = h.astype(np.float64) @ w.astype(np.float64).T + r
    expected = unfused(h, w, r)
    assert_inference_close(expected, reference)
    for offset in (0, 16, 36):
        moved = at_line_offset(h, offset), at_line_offset(w, offset), r
        assert np.array_equal(_bits(fused(*moved)), _bits(expected)), offset
