"""The fuzzer's shrunk reproducers of issue 8's defects (weft/fuzz/FINDINGS.md) keep the
contract. Each ran in a worker process, so a trap fails the test instead of killing it;
each failed on main before the issue 8 fixes (d62fb13); the seventh before h17-ground."""

from __future__ import annotations

import pytest

from weft.fuzz.check import Settings
from weft.fuzz.program import InputDef, Op, Program, Ref
from weft.fuzz.worker import Pool

F = "float32"


def _program(inputs, fn, args=None, kwargs=(), shape=(), dtype=F) -> Program:
    items = tuple(InputDef(f"in{n}", tuple(s), d, fill) for n, (s, d, fill) in enumerate(inputs))
    args = tuple(Ref(i.name) for i in items) if args is None else args
    return Program(3, (), items, (Op(("v0",), fn, args, kwargs, (tuple(shape),), (dtype,)),), ("v0",))


ATTENTION = (Ref("in0"), Ref("in1"), Ref("in2"))
FINDINGS = {
    "1-masked-attention-nan": (_program(
        [(("1", "3", "87", "3"), F, "normal:8"), (("1", "3", "257", "3"), F, "normal"),
         (("1", "3", "257", "5"), F, "small"), (("87", "257"), F, "addmask:alternate")],
        "attention", ATTENTION, (("causal", True), ("mask", Ref("in3"))), ("1", "3", "87", "5")),
        "inference", "greedy"),
    "2-int-min-div-sigfpe": (_program(
        [(("35", "1", "2"), "int64", "int_extremes"), (("35", "1", "2"), "int64", "int_extremes")],
        "div", shape=("35", "1", "2"), dtype="int64"), "strict", "off"),
    "3-int-min-div-oracle": (_program(
        [(("16",), "int32", "int_extremes"), (("1",), "int32", "int_extremes")], "div", shape=("16",),
        dtype="int32"), "inference", "off"),
    "4-float-int-cast": (_program([(("40",), F, "special")], "cast", (Ref("in0"), "int32"), shape=("40",),
                                  dtype="int32"), "inference", "off"),
    "5-huge-score-nan": (_program(
        [(("40", "8"), F, "normal:1e10"), (("200", "8"), F, "normal"), (("200", "8"), F, "normal")],
        "attention", ATTENTION, shape=("40", "8")), "inference", "greedy"),
    "6-value-dim-1": (_program(
        [(("1", "6", "1", "3"), F, "ones"), (("1", "3", "16", "3"), F, "ones"), (("1", "3", "16", "1"), F, "ones")],
        "attention", ATTENTION, (("scale", 1.0),), ("1", "6", "1", "1")), "inference", "greedy"),
    # a later run (seed 7, program 58): the mean square overflowed for |x| ~ 1e30 and the output
    # was 0; rows up to an rms of 2**102 now normalise (its +-3e38 values are beyond that range)
    "7-rms-norm-huge": (_program([(("12", "4"), F, "normal:1e30")], "rms_norm", shape=("12", "4")),
                        "inference", "off"),
}


@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_fuzz_finding_stays_fixed(name, fuzz_cache, monkeypatch):
    monkeypatch.setenv("WEFT_CACHE_DIR", str(fuzz_cache))
    program, contract, fusion = FINDINGS[name]
    pool = Pool(Settings(contract, fusion, threads=1), timeout=300)
    try:
        outcome = pool.check([program])[0]
    finally:
        pool.close()
    assert outcome.status == "ok", f"{name}: {outcome.status} at {outcome.stage}: {outcome.message[:800]}"
