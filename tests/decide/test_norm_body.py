"""The single-pass (Welford) layer norm body, Inference-only."""

import numpy as np
import pytest

import weft
from weft import nn
from weft.decide.library import admissions
from weft.decide.library.norm import match_layer_norm
from weft.lower.library import LibraryCall
from weft.nn import spec
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal, at_line_offset


def _members(plan):
    return tuple(kernel.output for kernel in plan.kernels)


def _float64(x, weight=None, bias=None, eps=1e-5):
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * (1 if weight is None else weight) + (0 if bias is None else bias)


def _bodies(compiled):
    return [n.body for f in compiled.lowered.functions for n in f.nests if isinstance(n, LibraryCall)]


def test_matcher_admits_layer_norm_with_or_without_affine_and_refuses_rms_norm():
    with_affine = weft.trace(lambda x, w, b: nn.layer_norm(x, weight=w, bias=b), spec((4, 24)), spec(24), spec(24))
    match = match_layer_norm(with_affine, _members(with_affine))
    assert match is not None and match.role("weight") == "w" and match.role("bias") == "b"
    assert np.isclose(match.constant("epsilon"), 1e-5 * 2.0**-64)
    bare = weft.trace(lambda x: nn.layer_norm(x), spec((2, 3, 24)))
    assert [b.name for b, _ in admissions(bare, _members(bare), "inference")] == ["welford layer norm"]
    assert admissions(bare, _members(bare), "strict") == ()  # Welford reorders the row folds
    rms = weft.trace(lambda x: nn.rms_norm(x), spec((4, 24)))
    assert match_layer_norm(rms, _members(rms)) is None
    assert match_layer_norm(with_affine, _members(with_affine)[1:]) is None


@pytest.mark.parametrize("fusion", ["matchers", "priced"])
@pytest.mark.parametrize("shape,affine", [((64, 1000), True), ((3, 5, 40), False), ((7, 9), True)])
def test_welford_body_matches_float64(fusion, shape, affine, cache):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 2 + 5).astype(np.float32)  # an offset mean: two-pass accuracy needed
    dim = shape[-1]
    if affine:
        weight, bias = rng.standard_normal(dim).astype(np.float32), rng.standard_normal(dim).astype(np.float32)
        plan = weft.trace(lambda x, w, b: nn.layer_norm(x, weight=w, bias=b), spec(shape), spec(dim), spec(dim))
        inputs, reference = (x, weight, bias), _float64(x, weight, bias)
    else:
        plan = weft.trace(lambda x: nn.layer_norm(x), spec(shape))
        inputs, reference = (x,), _float64(x)
    compiled = weft.compile(plan, "inference", threads=2, fusion=fusion)
    if fusion == "matchers":  # priced takes the body only where its price is the lowest
        assert _bodies(compiled) == ["welford layer norm"]
    assert_inference_close(compiled(*inputs), reference, f"welford {shape}")


def test_strict_layer_norm_keeps_the_oracle_bytes(cache):
    plan = weft.trace(lambda x: nn.layer_norm(x), spec((16, 100)))
    x = np.random.default_rng(1).standard_normal((16, 100)).astype(np.float32)
    compiled = weft.compile(plan, "strict", threads=1, fusion="matchers")
    assert _bodies(compiled) == []
    assert_strict_equal(compiled(x), run(plan, x), "strict layer norm")


@pytest.mark.parametrize("shape", [(5, 1040), (9, 37), (4, 16), (6, 3), (3, 1)])
def test_welford_body_same_bytes_at_every_input_offset(shape, cache):
    """The body reads each row from whole 64-byte lines on AVX-512 (two aligned loads and a
    permute per vector): the vectors, so the bytes, are those of the plain loads wherever the
    row starts (odd dims put rows at every offset), tiny rows included; non-finite rows too."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    if shape[0] > 3 and shape[1] > 2:
        x[1, 1] = np.inf
        x[2, 0] = np.nan
        x[3, :] = 7.0  # a constant row: variance 0
    plan = weft.trace(lambda x: nn.layer_norm(x), spec(shape))
    compiled = weft.compile(plan, "inference", threads=1, fusion="matchers")
    assert _bodies(compiled) == ["welford layer norm"]
    first = compiled(at_line_offset(x, 0))
    for offset in range(4, 64, 4):
        assert np.array_equal(compiled(at_line_offset(x, offset)).view(np.uint32), first.view(np.uint32)), offset
    finite = np.isfinite(x).all(axis=-1)
    with np.errstate(all="ignore"):
        assert_inference_close(first[finite], _float64(x[finite]), f"welford {shape}")
    assert np.isnan(first[~finite]).all()
