"""A warm priced compile reuses its whole compile record while every verdict it rests on is
still in the decision record as it was; a changed verdict makes it decide again."""

from dataclasses import replace

import pytest

import weft
from weft.config import config_from_env
from weft.decide.race import RaceBudget
from weft.decide.record import DecisionRecord
from weft.workloads import get_workload


def _compile(name="layernorm", **settings):
    workload = get_workload(name)
    plan, inputs = workload.plan(**workload.small), workload.inputs(**workload.small)
    config = config_from_env(**{"contract": "inference", "threads": 1, "fusion": "priced", "budget_s": 30,
                                **settings})
    return weft.compile(plan, config=config), inputs


def test_a_warm_priced_compile_is_the_cold_one_reused_whole(cache):
    cold, inputs = _compile()
    assert not cold.from_record and cold.decide_report.rests_on
    warm, _ = _compile()
    report = warm.decide_report
    assert warm.from_record and report.from_compile_record
    assert (report.priced, report.price_calls, report.raced, report.written) == (0, 0, 0, 0)
    assert report.recorded == len(cold.decide_report.rests_on)
    assert warm.kernel_set() == cold.kernel_set()
    assert warm.output_digest(*inputs) == cold.output_digest(*inputs)
    # explain still shows the regions (decided again from the decision record, no price)
    assert warm.partition is not None and warm.partition.pricing.priced == 0
    assert [r.members for r in warm.partition.fused] == [r.members for r in cold.partition.fused]


def test_a_changed_verdict_makes_the_compile_decide_again(cache):
    cold, _ = _compile()
    record = DecisionRecord.in_cache(cache)
    first = cold.decide_report.rests_on[0]
    flipped = replace(first, choice="unfused" if first.choice == "fused" else "fused")
    record.put_many([flipped], replace=True)
    record.close()
    again, _ = _compile()
    assert not again.from_record and not again.decide_report.from_compile_record
    assert again.decide_report.recorded > 0 and again.decide_report.priced == 0


def test_another_thread_count_is_another_compile_record(cache):
    _compile(threads=1)
    other, _ = _compile(threads=2)
    assert not other.from_record and other.decide_report.priced > 0


def test_a_race_is_not_started_when_its_share_cannot_hold_a_build():
    budget = RaceBudget(0.5)
    assert budget.can_race()  # the prior build estimate fits
    budget.build_s = 0.6  # a measured build longer than the share
    assert not budget.can_race()
    budget = RaceBudget(0.5, spent=0.3)
    assert not budget.can_race()  # 0.2 s left: less than the prior 0.3 s build


def test_a_race_is_not_started_when_its_share_cannot_hold_its_timing():
    """sam3-encoder's window attention (calls of ~0.1 s each) built its contenders and then
    could not time two blocks in what was left: the model's times per call now say so first."""
    from weft.decide.race import MIN_BLOCKS, WARMUPS, timing_estimate

    assert timing_estimate((0.1, 0.05)) == pytest.approx(0.15 * (WARMUPS + 2 * MIN_BLOCKS))
    budget = RaceBudget(1.0)
    assert budget.can_race(timing_estimate((1e-3, 1e-3)))  # 12 ms of calls and a 0.3 s build fit 1 s
    assert not budget.can_race(timing_estimate((0.1, 0.05)))  # 0.9 s of calls do not


def test_the_race_under_way_counts_against_its_share():
    import time

    budget = RaceBudget(10.0)
    budget.running_since = time.perf_counter() - 4.0
    assert budget.left() == pytest.approx(6.0, abs=0.5)


def test_a_compile_whose_budget_left_candidates_undecided_is_reused_warm(cache):
    """A cold priced compile that spends its pricing budget before every candidate (minilm-6
    on a busy machine) leaves them unfused and unrecorded; the warm compile with the same
    budget must still be the cold one reused whole (no price, the same kernels), not a new
    pricing of what is left; a larger budget decides again."""
    cold, inputs = _compile("vit-block", budget_s=0.05)
    assert cold.decide_report.undecided and not cold.from_record
    warm, _ = _compile("vit-block", budget_s=0.05)
    report = warm.decide_report
    assert warm.from_record and report.from_compile_record
    assert (report.priced, report.price_calls, report.raced, report.written) == (0, 0, 0, 0)
    assert report.undecided == cold.decide_report.undecided
    assert warm.kernel_set() == cold.kernel_set()
    assert warm.output_digest(*inputs) == cold.output_digest(*inputs)
    larger, _ = _compile("vit-block", budget_s=30)
    assert not larger.from_record and larger.decide_report.price_calls > 0


def test_a_compile_record_left_undecided_yields_to_verdicts_recorded_since(cache):
    """Another compile (a concurrent one, or one with the time) recorded a verdict this one's
    budget left undecided: the next compile decides again from the record, as that one did."""
    from weft.decide.record import Decision

    cold, _ = _compile("vit-block", budget_s=0.05)
    left = cold.decide_report.undecided[0]
    record = DecisionRecord.in_cache(cache)
    record.put(Decision(key=left, choice="unfused", source="model", status="priced", created=1.0))
    record.close()
    again, _ = _compile("vit-block", budget_s=0.05)
    assert not again.decide_report.from_compile_record
    assert left not in again.decide_report.undecided


def test_a_verdict_priced_after_the_budget_cut_it_short_is_not_left_undecided(tmp_path):
    """A step cut short by the timer leaves its key undecided; when a later region with the
    same key is priced (the pricer kept what the survey learnt), the key is decided: a
    compile that listed it as undecided too was never reused warm (the warm compile took
    the verdict for one another compile had recorded since, and decided everything again;
    seen on examples/minilm6.py whenever the 10 ms-short steps hit 29 of 240 keys)."""
    from types import SimpleNamespace

    from weft.cost.model import Price
    from weft.cost.search import RegionPrice
    from weft.decide.verdicts import DecidedPricing

    def price(cycles):
        return Price(cycles=cycles, compute=cycles, data=0.0, overhead=0.0, served=(0.0, 0.0, 0.0, 0.0))

    answers = [RegionPrice("sig", "budget", reason="cut short"),
               RegionPrice("sig", "priced", unfused=price(100.0), fused=price(50.0), form="fused")]

    class Pricing:
        report = SimpleNamespace()
        member_homes = {}

        def verdict(self, region):
            return answers.pop(0)

        def signature(self, region):
            return "sig"

        def buffer_order(self, region):
            return ("x", "y")

    record = DecisionRecord(tmp_path / "decisions.sqlite")
    key_base = dict(contract="inference", threads=1, profile_id="p", deciding="d", compiler="cc")
    pricer = DecidedPricing(Pricing(), record, key_base)
    first, second = (SimpleNamespace(members=members, is_fused=True) for members in (("a", "b"), ("c", "d")))
    assert pricer.verdict(first).status == "budget"
    assert list(pricer.undecided)  # undecided for now
    assert pricer.verdict(second).decision.choice == "fused"
    assert list(pricer.undecided) == []
    record.close()


def test_a_priced_compile_with_nothing_to_decide_is_reused_warm(cache):
    """A plan with no fused candidate (one linear) decides nothing; its priced compile is still
    recorded, so a warm compile is the cold one reused (it used to lower and render again)."""
    import numpy as np

    from weft import nn

    plan = weft.trace(lambda x, w: nn.linear(x, w), weft.spec((17, 64)), weft.spec((100, 64)))
    config = config_from_env(contract="strict", threads=1, fusion="priced")
    cold = weft.compile(plan, config=config)
    assert not cold.from_record and not any(d.verdicts for d in cold.partition.decisions)
    warm = weft.compile(plan, config=config)
    assert warm.from_record and warm.kernel_set() == cold.kernel_set()
    x, w = np.ones((17, 64), np.float32), np.ones((100, 64), np.float32)
    assert warm.output_digest(x, w) == cold.output_digest(x, w)
