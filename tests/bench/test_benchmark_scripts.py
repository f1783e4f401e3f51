"""The benchmark scripts' own logic: what ``--depths`` names (compile_time.py) and that a
side-by-side compile runs the checkout it names (cold_compile_against.py), and the attention
roof from the profile and from rates measured now (attention_roof.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import cold_compile_against  # noqa: E402
import compile_time  # noqa: E402


def test_depths_take_numbers_and_full_in_one_list():
    deepest = compile_time.DEPTHS["sam3-encoder"][-1]
    assert compile_time.wanted_depths("sam3-encoder", "4,full") == (4, deepest)
    assert compile_time.wanted_depths("sam3-encoder", "full") == (deepest,)
    assert compile_time.wanted_depths("sam3-encoder", "all") == compile_time.DEPTHS["sam3-encoder"]
    assert compile_time.wanted_depths("sam3-encoder", "4,4") == (4,)


@pytest.mark.parametrize("words", ["4,x", "0", "-1", "4,,full"])
def test_a_bad_depth_names_the_word_and_the_forms(words):
    with pytest.raises(SystemExit, match="neither a positive number nor 'full'"):
        compile_time.wanted_depths("sam3-encoder", words)


def test_a_child_that_imports_another_checkout_stops_the_comparison(tmp_path):
    """A folder without weft in it as the base: its child can only import another checkout's
    weft (the installed one), and the comparison must stop rather than time it as the base."""
    (tmp_path / "machine" / "machine").mkdir(parents=True)
    (tmp_path / "not-weft").mkdir()
    args = argparse.Namespace(workload="softmax", contract="inference", threads=1, fusion="off")
    with pytest.raises(SystemExit, match="not the checkout asked for"):
        cold_compile_against.cold(tmp_path / "not-weft", tmp_path / "machine", args)


def test_the_attention_roof_is_reported_from_the_profile_and_from_rates_measured_now():
    """A profile calibrated at another clock moves the roof; the live rates give their own."""
    import attention_roof

    class Profile:  # the profile's two rates, at half the live ones
        profile_id, measured_at, lanes, cores = "p", "then", 16, 2

        def fma_peak(self, threads):
            return 100e9 * threads

        def unary_rate(self, kind):
            return 200e6 if kind == "exp" else 0.0

    live = attention_roof.LiveRates(lanes=16, cores=2, fma_flops_per_core=200e9, exp_vectors_per_s=400e6)
    result = {"params": {"batch": 1, "heads": 1, "tokens": 1024, "head_dim": 32}, "settings": {"threads": 1},
              "in_process": {"roofline": {"arms": {
                  "priced+inference": {"median_s": 0.004, "fraction_of_floor": 1.0},
                  "torch-sdpa": {"median_s": 0.008, "fraction_of_floor": 0.5}}}}}
    out = attention_roof.report(result, Profile(), live)
    scores = 1024 * 1024
    fma_s, exp_s = 4.0 * scores * 32 / 100e9, scores / 16 / 200e6
    assert out["roof"]["roof_s"] == pytest.approx(fma_s + exp_s)
    assert out["live_roof"]["roof_s"] == pytest.approx((fma_s + exp_s) / 2)
    row = out["arms"]["priced+inference"]
    assert row["of_roof"] == pytest.approx((fma_s + exp_s) / 0.004)
    assert row["of_live_roof"] == pytest.approx(row["of_roof"] / 2)
    assert row["sdpa_over_arm"] == pytest.approx(2.0)
    assert attention_roof.report(result, Profile())["arms"]["torch-sdpa"]["of_live_roof"] is None
