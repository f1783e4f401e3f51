"""Every lowered ATen op against PyTorch eager on random inputs (float64 eager as the reference;
integer and bool results exact). Plans run on the NumPy oracle, so no C compiler is needed."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from aten_harness import float64_eager, run_lowered  # noqa: E402

from weft.testing import assert_inference_close  # noqa: E402

g = torch.Generator().manual_seed(0)


def rand(*shape):
    return torch.randn(*shape, generator=g)


def ints(high, *shape):
    return torch.randint(0, high, shape, generator=g)


NAN, INF = float("nan"), float("inf")
# edge values for the float functions: tiny, near -1, below -1, large, infinities, NaN, signed zeros
EDGES = torch.tensor([[1e-8, -1e-6, 1e-30, -1e-38, 3e-4, -0.3, 0.5, 1.0, -0.5, -0.9999],
                      [-1.0, -1.5, -3.0, INF, -INF, NAN, 0.0, -0.0, 2.0, 10.0],
                      [1e5, 3e7, 1e20, 3e38, 88.0, 88.7, 50.0, -17.0, -20.0, -104.0]])
# rounding edges: ties both ways, signed zeros, 2^22..2^24 (halves, then integers only), inf, NaN
ROUNDING = torch.tensor([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 0.0, -0.0],
                         [0.3, -0.3, 0.7, -0.7, 1.0, -1.0, 4194304.5, -4194304.5, 8388607.5, -8388607.5],
                         [8388608.0, -8388609.0, 16777216.0, 1e30, -1e30, INF, -INF, NAN, 123.456, -987.654]])


CASES = [
    ("aten.addmm.default", lambda x, w, b: F.linear(x, w, b), lambda: (rand(5, 8), rand(6, 8), rand(6))),
    ("aten.mm.default", lambda a, b: a @ b, lambda: (rand(5, 8), rand(8, 3))),
    ("aten.bmm.default", lambda a, b: a @ b, lambda: (rand(2, 5, 8), rand(2, 8, 3))),
    ("aten.add.Tensor", lambda a, b: a + b * 2 + 1.5, lambda: (rand(4, 5), rand(5))),
    ("aten.sub.Tensor", lambda a, b: a - b - 3, lambda: (rand(4, 5), rand(4, 1))),
    ("aten.mul.Tensor", lambda a, b: a * b * 0.25, lambda: (rand(4, 5), rand(4, 5))),
    ("aten.div.Tensor", lambda a, b: a / (b.abs() + 1) / 3, lambda: (rand(4, 5), rand(4, 5))),
    ("aten.div.Tensor", lambda a: a / 2, lambda: (ints(9, 4, 5),)),  # int / int promotes to float
    ("aten.neg.default", lambda a: -a, lambda: (rand(3, 4),)),
    ("aten.pow.Tensor_Scalar", lambda a: a ** 2 + a ** 3 + (a.abs() + 1) ** 0.5 + (a.abs() + 1) ** -0.5,
     lambda: (rand(3, 4),)),
    ("aten.rsqrt.default", lambda a: torch.rsqrt(a.abs() + 0.1), lambda: (rand(3, 4),)),
    ("aten.sqrt.default", lambda a: torch.sqrt(a.abs()), lambda: (rand(3, 4),)),
    ("aten.exp.default", torch.exp, lambda: (rand(3, 4),)),
    ("aten.log.default", lambda a: torch.log(a.abs() + 0.5), lambda: (rand(3, 4),)),
    ("aten.tanh.default", torch.tanh, lambda: (rand(3, 4),)),
    ("aten.sigmoid.default", torch.sigmoid, lambda: (rand(3, 4),)),
    ("aten.gelu.default", F.gelu, lambda: (rand(3, 4),)),
    ("aten.gelu.default", lambda a: F.gelu(a, approximate="tanh"), lambda: (rand(3, 4),)),
    ("aten.silu.default", F.silu, lambda: (rand(3, 4),)),
    ("aten.relu.default", F.relu, lambda: (rand(3, 4),)),
    ("aten.mean.dim", lambda a: a.mean(-1, keepdim=True) + a.mean((0, 2)).sum(), lambda: (rand(3, 4, 5),)),
    ("aten.sum.dim_IntList", lambda a: a.sum(1), lambda: (rand(3, 4, 5),)),
    ("aten.amax.default", lambda a: a.amax(-1), lambda: (rand(3, 4, 5),)),
    ("aten.max.dim", lambda a: torch.max(a, 1), lambda: (rand(3, 4, 5),)),  # values and indices
    ("aten.max.dim", lambda a: torch.max(a, -1, keepdim=True), lambda: (ints(3, 4, 5),)),  # ties: the first index
    ("aten.min.dim", lambda a: torch.min(a, 0), lambda: (rand(3, 4, 5),)),
    ("aten.max.dim", lambda a: torch.max(a, 1), lambda: (torch.rand(3, 4, generator=g) > 0.5,)),  # bool
    ("aten.argmax.default", lambda a: a.argmax(-1) + a.argmax(0, keepdim=True).sum(), lambda: (rand(3, 4),)),
    ("aten.argmax.default", lambda a: a.argmax(), lambda: (rand(3, 4, 5),)),  # flattened
    ("aten.argmin.default", lambda a: a.argmin(1), lambda: (ints(3, 4, 5),)),
    ("aten.argmax.default", lambda a: a.argmax(-1),  # NaN is the maximum: the first NaN's index, as ATen
     lambda: (torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [float("-inf")] * 4]),)),
    ("aten.max.default", lambda a: a.max() + a.min(), lambda: (rand(3, 4),)),
    ("aten.max_pool2d_with_indices.default", lambda a: F.max_pool2d(a, 3, 2, 1, return_indices=True),
     lambda: (rand(2, 3, 7, 8),)),  # values and the flat indices a training backward reads
    ("aten.max_pool2d_with_indices.default", lambda a: F.max_pool2d(a, 2, 1, dilation=2, return_indices=True),
     lambda: (torch.tensor([[[[1.0, float("nan"), 2.0, 2.0], [2.0, 2.0, -1.0, float("-inf")],
                              [0.0, 2.0, float("-inf"), float("-inf")]]]]),)),  # ties, NaN, -inf: ATen's index
    ("aten.max_pool2d_with_indices.default", lambda a: F.max_pool2d(a, 2), lambda: (rand(3, 6, 5),)),  # unbatched
    ("aten.avg_pool2d.default", lambda a: F.avg_pool2d(a, 3, 2, 1) + F.avg_pool2d(a, 3, 2, 1, count_include_pad=False),
     lambda: (rand(2, 3, 7, 8),)),
    ("aten.avg_pool2d.default", lambda a: F.avg_pool2d(a, 2), lambda: (rand(3, 6, 5),)),  # unbatched
    ("aten.leaky_relu.default", lambda a: F.leaky_relu(a) + F.leaky_relu(a, 0.2), lambda: (rand(3, 4),)),
    ("aten._softmax.default", lambda a: torch.softmax(a, -1), lambda: (rand(3, 4, 5),)),
    ("aten._log_softmax.default", lambda a: torch.log_softmax(a, 1), lambda: (rand(3, 4, 5),)),
    ("aten.native_layer_norm.default", lambda a, w, b: F.layer_norm(a, (5,), w, b, 1e-5),
     lambda: (rand(3, 4, 5), rand(5), rand(5))),
    ("aten.native_layer_norm.default", lambda a: torch.ops.aten.native_layer_norm(a, [5], None, None, 1e-5),
     lambda: (rand(3, 4, 5),)),  # mean and rstd outputs too
    ("aten.embedding.default", lambda ids, w: F.embedding(ids, w), lambda: (ints(10, 3, 4), rand(10, 6))),
    ("aten.index.Tensor", lambda x, i: x[:, i], lambda: (rand(4, 7, 3), torch.tensor([[0, -1], [6, 2]]))),
    ("aten.index.Tensor", lambda x, i, j: x[i, j], lambda: (rand(4, 7), ints(4, 3, 1), ints(7, 5))),
    ("aten.index.Tensor", lambda x, i, j: x[i, :, j], lambda: (rand(4, 3, 7), ints(4, 5), ints(7, 5))),
    ("aten.gather.default", lambda x, i: torch.gather(x, 1, i), lambda: (rand(3, 6, 2), ints(6, 3, 4, 2))),
    ("aten.gather.default", lambda x, i: torch.gather(x, 0, i), lambda: (ints(50, 5, 4), ints(5, 2, 4))),
    ("aten.select.int", lambda a: a[:, 2] + a[-1], lambda: (rand(4, 4),)),
    ("aten.slice.Tensor", lambda a: a[1:3, ::2] * 2, lambda: (rand(4, 6),)),
    ("aten.view.default", lambda a: a.view(2, 12) * 2, lambda: (rand(4, 6),)),
    ("aten.permute.default", lambda a: a.permute(2, 0, 1) * 2, lambda: (rand(2, 3, 4),)),
    ("aten.permute.default", lambda a: a.transpose(0, 2) * 2, lambda: (rand(2, 3, 4),)),
    ("aten.expand.default", lambda a: a.expand(3, 4, 5) * 2, lambda: (rand(4, 1),)),
    ("aten.unsqueeze.default", lambda a: a.unsqueeze(1) * 2, lambda: (rand(4, 5),)),
    ("aten.squeeze.dims", lambda a: a.squeeze(1) * 2, lambda: (rand(4, 1, 5),)),
    ("aten.clone.default", lambda a: a.t().contiguous() * 2, lambda: (rand(4, 5),)),
    ("aten.cat.default", lambda a, b: torch.cat([a, b * 2, a], 1), lambda: (rand(2, 3), rand(2, 4))),
    ("aten.split_with_sizes.default", lambda a: tuple(p * 2 for p in a.split([2, 3], 1)), lambda: (rand(3, 5),)),
    ("aten._to_copy.default", lambda a: a.to(torch.int64) * 3, lambda: (rand(3, 5) * 10,)),
    ("aten._to_copy.default", lambda a: a.float() * 3, lambda: (ints(9, 3, 5),)),
    ("prims.convert_element_type.default", lambda a: torch.ops.prims.convert_element_type(a, torch.float32) * 2,
     lambda: (ints(9, 3, 5),)),
    ("aten.arange.start_step", lambda a: a + torch.arange(2, 12, 2), lambda: (rand(3, 5),)),
    ("aten.arange.start_step", lambda a: a * torch.arange(5, dtype=torch.float32), lambda: (rand(3, 5),)),
    ("aten.full.default", lambda a: a + torch.full((3, 5), 2.5), lambda: (rand(3, 5),)),
    ("aten.full_like.default", lambda a: a * torch.full_like(a, 3.0), lambda: (rand(3, 5),)),
    ("aten.lift_fresh_copy.default", lambda a: torch.where(a > 0, a, torch.tensor(-1.0)), lambda: (rand(3, 5),)),
    ("aten.scalar_tensor.default", lambda a: torch.where(a > 0, a, -1.0), lambda: (rand(3, 5),)),
    ("aten.where.self", lambda c, a, b: torch.where(c > 0, a, b), lambda: (rand(3, 5), rand(3, 5), rand(5))),
    ("aten.eq.Tensor", lambda a, b: a == b, lambda: (ints(3, 4, 5), ints(3, 4, 5))),
    ("aten.ne.Scalar", lambda a: a != 1, lambda: (ints(3, 4, 5),)),
    ("aten.lt.Tensor", lambda a, b: a < b, lambda: (rand(4, 5), rand(5))),
    ("aten.le.Scalar", lambda a: a <= 0.5, lambda: (ints(3, 4, 5),)),  # int vs float scalar
    ("aten.gt.Scalar", lambda a: a > 0.1, lambda: (rand(4, 5),)),
    ("aten.ge.Tensor", lambda a, b: a >= b, lambda: (ints(3, 4, 5), rand(4, 5))),  # int vs float tensor
    ("aten.logical_and.default", lambda a, b: torch.logical_and(a > 0, b), lambda: (rand(4, 5), ints(2, 4, 5))),
    ("aten.logical_or.default", lambda a, b: torch.logical_or(a > 0, b > 0), lambda: (rand(4, 5), rand(4, 5))),
    ("aten.logical_not.default", lambda a: torch.logical_not(a), lambda: (ints(3, 4, 5),)),
    ("aten.bitwise_and.Tensor", lambda a, b: (a > 0) & (b > 0), lambda: (rand(4, 5), rand(4, 5))),
    ("aten.any.dim", lambda a: (a > 1).any(-1), lambda: (rand(4, 5),)),
    ("aten.masked_fill.Scalar", lambda a: a.masked_fill(a < 0, -1e9), lambda: (rand(4, 5),)),
    ("aten.convolution.default", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
     lambda: (rand(1, 3, 8, 8), rand(4, 3, 3, 3), rand(4))),
    ("aten.convolution.default", lambda x, w: F.conv2d(x, w, stride=4), lambda: (rand(2, 3, 8, 8), rand(5, 3, 4, 4))),
    ("aten.convolution.default", lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2),  # grouped
     lambda: (rand(2, 4, 7, 6), rand(6, 2, 3, 3), rand(6))),
    ("aten.convolution.default", lambda x, w: F.conv2d(x, w, padding=2, dilation=2, groups=3),  # depthwise
     lambda: (rand(1, 3, 9, 9), rand(3, 1, 3, 3))),
    ("aten.convolution.default", lambda x, w, b: F.conv2d(x, w, b, padding="same"),  # unbatched, "same"
     lambda: (rand(3, 6, 5), rand(4, 3, 4, 3), rand(4))),
    ("aten.convolution.default", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
     lambda: (rand(2, 3, 11), rand(4, 3, 3), rand(4))),
    ("aten.convolution.default", lambda x, w: F.conv1d(x, w, padding=2, groups=4),  # depthwise 1-D, unbatched
     lambda: (rand(4, 9), rand(4, 1, 5))),
    ("aten.index_put.default", lambda c, v, p: c.index_copy(2, p, v),  # a static KV cache write
     lambda: (rand(1, 2, 9, 4), rand(1, 2, 3, 4), torch.tensor([4, 0, 8]))),
    ("aten.index_put.default", lambda c, v, p: torch.index_put(c, (p,), v),  # repeated and negative indices
     lambda: (rand(6, 3), rand(4, 3), torch.tensor([1, -1, 1, 2]))),
    ("aten.index_put.default", lambda c, v, p: c.index_copy(1, p, v),  # inner dim, values broadcast
     lambda: (rand(3, 5), rand(1, 2).expand(3, 2), torch.tensor([0, 3]))),
    ("aten.sin.default", torch.sin, lambda: (rand(3, 40) * 40,)),
    ("aten.cos.default", torch.cos, lambda: (rand(3, 40) * 3e4,)),  # rotary-table magnitudes
    ("aten.abs.default", torch.abs, lambda: (rand(3, 4),)),
    ("aten.maximum.default", torch.maximum, lambda: (rand(3, 4), rand(4))),
    ("aten.erf.default", torch.erf, lambda: (rand(3, 4),)),
    ("aten.reciprocal.default", lambda a: torch.reciprocal(a.abs() + 1), lambda: (rand(3, 4),)),
    ("aten.rsub.Scalar", lambda a: 1 - a, lambda: (rand(3, 4),)),
    ("aten.remainder.Scalar", lambda a: a % 3, lambda: (torch.randint(-9, 9, (4, 5), generator=g),)),
    ("aten.remainder.Tensor", lambda a, b: a % b, lambda: (torch.randint(-9, 9, (4, 5), generator=g),
                                                           torch.tensor([3, -3, 2, -2, 7]))),
    ("aten.remainder.Tensor", lambda a, b: a % b, lambda: (rand(4, 5) * 5, rand(5).abs() + 0.5)),
    ("aten.div.Tensor_mode", lambda a: a // 3, lambda: (torch.randint(-9, 9, (4, 5), generator=g),)),
    ("aten.div.Tensor_mode", lambda a: torch.div(a, -2, rounding_mode="trunc"),
     lambda: (torch.randint(-9, 9, (4, 5), generator=g),)),
    ("aten.clamp.default", lambda a: torch.clamp(a, -0.5, 0.5) + torch.clamp(a, min=0.2) + torch.clamp(a, max=-0.1),
     lambda: (rand(3, 4),)),
    ("aten.clamp.default", lambda a: torch.clamp(a, -0.5, 0.5),  # NaN stays NaN, as in ATen
     lambda: (torch.tensor([[float("nan"), 1.0, -2.0, 0.3], [float("-inf"), float("inf"), 0.0, -0.5]]),)),
    ("aten.clamp.default", lambda a: torch.clamp(a, 2, 6), lambda: (ints(9, 4, 5),)),  # int64 stays int64
    ("aten.clamp.default", lambda a: torch.clamp(a, 0.5, 6), lambda: (ints(9, 4, 5),)),  # a float bound: float
    ("aten.clamp.default", lambda a: torch.clamp(a, 1.0, -1.0), lambda: (rand(3, 4),)),  # lo > hi gives hi
    ("aten.clamp.Tensor", lambda a, lo, hi: torch.clamp(a, lo, hi), lambda: (rand(3, 4), rand(4) - 1, rand(3, 1) + 1)),
    ("aten.hardtanh.default", lambda a: F.hardtanh(a * 2) + F.hardtanh(a, -0.25, 0.75), lambda: (rand(3, 4),)),
    ("aten.native_group_norm.default", lambda a, w, b: F.group_norm(a, 2, w, b),
     lambda: (rand(2, 4, 3, 5), rand(4), rand(4))),
    ("aten.native_group_norm.default", lambda a: torch.ops.aten.native_group_norm(a, None, None, 2, 6, 7, 3, 1e-5),
     lambda: (rand(2, 6, 7),)),  # mean and rstd outputs too
    # batch norm in train(): output, save_mean, save_rstd, new running_mean, new running_var
    ("aten._native_batch_norm_legit_functional.default",
     lambda a, w, b, m, v: torch.ops.aten._native_batch_norm_legit_functional(a, w, b, m, v, True, 0.1, 1e-5),
     lambda: (rand(4, 3, 5, 6) * 2 + 1, rand(3), rand(3), rand(3), rand(3).abs() + 0.5)),
    ("aten._native_batch_norm_legit_functional.default",  # BatchNorm1d of (N, C), no affine, momentum 0.3
     lambda a, m, v: torch.ops.aten._native_batch_norm_legit_functional(a, None, None, m, v, True, 0.3, 1e-3),
     lambda: (rand(7, 5) - 2, rand(5), rand(5).abs() + 0.5)),
    ("aten._native_batch_norm_legit_functional.default",  # (N, C, L) and momentum 1 / num_batches_tracked
     lambda a, w, m, v: torch.ops.aten._native_batch_norm_legit_functional(a, w, None, m, v, True, 1 / 3, 1e-5),
     lambda: (rand(2, 4, 9), rand(4), rand(4), rand(4).abs() + 0.5)),
    ("aten._native_batch_norm_legit.no_stats",  # track_running_stats=False: (output, save_mean, save_rstd)
     lambda a, w, b: torch.ops.aten._native_batch_norm_legit(a, w, b, True, 0.1, 1e-5),
     lambda: (rand(3, 4, 2, 5), rand(4), rand(4))),
    # (InstanceNorm reaches no_stats only through aot_autograd's functional graph: tests/torch/test_backend.py)
    ("aten.copy.default", lambda a, b: torch.ops.aten.copy(a, b) * 2, lambda: (rand(3, 4), rand(4))),
    ("aten.copy.default", lambda a, b: torch.ops.aten.copy(a, b), lambda: (ints(9, 3, 4), rand(3, 4) * 5)),
    ("aten.cumsum.default", lambda a: torch.cumsum(a, 1) + torch.cumsum(a, -1).sum(), lambda: (rand(3, 7, 5),)),
    ("aten.cumsum.default", lambda a: torch.cumsum(a, 0), lambda: (rand(1024, 2),)),  # the longest axis taken
    ("aten.cumsum.default", lambda a: torch.cumsum(a, 1),  # inf and NaN do not leak to earlier positions
     lambda: (torch.tensor([[1.0, INF, 2.0, -INF, 3.0], [-0.0, -0.0, NAN, 1.0, 2.0]]),)),
    ("aten.cumsum.default", lambda a: torch.cumsum(a, 1), lambda: (ints(9, 3, 6),)),  # int64
    ("aten.cumsum.default", lambda a: torch.cumsum(a > 0, 0), lambda: (rand(6, 3),)),  # bool counts in int64
    ("aten.cumsum.default", lambda a: torch.cumsum(a.int(), 0, dtype=torch.float32), lambda: (ints(9, 6),)),
    ("aten.cumsum.default", lambda a: torch.cumsum(a, 0) * 2, lambda: (torch.tensor(3.5),)),  # 0-d
    ("aten.var_mean.correction", lambda a: torch.var_mean(a, dim=1) + torch.var_mean(a, dim=(0, 2), keepdim=True,
                                                                                      correction=0),
     lambda: (rand(3, 4, 5),)),
    ("aten.var.correction", lambda a: a.var(-1) + a.var(), lambda: (rand(3, 4, 5),)),
    ("aten.constant_pad_nd.default", lambda a: F.pad(a * 2, (1, 2, 0, 3), value=0.5), lambda: (rand(2, 3, 4),)),
    ("aten.log1p.default", torch.log1p, lambda: (rand(3, 4).abs() * 3 - 0.9,)),
    ("aten.log1p.default", torch.log1p, lambda: (EDGES,)),  # tiny, -1, below -1, inf, NaN, signed zeros
    ("aten.log1p.default", lambda a: F.softplus(a) + F.softplus(a, beta=2.0) + F.mish(a), lambda: (rand(3, 4) * 8,)),
    ("aten.log1p.default", lambda a, t: F.binary_cross_entropy_with_logits(a, t), lambda: (rand(3, 4) * 4, rand(3, 4).sigmoid())),
    ("aten.log1p.default", torch.log1p, lambda: (ints(9, 3, 4),)),  # an integer input: a float result
    ("aten.expm1.default", torch.expm1, lambda: (rand(3, 4) * 3,)),
    ("aten.expm1.default", torch.expm1, lambda: (EDGES,)),
    ("aten.expm1.default", lambda a: F.celu(a, 0.5), lambda: (rand(3, 4) * 3,)),
    ("aten.elu.default", lambda a: F.elu(a) + F.elu(a, 0.3) + F.selu(a), lambda: (rand(3, 4) * 3,)),
    ("aten.elu.default", F.elu, lambda: (EDGES,)),
    ("aten.index_select.default", lambda a, i: torch.index_select(a, 1, i) * 2, lambda: (rand(3, 5, 2), torch.tensor([4, 0, 0, 2]))),
    ("aten.index_select.default", lambda a, i: torch.index_select(a, 0, i), lambda: (ints(50, 4, 3), torch.tensor(2))),
    ("aten.index_select.default", lambda a: torch.roll(a, 2, 1) + torch.roll(a, (-1, 7), (0, 1)),  # roll: fmod, gather
     lambda: (rand(3, 5),)),
    ("aten.index_select.default", lambda a: torch.roll(a, -3) * 2, lambda: (rand(3, 5),)),  # flattened
    ("aten.fmod.Scalar", lambda a: torch.fmod(a, 1.5) + torch.fmod(a, -2), lambda: (rand(3, 4) * 5,)),
    ("aten.fmod.Scalar", lambda a: torch.fmod(a, 3), lambda: (torch.randint(-9, 9, (4, 5), generator=g),)),
    ("aten.fmod.Tensor", lambda a, b: torch.fmod(a, b), lambda: (rand(3, 4) * 5, rand(4) + 0.1)),
    ("aten.fmod.Tensor", lambda a, b: torch.fmod(a, b), lambda: (torch.randint(-9, 9, (4, 5), generator=g),
                                                                 torch.tensor([3, -3, 2, -2, 7]))),
    ("aten.repeat.default", lambda a: a.repeat(2, 1, 3) * 2, lambda: (rand(4, 5),)),
    ("aten.repeat.default", lambda a: a.repeat(3, 2), lambda: (ints(9, 1, 3),)),
    ("aten.flip.default", lambda a: torch.flip(a, (0, -1)) * 2, lambda: (rand(3, 4, 5),)),
    ("aten.flip.default", lambda a: torch.flip(a, (1,)), lambda: (ints(9, 3, 4),)),
    ("aten.sign.default", torch.sign, lambda: (EDGES,)),  # sign(NaN) = 0, as ATen's
    ("aten.sign.default", lambda a: torch.sign(a - 4), lambda: (ints(9, 3, 4),)),
    ("aten.round.default", torch.round, lambda: (ROUNDING,)),
    ("aten.round.default", lambda a: torch.round(a * 4), lambda: (rand(3, 40),)),
    ("aten.floor.default", torch.floor, lambda: (ROUNDING,)),
    ("aten.ceil.default", torch.ceil, lambda: (ROUNDING,)),
    ("aten.trunc.default", torch.trunc, lambda: (ROUNDING,)),
    ("aten.floor.default", lambda a: torch.floor(a) * 2, lambda: (ints(9, 3, 4),)),  # an integer is its own floor
    ("aten.isnan.default", torch.isnan, lambda: (EDGES,)),
    ("aten.isnan.default", torch.isnan, lambda: (ints(9, 3, 4),)),
    ("aten.pow.Tensor_Scalar", lambda a: (a.abs() + 0.1) ** 1.7 + a ** -2 + a ** 11, lambda: (rand(3, 4) + 2,)),
    ("aten.pow.Tensor_Scalar", lambda a: a ** 11, lambda: (ints(4, 3, 4),)),
    ("aten.pow.Tensor_Tensor", lambda a, b: torch.pow(a.abs() + 0.5, b) + torch.pow(-2.0 * a.abs() - 1, b.round()),
     lambda: (rand(3, 4), rand(3, 4) * 2)),
    ("aten.pow.Scalar", lambda a: torch.pow(2.0, a) + torch.pow(3, a), lambda: (rand(3, 4) * 4,)),
    ("aten.bitwise_xor.Tensor", lambda a, b: (a > 0) ^ (b > 0), lambda: (rand(4, 5), rand(5))),
    ("aten.addmm.default", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0) + torch.addmm(c, a, b, alpha=-1),
     lambda: (rand(5, 3), rand(5, 8), rand(8, 3))),
    ("aten.addmm.default", lambda c, a, b: torch.addmm(c, a, b, beta=0),  # beta 0: the bias is not read, NaN too
     lambda: (torch.full((5, 3), float("nan")), rand(5, 8), rand(8, 3))),
]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c[0]}-{n}" for n, c in enumerate(CASES)])
def test_lowered_op_matches_eager(case):
    op, fn, make = CASES[case]
    inputs = make()
    ops, got = run_lowered(fn, *inputs)
    if op not in ops:  # the core decompositions rewrite it; lower the op itself
        ops, got = run_lowered(fn, *inputs, decompose=False)
    assert op in ops, f"the graph does not exercise {op}: {sorted(ops)}"
    expected = float64_eager(fn, *inputs)
    assert len(got) == len(expected)
    for actual, want in zip(got, expected, strict=True):
        if want.dtype.kind == "f":
            assert actual.dtype == np.float32
            assert_inference_close(actual, want, context=op)
        else:
            assert actual.dtype == want.dtype, (actual.dtype, want.dtype)
            np.testing.assert_array_equal(actual, want)


def _sweep():
    """Edge values and a log-spaced sweep of both signs, 1e-30..1e4: where log(1 + x) and
    exp(x) - 1 lose every digit (|x| < 1e-4) and where they are fine."""
    magnitudes = np.logspace(-30, 4, 3000, dtype=np.float64)
    values = np.concatenate([EDGES.numpy().ravel(), [89.0, 100.0, -88.0, 1e-45, -1e-45, 0.99999994, -0.99999994]],
                            dtype=np.float32)
    return torch.tensor(np.concatenate([values, magnitudes.astype(np.float32), -magnitudes.astype(np.float32)]))


@pytest.mark.parametrize("name", ["log1p", "expm1"])
def test_log1p_and_expm1_are_accurate_for_tiny_and_large_arguments(name):
    """Kahan's compositions (weft/torch/composed.py) within 4 float32 ulp of float64 ATen wherever
    the result is a normal float32; elsewhere (overflow, -1 and below, inf, NaN, denormals) as
    float32 ATen: the same non-finite values and signed zeros, denormal results within 1e-45."""
    fn = getattr(torch, name)
    x = _sweep()
    ops, (got,) = run_lowered(fn, x)
    assert f"aten.{name}.default" in ops
    want64 = fn(x.double()).numpy()
    want32 = fn(x).numpy()
    normal = np.isfinite(want64) & (np.abs(want64) >= 2.0**-126) & (np.abs(want64) < 3.4e38)
    error = np.abs(got[normal] - want64[normal]) / np.abs(want64[normal]) / 2.0**-24
    assert error.max() <= 4, (error.max(), x.numpy()[normal][error.argmax()])
    rest = ~normal
    same = (np.isnan(got[rest]) & np.isnan(want32[rest])) | (got[rest] == want32[rest])
    with np.errstate(invalid="ignore"):
        tiny = np.isfinite(want32[rest]) & (np.abs(got[rest] - want32[rest]) <= 1.5e-45)
    assert np.all(same | tiny), x.numpy()[rest][~(same | tiny)]
    zeros = x.numpy() == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(x.numpy()[zeros]))  # f(-0) = -0


@pytest.mark.parametrize("name", ["round", "floor", "ceil", "trunc"])
def test_rounding_is_exact_with_atens_signed_zeros(name):
    """Rounded values are exact: byte-equal to float32 ATen (ties to even, ``round(-0.4) = -0``,
    2^22..2^24, infinities; NaN where NaN)."""
    fn = getattr(torch, name)
    x = torch.cat([ROUNDING.ravel(), rand(400) * 1e3, rand(400) * 3, rand(100) * 3e7])
    _, (got,) = run_lowered(fn, x)
    want = fn(x).numpy()
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("fn, make, op, reason", [
    (lambda a, b: a ^ b, lambda: (ints(9, 3, 4), ints(9, 3, 4)), "aten.bitwise_xor.Tensor", "integers"),
    (lambda a, b: torch.pow(a, b), lambda: (ints(9, 3, 4), ints(3, 3, 4)), "aten.pow.Tensor_Tensor", "float32 only"),
    (lambda a: a ** 65, lambda: (ints(2, 3, 4),), "aten.pow.Tensor_Scalar", "integers: 0..64"),
    (lambda a: torch.round(a, decimals=2), lambda: (rand(3, 4),), "aten.round.decimals", "no lowering"),
    (lambda a: torch.cumsum(a, 1), lambda: (rand(2, 1025),), "aten.cumsum.default", "1025 > 1024 positions"),
    (lambda a, w, b, m, v: torch.ops.aten._native_batch_norm_legit_functional(a, w, b, m, v, False, 0.1, 1e-5),
     lambda: (rand(2, 3, 4), rand(3), rand(3), rand(3), rand(3).abs() + 0.5),
     "aten._native_batch_norm_legit_functional.default", "training=False"),
])
def test_unsupported_variants_stay_reported_fallbacks(fn, make, op, reason):
    """Variants these lowerings refuse: the partitioner leaves them to eager with the reason."""
    from aten_harness import aten_graph

    from weft.torch.partition import check_node, node_values, op_name

    inputs = make()
    gm = aten_graph(fn, *inputs)
    values = node_values(gm, inputs)
    (node,) = [n for n in gm.graph.nodes if n.op == "call_function" and op_name(n) == op]
    verdict = check_node(node, values)
    assert not verdict.supported and reason in verdict.reason, verdict.reason
