"""``weft machine`` and ``weft explain --prices`` from the command line."""

import sys
from pathlib import Path

from weft.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from model_cases import fixed_profile  # noqa: E402


def test_weft_machine_prints_every_measured_fact(monkeypatch, capsys):
    import weft.cost.cli as cost_cli

    calls = []
    monkeypatch.setattr(cost_cli, "machine_profile", lambda recalibrate=False: calls.append(recalibrate) or fixed_profile())
    assert main(["machine", "--calibrate"]) == 0
    assert calls == [True]
    text = capsys.readouterr().out
    for needle in ("clock: 4.00 GHz", "memory 1 thread", "l1     2 threads", "FMA peak", "exp:", "log:", "divide:",
                   "parallel region", "runner call", "first touch", "L1d 48 KiB"):
        assert needle in text, needle


def test_weft_explain_prices_shows_cycles_and_margins(monkeypatch, capsys, tmp_path):
    import importlib

    fuse_module = importlib.import_module("weft.fuse")
    original = fuse_module.region_pricing
    monkeypatch.setattr(fuse_module, "region_pricing",
                        lambda plan, config, target, profile=None: original(plan, config, target, fixed_profile()))
    assert main(["explain", "layernorm", "--prices", "--set", "rows=512", "--set", "dim=256"]) == 0
    text = capsys.readouterr().out
    assert "policy priced" in text and "cycles" in text and "margin" in text and "pricing:" in text


def test_weft_explain_prices_is_what_the_compile_decides_library_bodies_included(monkeypatch, capsys, tmp_path):
    """`weft explain --prices` priced compose's candidates only: a fused Adam step showed the
    generic fused form while the compile took the library body. It now shows the compile."""
    from plans.profiles import seed_profile

    seed_profile(tmp_path)  # round numbers under this machine's profile id: no calibration
    monkeypatch.setenv("WEFT_CACHE_DIR", str(tmp_path))
    assert main(["explain", "adam", "--prices", "--set", "params=40000", "--set", "tensors=2"]) == 0
    text = capsys.readouterr().out
    assert "bodies admitted: fused adam" in text and "verdict from" in text and "lowered:" in text
    assert "  price [t0_adam_v t0_adam_param]" in text  # every candidate's price, not only the chosen one
    assert main(["explain", "softmax", "--fusion", "matchers", "--set", "rows=64", "--set", "cols=128"]) == 0
    text = capsys.readouterr().out
    assert "policy matchers" in text and "softmax rows" in text
