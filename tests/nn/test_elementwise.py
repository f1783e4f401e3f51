"""Elementwise members against float64 NumPy, over broadcast shapes with size-1 axes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from weft import nn

SETTINGS = settings(max_examples=25, deadline=None)


def _f32(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


broadcast_pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=1, max_side=5)


@SETTINGS
@given(shapes=broadcast_pairs, op=st.sampled_from(["add", "sub", "mul", "div", "maximum", "minimum"]),
       seed=st.integers(0, 2**16))
def test_binary_ops_broadcast_like_numpy(traced, close, shapes, op, seed):
    a, b = _f32(shapes.input_shapes[0], seed), _f32(shapes.input_shapes[1], seed + 1)
    if op == "div":
        b = np.where(np.abs(b) < 0.1, np.float32(0.5), b)
    reference = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                 "maximum": np.maximum, "minimum": np.minimum}[op]
    plan, out = traced(getattr(nn, op), a, b)
    assert len(plan.kernels) == 1
    close(out, reference(a.astype(np.float64), b.astype(np.float64)), rtol=1e-6)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


UNARY = {
    "neg": (nn.neg, np.negative, 1.0),
    "abs": (nn.abs, np.abs, 1.0),
    "exp": (nn.exp, np.exp, 3.0),
    "log": (lambda x: nn.log(nn.abs(x)), lambda x: np.log(np.abs(x)), 1.0),
    "sqrt": (lambda x: nn.sqrt(nn.abs(x)), lambda x: np.sqrt(np.abs(x)), 1.0),
    "rsqrt": (lambda x: nn.rsqrt(nn.abs(x)), lambda x: 1 / np.sqrt(np.abs(x)), 1.0),
    "tanh": (nn.tanh, np.tanh, 3.0),
    "erf": (nn.erf, scipy.special.erf, 2.0),
    "sigmoid": (nn.sigmoid, lambda x: 1 / (1 + np.exp(-x)), 4.0),
    "sin": (nn.sin, np.sin, 100.0),
    "cos": (nn.cos, np.cos, 100.0),
    "relu": (nn.relu, lambda x: np.maximum(x, 0), 1.0),
    "silu": (nn.silu, lambda x: x / (1 + np.exp(-x)), 4.0),
    "gelu": (nn.gelu, lambda x: 0.5 * x * (1 + scipy.special.erf(x / math.sqrt(2))), 3.0),
    "gelu_tanh": (lambda x: nn.gelu(x, approximate="tanh"), _gelu_tanh, 3.0),
    "square": (nn.square, np.square, 2.0),
}


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=6),
       name=st.sampled_from(sorted(UNARY)), seed=st.integers(0, 2**16))
def test_unary_ops_and_activations(traced, close, shape, name, seed):
    function, reference, scale = UNARY[name]
    x = _f32(shape, seed, scale)
    x = np.where(np.abs(x) < 1e-3, np.float32(0.25), x).astype(np.float32)
    _, out = traced(function, x)
    close(out, reference(x.astype(np.float64)), rtol=2e-5, atol=1e-6)


def test_compound_activations_are_one_member(traced):
    x = _f32((3, 4), 0)
    for function in (nn.gelu, nn.silu, lambda v: nn.gelu(v, approximate="tanh")):
        plan, _ = traced(function, x)
        assert len(plan.kernels) == 1


def test_operators_scalars_and_reflected(traced, close):
    x, y = _f32((2, 3), 1), _f32((3,), 2)
    _, out = traced(lambda x, y: (2.0 - x) * y / 4 + 1 - (-x) ** 2, x, y)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    close(out, (2.0 - x64) * y64 / 4 + 1 - x64**2, rtol=1e-6)


def test_where_comparison_and_cast(traced, close):
    x, y = _f32((4, 5), 3), _f32((5,), 4)
    _, out = traced(lambda x, y: nn.where(x > y, x, nn.cast(x < 0.0, "float32") * 3.0), x, y)
    close(out, np.where(x > y, x, (x < 0).astype(np.float64) * 3.0))
    ints = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    _, out = traced(lambda n: nn.cast(n * 3 - 1, "float32") / 2.0, ints)
    close(out, (ints.astype(np.float64) * 3 - 1) / 2)


def test_logical_ops(traced):
    x = _f32((3, 4), 5)
    _, out = traced(lambda x: nn.logical_or(nn.logical_and(x > 0.0, x < 1.0), ~(x > -0.5)), x)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, ((x > 0) & (x < 1)) | ~(x > -0.5))


def test_non_contiguous_numpy_inputs(traced, close):
    base = _f32((6, 8), 6)
    view = base[::2, 1::3]  # a strided NumPy view fed to the oracle
    _, out = traced(lambda v: nn.exp(v) * 2.0, view)
    close(out, np.exp(view.astype(np.float64)) * 2)


def test_pow_refuses_what_has_no_integer_answer():
    import weft
    from weft.errors import DTypeError

    with pytest.raises(DTypeError, match="negative power"):
        weft.trace(lambda x: x ** -1, weft.spec((2,), "int32"))
    with pytest.raises(DTypeError, match="needs float32"):
        weft.trace(lambda x: x ** 1.7, weft.spec((2,), "int32"))


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=4),
       seed=st.integers(0, 2**16))
def test_where_broadcasts_three_ways(traced, shapes, seed):
    condition_shape, a_shape, b_shape = shapes.input_shapes
    rng = np.random.default_rng(seed)
    condition = np.asarray(rng.random(condition_shape) < 0.5)
    a, b = _f32(a_shape, seed), _f32(b_shape, seed + 1)
    _, out = traced(nn.where, condition, a, b)
    np.testing.assert_array_equal(out, np.where(condition, a, b))
