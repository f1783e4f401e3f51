"""The race: the decision over given timings, ABBA order, and the budget."""

import io

import numpy as np
import pytest

import weft
from weft.config import config_from_env
from weft.decide.race import RaceInputs, judge, position_spread, run_race, time_abba
from weft.workloads import get_workload


def test_a_clear_measured_margin_decides():
    assert judge("unfused", unfused_s=2.0, fused_s=1.0, spread=0.02)[:2] == ("fused", False)
    choice, kept, note = judge("fused", unfused_s=1.0, fused_s=1.5, spread=0.02)
    assert (choice, kept) == ("unfused", False) and "overrules" in note


def test_a_spread_wider_than_the_margin_keeps_the_model_and_says_so():
    choice, kept, note = judge("fused", unfused_s=1.00, fused_s=1.03, spread=0.05)
    assert (choice, kept) == ("fused", True) and "inconclusive" in note and "model's choice" in note
    assert judge("unfused", unfused_s=1.00, fused_s=0.97, spread=0.05)[:2] == ("unfused", True)


def test_position_spread_is_the_largest_gap_between_an_arms_positions():
    positions = {"a": ([1.0, 1.0], [1.1, 1.1]), "b": ([2.0], [2.0])}
    assert position_spread(positions) == pytest.approx(0.1)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _contenders(clock, costs, calls):
    def make(name):
        def run():
            calls.append(name)
            clock.now += costs[name]
        return run
    return {name: make(name) for name in costs}


def test_blocks_alternate_abba_baab_and_warmups_are_dropped():
    clock, calls = FakeClock(), []
    positions, rounds = time_abba(_contenders(clock, {"unfused": 2.0, "fused": 1.0}, calls), seconds=1000.0,
                                  clock=clock, warmups=2, max_blocks=4)
    assert calls[:4] == ["unfused", "fused"] * 2  # warm-ups
    timed = calls[4:]
    assert timed == ["unfused", "fused", "fused", "unfused", "fused", "unfused", "unfused", "fused"] * 2
    assert rounds == {"unfused": [2.0] * 8, "fused": [1.0] * 8}
    assert positions["unfused"] == ([2.0] * 4, [2.0] * 4)


def test_the_race_decides_from_fake_timings():
    clock = FakeClock()
    outcome = run_race(_contenders(clock, {"unfused": 3.0, "fused": 2.0}, []), "unfused", 1000.0, clock)
    assert outcome.choice == "fused" and not outcome.kept_model
    assert outcome.medians == {"unfused": 3.0, "fused": 2.0}
    assert outcome.measured_margin == pytest.approx(1 / 3)


def test_no_race_when_the_time_cannot_hold_two_blocks():
    clock = FakeClock()
    assert run_race(_contenders(clock, {"unfused": 1.0, "fused": 1.0}, []), "fused", 5.0, clock) is None


def test_race_inputs_have_the_real_shapes_and_no_zeros():
    workload = get_workload("attention")
    plan = workload.plan(**workload.small)
    arrays = RaceInputs().for_plan(plan)
    buffers = plan.buffer_map()
    for name, array in zip(plan.inputs, arrays, strict=True):
        assert array.shape == buffers[name].shape
        if array.dtype == np.float32:
            assert np.all(array != 0)


def test_race_inputs_of_a_large_input_repeat_one_random_block():
    """A race of sam3-encoder's window attention drew 48 M normal floats for its scores (0.72 s,
    more than the race share): a large input now repeats ``RANDOM_BLOCK`` drawn values."""
    from weft.decide.race import RANDOM_BLOCK

    plan = weft.trace(lambda x: x * 2.0, weft.nn.spec((1000, 999)))
    (array,) = RaceInputs().for_plan(plan)
    assert array.shape == (1000, 999) and array.dtype == np.float32 and array.flags.c_contiguous
    assert np.all(array != 0) and np.all(np.isfinite(array))
    flat = array.reshape(-1)
    assert 0.99 * RANDOM_BLOCK < len(np.unique(flat)) <= RANDOM_BLOCK  # the drawn values (float32 draws may tie), repeated
    assert np.array_equal(flat[RANDOM_BLOCK:2 * RANDOM_BLOCK], flat[:RANDOM_BLOCK])
    assert not np.array_equal(array[1], array[0])  # the prime block does not line up with the rows
    assert abs(float(flat.mean())) < 0.05 and 0.95 < float(flat.std()) < 1.05  # still standard normal
    (again,) = RaceInputs().for_plan(plan)
    assert np.array_equal(again, array)  # the same inputs in every process (seeded)


def test_race_inputs_keep_a_0_d_input_0_d():
    """Found by ``python -m weft.fuzz --seed 2029 --contract strict --fusion priced``: a
    cross-entropy over a 0-d label raced its contenders on a (1,)-shaped label
    (``numpy.ascontiguousarray`` makes 0-d arrays 1-d) and the compile failed on an InputError."""
    from weft import nn
    from weft.nn import spec

    def scaled(x, s):
        return nn.softmax(x * s, axis=-1)

    plan = weft.trace(scaled, spec((4, 8)), spec(()))
    arrays = RaceInputs().for_plan(plan)
    assert [a.shape for a in arrays] == [(4, 8), ()]
    assert all(a.flags.c_contiguous for a in arrays)


def _compile(cache, **config):
    workload = get_workload("softmax")
    plan = workload.plan(**workload.small)
    settings = dict(contract="strict", threads=1, fusion="priced", budget_s=20, race_margin=10.0)
    settings.update(config)
    return weft.compile(plan, config=config_from_env(**settings))


def test_a_race_share_of_zero_means_no_race(cache):
    compiled = _compile(cache, race_share=0.0)
    report = compiled.decide_report
    assert report.raced == 0 and report.race_skipped == report.priced > 0
    text = io.StringIO()
    compiled.explain(file=text)
    assert "not raced" in text.getvalue() and "verdict from model" in text.getvalue()


def test_thin_margins_are_raced_and_explain_shows_the_timings(cache):
    compiled = _compile(cache, race_share=0.5)
    assert compiled.decide_report.raced > 0
    text = io.StringIO()
    compiled.explain(file=text)
    assert "verdict from race" in text.getvalue() and "race: " in text.getvalue() and " us" in text.getvalue()
    warm = _compile(cache, race_share=0.5)
    assert warm.decide_report.raced == 0 and warm.kernel_set() == compiled.kernel_set()
    text = io.StringIO()
    warm.explain(file=text)
    assert "verdict from record (decided by the race)" in text.getvalue()
