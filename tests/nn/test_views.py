"""Views are index maps: they match NumPy and add no member of their own."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from weft import nn

SETTINGS = settings(max_examples=30, deadline=None)


def _f32(shape, seed):
    return np.asarray(np.random.default_rng(seed).standard_normal(shape), dtype=np.float32)


def _factorizations(n):
    return [(a, n // a) for a in range(1, n + 1) if n % a == 0]


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5), data=st.data())
def test_permute_then_reshape_then_slice(traced, shape, data):
    x = _f32(shape, 0)
    order = data.draw(st.permutations(range(len(shape))))
    size = x.size
    first, second = data.draw(st.sampled_from(_factorizations(size)))
    target = (first, 1, second)
    start = data.draw(st.integers(0, second - 1))
    step = data.draw(st.integers(1, 3))

    def fn(x):
        return nn.permute(x, order).reshape(target)[:, 0, start::step] * 1.0

    plan, out = traced(fn, x)
    assert len(plan.kernels) == 1  # the only member is the multiply
    np.testing.assert_array_equal(out, np.transpose(x, order).reshape(target)[:, 0, start::step])


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=1, min_dims=1, max_dims=3, max_side=4),
       data=st.data())
def test_expand_and_reshape_of_expand(traced, shapes, data):
    x = _f32(shapes.input_shapes[0], 1)
    target = shapes.result_shape
    _, out = traced(lambda x: nn.expand(x, target), x)
    np.testing.assert_array_equal(out, np.broadcast_to(x, target))
    _, out = traced(lambda x: nn.expand(x, target).reshape(-1), x)
    np.testing.assert_array_equal(out, np.broadcast_to(x, target).reshape(-1))


@SETTINGS
@given(parts=st.lists(st.integers(1, 4), min_size=1, max_size=4), axis=st.integers(0, 2), seed=st.integers(0, 99))
def test_concat_matches_numpy(traced, parts, axis, seed):
    shapes = []
    for extent in parts:
        shape = [2, 3, 2]
        shape[axis] = extent
        shapes.append(tuple(shape))
    arrays = [_f32(s, seed + n) for n, s in enumerate(shapes)]

    def fn(*xs):
        return nn.concat(list(xs), axis=axis)

    plan, out = traced(fn, *arrays)
    assert len(plan.kernels) == 1  # the output copy; the concat itself is a read
    np.testing.assert_array_equal(out, np.concatenate(arrays, axis=axis))


def test_concat_of_views_is_still_one_member(traced):
    a, b = _f32((3, 4), 2), _f32((4, 2), 3)
    plan, out = traced(lambda a, b: nn.concat([a.T, b], axis=1) + 1.0, a, b)
    assert len(plan.kernels) == 1
    np.testing.assert_allclose(out, np.concatenate([a.T, b], 1) + 1, rtol=1e-7)


def _np_window_partition(x, window):
    b, h, w, c = x.shape
    ph, pw = -h % window, -w % window
    x = np.pad(x, ((0, 0), (0, ph), (0, pw), (0, 0)))
    hp, wp = h + ph, w + pw
    x = x.reshape(b, hp // window, window, wp // window, window, c)
    return x.transpose(0, 1, 3, 2, 4, 5).reshape(-1, window, window, c)


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 2), h=st.integers(1, 7), w=st.integers(1, 7), c=st.integers(1, 3), window=st.integers(1, 4))
def test_window_partition_and_unpartition(traced, b, h, w, c, window):
    x = _f32((b, h, w, c), 4)
    _, out = traced(lambda x: nn.window_partition(x, window), x)
    np.testing.assert_array_equal(out, _np_window_partition(x, window))
    plan, out = traced(lambda x: nn.window_unpartition(nn.window_partition(x, window) * 2.0, window, h, w), x)
    assert len(plan.kernels) == 2  # multiply + output copy of the unpartition view
    np.testing.assert_array_equal(out, x * 2)


def test_getitem_forms(traced):
    x = _f32((4, 5, 6), 5)
    _, out = traced(lambda x: x[1, ..., ::-2][None, :, 1:], x)
    np.testing.assert_array_equal(out, x[1, ..., ::-2][None, :, 1:])
    _, out = traced(lambda x: nn.squeeze(nn.unsqueeze(x, 1)[:, :, 2:3], (1, 2)), x)
    np.testing.assert_array_equal(out, x[:, 2, :])


def test_transpose_and_flatten(traced):
    x = _f32((2, 3, 4), 6)
    _, out = traced(lambda x: nn.flatten(nn.transpose(x, 0, 2), 1), x)
    np.testing.assert_array_equal(out, x.transpose(2, 1, 0).reshape(4, 6))
    _, out = traced(lambda x: x.T, x)
    np.testing.assert_array_equal(out, x.T)


def test_reshape_of_view_prints_affine_index():
    import weft
    from weft.ir import format_plan

    plan = weft.trace(lambda x: nn.exp(x.reshape(2, 3, 4, 8).permute(0, 2, 1, 3)), weft.spec((2, 3, 32)))
    text = format_plan(plan)
    assert "x[i0, i2, 8*i1 + i3]" in text, text


def test_unpacking_gives_views(traced):
    x = _f32((3, 2, 4), 7)
    plan, out = traced(lambda x: (lambda q, k, v: q * k + v)(*x), x)
    assert len(plan.kernels) == 2
    np.testing.assert_allclose(out, x[0] * x[1] + x[2], rtol=1e-6)


def test_slice_function(traced):
    x = _f32((4, 6), 8)
    _, out = traced(lambda x: nn.slice(x, 1, 1, None, 2), x)
    np.testing.assert_array_equal(out, x[:, 1::2])
