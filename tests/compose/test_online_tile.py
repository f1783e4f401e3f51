"""The one pass on the register tile (``weft.lower.online_scores``): the scores from packed
operands (K packed once per call, shared by every query tile), the max / rescale / exp / row
sum on the tile, P x V on a rows x chunk tile. Compiled C at sizes spanning several key
blocks (full blocks take the tile, a partial last block the general pass), head dims 1 to 80,
heads and grouped-query heads, causal, bool and additive masks hiding whole blocks, fully
masked rows, huge scores, 1 and 2 threads, 16 / 8 / 4 lanes: against float64 written in
``weft.fuzz.reference64`` (visible rows) and the oracle (fully masked rows, exactly).
"""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.codegen.units import UNIT_BREAK
from weft.fuzz.reference64 import attention64
from weft.lower.online import PASS_BLOCK, OnlinePass
from weft.testing import assert_strict_equal

RTOL, ATOL = 1e-4, 2e-5


def _pass_of(compiled) -> OnlinePass | None:
    found = [n for f in compiled.lowered.functions for n in f.nests if isinstance(n, OnlinePass)]
    return found[0] if found else None


def _plan(hq, hkv, tq, tk, d, e, mask):
    lead_q, lead_kv = ((hq,), (hkv,)) if hq else ((), ())
    specs = [nn.spec(lead_q + (tq, d)), nn.spec(lead_kv + (tk, d)), nn.spec(lead_kv + (tk, e))]
    if mask in ("bool", "additive"):
        mask_spec = nn.spec((tq, tk), "bool" if mask == "bool" else "float32")
        return nn.trace(lambda a, b, c, m: nn.attention(a, b, c, mask=m), *specs, mask_spec)
    return nn.trace(lambda a, b, c: nn.attention(a, b, c, causal=mask == "causal"), *specs)


def _inputs(hq, hkv, tq, tk, d, e, mask, keep, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    lead_q, lead_kv = ((hq,), (hkv,)) if hq else ((), ())
    q = (rng.standard_normal(lead_q + (tq, d)) * scale).astype(np.float32)
    k = rng.standard_normal(lead_kv + (tk, d)).astype(np.float32)
    v = rng.standard_normal(lead_kv + (tk, e)).astype(np.float32)
    if mask == "bool":
        return (q, k, v, keep), dict(keep=keep)
    if mask == "additive":
        additive = np.where(keep, rng.standard_normal((tq, tk)), -np.inf).astype(np.float32)
        return (q, k, v, additive), dict(keep=keep, additive=additive)
    if mask == "causal":
        return (q, k, v), dict(keep=np.tri(tq, tk, dtype=bool))
    return (q, k, v), dict(keep=np.ones((tq, tk), bool))


def _check(compiled, plan, arrays, masks):
    got = compiled(*arrays)
    keep = masks["keep"]
    expected = attention64(*arrays[:3], keep=keep, additive=masks.get("additive"))
    visible = np.broadcast_to(keep.any(axis=-1), got.shape[:-1])
    assert np.all(np.isfinite(got[visible])), "a row with a visible key came out non-finite"
    np.testing.assert_allclose(got[visible], expected[visible], rtol=RTOL, atol=ATOL)
    if not visible.all():
        oracle = weft.oracle.run(plan, *arrays)
        assert np.array_equal(got[~visible], oracle[~visible], equal_nan=True)


# (query heads, K/V heads, queries, keys, head dim, value head dim, mask)
SHAPES = [
    (0, 0, 70, 3 * PASS_BLOCK + 5, 32, 32, None),  # full blocks and a partial last block
    (0, 0, 13, 2 * PASS_BLOCK, 64, 64, None),  # only full blocks; 13 rows: a partial row group
    (2, 2, 37, 2 * PASS_BLOCK + 1, 80, 80, "causal"),  # head dim 80: value tile in chunks of 1 vector
    (4, 2, 19, 3 * PASS_BLOCK + 17, 32, 32, "bool"),  # grouped-query heads
    (4, 1, 25, 2 * PASS_BLOCK + 33, 8, 16, "additive"),
    (0, 0, 9, 2 * PASS_BLOCK + 3, 1, 16, None),  # head dim 1 for q k
    (0, 0, 11, 2 * PASS_BLOCK + 3, 8, 8, "bool"),  # value head dim below the lanes: general pass
    (0, 0, 7, 2 * PASS_BLOCK + 3, 16, 1, None),  # value head dim 1
    (3, 3, 65, 5 * PASS_BLOCK - 1, 64, 48, "causal"),
    (8, 2, 1, 2 * PASS_BLOCK + 44, 64, 64, None),  # a decode step: one query per head, a 1-row tile
    (4, 2, 2, 3 * PASS_BLOCK, 32, 32, "bool"),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "h{}kv{}_q{}_k{}_d{}_e{}_{}".format(*s))
def test_tile_pass_at_shapes(fused_config, shape, threads):
    hq, hkv, tq, tk, d, e, mask = shape
    rng = np.random.default_rng(sum(shape[:6]))
    keep = rng.random((tq, tk)) < 0.4
    keep[0] = False  # a fully masked row (masks only)
    keep[-1, -1] = True
    plan = _plan(*shape)
    compiled = weft.compile(plan, config=fused_config("inference", threads=threads))
    found = _pass_of(compiled)
    assert found is not None and found.scores is not None  # the scores on the register tile
    # no register-tile rows that repeat a query of a short tile (grouped: its rows are query heads)
    assert found.scores.rows <= (tq if found.scores.group == 1 else found.scores.group)
    if e % 16 == 0:
        assert found.tile is not None
    arrays, masks = _inputs(*shape, keep=keep, seed=threads)
    _check(compiled, plan, arrays, masks)


def _block_masks(tq: int, tk: int) -> dict[str, np.ndarray]:
    block = PASS_BLOCK
    j, i = np.arange(tk)[None, :], np.arange(tq)[:, None]
    masks = {
        "leading_blocks": np.broadcast_to(j >= 2 * block, (tq, tk)),
        "trailing_blocks": np.broadcast_to(j < block, (tq, tk)),
        "alternating_blocks": np.broadcast_to((j // block) % 2 == 1, (tq, tk)),
        "only_the_partial_last_block": np.broadcast_to(j >= (tk // block) * block, (tq, tk)),
        "all_but_last_key": np.broadcast_to(j == tk - 1, (tq, tk)),
        "one_key_per_row": j == (i * 37) % tk,
    }
    ragged = j >= (i * 53) % tk
    ragged[1] = False
    ragged[4] = False
    ragged[tq - 1] = False  # the last row of the tile: the row group's duplicates repeat it
    masks["ragged_with_masked_rows"] = ragged
    return {name: np.ascontiguousarray(mask) for name, mask in masks.items()}


TQ, TK = 14, 4 * PASS_BLOCK + 9
MASKS = _block_masks(TQ, TK)


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("name", sorted(MASKS))
def test_tile_pass_under_block_masks(fused_config, name, kind):
    shape = (0, 0, TQ, TK, 32, 32, kind)
    plan = _plan(*shape)
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert _pass_of(compiled).tile is not None
    arrays, masks = _inputs(*shape, keep=MASKS[name], seed=11)
    _check(compiled, plan, arrays, masks)


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_tile_pass_at_every_vector_width(tmp_path, lanes):
    shape = (2, 1, 21, 3 * PASS_BLOCK + 7, 32, 32, "causal")
    plan = _plan(*shape)
    config = weft.config.config_from_env(contract="inference", threads=2, fusion="greedy", cache_dir=tmp_path)
    compiled = weft.compile(plan, config=config, lanes=lanes)
    found = _pass_of(compiled)
    assert found.tile is not None and found.scores.rows * (PASS_BLOCK // lanes) <= 24
    arrays, masks = _inputs(*shape, keep=None, seed=5)
    _check(compiled, plan, arrays, masks)


@pytest.mark.parametrize("scale", [1e10, 1e30])
def test_tile_pass_at_huge_scores(fused_config, scale):
    # one-hot softmax: s * c rounded once, the max and the exp read the same registers
    shape = (0, 0, 17, 3 * PASS_BLOCK + 3, 8, 16, None)
    plan = _plan(*shape)
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert _pass_of(compiled).tile is not None
    (q, k, v), _ = _inputs(*shape, keep=None, seed=3, scale=scale)
    got = compiled(q, k, v)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, attention64(q, k, v), rtol=RTOL, atol=ATOL)
    s = np.asarray(q, np.float64) @ np.asarray(k, np.float64).T
    np.testing.assert_allclose(got, np.asarray(v, np.float64)[s.argmax(axis=1)], rtol=RTOL, atol=ATOL)


def test_strict_attention_is_untouched(fused_config):
    # the register tile is Inference only: Strict keeps the oracle's bytes
    shape = (2, 1, 9, 2 * PASS_BLOCK + 5, 8, 16, "causal")
    plan = _plan(*shape)
    compiled = weft.compile(plan, config=fused_config("strict"))
    assert _pass_of(compiled) is None
    arrays, _ = _inputs(*shape, keep=None, seed=2)
    assert_strict_equal(compiled(*arrays), weft.oracle.run(plan, *arrays))


def test_k_is_packed_once_per_call_not_per_tile(fused_config):
    # the packing loop sits before the tile loop in the C, once per function
    plan = _plan(0, 0, 200, 3 * PASS_BLOCK, 32, 32, None)
    compiled = weft.compile(plan, config=fused_config("inference"))
    source = compiled.source_path.read_text()
    body = source[source.index(") {", source.index(UNIT_BREAK)):]  # past the prototypes
    assert body.count("aligned_alloc(64") >= 1
    assert body.index("wa_kp = ") < body.index("for (long wf_tile")
    assert "wfc_gather_f" not in body


def test_tile_pass_nan_scores_give_nan_rows(fused_config):
    # the private max folds lanes by compare-select: a NaN score must still make its row NaN
    shape = (0, 0, 12, 3 * PASS_BLOCK + 3, 32, 32, None)
    plan = _plan(*shape)
    compiled = weft.compile(plan, config=fused_config("inference"))
    found = _pass_of(compiled)
    assert found.tile is not None and found.tile.plain_max
    (q, k, v), _ = _inputs(*shape, keep=None, seed=8)
    k[PASS_BLOCK + 5, 3] = np.nan  # one key: every row sees a NaN score in the second block
    q[7, 0] = np.nan  # one query row: NaN scores everywhere
    got = compiled(q, k, v)
    oracle = weft.oracle.run(plan, q, k, v)
    assert np.array_equal(np.isnan(got), np.isnan(oracle)) and np.isnan(got).all()


def test_tile_pass_exp_underflow_and_distance(fused_config):
    # scores spread so that exp(t - max) runs from 1 down past exp(-86) (flushed to 0) and exp(-104)
    shape = (0, 0, 10, 2 * PASS_BLOCK + 11, 16, 16, None)
    plan = _plan(*shape)
    compiled = weft.compile(plan, config=fused_config("inference"))
    rng = np.random.default_rng(9)
    q = np.ones((10, 16), np.float32)
    k = (rng.uniform(-30.0, 0.0, (2 * PASS_BLOCK + 11, 1)) * np.ones((1, 16))).astype(np.float32)
    v = rng.standard_normal((2 * PASS_BLOCK + 11, 16)).astype(np.float32)
    got = compiled(q, k, v)
    np.testing.assert_allclose(got, attention64(q, k, v), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("heads", [0, 2])
def test_tile_pass_packs_a_transposed_v(fused_config, heads):
    # V given as (e, keys) and transposed in the plan: strided along e, so packed once per call
    tq, tk, d, e = 23, 3 * PASS_BLOCK + 5, 32, 32
    lead = (heads,) if heads else ()
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, nn.transpose(c)),
                    nn.spec(lead + (tq, d)), nn.spec(lead + (tk, d)), nn.spec(lead + (e, tk)))
    compiled = weft.compile(plan, config=fused_config("inference"))
    found = _pass_of(compiled)
    assert found.tile is not None and found.tile.pack_rest
    rng = np.random.default_rng(12)
    q, k = rng.standard_normal(lead + (tq, d)).astype(np.float32), rng.standard_normal(lead + (tk, d)).astype(np.float32)
    v_t = rng.standard_normal(lead + (e, tk)).astype(np.float32)
    got = compiled(q, k, v_t)
    np.testing.assert_allclose(got, attention64(q, k, np.swapaxes(v_t, -1, -2)), rtol=RTOL, atol=ATOL)


def test_row_group_sizes_waste_no_rows_where_a_tile_can_hold_whole_groups():
    from weft.lower.online_scores import row_group_sizes

    # 5184 = 72 x 72 queries: 64 per tile ran 11 groups of 6 rows (66 rows computed for 64)
    assert row_group_sizes(5184, 64, 6)[0] == 72
    assert all(size % 6 == 0 and 48 <= size <= 96 for size in row_group_sizes(5184, 64, 6))
    assert row_group_sizes(1024, 64, 6)[0] == 66  # 15 x 66 + 34 (36 computed): 1026 rows for 1056
    assert row_group_sizes(5184, 72, 6) == []  # already whole groups
    assert row_group_sizes(13, 13, 6) == []  # nothing in range computes fewer rows


def test_sam3_attention_tiles_hold_whole_row_groups(fused_config):
    # 5184 x 32, one head: 72 tiles of 72 queries, 12 groups of 6, no group repeats a row
    plan = _plan(0, 0, 5184, 5184, 32, 32, None)
    compiled = weft.compile(plan, config=fused_config("inference"))
    found = _pass_of(compiled)
    assert found.scores is not None and found.scores.rows == 6
    assert found.row_counts[-1] == 72 and found.row_counts[-1] % found.scores.rows == 0
    (function,) = [f for f in compiled.lowered.functions if found in f.nests]
    assert function.tile_loop.extent == 72 and function.tile_loop.tiles[-1][2] == 72


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("tq", [200, 131])
def test_regrouped_tiles_against_float64(fused_config, tq, threads):
    # query counts where the tile is regrouped (a last tile shorter than the others), causal
    shape = (2, 1, tq, 3 * PASS_BLOCK + 5, 32, 32, "causal")
    plan = _plan(*shape)
    compiled = weft.compile(plan, config=fused_config("inference", threads=threads))
    found = _pass_of(compiled)
    assert found.tile is not None and found.row_counts[-1] % found.scores.rows == 0
    arrays, masks = _inputs(*shape, keep=None, seed=tq + threads)
    _check(compiled, plan, arrays, masks)


@pytest.mark.parametrize("d", [40, 64])
def test_k_rows_along_d_are_packed_by_transposed_tiles(fused_config, d):
    # K's full key blocks by lanes x lanes tiles transposed in registers (d past the last whole
    # vector element by element, a partial last block as before): the same bytes as packing
    # element by element, which cost 1.45 cycles an element against 0.4
    shape = (2, 2, 30, 2 * PASS_BLOCK + 7, d, 32, None)
    plan = _plan(*shape)
    compiled = weft.compile(plan, config=fused_config("inference"))
    found = _pass_of(compiled)
    assert found is not None and found.scores is not None and found.scores.k_transposed
    source = compiled.source_path.read_text()
    assert "wfc_transpose_f(wa_rows);" in source[source.index(") {", source.index(UNIT_BREAK)):]
    arrays, masks = _inputs(*shape, keep=None, seed=12)
    _check(compiled, plan, arrays, masks)
