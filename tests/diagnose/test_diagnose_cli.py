"""weft diagnose on the built-in attention workload: quadratic memory, members named."""

import json

from plans.profiles import fixed_profile

from weft.cli import main  # noqa: E402


def test_diagnose_attention_names_the_quadratic_members(capsys, tmp_path, monkeypatch):
    # the flag compares the chain's work with the ridge point: a fixed profile, not the one
    # calibrated on this machine (under load it moves the ridge and the flag with it)
    monkeypatch.setattr("weft.cost.machine.machine_profile", lambda recalibrate=False: fixed_profile())
    png, data = tmp_path / "roof.png", tmp_path / "d.json"
    argv = ["diagnose", "attention", "--size", "heads=1", "--size", "head_dim=16", "--sizes", "64,128",
            "--repeats", "1", "--plot", str(png), "--json", str(data)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "tokens 64 -> 128" in text and "Quadratic" in text
    assert "Members responsible" in text
    for member in ("attn_scores", "attn_exp", "attn_probs"):
        assert f"    {member}: (1, 1, 64, 64) -> (1, 1, 128, 128)" in text
    assert "FLAGGED" in text and png.stat().st_size > 1000
    record = json.loads(data.read_text())
    assert record["memory"]["responsible"] == ["attn_scores", "attn_exp", "attn_probs"]
    assert record["memory"]["quadratic"] and len(record["functions"]) == 6


def test_diagnose_layernorm_is_linear(capsys):
    assert main(["diagnose", "layernorm", "--size", "rows=64", "--size", "dim=64", "--repeats", "1"]) == 0
    text = capsys.readouterr().out
    assert "Linear (or slower) in rows" in text


def test_diagnose_rejects_a_peer_arm(capsys):
    assert main(["diagnose", "softmax", "--arm", "torch-eager"]) == 2
    assert "Weft arms only" in capsys.readouterr().err
