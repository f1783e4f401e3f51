"""Pooling and inference batch norm for CNNs, as plain members (PyTorch's semantics).

``max_pool2d`` is one member folding (ky, kx) with max over a window read through a
-inf padded Load; ``avg_pool2d`` a sum fold times 1/(kh*kw) (with
``count_include_pad=False`` a second fold counts the window's in-range pixels);
``batch_norm`` (inference: running statistics) is elementwise members over the channel
axis 1. Each output pixel::

    max_pool2d[n, c, y, x] = max_{ky, kx} x[n, c, y*sy + ky*dy - py, x*sx + kx*dx - px]
"""

from __future__ import annotations

from collections.abc import Sequence

from weft.errors import ShapeError
from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Combiner,
    Const,
    DType,
    Expr,
    Fold,
    IndexExpr,
    IndexValue,
    Where,
)
from weft.nn.tensor import Tensor, current_tracer, name_scope
from weft.nn.views import read_padded, reshape


def _pair(op: str, name: str, value: int | Sequence[int]) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or any(not isinstance(n, int) or isinstance(n, bool) for n in pair):
        raise ShapeError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
    return pair  # type: ignore[return-value]


def _windows(op: str, x: Tensor, kernel_size, stride, padding, dilation=1):
    """Window geometry shared by the pools: checks rank, sizes and PyTorch's padding rule."""
    from weft.nn.linalg import _need_float

    _need_float(op, x)
    if x.ndim != 4:
        fix = " (one image: add the batch axis with nn.unsqueeze(x, 0))" if x.ndim == 3 else ""
        raise ShapeError(f"{op}: input has rank {x.ndim} (shape {x.shape}); {op} takes a rank-4 batched input"
                         f" (N, C, H, W){fix}")
    kh, kw = _pair(op, "kernel_size", kernel_size)
    sy, sx = _pair(op, "stride", kernel_size if stride is None else stride)
    py, px = _pair(op, "padding", padding)
    dy, dx = _pair(op, "dilation", dilation)
    if min(kh, kw, sy, sx, dy, dx) < 1 or min(py, px) < 0:
        raise ShapeError(f"{op}: kernel_size, stride and dilation must be >= 1 and padding >= 0, got "
                         f"{kernel_size}, {stride}, {dilation}, {padding}")
    if py > kh // 2 or px > kw // 2:
        raise ShapeError(f"{op}: padding {(py, px)} must be at most half the kernel {(kh, kw)} (as in PyTorch)")
    n, c, height, width = x.shape
    out_h = (height + 2 * py - dy * (kh - 1) - 1) // sy + 1
    out_w = (width + 2 * px - dx * (kw - 1) - 1) // sx + 1
    if out_h < 1 or out_w < 1:
        raise ShapeError(f"{op}: kernel {(kh, kw)} is larger than the padded input {x.shape[2:]}")
    current_tracer(x)
    axes = (Axis("n", n), Axis("c", c), Axis("y", out_h), Axis("x", out_w))
    fold = Fold((Axis("ky", kh), Axis("kx", kw)), Combiner.SUM)
    row = AxisIndex("y") * sy + AxisIndex("ky") * dy - py
    col = AxisIndex("x") * sx + AxisIndex("kx") * dx - px
    return axes, fold, row, col, (kh, kw), (py, px)


def max_pool2d(x: Tensor, kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None,
               padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1,
               ceil_mode: bool = False) -> Tensor:
    """``torch.nn.functional.max_pool2d`` over NCHW input (stride defaults to the kernel):
    one member, a max fold over the window; padding reads as -inf."""
    if ceil_mode:
        raise ShapeError("max_pool2d: ceil_mode=True is not supported; pad the input or use ceil_mode=False")
    axes, fold, row, col, _, (py, px) = _windows("max_pool2d", x, kernel_size, stride, padding, dilation)
    index = (AxisIndex("n"), AxisIndex("c"), row, col)
    body = read_padded(x, index, float("-inf")) if py or px else x.read(index)
    return x.tracer.emit("max_pool2d", axes, body, DType.FLOAT32, Fold(fold.axes, Combiner.MAX))


def _inside(position: IndexExpr, extent: int) -> Expr:
    value = IndexValue(position)
    return Binary(BinaryOp.AND, Binary(BinaryOp.GE, value, Const(0, DType.INT64)),
                  Binary(BinaryOp.LT, value, Const(extent, DType.INT64)))


def avg_pool2d(x: Tensor, kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None,
               padding: int | Sequence[int] = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """``torch.nn.functional.avg_pool2d`` over NCHW input (stride defaults to the kernel):
    a sum fold over the window (padding reads 0) times 1/(kh*kw); with
    ``count_include_pad=False`` divided by the count of in-range pixels instead."""
    if ceil_mode:
        raise ShapeError("avg_pool2d: ceil_mode=True is not supported; pad the input or use ceil_mode=False")
    axes, fold, row, col, (kh, kw), (py, px) = _windows("avg_pool2d", x, kernel_size, stride, padding)
    index = (AxisIndex("n"), AxisIndex("c"), row, col)
    pixel = read_padded(x, index, 0.0) if py or px else x.read(index)
    if count_include_pad or not (py or px):
        body = Binary(BinaryOp.MUL, pixel, Const(1.0 / (kh * kw), DType.FLOAT32))
        return x.tracer.emit("avg_pool2d", axes, body, DType.FLOAT32, fold)
    total = x.tracer.emit("avg_pool2d_sum", axes, pixel, DType.FLOAT32, fold)
    height, width = x.shape[2:]
    inside = Binary(BinaryOp.AND, _inside(row, height), _inside(col, width))
    counted = Where(inside, Const(1.0, DType.FLOAT32), Const(0.0, DType.FLOAT32))
    count = x.tracer.emit("avg_pool2d_count", axes[2:], counted, DType.FLOAT32, fold)
    out_index = tuple(AxisIndex(axis.name) for axis in axes)
    body = Binary(BinaryOp.DIV, total.read(out_index), count.read(out_index[2:]))
    return x.tracer.emit("avg_pool2d", axes, body, DType.FLOAT32)


def batch_norm(x: Tensor, running_mean: Tensor, running_var: Tensor, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Inference batch norm (``torch.nn.functional.batch_norm(..., training=False)``) over the
    channel axis 1 of (N, C, ...): ``(x - mean) / sqrt(var + eps) * weight + bias``."""
    from weft.nn.elementwise import sqrt
    from weft.nn.linalg import _need_float

    _need_float("batch_norm", x, running_mean, running_var, weight, bias)
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: input has rank {x.ndim} (shape {x.shape}); it needs (N, C, ...)")
    channels = x.shape[1]
    for name, tensor in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                         ("bias", bias)):
        if tensor is not None and tensor.shape != (channels,):
            raise ShapeError(f"batch_norm: {name} has shape {tensor.shape}, expected ({channels},) for input "
                             f"{x.shape} (channels on axis 1)")
    per_channel = (channels,) + (1,) * (x.ndim - 2)

    def channel(tensor: Tensor) -> Tensor:
        return reshape(tensor, per_channel)

    with name_scope("batch_norm"):
        out = (x - channel(running_mean)) / sqrt(channel(running_var) + float(eps))
        if weight is not None:
            out = out * channel(weight)
        if bias is not None:
            out = out + channel(bias)
    return out


__all__ = ["avg_pool2d", "batch_norm", "max_pool2d"]
