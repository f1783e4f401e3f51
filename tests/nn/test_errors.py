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
    with pytest.raises(DTypeError, match=r"relu.*int32.*\(2, 3\)"):
        _trace(nn.relu, (2, 3), dtype="int32")
    with pytest.raises(DTypeError, match="add.*bool.*cast"):  # int/float mixes promote (PyTorch); bool+bool not
        weft.trace(nn.add, weft.spec((2,), "bool"), weft.spec((2,), "bool"))
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


@pytest.mark.parametrize("numpy_call, function", [
    (lambda a: np.exp(a), "weft.nn.exp"), (lambda a: np.log(a), "weft.nn.log"),
    (lambda a: np.negative(a), "weft.nn.neg"), (lambda a: np.maximum(a, 0.0), "weft.nn.maximum"),
    (lambda a: np.sum(a, axis=1), "weft.nn.sum"), (lambda a: np.concatenate([a, a]), "weft.nn.concat"),
    (lambda a: np.tanh(a) + 1.0, "weft.nn.tanh"), (lambda a: np.floor(a), "weft.nn has no floor"),
])
def test_numpy_on_a_tensor_is_refused_at_once_naming_the_weft_function(numpy_call, function):
    """np.exp on a traced (64, 384) Tensor used to trace one scalar member per element
    (76 s) and then fail; now NumPy's protocols refuse the Tensor immediately."""
    with pytest.raises(TraceError) as caught:
        weft.trace(numpy_call, weft.spec((64, 384)))
    assert function in str(caught.value)


def test_numpy_conversion_of_a_tensor_is_refused():
    with pytest.raises(TraceError, match="symbolic.*weft.oracle.run or weft.compile"):
        weft.trace(lambda a: np.asarray(a) + 1.0, weft.spec((64, 384)))


def test_operators_with_numpy_scalars_on_the_left_still_trace():
    plan = weft.trace(lambda a: np.float32(2.0) * a - np.float32(1.0), weft.spec((3, 5)))
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    assert np.array_equal(weft.oracle.run(plan, x), np.float32(2.0) * x - np.float32(1.0))


def _weft_names_in_strings():
    """Every ``weft.nn.<name>`` / ``nn.<name>`` written in a string of the package's source."""
    import ast
    import re
    from pathlib import Path

    pattern = re.compile(r"(?<![\w.])(?:weft\.)?nn\.([A-Za-z_]\w*)")
    found = []
    for path in sorted(Path(weft.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found += [(path.name, node.lineno, name) for name in pattern.findall(node.value)]
    return found


def test_every_weft_nn_function_named_in_a_message_exists():
    """An error that says "use weft.nn.take_along_axis" must not send users to nothing."""
    names = _weft_names_in_strings()
    assert len(names) >= 5  # the scan sees the messages (weft.nn.cast, weft.nn.where, ...)
    missing = [f"{file}:{line}: nn.{name}" for file, line, name in names if not hasattr(nn, name)]
    assert not missing, missing


def test_tensor_indexing_error_names_only_real_functions():
    with pytest.raises(TraceError) as caught:
        weft.trace(lambda t, i: t[i], weft.spec((4, 3)), weft.spec((2,), "int32"))
    message = str(caught.value)
    assert "weft.nn.embedding" in message and hasattr(nn, "embedding")
    assert "use weft.nn.embedding / take_along_axis" not in message
