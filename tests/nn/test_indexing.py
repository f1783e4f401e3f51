"""The index simplifier preserves values; reshape grouping pairs equal products."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from plans.build import index_value

from weft.ir import AxisIndex, IndexAdd, IndexConst, IndexFloorDiv, IndexMod, IndexMul
from weft.ir.indexing import reshape_groups, reshape_index, simplify_index

EXTENTS = {"a": 3, "b": 4, "c": 5}



leaves = st.one_of(st.sampled_from([AxisIndex(n) for n in EXTENTS]), st.integers(-3, 6).map(IndexConst))
indices = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: IndexAdd(*p)),
        st.tuples(inner, st.integers(-3, 5)).map(lambda p: IndexMul(*p)),
        st.tuples(inner, st.integers(1, 7)).map(lambda p: IndexFloorDiv(*p)),
        st.tuples(inner, st.integers(1, 7)).map(lambda p: IndexMod(*p)),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(index=indices)
def test_simplify_preserves_every_value(index):
    simple = simplify_index(index, EXTENTS)
    for values in itertools.product(*(range(n) for n in EXTENTS.values())):
        point = dict(zip(EXTENTS, values, strict=True))
        assert index_value(simple, point) == index_value(index, point), (index, simple)


def test_split_then_merge_cancels():
    h, d = AxisIndex("h"), AxisIndex("d")
    flat = h * 4 + d
    assert simplify_index(flat // 4, {"h": 3, "d": 4}) == h
    assert simplify_index(flat % 4, {"h": 3, "d": 4}) == d


@settings(max_examples=100, deadline=None)
@given(source=st.lists(st.integers(1, 4), min_size=0, max_size=4), data=st.data())
def test_reshape_index_is_row_major(source, data):
    size = 1
    for n in source:
        size *= n
    factors = [n for n in range(1, size + 1) if size % n == 0]
    first = data.draw(st.sampled_from(factors))
    target = (first, 1, size // first)
    groups = reshape_groups(tuple(source), target)
    for src, dst in groups:
        product_src = product_dst = 1
        for d in src:
            product_src *= source[d]
        for d in dst:
            product_dst *= target[d]
        assert product_src == product_dst
    names = tuple(AxisIndex(f"t{n}") for n in range(len(target)))
    mapped = reshape_index(tuple(source), target, names)
    for values in itertools.product(*(range(n) for n in target)):
        point = {f"t{n}": v for n, v in enumerate(values)}
        flat = (values[0] * 1 + values[1]) * target[2] + values[2]
        expected = []
        for extent in reversed(source):
            expected.append(flat % extent)
            flat //= extent
        assert [index_value(i, point) for i in mapped] == list(reversed(expected))
