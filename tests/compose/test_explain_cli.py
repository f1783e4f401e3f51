"""End to end: ``weft explain WORKLOAD``."""

from __future__ import annotations

import pytest

from weft.cli import main
from weft.errors import WorkloadError
from weft.workloads.params import parse_setting


def test_explain_attention_inference(capsys):
    assert main(["explain", "--fusion", "greedy", "attention", "--contract", "inference", "--set", "tokens=64", "--set", "heads=2"]) == 0
    text = capsys.readouterr().out
    assert "anchor attn_out" in text
    assert "chosen: attn_scores attn_max attn_exp attn_sum attn_probs attn_out" in text
    assert "tile axis i" in text and "rewrite: fired" in text and "never materialised: attn_exp, attn_probs" in text


def test_explain_strict_lists_the_forbidden_rewrite(capsys):
    assert main(["explain", "--fusion", "greedy", "softmax", "--set", "rows=4", "--set", "cols=8"]) == 0
    text = capsys.readouterr().out
    assert "Strict forbids" in text


def test_explain_cross_entropy_lists_unfused_with_reason(capsys):
    assert main(["explain", "--fusion", "greedy", "cross-entropy", "--set", "tokens=4", "--set", "vocab=100"]) == 0
    text = capsys.readouterr().out
    assert "ce_mean: could not take ce_count: no common tile axis" in text
    assert "could not take ce_loss: no common tile axis" in text


def test_explain_off_policy(capsys):
    assert main(["explain", "layernorm", "--fusion", "off", "--set", "rows=4", "--set", "dim=8"]) == 0
    assert "0 fused" in capsys.readouterr().out


def test_unknown_workload_is_a_clean_error(capsys):
    assert main(["explain", "no-such-workload"]) == 2
    assert "unknown workload" in capsys.readouterr().err


def test_parse_setting():
    assert parse_setting("tokens=256") == ("tokens", 256)
    assert parse_setting("eps=1e-5") == ("eps", 1e-5)
    assert parse_setting("projection=true") == ("projection", True)
    with pytest.raises(WorkloadError, match="KEY=VALUE"):
        parse_setting("tokens")


def test_explain_with_lowering_compiles(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("WEFT_CACHE_DIR", str(tmp_path))
    assert main(["explain", "--fusion", "greedy", "cross-entropy", "--contract", "inference", "--lowering", "--set", "tokens=8", "--set", "vocab=64"]) == 0
    text = capsys.readouterr().out
    assert "lowered:" in text and "one pass (rescaled)" in text
    # softmax needs E = exp(x - m) itself (P = E / L): the rewrite is legal, the plain fused form is used
    assert main(["explain", "--fusion", "greedy", "softmax", "--contract", "inference", "--lowering", "--set", "rows=8", "--set", "cols=64"]) == 0
    text = capsys.readouterr().out
    assert "rewrite: fired" in text and "one pass not used: softmax_exp needs the terms" in text
    assert "one pass (rescaled)" not in text


def test_explain_vit_block_shows_every_cut_back_and_only_lowerable_regions(capsys):
    """Default sizes: the attention + projection candidate needs ~52 MB of scratch per tile row, the
    MLP candidates would re-read their 16 MB weight every few rows; greedy takes smaller candidates,
    says so, and every region it keeps is one the lowering emits fused (no compile needed)."""
    from weft.compose import choose_regions
    from weft.lower.fused import region_fits
    from weft.lower.schedule import Target
    from weft.workloads import get_workload

    assert main(["explain", "--fusion", "greedy", "vit-block"]) == 0
    text = capsys.readouterr().out
    assert "cut back: " in text and "exceeds the 262,144 B budget; took candidate" in text
    assert "out of cache) fewer than" in text
    assert "chosen: attn_scores attn_max attn_exp attn_sum attn_probs attn_out" in text
    plan = get_workload("vit-block").plan()
    fits = region_fits(plan, Target(lanes=16, contract="strict"))
    partition = choose_regions(plan, "greedy", "strict", fits=fits)
    assert len(partition.fused) >= 5 and all(fits(region) is None for region in partition.regions)
