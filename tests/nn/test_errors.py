"""User errors raise WeftError subclasses naming the op and the shapes."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.errors import AxisError, DTypeError, ShapeError, WeftError
from weft.nn import TraceError


def _trace(fn, *shapes, dtype="float32"):
    return weft.trace(fn, *(weft.spec(s, dtype) for s in shapes))


def test_matmul_shape_mismatch_names_op_and_both_shapes():
    with pytest.raises(ShapeError) as caught:
        _trace(nn.matmul, (2, 3), (4, 5))
    message = str(caught.value)
    assert "matmul" in message and "(2, 3)" in message and "(4, 5)" in message


def test_failed_broadcast_names_op_and_both_shapes():
    with pytest.raises(ShapeError) as caught:
        _trace(nn.add, (2, 3), (4,))
    message = str(caught.value)
    assert "add" in message and "(2, 3)" in message and "(4,)" in message
    with pytest.raises(ShapeError, match=r"matmul.*\(2, 1, 3\).*\(5, 3, 2\)|matmul.*\(2,\).*\(5,\)"):
        _trace(nn.matmul, (2, 2, 3), (5, 3, 2))


@pytest.mark.parametrize("fn", [
    lambda x: nn.sum(x, 3), lambda x: nn.softmax(x, -4), lambda x: nn.transpose(x, 0, 5),
    lambda x: nn.mean(x, (0, -3)), lambda x: nn.permute(x, (0, 1)), lambda x: nn.concat([x, x], 3),
])
def test_axis_out_of_range(fn):
    with pytest.raises(AxisError) as caught:
        _trace(fn, (2, 3, 4))
    assert "(2, 3, 4)" in str(caught.value)


def test_unsupported_dtypes():
    for dtype in ("float16", np.float64, "complex64"):
        with pytest.raises(DTypeError, match="weft.spec.*not supported"):
            weft.spec((2,), dtype)
    with pytest.raises(DTypeError, match=r"exp.*int32.*\(2, 3\)"):
        _trace(nn.exp, (2, 3), dtype="int32")
    with pytest.raises(DTypeError, match="add.*cast"):
        weft.trace(nn.add, weft.spec((2,)), weft.spec((2,), "int64"))
    with pytest.raises(DTypeError, match="cross_entropy"):
        weft.trace(nn.cross_entropy, weft.spec((2, 5)), weft.spec((2,)))
    with pytest.raises(DTypeError, match="embedding"):
        weft.trace(nn.embedding, weft.spec((2,)), weft.spec((5, 3)))


@pytest.mark.parametrize("fn,shapes,pattern", [
    (lambda x: nn.reshape(x, (5, 5)), [(2, 3)], r"reshape.*\(2, 3\).*\(5, 5\)"),
    (lambda x: nn.expand(x, (2, 4)), [(3,)], r"expand.*\(3,\).*\(2, 4\)"),
    (nn.linear, [(2, 3), (4, 5)], r"linear.*\(2, 3\).*\(4, 5\)"),
    (nn.attention, [(2, 4, 3), (2, 4, 5), (2, 4, 5)], r"attention.*\(2, 4, 3\).*\(2, 4, 5\)"),
    (nn.attention, [(3, 4, 2), (2, 4, 2), (2, 4, 2)], r"attention.*3 query heads.*2"),
    (nn.conv2d, [(1, 3, 5, 5), (2, 4, 3, 3)], r"conv2d.*\(1, 3, 5, 5\).*\(2, 4, 3, 3\)"),
    (nn.cross_entropy, [(4, 5), (3,)], r"cross_entropy.*\(4, 5\).*\(3,\)"),
    (lambda x: nn.concat([x, x.T], 0), [(2, 3)], r"concat.*\(2, 3\).*\(3, 2\)"),
    (lambda x: nn.window_partition(x, 2), [(4, 4, 3)], r"window_partition.*\(4, 4, 3\)"),
])
def test_shape_errors_name_op_and_shapes(fn, shapes, pattern):
    specs = [weft.spec(s, "int64" if fn is nn.cross_entropy and n == 1 else "float32") for n, s in enumerate(shapes)]
    with pytest.raises(ShapeError, match=pattern):
        weft.trace(fn, *specs)


def test_trace_misuse():
    with pytest.raises(TraceError, match="2 positional inputs but 3"):
        weft.trace(lambda a, b: a, weft.spec(2), weft.spec(2), weft.spec(2))
    with pytest.raises(TraceError, match="return a Tensor"):
        weft.trace(lambda a: 3.0, weft.spec(2))
    with pytest.raises(TraceError, match="truth value"):
        weft.trace(lambda a: a if a > 0.0 else -a, weft.spec(2))
    with pytest.raises(TraceError, match="inside weft.trace"):
        nn.exp(nn.Tensor((2,), weft.ir.DType.FLOAT32, None, lambda i: None, None))
    assert issubclass(TraceError, WeftError)


def test_errors_are_weft_errors():
    for error in (ShapeError, AxisError, DTypeError):
        assert issubclass(error, WeftError)
