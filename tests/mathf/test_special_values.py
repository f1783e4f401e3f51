"""Special values, signed zeros, NaN handling and the Python-level contract."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weft import mathf
from weft.errors import DTypeError
from weft.oracle.interpreter import weft_max, weft_min

INF = np.float32(np.inf)
NAN = np.float32(np.nan)
F32_MAX = np.finfo(np.float32).max


def bits(values) -> list[int]:
    return np.asarray(values, dtype=np.float32).view(np.uint32).tolist()


def check(function, cases):
    inputs = np.array([x for x, _ in cases], dtype=np.float32)
    expected = np.array([y for _, y in cases], dtype=np.float32)
    result = function(inputs)
    # Compare bits so that -0.0 and +0.0 differ; any NaN matches any NaN.
    for x, got, want in zip(inputs, result, expected, strict=True):
        if np.isnan(want):
            assert np.isnan(got), (x, got)
        else:
            assert bits(got) == bits(want), (x, got, want)


def test_exp_special_values():
    check(
        mathf.exp,
        [
            (0.0, 1.0),
            (-0.0, 1.0),
            (INF, INF),
            (-INF, 0.0),
            (NAN, NAN),
            (89.0, INF),
            (F32_MAX, INF),
            (88.72283172607422, np.float32(np.exp(np.float64(np.float32(88.72283172607422))))),
            (88.72283935546875, INF),
            (-104.0, 0.0),
            (-F32_MAX, 0.0),
            (1.0, np.float32(np.e)),
            (-103.0, np.float32(np.exp(-103.0))),
            (2.0**-149, 1.0),
        ],
    )


def test_log_special_values():
    check(
        mathf.log,
        [
            (0.0, -INF),
            (-0.0, -INF),
            (-1.0, NAN),
            (-INF, NAN),
            (-(2.0**-149), NAN),
            (INF, INF),
            (NAN, NAN),
            (1.0, 0.0),
            (2.0**-149, np.float32(np.log(2.0**-149))),
            (F32_MAX, np.float32(np.log(np.float64(F32_MAX)))),
            (2.0, np.float32(np.log(2.0))),
        ],
    )


def test_tanh_special_values():
    check(
        mathf.tanh,
        [
            (0.0, 0.0),
            (-0.0, -0.0),
            (INF, 1.0),
            (-INF, -1.0),
            (NAN, NAN),
            (20.0, 1.0),
            (-20.0, -1.0),
            (2.0**-149, 2.0**-149),
            (-(2.0**-140), -(2.0**-140)),
            (F32_MAX, 1.0),
        ],
    )


def test_erf_special_values():
    check(
        mathf.erf,
        [
            (0.0, 0.0),
            (-0.0, -0.0),
            (INF, 1.0),
            (-INF, -1.0),
            (NAN, NAN),
            (4.0, 1.0),
            (-10.0, -1.0),
            (F32_MAX, 1.0),
            (2.0**-130, np.float32(2.0**-130 * 2 / np.sqrt(np.pi))),
        ],
    )


def test_sigmoid_special_values():
    check(
        mathf.sigmoid,
        [
            (0.0, 0.5),
            (-0.0, 0.5),
            (INF, 1.0),
            (-INF, 0.0),
            (NAN, NAN),
            (30.0, 1.0),
            (-F32_MAX, 0.0),
            (F32_MAX, 1.0),
            (-100.0, np.float32(np.exp(-100.0))),
            (-104.0, 0.0),
        ],
    )


def test_sin_cos_special_values():
    tiny = np.float32(2.0**-149)
    limit = np.float32(2.0**22)  # weft.mathf.definitions.TRIG_INPUT_MAX
    beyond = np.nextafter(limit, INF)
    check(mathf.sin, [(0.0, 0.0), (-0.0, -0.0), (tiny, tiny), (-tiny, -tiny), (1e-30, 1e-30), (INF, NAN),
                      (-INF, NAN), (NAN, NAN), (beyond, NAN), (-beyond, NAN), (F32_MAX, NAN)])
    check(mathf.cos, [(0.0, 1.0), (-0.0, 1.0), (tiny, 1.0), (1e-5, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN),
                      (beyond, NAN), (-F32_MAX, NAN)])
    assert np.isfinite(mathf.sin(limit)) and np.isfinite(mathf.cos(-limit))
    x = np.linspace(-50.0, 50.0, 10001, dtype=np.float32)
    assert bits(mathf.sin(-x)) == bits(-mathf.sin(x))  # odd
    assert bits(mathf.cos(-x)) == bits(mathf.cos(x))  # even


def test_sin_cos_near_multiples_of_half_pi_keep_relative_accuracy():
    """The hard inputs: x next to k*pi/2, where the reduced argument cancels to a few ulps."""
    from weft.mathf.accuracy import STATED_MAX_ULP, ulp_error

    k = np.unique(np.geomspace(1, 2.6e6, 4000).astype(np.int64))
    centre = (k * (np.pi / 2)).astype(np.float32)
    x = np.concatenate([centre, np.nextafter(centre, 0), np.nextafter(centre, INF)])
    x = x[np.abs(x) <= 2.0**22]
    for name, reference in (("sin", np.sin), ("cos", np.cos)):
        error = ulp_error(getattr(mathf, name)(x), reference(x.astype(np.float64)))
        assert error.max() <= STATED_MAX_ULP[name], (name, error.max(), x[error.argmax()])


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "erf", "sigmoid", "sin", "cos"])
def test_nan_input_comes_back_quiet_with_its_payload(name):
    signalling = np.array([0x7F800001, 0xFFA00002, 0x7FC12345], dtype=np.uint32).view(np.float32)
    result = getattr(mathf, name)(signalling).view(np.uint32)
    assert result.tolist() == [0x7FC00001, 0xFFE00002, 0x7FC12345]


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "erf", "sigmoid", "sin", "cos"])
def test_shapes_and_scalars(name):
    function = getattr(mathf, name)
    matrix = np.linspace(0.25, 3.0, 12, dtype=np.float32).reshape(3, 4)
    result = function(matrix)
    assert result.shape == (3, 4) and result.dtype == np.float32
    assert np.array_equal(result.ravel(), function(matrix.ravel()))
    scalar = function(np.float32(0.5))
    assert isinstance(scalar, np.float32) and scalar == function(np.array([0.5], np.float32))[0]
    assert function(0.5) == scalar
    assert function(np.zeros((0, 2), np.float32)).shape == (0, 2)


def test_non_float32_input_is_a_clear_error():
    with pytest.raises(DTypeError, match=r"mathf\.exp.*float64.*\(3,\).*astype"):
        mathf.exp(np.zeros(3))
    with pytest.raises(DTypeError, match="mathf.log"):
        mathf.log(True)


floats = st.floats(width=32, allow_nan=True, allow_infinity=True)


@settings(max_examples=300, deadline=None)
@given(floats, floats)
def test_max_min_match_the_oracle(a, b):
    left, right = np.float32(a), np.float32(b)
    assert bits(mathf.maximum(left, right)) == bits(weft_max(left, right))
    assert bits(mathf.minimum(left, right)) == bits(weft_min(left, right))


def test_max_min_on_zeros_nans_and_infinities():
    values = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0], dtype=np.float32)
    left, right = np.meshgrid(values, values)
    assert bits(mathf.maximum(left, right)) == bits(weft_max(left, right))
    assert bits(mathf.minimum(left, right)) == bits(weft_min(left, right))


def test_oracle_uses_these_functions():
    from weft.ir import UnaryOp
    from weft.oracle.interpreter import NUMPY_UNARY

    for op, name in (
        (UnaryOp.EXP, "exp"),
        (UnaryOp.LOG, "log"),
        (UnaryOp.TANH, "tanh"),
        (UnaryOp.ERF, "erf"),
        (UnaryOp.SIN, "sin"),
        (UnaryOp.COS, "cos"),
    ):
        assert NUMPY_UNARY[op] is getattr(mathf, name)
    assert NUMPY_UNARY[UnaryOp.SIGMOID] is mathf.sigmoid
