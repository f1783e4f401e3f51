"""Weft tensors that hold values known at trace time, and the torch <-> weft dtype map.

ATen graphs create tensors from nothing (``arange``, ``full``, ``scalar_tensor``):
they become views whose read function is a constant or an affine function of the
index, so they cost no member and no buffer; the member that reads them folds the
value into its body.
"""

from __future__ import annotations

import torch

from weft.errors import WeftError
from weft.ir import Binary, BinaryOp, Cast, Const, DType, IndexValue
from weft.nn.tensor import Tensor, current_tracer


class LoweringError(WeftError):
    """An ATen node Weft cannot lower (op, dtype, shape or argument it does not support)."""


TORCH_TO_WEFT = {
    torch.float32: DType.FLOAT32,
    torch.int64: DType.INT64,
    torch.int32: DType.INT32,
    torch.bool: DType.BOOL,
}


def weft_dtype(dtype: torch.dtype, what: str) -> DType:
    if dtype not in TORCH_TO_WEFT:
        raise LoweringError(f"{what}: dtype {dtype} is not supported by Weft (float32, int32, int64, bool)")
    return TORCH_TO_WEFT[dtype]


def python_scalar(value: object, dtype: DType) -> float | int | bool:
    """A Python number as ``dtype`` would hold it (torch casts the scalar to the result type)."""
    if dtype is DType.BOOL:
        return bool(value)
    if dtype.is_float:
        return float(value)
    return int(value)


def constant(value: object, shape: tuple[int, ...], dtype: DType) -> Tensor:
    """A tensor of ``shape`` whose every element is ``value`` (no member, no buffer)."""
    fixed = Const(python_scalar(value, dtype), dtype)
    return Tensor(tuple(shape), dtype, current_tracer(), lambda index: fixed, None)


def arange(start: float, step: float, length: int, dtype: DType) -> Tensor:
    """``start + step * i`` for ``i`` in ``range(length)`` as a view of its index."""
    if dtype.is_float:
        def read(index):
            position = Cast(IndexValue(index[0]), DType.FLOAT32)
            return Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, position, Const(float(step))), Const(float(start)))
    else:
        def read(index):
            position = Cast(IndexValue(index[0]), dtype) if dtype is not DType.INT64 else IndexValue(index[0])
            return Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, position, Const(int(step), dtype)),
                          Const(int(start), dtype))
    return Tensor((length,), dtype, current_tracer(), read, None)


EMPTY = "empty tensor"  # a zero-size tensor: a cat input contributing nothing, batch norm's saved statistics
