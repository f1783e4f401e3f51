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
    ("aten.var_mean.correction", lambda a: torch.var_mean(a, dim=1) + torch.var_mean(a, dim=(0, 2), keepdim=True,
                                                                                      correction=0),
     lambda: (rand(3, 4, 5),)),
    ("aten.var.correction", lambda a: a.var(-1) + a.var(), lambda: (rand(3, 4, 5),)),
    ("aten.constant_pad_nd.default", lambda a: F.pad(a * 2, (1, 2, 0, 3), value=0.5), lambda: (rand(2, 3, 4),)),
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
