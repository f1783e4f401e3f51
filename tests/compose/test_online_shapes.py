"""The fused Inference attention at odd shapes: value head dims 1..17, key counts from 1 to 200
across the pass's blocks of 64, heads and grouped-query heads, masks; compiled C against
float64 (fully masked rows against the oracle). And an internal error in a compile stage
surfaces as a ``CompileError`` naming the region and member, never a bare ``KeyError``."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.codegen.online import OnlinePassWriter
from weft.config import config_from_env
from weft.errors import CompileError, ShapeError
from weft.fuzz.reference64 import attention64
from weft.lower.online import OnlinePass
from weft.testing import assert_inference_close

# (query heads, K/V heads, queries, keys, head dim, value head dim, mask); 0 heads: (T, D) operands
SHAPES = [
    (0, 0, 1, 16, 4, 1, None),  # issue 8: value head dim 1 with 16 keys crashed the compile
    (0, 0, 3, 1, 4, 1, None),
    (0, 0, 5, 2, 3, 2, "bool"),
    (0, 0, 7, 15, 5, 3, "bool"),
    (0, 0, 2, 17, 8, 4, None),
    (0, 0, 9, 63, 8, 5, "additive"),
    (0, 0, 4, 64, 16, 6, None),
    (0, 0, 3, 65, 8, 7, "bool"),
    (0, 0, 6, 100, 8, 8, "causal"),
    (0, 0, 5, 127, 4, 9, None),
    (0, 0, 3, 128, 8, 10, "additive"),
    (0, 0, 2, 129, 8, 11, "bool"),
    (2, 2, 5, 150, 8, 12, None),
    (4, 2, 3, 131, 8, 13, "bool"),
    (4, 1, 6, 200, 8, 14, "causal"),
    (3, 3, 1, 199, 16, 15, "additive"),
    (2, 1, 17, 190, 8, 16, None),
    (8, 2, 2, 66, 4, 17, "bool"),
    (2, 1, 3, 16, 4, 1, "bool"),
    (4, 2, 33, 70, 8, 1, None),
    (2, 2, 16, 64, 8, 1, "additive"),
]


def _case(hq, hkv, tq, tk, d, e, mask, seed):
    rng = np.random.default_rng(seed)
    lead_q, lead_kv = ((hq,), (hkv,)) if hq else ((), ())
    q = rng.standard_normal(lead_q + (tq, d)).astype(np.float32)
    k = rng.standard_normal(lead_kv + (tk, d)).astype(np.float32)
    v = rng.standard_normal(lead_kv + (tk, e)).astype(np.float32)
    specs = [nn.spec(q.shape), nn.spec(k.shape), nn.spec(v.shape)]
    keep = rng.random((tq, tk)) < 0.3
    keep[0] = False  # one fully masked row (it must give what the oracle gives)
    keep[-1, -1] = True
    if mask == "bool":
        plan = nn.trace(lambda a, b, c, m: nn.attention(a, b, c, mask=m), *specs, nn.spec((tq, tk), "bool"))
        return plan, (q, k, v, keep), dict(keep=keep)
    if mask == "additive":
        additive = np.where(keep, rng.standard_normal((tq, tk)), -np.inf).astype(np.float32)
        plan = nn.trace(lambda a, b, c, m: nn.attention(a, b, c, mask=m), *specs, nn.spec((tq, tk)))
        return plan, (q, k, v, additive), dict(keep=keep, additive=additive)
    causal = mask == "causal"
    plan = nn.trace(lambda a, b, c: nn.attention(a, b, c, causal=causal), *specs)
    keep = np.tri(tq, tk, dtype=bool) if causal else np.ones((tq, tk), bool)
    return plan, (q, k, v), dict(keep=keep)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "h{}kv{}_q{}_k{}_d{}_e{}_{}".format(*s))
def test_fused_inference_attention_at_odd_shapes(fused_config, shape):
    plan, arrays, masks = _case(*shape, seed=sum(shape[:6]))
    compiled = weft.compile(plan, config=fused_config("inference"))
    got = compiled(*arrays)
    keep = masks["keep"]
    expected = attention64(*arrays[:3], keep=keep, additive=masks.get("additive"))
    visible = np.broadcast_to(keep.any(axis=-1), got.shape[:-1])
    assert np.all(np.isfinite(got[visible]))
    assert_inference_close(got[visible], expected[visible])
    if not visible.all():
        oracle = weft.oracle.run(plan, *arrays)
        assert np.array_equal(got[~visible], oracle[~visible], equal_nan=True)


def test_the_shapes_take_the_one_pass(fused_config):
    # the sweep is about the one pass: most of its shapes (every one with 16 keys or more) take it
    taken = []
    for shape in SHAPES:
        plan, _, _ = _case(*shape, seed=0)
        compiled = weft.compile(plan, config=fused_config("inference"))
        if any(isinstance(n, OnlinePass) for f in compiled.lowered.functions for n in f.nests):
            taken.append(shape)
    assert [s for s in SHAPES if s[3] >= 16 and s not in taken] == []


def _issue_plan():
    return weft.trace(lambda q, k, v: nn.attention(q, k, v), weft.spec((1, 4)), weft.spec((16, 4)), weft.spec((16, 1)))


def _patched_config(tmp_path):
    # a fresh cache: the compile record (keyed by Weft's source files, not by patched objects)
    # must not hand back a lowering made before the patch
    return config_from_env(contract="inference", threads=2, fusion="greedy", cache_dir=tmp_path)


def test_an_internal_error_names_the_region_and_member(tmp_path, monkeypatch):
    def broken(self, *args, **kwargs):
        raise KeyError("e")

    monkeypatch.setattr(OnlinePassWriter, "_write_finals", broken)  # every form of the pass calls it
    with pytest.raises(CompileError) as caught:
        weft.compile(_issue_plan(), config=_patched_config(tmp_path))
    message = str(caught.value)
    assert "KeyError" in message and "bug in Weft" in message
    assert "region attn_scores, attn_max" in message and "member attn_" in message
    assert isinstance(caught.value.__cause__, KeyError)


def test_a_weft_error_inside_a_stage_passes_through(tmp_path, monkeypatch):
    def refuses(self, *args, **kwargs):
        raise ShapeError("attention: a deliberate refusal")

    monkeypatch.setattr(OnlinePassWriter, "_write_finals", refuses)
    with pytest.raises(ShapeError, match="deliberate refusal"):
        weft.compile(_issue_plan(), config=_patched_config(tmp_path))
