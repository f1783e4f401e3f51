"""2-D convolution with PyTorch's ``F.conv2d`` arguments: stride, padding (ints, pairs,
``"same"``, ``"valid"``), dilation, groups, batched (N, C, H, W) or unbatched (C, H, W) input.

One contraction member folding (c, ky, kx) over the channels of the output's group::

    out[n, o, y, x] = sum_{c, ky, kx} in[n, g(o)*Cg + c, y*sy + ky*dy - top, x*sx + kx*dx - left]
                                      * w[o, c, ky, kx]          g(o) = o // (O / groups)

The halo reads through a zero-padded Load. ``"same"`` pads d*(k-1) in total per dim, the
extra one at the bottom/right, as PyTorch does (stride 1 only, as PyTorch). A bias adds a member.

Unless each group reads one input channel (depthwise), the convolution is instead one
contraction of the weights (rows) with the input's *patch view* (columns: every output
pixel of the image and group), folding the taps ``t = (c*KH + ky)*KW + kx`` ascending (the
direct member's order)::

    out[n, g, o', p] = sum_t w[g*Og + o', c, ky, kx]
                             * in[n, g*Cg + c, (p // OW)*sy + ky*dy - top, (p % OW)*sx + kx*dx - left]

and the output is (N, C, H, W) as written (``out`` reshaped, a view). The patch view is an
index map, never a buffer: the contraction microkernel packs it run by run of one output
row (``weft.lower.contraction.ColumnSplit``; one copy per micro-panel when a stride-1
view's padded width is the input's), packs the weights once per call and gives each
thread bands of output pixels (``split_blocking``), so the K x (OH*OW) patches are never
written and read back. A 1x1 convolution is the same contraction over the input as a
(C, H*W) matrix; depthwise keeps the direct member (9 taps of work per packed element
would not pay for the packing). ``benchmarks/conv2d.py`` compares both with PyTorch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from weft.errors import ShapeError
from weft.ir import Axis, AxisIndex, Binary, BinaryOp, Combiner, DType, Fold
from weft.nn.elementwise import add
from weft.nn.linalg import _need_float
from weft.nn.tensor import Tensor, current_tracer
from weft.nn.views import read_padded, reshape

PATCHES_MIN_GROUP_CHANNELS = 2  # input channels per group from which the patch contraction beats the direct member


def _pair(name: str, value: int | Sequence[int]) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or any(not isinstance(n, int) for n in pair):
        raise ShapeError(f"conv2d: {name} must be an int or a pair of ints, got {value!r}")
    return pair


def _padding(padding: int | Sequence[int] | str, stride: tuple[int, int], dilation: tuple[int, int],
             kernel: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(top, left) and (bottom, right) padding."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), (0, 0)
        if padding != "same":
            raise ShapeError(f"conv2d: padding must be ints, 'same' or 'valid', got {padding!r}")
        if stride != (1, 1):
            raise ShapeError(f"conv2d: padding='same' needs stride 1 (as in PyTorch), got stride {stride};"
                             " give the padding as ints for a strided convolution")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        return (totals[0] // 2, totals[1] // 2), (totals[0] - totals[0] // 2, totals[1] - totals[1] // 2)
    pair = _pair("padding", padding)
    return pair, pair


def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] | str = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    """PyTorch's ``F.conv2d``: (N, C, H, W) or (C, H, W) input, (O, C/groups, KH, KW) weight."""
    _need_float("conv2d", x, weight, bias)
    if weight.ndim != 4:
        raise ShapeError(f"conv2d: weight has rank {weight.ndim} (shape {weight.shape}); conv2d takes a rank-4"
                         " weight (O, C/groups, KH, KW)")
    if x.ndim not in (3, 4):
        raise ShapeError(f"conv2d: input has rank {x.ndim} (shape {x.shape}); conv2d takes a batched (N, C, H, W)"
                         " or an unbatched (C, H, W) input")
    batched = x.ndim == 4  # unbatched, as PyTorch: a batch of one, read without a batch index
    shape = x.shape if batched else (1, *x.shape)
    if not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"conv2d: groups must be a positive int, got {groups!r}")
    if shape[1] != weight.shape[1] * groups:
        per_group = f" ({weight.shape[1]} per group x groups={groups})" if groups > 1 else ""
        raise ShapeError(
            f"conv2d: input {x.shape} has {shape[1]} channels but weight {weight.shape} expects"
            f" {weight.shape[1] * groups}{per_group}: need (N, C, H, W) and (O, C/groups, KH, KW)"
        )
    if weight.shape[0] % groups:
        raise ShapeError(f"conv2d: weight {weight.shape} has {weight.shape[0]} output channels; need O divisible by"
                         f" groups={groups}")
    (sy, sx), (dy, dx) = _pair("stride", stride), _pair("dilation", dilation)
    if min(sy, sx, dy, dx) < 1:
        raise ShapeError(f"conv2d: stride and dilation must be >= 1, got {stride}, {dilation}")
    n, _, height, width = shape
    out_channels, group_channels, kh, kw = weight.shape
    (top, left), (bottom, right) = _padding(padding, (sy, sx), (dy, dx), (kh, kw))
    if min(top, left) < 0:
        raise ShapeError(f"conv2d: padding must be >= 0, got {padding}")
    out_h = (height + top + bottom - dy * (kh - 1) - 1) // sy + 1
    out_w = (width + left + right - dx * (kw - 1) - 1) // sx + 1
    if out_h < 1 or out_w < 1:
        raise ShapeError(f"conv2d: kernel {weight.shape[2:]} is larger than the padded input {x.shape[2:]}")
    if bias is not None and bias.shape != (out_channels,):
        raise ShapeError(f"conv2d: bias has shape {bias.shape}, expected ({out_channels},)")
    current_tracer(x, weight, bias)
    window = _Window((sy, sx), (dy, dx), (top, left), padded=bool(top or left or bottom or right), batched=batched)
    if group_channels >= PATCHES_MIN_GROUP_CHANNELS:
        out = _conv2d_patches(x, weight, groups, window, (out_h, out_w))
    else:
        out = _conv2d_direct(x, weight, groups, window, (out_h, out_w))
    if not batched:
        out = reshape(out, out.shape[1:])
    if bias is None:
        return out
    return add(out, reshape(bias, (out_channels, 1, 1)))


@dataclass(frozen=True, slots=True)
class _Window:
    """Where output pixel (y, x) and kernel tap (ky, kx) read the input: stride, dilation,
    the (top, left) padding, whether any side is padded (a zero-padded Load) and whether the
    input has a batch axis (an unbatched input is read as it is, not through a view)."""

    stride: tuple[int, int]
    dilation: tuple[int, int]
    origin: tuple[int, int]
    padded: bool
    batched: bool = True

    def read(self, x: Tensor, batch, channel, ky, kx, y=None, x_index=None):
        """The input pixel tap (ky, kx) of output pixel (y, x) reads (default: the axes y, x)."""
        (sy, sx), (dy, dx), (top, left) = self.stride, self.dilation, self.origin
        y = AxisIndex("y") if y is None else y
        x_index = AxisIndex("x") if x_index is None else x_index
        index = (batch,) * self.batched + (channel, y * sy + ky * dy - top, x_index * sx + kx * dx - left)
        return read_padded(x, index) if self.padded else x.read(index)


def _conv2d_direct(x: Tensor, weight: Tensor, groups: int, window: _Window, out_size: tuple[int, int]) -> Tensor:
    """One contraction member over (n, o, y, x), folding (c, ky, kx)."""
    n = x.shape[0] if window.batched else 1
    out_channels, group_channels, kh, kw = weight.shape
    out_h, out_w = out_size
    axes = (Axis("n", n), Axis("o", out_channels), Axis("y", out_h), Axis("x", out_w))
    fold = Fold((Axis("c", group_channels), Axis("ky", kh), Axis("kx", kw)), Combiner.SUM)
    ci, ky, kx = AxisIndex("c"), AxisIndex("ky"), AxisIndex("kx")
    channel = ci if groups == 1 else AxisIndex("o") // (out_channels // groups) * group_channels + ci
    pixel = window.read(x, AxisIndex("n"), channel, ky, kx)
    body = Binary(BinaryOp.MUL, pixel, weight.read((AxisIndex("o"), ci, ky, kx)))
    return x.tracer.emit("conv2d", axes, body, DType.FLOAT32, fold)


def _conv2d_patches(x: Tensor, weight: Tensor, groups: int, window: _Window, out_size: tuple[int, int]) -> Tensor:
    """One contraction per image and group, weights (rows) times the input's patch view
    (columns: the output pixels, flattened): ``out[n, g, o', p] = sum_t w[g*Og + o', t] * patch[n, g, t, p]``.

    The patch view is an index map of the input (``p // OW``, ``p % OW``), never a buffer:
    the microkernel's packing reads it row segment by row segment
    (``weft.lower.contraction.ColumnSplit``). The output is (N, C, H, W) as it is written."""
    n = x.shape[0] if window.batched else 1
    out_channels, group_channels, kh, kw = weight.shape
    out_h, out_w = out_size
    per_group = out_channels // groups
    pixel, tap, group, row = AxisIndex("p"), AxisIndex("t"), AxisIndex("g"), AxisIndex("o")
    ci, ky, kx = tap // (kh * kw), tap // kw % kh, tap % kw
    channel = ci if groups == 1 else group * group_channels + ci
    axes = (Axis("n", n), Axis("g", groups), Axis("o", per_group), Axis("p", out_h * out_w))
    fold = Fold((Axis("t", group_channels * kh * kw),), Combiner.SUM)
    taps = weight.read((row if groups == 1 else group * per_group + row, ci, ky, kx))
    pixels = window.read(x, AxisIndex("n"), channel, ky, kx, pixel // out_w, pixel % out_w)
    out = x.tracer.emit("conv2d", axes, Binary(BinaryOp.MUL, taps, pixels), DType.FLOAT32, fold)
    return reshape(out, (n, out_channels, out_h, out_w))
