"""Grouped-query attention in the one pass (``weft.lower.online_scores``): when K and V read
the head axis as ``h // g``, K is packed once per K/V head (not once per query head), the g
query heads of one K/V head are the register tile's rows (each K and V row read once per
group), and keys that are a concat of a cache and the new token's key read the cache through
its plain load on the key blocks below the cache length (the new key through the general
path). Compiled C at odd sizes, 1 and 2 threads, against float64 written in
``weft.fuzz.reference64``; Strict (no one pass) stays byte-identical to the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.fuzz.reference64 import attention64
from weft.lower.online import PASS_BLOCK, OnlinePass
from weft.testing import assert_strict_equal
from weft.workloads import get_workload

RTOL, ATOL = 1e-4, 2e-5


def _pass_of(compiled) -> OnlinePass:
    found = [n for f in compiled.lowered.functions for n in f.nests if isinstance(n, OnlinePass)]
    assert found, "no one pass"
    return found[0]


def _decode_plan(hq, hkv, cache, d, e):
    """One decode step's attention: keys and values are the cache with the new token appended."""
    def step(q, k_cache, k_new, v_cache, v_new):
        keys, values = nn.concat([k_cache, k_new], axis=1), nn.concat([v_cache, v_new], axis=1)
        return nn.attention(q, keys, values)

    specs = (nn.spec((hq, 1, d)), nn.spec((hkv, cache, d)), nn.spec((hkv, 1, d)), nn.spec((hkv, cache, e)),
             nn.spec((hkv, 1, e)))
    return nn.trace(step, *specs)


def _decode_inputs(hq, hkv, cache, d, e, seed):
    rng = np.random.default_rng(seed)
    shapes = ((hq, 1, d), (hkv, cache, d), (hkv, 1, d), (hkv, cache, e), (hkv, 1, e))
    return tuple(rng.standard_normal(shape).astype(np.float32) for shape in shapes)


def _decode_expected(q, k_cache, k_new, v_cache, v_new):
    return attention64(q, np.concatenate([k_cache, k_new], 1), np.concatenate([v_cache, v_new], 1))


# (query heads, K/V heads, cache length, head dim, value head dim)
DECODE = [
    (14, 2, 3 * PASS_BLOCK + 11, 64, 64),  # qwen-like: 7 query heads per K/V head
    (14, 2, 2 * PASS_BLOCK, 32, 32),  # the cache ends on a block: the new key alone in the last block
    (14, 2, 2 * PASS_BLOCK - 1, 32, 48),  # cache + new key fill whole blocks: the last one takes the general path
    (6, 3, PASS_BLOCK + 5, 16, 16),  # 2 per K/V head
    (4, 1, 37, 32, 32),  # fewer keys than a block: the member nests' pass (no register tile)
    (32, 2, 2 * PASS_BLOCK + 3, 32, 32),  # 16 per K/V head: register tiles of 8 heads, K read twice per group
    (8, 1, PASS_BLOCK + 20, 32, 32),  # one K/V head (K reads head 0): the heads share one panel
]


@pytest.mark.parametrize("shape", [s for s in DECODE if s[2] + 1 >= PASS_BLOCK and s[1] > 1],
                         ids=lambda s: "h{}kv{}_c{}_d{}_e{}".format(*s))
def test_decode_step_packs_k_once_per_kv_head_and_takes_each_group_as_the_tile_rows(fused_config, shape):
    hq, hkv, cache, d, e = shape
    compiled = weft.compile(_decode_plan(*shape), config=fused_config("inference", threads=1))
    found = _pass_of(compiled)
    scores, group = found.scores, hq // hkv
    assert scores is not None, "the scores should run on the register tile"
    assert scores.group == group and scores.row_axis == "h"
    assert scores.batch_points == hkv  # one packed K panel per K/V head, not per query head
    assert group % scores.rows == 0 and scores.rows == min(group, 8)
    assert found.rows[-1][0] == "h" and found.row_counts[-1] % group == 0  # tiles of whole groups
    assert scores.y_stop == cache and scores.y_plain is not None
    if cache >= PASS_BLOCK and e % 16 == 0:
        tile = found.tile
        assert tile is not None and tile.rest_head and tile.stop == cache and not tile.pack_rest


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", DECODE, ids=lambda s: "h{}kv{}_c{}_d{}_e{}".format(*s))
def test_grouped_decode_step_matches_float64(fused_config, shape, threads):
    compiled = weft.compile(_decode_plan(*shape), config=fused_config("inference", threads=threads))
    arrays = _decode_inputs(*shape, seed=threads + sum(shape))
    got = compiled(*arrays)
    np.testing.assert_allclose(got, _decode_expected(*arrays), rtol=RTOL, atol=ATOL)


def test_grouped_decode_step_with_huge_scores_in_the_cache_and_the_new_key(fused_config):
    """The block max moves at the new key (the general path) after the cache's full blocks."""
    shape = (14, 2, 2 * PASS_BLOCK + 9, 32, 32)
    compiled = weft.compile(_decode_plan(*shape), config=fused_config("inference", threads=2))
    q, k_cache, k_new, v_cache, v_new = _decode_inputs(*shape, seed=5)
    k_cache[:, 70] *= 20.0
    k_new *= 40.0
    got = compiled(q, k_cache, k_new, v_cache, v_new)
    expected = _decode_expected(q, k_cache, k_new, v_cache, v_new)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def _gqa_plan(hq, hkv, tq, tk, d):
    specs = (nn.spec((hq, tq, d)), nn.spec((hkv, tk, d)), nn.spec((hkv, tk, d)))
    return nn.trace(lambda q, k, v: nn.attention(q, k, v), *specs)


@pytest.mark.parametrize("threads", [1, 2])
def test_plain_grouped_decode_keys_take_the_group_as_rows(fused_config, threads):
    """K and V plain inputs (no concat): the group is still the tile's rows, V read in place."""
    shape = (8, 2, 1, 2 * PASS_BLOCK + 44, 64)
    compiled = weft.compile(_gqa_plan(*shape), config=fused_config("inference", threads=threads))
    found = _pass_of(compiled)
    assert found.scores.group == 4 and found.scores.batch_points == 2 and found.scores.rows == 4
    assert found.tile is not None and found.tile.rest_head and not found.tile.pack_rest
    assert found.scores.y_plain is None and found.tile.stop is None
    assert found.scores.k_transposed  # K rows along d: packed by transposed tiles, per K/V head
    rng = np.random.default_rng(threads)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((8, 1, 64), (2, shape[3], 64), (2, shape[3], 64)))
    np.testing.assert_allclose(compiled(q, k, v), attention64(q, k, v), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("threads", [1, 2])
def test_grouped_prefill_packs_k_once_per_kv_head_with_rows_along_the_queries(fused_config, threads):
    """Many queries per head: the register tile keeps query rows, but K is packed per K/V head."""
    shape = (4, 2, 37, 2 * PASS_BLOCK + 17, 32)
    compiled = weft.compile(_gqa_plan(*shape), config=fused_config("inference", threads=threads))
    scores = _pass_of(compiled).scores
    assert scores is not None and scores.batch_points == 2 and scores.divisors == (2,)
    rng = np.random.default_rng(3 + threads)
    hq, hkv, tq, tk, d = shape
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((hq, tq, d), (hkv, tk, d), (hkv, tk, d)))
    np.testing.assert_allclose(compiled(q, k, v), attention64(q, k, v), rtol=RTOL, atol=ATOL)


QWEN_SMALL = dict(layers=2, hidden=14 * 32, heads=14, kv_heads=2, intermediate=96, cache_len=PASS_BLOCK + 13)


def test_qwen_decode_step_attention_is_grouped(fused_config):
    workload = get_workload("qwen-decode-step")
    plan = workload.plan(**QWEN_SMALL)
    compiled = weft.compile(plan, config=fused_config("inference", threads=2))
    passes = [n for f in compiled.lowered.functions for n in f.nests if isinstance(n, OnlinePass)
              and n.scores is not None]
    assert passes and all(p.scores.group == 7 and p.scores.batch_points == 2 for p in passes)
    arrays = workload.inputs(seed=1, **QWEN_SMALL)
    got = compiled(*arrays)
    expected = weft.oracle.run(plan, *arrays)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def test_strict_grouped_decode_step_stays_byte_identical(fused_config):
    """Strict never takes the one pass: the grouped decode step is the oracle's bytes."""
    shape = (14, 2, 2 * PASS_BLOCK + 11, 32, 32)
    plan = _decode_plan(*shape)
    compiled = weft.compile(plan, config=fused_config("strict", threads=2))
    arrays = _decode_inputs(*shape, seed=2)
    assert_strict_equal(compiled(*arrays), weft.oracle.run(plan, *arrays))


@pytest.mark.parametrize("cache", [3 * PASS_BLOCK + 11, 2 * PASS_BLOCK - 1])
def test_the_pass_prices_k_packing_once_per_kv_head(fused_config, cache):
    """The cost facts of the grouped pass: K's cache blocks packed by transposed tiles once per
    K/V head (2, not 14), the block holding the new key element by element, Q once."""
    from weft.cost.facts import _scores_packing

    hq, hkv, d = 14, 2, 64
    compiled = weft.compile(_decode_plan(hq, hkv, cache, d, d), config=fused_config("inference", threads=1))
    scores = _pass_of(compiled).scores
    scalar, transposed = _scores_packing(scores)
    blocks = -(-(cache + 1) // PASS_BLOCK)
    full = cache // PASS_BLOCK
    assert transposed == hkv * full * PASS_BLOCK * d
    assert scalar == hkv * (blocks - full) * PASS_BLOCK * d + hq * d


def test_priced_takes_the_grouped_pass_for_the_decode_attention(fused_config):
    """fusion='priced' prices the grouped pass (K packed once per K/V head, tiles of a group)
    and takes it for qwen-decode-step's attention at its own shapes (14 heads, 2 K/V heads)."""
    params = dict(QWEN_SMALL, layers=1, hidden=896, intermediate=64, cache_len=4 * PASS_BLOCK + 9)
    plan = get_workload("qwen-decode-step").plan(**params)
    compiled = weft.compile(plan, config=fused_config("inference", fusion="priced", threads=1))
    passes = [n for f in compiled.lowered.functions for n in f.nests if isinstance(n, OnlinePass)]
    assert passes and passes[0].scores is not None
    assert passes[0].scores.group == 7 and passes[0].scores.batch_points == 2


def test_v_is_prefetched_where_each_tile_streams_its_own_rows(fused_config):
    """The decode step's tiles split V (one K/V head each): the value tile prefetches the next
    key block; attention's query tiles share V (in cache for each): no prefetch."""
    decode = _pass_of(weft.compile(_decode_plan(14, 2, 2 * PASS_BLOCK + 5, 32, 32),
                                   config=fused_config("inference", threads=1)))
    shared = _pass_of(weft.compile(_gqa_plan(2, 1, 4 * 37, 2 * PASS_BLOCK + 5, 32),
                                   config=fused_config("inference", threads=1)))
    assert decode.tile.prefetch_rest
    assert shared.tile is not None and shared.row_counts[-1] < 4 * 37 and not shared.tile.prefetch_rest
