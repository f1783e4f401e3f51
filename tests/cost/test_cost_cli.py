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
