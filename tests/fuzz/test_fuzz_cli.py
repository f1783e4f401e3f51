"""The command: counts, JSON result, exit status, and how failures are told apart."""

from __future__ import annotations

import json

import pytest

from weft.fuzz.check import Outcome
from weft.fuzz.cli import known_bugs, main, mismatch_kind, same_failure
from weft.fuzz.generate import KNOWN_BUGS


def test_a_small_run_writes_its_counts_and_exits_zero_when_clean(tmp_path, fuzz_cache, monkeypatch, capsys):
    monkeypatch.setenv("WEFT_CACHE_DIR", str(fuzz_cache))
    out = tmp_path / "fuzz.json"
    # three elementwise-heavy programs of seed 0 (strict, fusion off) are clean on every branch
    status = main(["--programs", "3", "--seed", "0", "--json", str(out), "--avoid-known-bugs"])
    result = json.loads(out.read_text())
    assert result["programs"] == 3
    assert result["ok"] + result["refusals"] + result["mismatches"] + result["crashes"] == 3
    assert status == (1 if result["mismatches"] or result["crashes"] else 0)
    assert "weft fuzz: 3 programs (contract=strict, fusion=off" in capsys.readouterr().out
    assert sorted(result["avoided_known_bugs"]) == sorted(KNOWN_BUGS)


def test_known_bug_names_are_checked():
    assert known_bugs("") == frozenset()
    assert known_bugs("all") == frozenset(KNOWN_BUGS)
    with pytest.raises(SystemExit):
        known_bugs("no-such-bug")


def test_failures_of_different_kinds_are_not_the_same_failure():
    nan = Outcome("mismatch", "output 0 (v1): 3 of 9 elements differ (at (0,): compiled=np.float64(nan), ...")
    off = Outcome("mismatch", "output 0 (v1): 1 of 9 elements differ (at (0,): compiled=np.float64(1.5), ...")
    wrong_int = Outcome("mismatch", "output 0 (v1): 1 of 9 elements differ (at (0,): compiled=np.int32(3), ...")
    assert [mismatch_kind(o.message) for o in (nan, off, wrong_int)] == ["nan", "value", "integer"]
    assert not same_failure(off, nan) and same_failure(nan, nan)
    crash = Outcome("crash", "KeyError: 'e'\nTraceback ...", "compile")
    assert same_failure(Outcome("crash", "KeyError: 'e'\nother frames", "compile"), crash)
    assert not same_failure(Outcome("crash", "worker process killed by SIGFPE", "process"), crash)


def test_an_internal_error_wrapped_in_a_weft_error_is_a_crash_not_a_refusal():
    from weft.errors import CompileError, ShapeError
    from weft.fuzz.check import _failure

    try:
        try:
            {}["adam_m"]
        except KeyError as problem:
            raise CompileError("internal error while rendering C for plan p: KeyError: 'adam_m'") from problem
    except CompileError as error:
        internal = _failure("compile", error)
    assert internal.status == "crash" and "KeyError" in internal.message and internal.stage == "compile"
    assert _failure("trace", ShapeError("x: shapes (2,) and (3,) do not broadcast")).status == "refusal"
