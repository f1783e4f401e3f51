"""``weft plan`` and ``weft workloads`` through weft.cli.main."""

from __future__ import annotations

from weft.cli import main


def test_plan_attention_prints_six_members(capsys):
    assert main(["plan", "attention"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan attention: 6 members")
    for name in ("attn_scores", "attn_max", "attn_exp", "attn_sum", "attn_probs", "attn_out"):
        assert name in out
    assert "q[1, 16, 5184, 64]" in out


def test_plan_vit_block_prints_the_block(capsys):
    assert main(["plan", "vit-block"]) == 0
    out = capsys.readouterr().out
    for name in ("norm1_ln_mean", "qkv_linear", "q_rope2d", "attn_scores", "proj_linear", "mlp_gelu",
                 "residual2_add"):
        assert name in out
    assert main(["plan", "vit-block", "--set", "window=0", "--set", "tokens_side=8", "--set", "dim=64"]) == 0
    assert "attn_scores[b0:1, h:16, i:64, j:64]" in capsys.readouterr().out


def test_plan_with_settings_and_errors(capsys):
    assert main(["plan", "attention", "--set", "tokens=128", "--set", "head-dim=32"]) == 0
    assert "q[1, 16, 128, 32]" in capsys.readouterr().out
    assert main(["plan", "attention", "--set", "tokens"]) == 2
    assert "--set expects key=value" in capsys.readouterr().err
    assert main(["plan", "attention", "--set", "tokens=lots"]) == 2
    assert "tokens='lots' is not a valid int" in capsys.readouterr().err
    assert main(["plan", "attention", "--set", "colour=red"]) == 2
    assert "unknown parameter(s) colour" in capsys.readouterr().err
    assert main(["plan", "nonesuch"]) == 2
    assert "valid: attention" in capsys.readouterr().err


def test_workloads_lists_names_descriptions_defaults(capsys):
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    for name in ("attention", "layernorm", "softmax", "adam", "cross-entropy", "vit-block", "qwen-decode-step"):
        assert f"\n{name}\n" in f"\n{out}"
    assert "tokens=5184" in out and "params=50000000" in out and "cache_len=1024" in out
