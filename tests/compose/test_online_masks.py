"""The one pass (online softmax) under masks and at extreme score magnitudes, through the real
compiled C path and through the Python reference schedule (``weft.compose.execute``).

A row with any visible key must be within the Inference tolerance of a float64 reference
written here; a fully masked row must give exactly what the oracle gives (NaN where it has
NaN). The pass walks the keys in blocks of ``PASS_BLOCK`` (64), so the masks hide whole
leading blocks (the running max stays -inf for a while), whole trailing blocks, alternating
blocks and every key but one, for bool masks and additive -inf masks.
"""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.compose import choose_regions
from weft.compose.execute import ExecutionReport, run_partition_outputs
from weft.fuzz.reference64 import attention64
from weft.lower.online import PASS_BLOCK
from weft.testing import assert_inference_close


def named_masks(tq: int, tk: int) -> dict[str, np.ndarray]:
    """Keep-masks (True = visible) of shape (tq, tk) at a size spanning several blocks."""
    block = PASS_BLOCK
    j = np.arange(tk)[None, :]
    i = np.arange(tq)[:, None]
    masks = {
        "leading_blocks": np.broadcast_to(j >= 2 * block, (tq, tk)),  # left padding: two whole blocks
        "leading_one_block_and_a_bit": np.broadcast_to(j > block + 3, (tq, tk)),
        "trailing_blocks": np.broadcast_to(j < block, (tq, tk)),
        "alternating_blocks": np.broadcast_to((j // block) % 2 == 1, (tq, tk)),
        "all_but_last_key": np.broadcast_to(j == tk - 1, (tq, tk)),
        "all_but_one_key_per_row": j == (i * 37) % tk,
        "sliding_window": (j <= i * (tk // tq)) & (j > i * (tk // tq) - 16),
    }
    rows = dict(masks)
    ragged = (j >= (i * 53) % tk)  # each row's visible keys start elsewhere (some in the last block)
    ragged[1] = False  # a fully masked row
    ragged[3] = False
    rows["ragged_left_padding_with_masked_rows"] = ragged
    return {name: np.ascontiguousarray(mask) for name, mask in rows.items()}


TQ, TK, D, E = 6, 3 * PASS_BLOCK + 8, 8, 16
MASKS = named_masks(TQ, TK)


def _inputs(seed: int, tq=TQ, tk=TK, d=D, e=E):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(np.float32) for shape in ((tq, d), (tk, d), (tk, e)))


def _masked_plan(kind: str, tq=TQ, tk=TK, d=D, e=E, causal=False):
    mask_spec = nn.spec((tq, tk), "bool" if kind == "bool" else "float32")
    return nn.trace(lambda q, k, v, m: nn.attention(q, k, v, mask=m, causal=causal),
                    nn.spec((tq, d)), nn.spec((tk, d)), nn.spec((tk, e)), mask_spec)


def _mask_input(kind: str, keep: np.ndarray) -> np.ndarray:
    if kind == "bool":
        return keep
    return np.where(keep, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)


def _one_pass_used(compiled) -> bool:
    return any(type(n).__name__ == "OnlinePass" for f in compiled.lowered.functions for n in f.nests)


def assert_rows_match(got, keep, q, k, v, plan, arrays, additive=None, causal=False):
    """Visible rows against float64 within the contract; fully masked rows exactly as the oracle."""
    full_keep = keep & (np.arange(keep.shape[-1])[None, :] <= np.arange(keep.shape[-2])[:, None]) if causal else keep
    expected = attention64(q, k, v, keep=full_keep, additive=additive)
    visible = full_keep.any(axis=-1)
    assert np.all(np.isfinite(got[visible])), "a row with a visible key came out non-finite"
    assert_inference_close(got[visible], expected[visible])
    if not visible.all():
        oracle = weft.oracle.run(plan, *arrays)
        hidden = ~visible
        assert np.array_equal(got[hidden], oracle[hidden], equal_nan=True), (got[hidden], oracle[hidden])


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("name", sorted(MASKS))
def test_compiled_one_pass_under_masks(fused_config, name, kind):
    keep = MASKS[name]
    plan = _masked_plan(kind)
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert _one_pass_used(compiled)
    q, k, v = _inputs(1)
    arrays = (q, k, v, _mask_input(kind, keep))
    assert_rows_match(compiled(*arrays), keep, q, k, v, plan, arrays)


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("name", sorted(MASKS))
def test_reference_schedule_under_masks(name, kind):
    keep = MASKS[name]
    plan = _masked_plan(kind)
    q, k, v = _inputs(2)
    arrays = (q, k, v, _mask_input(kind, keep))
    report = ExecutionReport(4)
    got = run_partition_outputs(plan, choose_regions(plan, "greedy", "inference"), *arrays,
                                tile=4, block=PASS_BLOCK, report=report)
    assert report.online_regions
    assert_rows_match(got, keep, q, k, v, plan, arrays)


def test_compiled_causal_with_a_mask_and_heads(fused_config):
    # grouped-query heads (4 query heads on 2 K/V heads), causal and a left-padding mask together:
    # row i sees keys in [pad, i]; rows before the padding see nothing
    heads, kv_heads, t = 4, 2, 2 * PASS_BLOCK + 40
    rng = np.random.default_rng(3)
    q = rng.standard_normal((heads, t, D)).astype(np.float32)
    k, v = (rng.standard_normal((kv_heads, t, D)).astype(np.float32) for _ in range(2))
    keep = np.broadcast_to(np.arange(t)[None, :] >= PASS_BLOCK + 5, (t, t)).copy()
    plan = nn.trace(lambda a, b, c, m: nn.attention(a, b, c, mask=m, causal=True),
                    nn.spec((heads, t, D)), nn.spec((kv_heads, t, D)), nn.spec((kv_heads, t, D)), nn.spec((t, t), "bool"))
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert _one_pass_used(compiled)
    got = compiled(q, k, v, keep)
    for h in range(heads):
        sub = weft.oracle.run(plan, q, k, v, keep)[h]
        expected = attention64(q[h], k[h // 2], v[h // 2], keep=keep & np.tri(t, dtype=bool))
        visible = (keep & np.tri(t, dtype=bool)).any(axis=-1)
        assert_inference_close(got[h][visible], expected[visible])
        assert np.array_equal(got[h][~visible], sub[~visible], equal_nan=True)


@pytest.mark.parametrize("window", [1, 16, PASS_BLOCK + 1])
def test_compiled_sliding_window_additive(fused_config, window):
    # a sliding window as an additive mask with finite penalties inside the window and -inf outside
    t = 3 * PASS_BLOCK + 5
    j, i = np.arange(t)[None, :], np.arange(t)[:, None]
    keep = (j <= i) & (j > i - window)
    additive = np.where(keep, -0.25 * (i - j), -np.inf).astype(np.float32)
    plan = nn.trace(lambda a, b, c, m: nn.attention(a, b, c, mask=m),
                    nn.spec((t, D)), nn.spec((t, D)), nn.spec((t, E)), nn.spec((t, t)))
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert _one_pass_used(compiled)
    q, k, v = _inputs(4, tq=t, tk=t)
    got = compiled(q, k, v, additive)
    assert np.all(np.isfinite(got))
    assert_inference_close(got, attention64(q, k, v, additive=additive))


# ---------------------------------------------------------------------- large scores


def _argmax_reference(q, k, v):
    """At these magnitudes softmax is one-hot at each row's largest score (float64, no exp)."""
    s = np.asarray(q, np.float64) @ np.asarray(k, np.float64).T
    return np.asarray(v, np.float64)[s.argmax(axis=1)]


@pytest.mark.parametrize("scale", [1e10, 1e20, 1e30])
@pytest.mark.parametrize("keys", [100, 3 * PASS_BLOCK + 7])
def test_compiled_one_pass_at_huge_scores(fused_config, scale, keys):
    rng = np.random.default_rng(5)
    q = (rng.standard_normal((9, 8)) * scale).astype(np.float32)
    k, v = rng.standard_normal((keys, 8)).astype(np.float32), rng.standard_normal((keys, 16)).astype(np.float32)
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c), nn.spec((9, 8)), nn.spec((keys, 8)), nn.spec((keys, 16)))
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert _one_pass_used(compiled)
    got = compiled(q, k, v)
    assert np.all(np.isfinite(got))
    assert_inference_close(got, attention64(q, k, v))
    assert_inference_close(got, _argmax_reference(q, k, v))


@pytest.mark.parametrize("scale", [1e10, 1e20, 1e30])
def test_compiled_one_pass_at_huge_scores_with_an_additive_mask(fused_config, scale):
    # the mask is added to the scaled scores: s * c + mask must be one rounded value for the max and the exp
    tq, tk = 7, 2 * PASS_BLOCK + 9
    rng = np.random.default_rng(6)
    q = (rng.standard_normal((tq, 8)) * scale).astype(np.float32)
    k, v = rng.standard_normal((tk, 8)).astype(np.float32), rng.standard_normal((tk, 4)).astype(np.float32)
    additive = np.where(np.arange(tk)[None, :] >= 3 * np.arange(tq)[:, None], np.float32(scale / 7), -np.inf)
    additive = additive.astype(np.float32)
    plan = nn.trace(lambda a, b, c, m: nn.attention(a, b, c, mask=m),
                    nn.spec((tq, 8)), nn.spec((tk, 8)), nn.spec((tk, 4)), nn.spec((tq, tk)))
    compiled = weft.compile(plan, config=fused_config("inference"))
    assert _one_pass_used(compiled)
    got = compiled(q, k, v, additive)
    assert np.all(np.isfinite(got))
    assert_inference_close(got, attention64(q, k, v, additive=additive))


@pytest.mark.parametrize("scale", [1e10, 1e30])
def test_reference_schedule_at_huge_scores(scale):
    rng = np.random.default_rng(7)
    q = (rng.standard_normal((5, 8)) * scale).astype(np.float32)
    k, v = rng.standard_normal((150, 8)).astype(np.float32), rng.standard_normal((150, 3)).astype(np.float32)
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c), nn.spec((5, 8)), nn.spec((150, 8)), nn.spec((150, 3)))
    got = run_partition_outputs(plan, choose_regions(plan, "greedy", "inference"), q, k, v, tile=2, block=PASS_BLOCK)
    assert_inference_close(got, attention64(q, k, v))
