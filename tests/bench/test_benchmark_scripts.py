"""The benchmark scripts' own logic: what ``--depths`` names (compile_time.py) and that a
side-by-side compile runs the checkout it names (cold_compile_against.py)."""

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
