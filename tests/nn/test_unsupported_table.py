"""docs/unsupported.md's table of refusals matches what refuses, both ways.

``test_opinfo.py`` checks that every refusal PyTorch's samples meet is in the table. This
file checks the converse: each row of the table is reached by a small program that
raises it (a ``WeftError`` from ``weft.nn``, or the OpInfo mapping's ``Unmapped`` for a
PyTorch keyword ``weft.nn`` has no parameter for), so a row whose refusal was lifted or
reworded fails here instead of lingering as a stale promise; and every row has such a
program (a new row without one fails ``test_every_row_has_a_program``).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="the Unmapped rows are the OpInfo mapping's, which imports torch")

from opinfo_map import MAPPING, Unmapped  # noqa: E402
from test_opinfo import UNSUPPORTED_DOC, documented_refusals  # noqa: E402

import weft  # noqa: E402
from weft import nn  # noqa: E402
from weft.errors import WeftError  # noqa: E402


def traced(fn, *specs):
    return lambda: weft.trace(fn, *specs)


def mapped(name, *specs, **keywords):
    """The OpInfo mapping's adapter for ``name`` traced over ``specs`` with ``keywords``."""
    return traced(lambda *tensors: MAPPING[name](*tensors, **keywords), *specs)


F32 = np.float32
# the table's first column (exactly as written there) -> a program that must raise it
PROGRAMS = {
    r"(max\|min): reduces an axis of extent 0": traced(lambda x: nn.max(x, axis=0), weft.spec((0, 3))),
    r"batch_norm: input has rank 1": traced(lambda x, m, v: nn.batch_norm(x, m, v), weft.spec((4,)),
                                            weft.spec((4,)), weft.spec((4,))),
    r"dtype '(float64\|float16\|bfloat16\|complex64\|complex128\|uint8\|int8\|int16)' is not supported":
        lambda: weft.spec((2,), np.float16),
    r"cannot reduce bool values": traced(lambda x: nn.max(x), weft.spec((3,), "bool")),
    r"needs numbers, got (bool\|two bool)": traced(lambda a, b: nn.add(a, b), weft.spec((3,), "bool"),
                                                   weft.spec((3,), "bool")),
    r"needs float32 input, got (int32\|int64\|bool)": traced(lambda x: nn.relu(x), weft.spec((3,), "int32")),
    r"pow: ": traced(lambda x: nn.pow(x, -1), weft.spec((3,), "int32")),
    r"keyword (dtype\|max_norm\|size_average\|reduce)= is not supported":
        mapped("nn.functional.embedding", weft.spec((5, 4)), weft.spec((3,), "int64"), max_norm=1.0),
    r"cross_entropy with class weights":
        mapped("nn.functional.cross_entropy", weft.spec((2, 3)), weft.spec((2,), "int64"), weft.spec((3,))),
    r"attention dropout": mapped("nn.functional.scaled_dot_product_attention", *[weft.spec((1, 2, 4, 8))] * 3,
                                 dropout_p=0.1),
    r"attention heads that differ without enable_gqa":
        mapped("nn.functional.scaled_dot_product_attention", weft.spec((1, 4, 3, 8)), weft.spec((1, 2, 3, 8)),
               weft.spec((1, 2, 3, 8))),
    r"causal attention with a query length other than the key length":
        mapped("nn.functional.scaled_dot_product_attention", weft.spec((1, 2, 2, 8)), weft.spec((1, 2, 3, 8)),
               weft.spec((1, 2, 3, 8)), is_causal=True),
    r"narrow with a tensor start": traced(lambda x, start: MAPPING["narrow"](x, 0, start, 1), weft.spec((4,)),
                                          weft.spec((), "int64")),
    r"rms_norm over several trailing dims without a weight":
        mapped("nn.functional.rms_norm", weft.spec((2, 3, 4)), normalized_shape=(3, 4)),
    r"transpose: needs at least 2 dimensions": traced(lambda x: nn.transpose(x, 0, 1), weft.spec((3,))),
    r"ceil_mode=True is not supported": traced(lambda x: nn.max_pool2d(x, 2, ceil_mode=True),
                                               weft.spec((1, 1, 5, 5))),
    r"max_pool2d with return_indices": mapped("nn.functional.max_pool2d", weft.spec((1, 1, 4, 4)), kernel_size=2,
                                              return_indices=True),
    r"keyword divisor_override= is not supported":
        mapped("nn.functional.avg_pool2d", weft.spec((1, 1, 4, 4)), kernel_size=2, divisor_override=3),
    r"batch_norm in training mode": mapped("nn.functional.batch_norm", *[weft.spec((2, 3))] + [weft.spec((3,))] * 2,
                                           training=True),
    r"batch_norm without running statistics":
        traced(lambda x: MAPPING["nn.functional.batch_norm"](x, None, None), weft.spec((2, 3))),
    r"input has rank \d+ .* takes a rank-4 batched": traced(lambda x: nn.max_pool2d(x, 2), weft.spec((1, 4, 4))),
    r"padding .* must be at most half the kernel": traced(lambda x: nn.max_pool2d(x, 2, padding=2),
                                                          weft.spec((1, 1, 6, 6))),
    r"the -1 could be any size": traced(lambda x: nn.reshape(x, (-1, 0)), weft.spec((0, 3))),
}


def table_rows() -> list[str]:
    """The first column of the refusal table, as written (``\\|`` and all)."""
    import re

    rows = []
    for line in UNSUPPORTED_DOC.read_text().splitlines():
        found = re.match(r"\|\s*`([^`]+)`\s*\|", line)
        if found:
            rows.append(found.group(1))
    return rows


def test_every_row_has_a_program():
    rows = table_rows()
    assert len(rows) == len(documented_refusals())
    assert sorted(set(rows) - set(PROGRAMS)) == [], "rows of docs/unsupported.md without a program here"
    assert sorted(set(PROGRAMS) - set(rows)) == [], "programs here for rows no longer in docs/unsupported.md"


@pytest.mark.parametrize("row", sorted(PROGRAMS))
def test_each_row_is_what_refuses(row):
    pattern = [p for r, p in zip(table_rows(), documented_refusals(), strict=True) if r == row]
    assert pattern, f"{row!r} is not a row of docs/unsupported.md"
    with pytest.raises((WeftError, Unmapped)) as refusal:
        PROGRAMS[row]()
    assert pattern[0].search(str(refusal.value)), f"{row!r} does not match the refusal: {refusal.value}"
