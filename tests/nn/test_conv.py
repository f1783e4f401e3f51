"""conv2d with PyTorch's arguments (weft.nn.conv): groups (depthwise too), padding "same" /
"valid" / ints / pairs, dilation, stride, unbatched (C, H, W) input; each against PyTorch in
float64, compiled Strict byte-identical to the oracle and Inference within the contract,
fusion off and greedy; bad combinations refused with a ShapeError naming the fix."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.errors import ShapeError
from weft.lower.contraction import ContractionNest
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal

torch = pytest.importorskip("torch", reason="these tests compare weft.nn with PyTorch")
F = torch.nn.functional


def _f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CASES = [  # input shape, weight shape, keyword arguments
    ((2, 4, 7, 6), (6, 2, 3, 3), dict(groups=2, padding=1)),
    ((1, 6, 8, 8), (6, 1, 3, 3), dict(groups=6, padding="same")),  # depthwise
    ((2, 3, 7, 9), (5, 3, 2, 4), dict(padding="same")),  # even kernel: the extra pad bottom/right
    ((2, 3, 9, 9), (4, 3, 3, 3), dict(padding="same", dilation=2)),
    ((1, 3, 6, 5), (4, 3, 3, 2), dict(padding="valid", stride=(2, 1))),
    ((3, 7, 6), (4, 3, 3, 3), dict(padding=(1, 2))),  # unbatched, padding a pair
    ((4, 6, 6), (8, 2, 3, 3), dict(groups=2, padding="same", dilation=(1, 2))),  # unbatched, grouped
    ((2, 5, 6, 7), (64, 5, 3, 3), dict(padding=1)),
    ((1, 4, 7, 6), (128, 2, 3, 2), dict(groups=2, stride=(2, 1), padding="valid", dilation=(1, 2))),
    ((3, 6, 5), (64, 3, 2, 2), dict(padding="same")),  # unbatched, even kernel
    ((1, 4, 5, 5), (8, 1, 3, 3), dict(groups=4, padding=1)),  # one input channel per group, two outputs
]


@pytest.mark.parametrize("shapes", CASES, ids=[str(c[2]) for c in CASES])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv2d_matches_pytorch(shapes, with_bias):
    x_shape, w_shape, kwargs = shapes
    x, w, b = _f32(x_shape, 1), _f32(w_shape, 2), _f32((w_shape[0],), 3)
    arrays = (x, w, b) if with_bias else (x, w)
    tensors = [torch.from_numpy(a.astype(np.float64)) for a in arrays]
    want = F.conv2d(*tensors[:2], tensors[2] if with_bias else None, **kwargs).numpy()
    plan = weft.trace(lambda *t: nn.conv2d(t[0], t[1], t[2] if with_bias else None, **kwargs),
                      *(weft.spec(a.shape) for a in arrays))
    got = run(plan, *arrays)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for fusion in ("off", "greedy"):
        assert_strict_equal(weft.compile(plan, "strict", threads=1, fusion=fusion)(*arrays), got)
        assert_inference_close(weft.compile(plan, "inference", threads=1, fusion=fusion)(*arrays), want)


@pytest.mark.parametrize("x_shape,w_shape,kwargs,pattern", [
    ((1, 4, 5, 5), (6, 3, 3, 3), dict(groups=2), r"groups=2.*C/groups"),
    ((1, 4, 5, 5), (5, 2, 3, 3), dict(groups=2), r"O divisible by groups"),
    ((1, 3, 5, 5), (2, 3, 3, 3), dict(padding="same", stride=2), r"'same' needs stride 1.*as ints"),
    ((1, 3, 5, 5), (2, 3, 3, 3), dict(padding="full"), r"'same' or 'valid'"),
    ((1, 3, 5, 5), (2, 3, 3, 3), dict(groups=0), r"groups must be a positive int"),
])
def test_bad_combinations_name_the_fix(x_shape, w_shape, kwargs, pattern):
    with pytest.raises(ShapeError, match=pattern):
        weft.trace(lambda x, w: nn.conv2d(x, w, **kwargs), weft.spec(x_shape), weft.spec(w_shape))


@pytest.mark.parametrize("out_channels,groups,patches", [(64, 1, True), (128, 2, True), (16, 4, True),
                                                           (64, 64, False), (128, 64, False)])
def test_convolutions_run_as_one_contraction_over_the_patch_view(out_channels, groups, patches):
    """The decomposition the speed depends on: one contraction of the weights (rows) with
    the input's patch view (columns: every output pixel, read as ``p // OW``, ``p % OW``;
    no patches buffer), packed run by run (``ColumnSplit``), unless each group reads one
    input channel (depthwise), which keeps the direct member
    (weft.nn.conv.PATCHES_MIN_GROUP_CHANNELS)."""
    plan = weft.trace(lambda x, w: nn.conv2d(x, w, padding=1, groups=groups),
                      weft.spec((1, 64, 8, 8)), weft.spec((out_channels, 64 // groups, 3, 3)))
    # the patch contraction's (n, groups, channels, pixels) output is copied out (no bias here)
    assert [member.is_contraction for member in plan.members] == ([True, False] if patches else [True])
    contraction = next(member for member in plan.members if member.name == "conv2d")
    fold = [axis.extent for axis in contraction.fold.axes]
    assert fold == ([64 // groups * 9] if patches else [64 // groups, 3, 3])
    assert [axis.extent for axis in contraction.axes] == ([1, groups, out_channels // groups, 64] if patches
                                                          else [1, out_channels, 8, 8])
    if patches:
        nest = weft.compile(plan, contract="inference").lowered.functions[0].nests[0]
        assert isinstance(nest, ContractionNest) and nest.y_split is not None
        assert nest.y_split.width == 8 and (nest.row_axes, nest.column_axis) == (("o",), "p")


PATCH_VIEW_CASES = [  # input, weight, keywords, whether the patch view packs flat (ColumnSplit.flat)
    ((2, 30, 13, 21), (20, 30, 3, 3), dict(padding=1), True),  # K = 270: two fold blocks, 5 panels
    ((1, 8, 23, 19), (12, 8, 3, 3), dict(stride=2, padding=1), False),  # strided: runs of 10
    ((1, 6, 17, 40), (10, 3, 3, 5), dict(groups=2, padding=(2, 1), dilation=(2, 1)), False),
    ((2, 7, 9, 11), (5, 7, 1, 1), dict(), True),  # 1x1: one copy, no halo
    ((16, 15, 15), (300, 16, 3, 3), dict(padding="same"), True),  # unbatched; 300 rows: two row blocks
    ((1, 4, 12, 20), (6, 4, 2, 4), dict(padding="same"), True),  # halo 0/1 rows, 1/2 columns
    ((1, 3, 10, 18), (4, 3, 3, 3), dict(padding=3), False),  # whole rows and columns of padding
    ((1, 3, 56, 70), (16, 3, 14, 14), dict(stride=14), False),  # a patch embedding: stride 14 copies
    ((1, 5, 9, 30), (8, 5, 1, 5), dict(padding=(0, 2)), True),  # a 1-high kernel: t // 5 % 1 is 0
    ((1, 5, 30, 9), (8, 5, 3, 1), dict(padding=(1, 0), stride=(1, 2)), False),
    # rows narrower than 16 packed a vector at a time (pack_y_split_masked), runs wholly in the halo
    ((1, 6, 11, 9), (8, 6, 3, 3), dict(padding=(2, 3)), False),  # step 1, rows of 13
    ((2, 3, 13, 13), (10, 3, 3, 3), dict(stride=2, padding=2), False),  # step 2, rows of 8, two images
    ((1, 4, 20, 40), (12, 4, 3, 3), dict(stride=2, padding=1), False),  # step 2 by runs (rows of 20)
    # flat views as masked vectors, with edge micro-tiles (4 or 6 rows a group, a short last panel)
    ((1, 16, 18, 18), (16, 4, 3, 3), dict(groups=4, padding=1), True),
    ((8, 20, 20), (24, 2, 3, 3), dict(groups=4, padding="same"), True),  # unbatched, grouped, "same"
]


@pytest.mark.parametrize("shapes", PATCH_VIEW_CASES, ids=[str(c[2]) for c in PATCH_VIEW_CASES])
def test_patch_view_packing_strict_equal_and_close_to_pytorch(shapes):
    """The microkernel's packing of the input's patch view (weft.lower.contraction.ColumnSplit),
    run by run and flat, with the halo inside a micro-panel, rows of padding, strides,
    dilation, groups and two fold and row blocks: Strict byte-identical to the oracle at 1
    and 2 threads (and under greedy fusion), Inference close to PyTorch
    in float64."""
    x_shape, w_shape, kwargs, flat = shapes
    x, w, b = _f32(x_shape, 4), _f32(w_shape, 5), _f32((w_shape[0],), 6)
    plan = weft.trace(lambda x, w, b: nn.conv2d(x, w, b, **kwargs), weft.spec(x.shape), weft.spec(w.shape),
                      weft.spec(b.shape))
    want = F.conv2d(*(torch.from_numpy(a.astype(np.float64)) for a in (x, w, b)), **kwargs).numpy()
    oracle = run(plan, x, w, b)
    for contract, threads, fusion in (("strict", 1, "off"), ("strict", 2, "greedy"), ("inference", 2, "off")):
        compiled = weft.compile(plan, contract, threads=threads, fusion=fusion)
        if fusion == "off":
            nest = compiled.lowered.functions[0].nests[0]
            assert isinstance(nest, ContractionNest) and nest.y_split is not None and nest.y_split.flat is flat
        got = compiled(x, w, b)
        if contract == "strict":
            assert_strict_equal(got, oracle)
        else:
            assert_inference_close(got, want)


@pytest.mark.parametrize("shapes", [
    ((1, 6, 13, 37), (6, 1, 3, 3), dict(groups=6, padding=1)),
    ((2, 4, 9, 40), (8, 1, 5, 5), dict(groups=4, padding=4, dilation=2)),  # halo wider than a vector's edge
    ((3, 21, 18), (3, 1, 3, 3), dict(groups=3, padding=(2, 1), stride=(1, 2))),  # unbatched, strided
], ids=["3x3", "5x5-dilated", "unbatched-strided"])
def test_depthwise_halo_strict_equal_and_close_to_pytorch(shapes):
    """The direct depthwise member's vectors that straddle the image's edge (one masked load
    on AVX-512, lane by lane elsewhere): Strict byte-identical to the oracle, Inference close
    to PyTorch in float64."""
    x_shape, w_shape, kwargs = shapes
    x, w, b = _f32(x_shape, 7), _f32(w_shape, 8), _f32((w_shape[0],), 9)
    plan = weft.trace(lambda x, w, b: nn.conv2d(x, w, b, **kwargs), weft.spec(x.shape), weft.spec(w.shape),
                      weft.spec(b.shape))
    assert plan.kernels[0].fold is not None and len(plan.kernels[0].fold.axes) == 3  # the direct member
    want = F.conv2d(*(torch.from_numpy(a.astype(np.float64)) for a in (x, w, b)), **kwargs).numpy()
    assert_strict_equal(weft.compile(plan, "strict", threads=2)(x, w, b), run(plan, x, w, b))
    assert_inference_close(weft.compile(plan, "inference", threads=1)(x, w, b), want)
