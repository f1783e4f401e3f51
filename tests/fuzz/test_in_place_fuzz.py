"""Random programs with outputs written over their inputs (``python -m weft.fuzz --in-place``):
every pair ``weft.lower.in_place`` accepts must leave the oracle's values (Strict: bytes) in
the caller's arrays, fused or not."""

from __future__ import annotations

import pytest

import weft.fuzz.check as check
from weft.fuzz.generate import Options
from weft.fuzz.makers import generate


@pytest.mark.parametrize("fusion", ["off", "greedy"])
def test_random_programs_written_in_place_match_the_oracle(fusion, monkeypatch):
    accepted = []

    def counted(plan, lowered, pairs_of=check.in_place_pairs):
        pairs = pairs_of(plan, lowered)
        accepted.append(len(pairs))
        return pairs

    monkeypatch.setattr(check, "in_place_pairs", counted)
    settings = check.Settings("strict", fusion, 2, in_place=True)
    outcomes = []
    for batch in range(3):
        programs = [generate(1604, index, Options()) for index in range(10 * batch, 10 * batch + 10)]
        outcomes += check.check_batch(programs, settings)
    assert [o for o in outcomes if o.status != "ok"] == []
    assert sum(accepted) >= 6, accepted  # the mode wrote outputs over inputs, not only around them
