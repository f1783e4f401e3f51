"""Weft's float32 transcendentals: one definition, a NumPy and a C interpreter.

The functions are defined once (``weft.mathf.definitions``) as sequences of
IEEE-exact float32 operations. ``exp``, ``log``, ``tanh``, ``erf``,
``sigmoid``, ``sin`` and ``cos`` here evaluate them with NumPy (the oracle uses these);
``c_math_source(lanes)`` prints the same sequences as C (``wf_exp`` ...), so
compiled Strict code and the oracle agree bit for bit. See docs/math.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from weft.errors import DTypeError
from weft.mathf import definitions
from weft.mathf.c_source import C_BINARY_NAMES, C_UNARY_NAMES, c_math_source
from weft.mathf.numpy_ops import NumpyOps

_NUMPY_OPS = NumpyOps()


def _as_float32(x: object, op: str) -> np.ndarray:
    if isinstance(x, (bool, np.bool_)):
        raise DTypeError(f"mathf.{op}: got a bool; pass a float32 value, e.g. numpy.float32(x)")
    if isinstance(x, (int, float)):
        return np.asarray(x, dtype=np.float32)
    array = np.asarray(x)
    if array.dtype != np.float32:
        raise DTypeError(
            f"mathf.{op}: expected float32, got {array.dtype} with shape {array.shape};"
            f" cast first with .astype(numpy.float32)"
        )
    return array


def _unary(name: str) -> Callable[[object], np.ndarray]:
    definition = definitions.UNARY[name]

    def apply(x: object) -> np.ndarray:
        array = _as_float32(x, name)
        with np.errstate(all="ignore"):
            result = np.asarray(definition(_NUMPY_OPS, array), dtype=np.float32)
        return result[()] if array.ndim == 0 else result

    apply.__name__ = name
    apply.__qualname__ = name
    apply.__doc__ = (
        f"Weft's float32 {name}, elementwise (NumPy evaluation of definitions.{name});"
        f" float32 in, float32 out, same shape."
    )
    return apply


def _binary(name: str) -> Callable[[object, object], np.ndarray]:
    definition = definitions.BINARY[name]

    def apply(a: object, b: object) -> np.ndarray:
        left, right = _as_float32(a, name), _as_float32(b, name)
        try:
            left, right = np.broadcast_arrays(left, right)
        except ValueError as error:
            raise DTypeError(
                f"mathf.{name}: shapes {left.shape} and {right.shape} do not broadcast; reshape one"
            ) from error
        result = np.asarray(definition(_NUMPY_OPS, left, right), dtype=np.float32)
        return result[()] if result.ndim == 0 else result

    apply.__name__ = name
    apply.__qualname__ = name
    apply.__doc__ = f"Weft's {name} (NaN in the first operand wins), NumPy side of wf_{name}."
    return apply


exp = _unary("exp")
log = _unary("log")
tanh = _unary("tanh")
erf = _unary("erf")
sigmoid = _unary("sigmoid")
sin = _unary("sin")
cos = _unary("cos")
maximum = _binary("max")
minimum = _binary("min")

__all__ = [
    "C_BINARY_NAMES",
    "C_UNARY_NAMES",
    "c_math_source",
    "cos",
    "erf",
    "exp",
    "log",
    "maximum",
    "minimum",
    "sigmoid",
    "sin",
    "tanh",
]
