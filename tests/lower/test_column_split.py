"""The patch view a convolution's contraction packs (weft.lower.contraction.ColumnSplit) and
the reshape-cancelled addresses its packing reads (weft.lower.access.flat_address)."""

from __future__ import annotations

import itertools

import pytest
from plans.build import index_value

import weft
import weft.nn as nn
from weft.ir import AxisIndex, IndexConst, Load
from weft.lower.access import flat_address
from weft.lower.contraction import SPLIT_QUOTIENT, SPLIT_REMAINDER, column_split


@pytest.mark.parametrize("shape", [(4, 3, 3), (2, 5, 7), (6, 1, 4)])
def test_flat_address_cancels_a_row_major_reshape(shape):
    """A weight (O, C, KH, KW) read by flat tap t is at o * C*KH*KW + t, every division gone."""
    c, kh, kw = shape
    t, o = AxisIndex("t"), AxisIndex("o")
    index = (o, t // (kh * kw), t // kw % kh, t % kw)
    strides = (c * kh * kw, kh * kw, kw, 1)
    address = flat_address(index, strides)
    assert address is not None and "FloorDiv" not in repr(address) and "Mod" not in repr(address)
    for o_value, t_value in itertools.product(range(3), range(c * kh * kw)):
        env = {"o": o_value, "t": t_value}
        assert index_value(address, env) == sum(index_value(i, env) * s for i, s in zip(index, strides, strict=True))


def test_flat_address_keeps_what_does_not_cancel_and_refuses_what_it_cannot_read():
    t, q, r = AxisIndex("t"), AxisIndex("q"), AxisIndex("r")
    index = (t // 9, q + t // 3 % 3 - 1, r + t % 3 - 1)  # a padded 3x3 patch: halo offsets stay
    strides = (3136, 56, 1)
    address = flat_address(index, strides)
    assert address is not None
    for t_value, q_value, r_value in itertools.product(range(27), range(3), range(4)):
        env = {"t": t_value, "q": q_value, "r": r_value}
        assert index_value(address, env) == sum(index_value(i, env) * s for i, s in zip(index, strides, strict=True))
    assert flat_address((AxisIndex("i"), AxisIndex("j")), (8, 1)) is None  # nothing to cancel
    assert flat_address(((t + IndexConst(1)) // 3, t % 3), (3, 1)) is None  # a division of a sum


def _patch_factor(x_shape, w_shape, **kwargs):
    plan = weft.trace(lambda x, w: nn.conv2d(x, w, **kwargs), weft.spec(x_shape), weft.spec(w_shape))
    return plan.kernels[0].body.right


def test_a_convolution_reads_its_input_as_a_column_split():
    split = column_split(_patch_factor((1, 4, 9, 11), (6, 4, 3, 3), padding=1), "p")
    assert split is not None and split.width == 11 and split.load.padding == 0.0
    names = {name for index in split.load.index for name in repr(index).split("'") if name.startswith("wf.")}
    assert names == {SPLIT_QUOTIENT, SPLIT_REMAINDER}
    assert column_split(_patch_factor((1, 4, 9, 11), (6, 4, 1, 1), stride=2), "p").width == 6


@pytest.mark.parametrize("index", [
    (AxisIndex("p"),),                                  # the column itself, not split
    (AxisIndex("p") // 4, AxisIndex("p") % 5),          # two widths
    (AxisIndex("p") % 4 // 2,),                         # a division of the remainder: not affine in it
    (AxisIndex("p") // 4,),                             # the quotient only: the remainder never moves
])
def test_other_reads_of_the_column_are_not_split(index):
    assert column_split(Load("x", index), "p") is None
