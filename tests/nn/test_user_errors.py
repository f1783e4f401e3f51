"""Errors a new user meets first: short, naming what was wrong and the fix."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.errors import ShapeError, WeftError


def test_a_wrong_rank_input_to_conv2d_is_a_rank_error_not_a_channel_mismatch():
    with pytest.raises(ShapeError, match=r"input has rank 2 .*\(N, C, H, W\) or an unbatched \(C, H, W\)") as error:
        weft.trace(nn.conv2d, weft.spec((8, 8)), weft.spec((4, 3, 3, 3)))
    assert "channels" not in str(error.value)
    assert weft.trace(nn.conv2d, weft.spec((3, 8, 8)), weft.spec((4, 3, 3, 3))).outputs  # unbatched: allowed
    with pytest.raises(ShapeError, match="weight has rank 3"):
        weft.trace(nn.conv2d, weft.spec((1, 3, 8, 8)), weft.spec((4, 3, 3)))
    with pytest.raises(ShapeError, match="has 2 channels but weight .* expects 3"):
        weft.trace(nn.conv2d, weft.spec((1, 2, 8, 8)), weft.spec((4, 3, 3, 3)))


def test_an_array_where_a_spec_belongs_gets_a_short_message():
    big = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    for call in (lambda: weft.trace(lambda x: x * 2, big), lambda: weft.spec(big)):
        with pytest.raises(WeftError) as error:
            call()
        message = str(error.value)
        assert "(512, 512)" in message and "float32" in message and len(message) < 220, message
    assert weft.spec(np.array([2, 3])).shape == (2, 3)  # a 1-D integer array is a shape


def test_compiling_a_function_says_to_trace_it_first():
    def my_function(x):
        return nn.exp(x)

    with pytest.raises(WeftError, match=r"weft.trace\(my_function, \*specs\)"):
        weft.compile(my_function)


def test_a_weight_where_normalized_shape_belongs_is_named_briefly():
    def encoder(x, g, b):
        return nn.layer_norm(x, g, b)

    with pytest.raises(ShapeError, match=r"normalized_shape must be ints.*layer_norm\(x, weight=w, bias=b\)") as error:
        weft.trace(encoder, weft.spec((4, 384)), weft.spec((384,)), weft.spec((384,)))
    assert len(str(error.value)) < 300
