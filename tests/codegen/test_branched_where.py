"""A ``where`` whose condition is the same at every lane of a vector computes only the branch it
takes (``BodyRenderer.branched_where``): a concatenation read along an axis the lanes do not
walk (decode's ``concat(k_cache, k)`` along the keys, laned along ``d``) loads one part, not
both. Values are the select's: Strict stays the oracle's bytes, Inference the same bytes as
the select form within tolerance of float64, with NaN and infinities in either part."""

from __future__ import annotations

import re

import numpy as np
import pytest

import weft
from weft import nn
from weft.oracle import run as oracle_run
from weft.testing import assert_inference_close, assert_strict_equal


def _scores(heads: int, cached: int, depth: int):
    """Decode's scores over a cache plus one new key: s[h, j] = sum_d q[h, d] * keys[h, j, d]."""
    def scores(q, k_cache, k_new):
        keys = nn.concat([k_cache, k_new], axis=1)
        return nn.matmul(q.reshape(heads, 1, depth), nn.transpose(keys, -2, -1))

    return weft.trace(scores, weft.spec((heads, depth)), weft.spec((heads, cached, depth)),
                      weft.spec((heads, 1, depth)), name="scores")


def _rows(parts: int, width: int):
    """A concatenation along the rows, laned along the columns (Strict vectorises the columns)."""
    def joined(a, b):
        return nn.exp(nn.concat([a, b], axis=0)) * 2.0

    return weft.trace(joined, weft.spec((parts, width)), weft.spec((3, width)), name="joined")


def _with_specials(array: np.ndarray, rng) -> np.ndarray:
    flat = array.reshape(-1).copy()
    picks = rng.choice(flat.size, size=max(1, flat.size // 50), replace=False)
    flat[picks] = rng.choice(np.array([np.nan, np.inf, -np.inf, 3e38, -0.0], np.float32), size=picks.size)
    return flat.reshape(array.shape)


def _select_lines(source: str) -> list[str]:
    return [line for line in source.splitlines() if re.search(r"wfc_sel_f\(wfc_splat_i\(-\(t\d+\)\)", line)]


@pytest.mark.parametrize("cached,depth", [(37, 64), (5, 19), (64, 16)])
def test_decode_scores_load_one_part_of_the_concatenation(cached, depth):
    plan = _scores(3, cached, depth)
    rng = np.random.default_rng(cached + depth)
    arrays = [rng.standard_normal(spec.shape, dtype=np.float32) for spec in
              (plan.buffer_map()[name] for name in plan.inputs)]
    inference = weft.compile(plan, contract="inference", fusion="off")
    source = inference.source_path.read_text()
    assert not _select_lines(source), "a lane-uniform where still selects between two loaded vectors"
    reference = np.einsum("hd,hjd->hj", arrays[0].astype(np.float64),
                          np.concatenate([arrays[1], arrays[2]], axis=1).astype(np.float64))
    assert_inference_close(inference(*arrays), reference[:, None, :], "scores")
    strict = weft.compile(plan, contract="strict", fusion="off")
    assert_strict_equal(strict(*arrays), oracle_run(plan, *arrays), "scores")


@pytest.mark.parametrize("parts,width", [(4, 16), (5, 37), (1, 3)])
def test_rows_of_a_concatenation_keep_the_oracles_bytes_with_specials(parts, width):
    plan = _rows(parts, width)
    rng = np.random.default_rng(parts * 100 + width)
    a = _with_specials(rng.standard_normal((parts, width), dtype=np.float32), rng)
    b = _with_specials(rng.standard_normal((3, width), dtype=np.float32), rng)
    expected = oracle_run(plan, a, b)
    for threads in (1, 2):
        strict = weft.compile(plan, contract="strict", threads=threads, fusion="off")
        if width >= 16:
            assert not _select_lines(strict.source_path.read_text())
        assert_strict_equal(strict(a, b), expected, f"{parts}x{width}, {threads} threads")
