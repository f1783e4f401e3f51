"""The verdict arithmetic on hand-computed cases (docs/benchmarking.md, rule 4)."""

import pytest

from weft.bench.schedule import block_order, process_round_order, schedule
from weft.bench.verdict import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Block,
    allowed_regression,
    arm_spread,
    compare,
    control_floor,
    decide,
    judge_all,
    paired_ratios,
)


def abba_blocks(a_times, b_times, count=4):
    """``count`` blocks alternating ABBA / BAAB with each arm's (first, second) times."""
    blocks = []
    for index in range(count):
        if index % 2 == 0:
            order = ("A", "B", "B", "A")
            seconds = (a_times[0], b_times[0], b_times[1], a_times[1])
        else:
            order = ("B", "A", "A", "B")
            seconds = (b_times[0], a_times[0], a_times[1], b_times[1])
        blocks.append(Block(order, seconds))
    return blocks


def test_spread_of_six_percent_is_inconclusive():
    assert decide(0.06, 0.0) == INCONCLUSIVE
    # from rounds: A's first position 1.00, second 1.06 -> spread 6%
    blocks = abba_blocks((1.00, 1.06), (1.00, 1.00))
    assert arm_spread(blocks, "A") == pytest.approx(0.06)
    verdict = compare(blocks, "A", "B")
    assert verdict.status == INCONCLUSIVE
    assert verdict.spread == pytest.approx(0.06)


def test_spread_one_percent_regression_one_and_a_half_percent_passes():
    assert decide(0.01, 0.015) == PASS
    # A: 1.00 / 1.01 (spread 1%); B takes 1.5% longer at each position
    blocks = abba_blocks((1.00, 1.01), (1.015, 1.01 * 1.015))
    verdict = compare(blocks, "A", "B")
    assert verdict.spread == pytest.approx(0.01)
    assert verdict.regression == pytest.approx(0.015)
    assert verdict.allowed_regression == pytest.approx(0.02)
    assert verdict.status == PASS


def test_spread_one_percent_regression_three_percent_fails():
    assert decide(0.01, 0.03) == FAIL
    blocks = abba_blocks((1.00, 1.01), (1.03, 1.01 * 1.03))
    verdict = compare(blocks, "A", "B")
    assert verdict.regression == pytest.approx(0.03)
    assert verdict.status == FAIL


def test_spread_three_percent_allows_six_percent():
    assert allowed_regression(0.03) == pytest.approx(0.06)
    assert allowed_regression(0.005) == pytest.approx(0.02)
    assert decide(0.03, 0.059) == PASS
    assert decide(0.03, 0.061) == FAIL
    blocks = abba_blocks((1.00, 1.03), (1.05, 1.03 * 1.05))
    verdict = compare(blocks, "A", "B")
    assert verdict.allowed_regression == pytest.approx(0.06)
    assert verdict.status == PASS


def test_identical_arms_pass_without_speedup():
    blocks = abba_blocks((2.0, 2.0), (2.0, 2.0))
    verdict = compare(blocks, "A", "B", floor=0.0)
    assert verdict.status == PASS
    assert verdict.speedup_of is None and verdict.speedup_factor == 0.0
    assert verdict.paired_median_ratio == pytest.approx(1.0)


def test_speedup_needs_every_round_to_clear_the_floor():
    # B is ~2x faster in every round; floor 1% -> claimed
    blocks = abba_blocks((2.0, 2.02), (1.0, 1.01))
    verdict = compare(blocks, "A", "B", floor=0.01)
    assert verdict.speedup_of == "B"
    assert verdict.speedup_factor == pytest.approx(2.0 / 1.01)
    assert verdict.regression < 0 and verdict.status == PASS
    # one slow round of B overlapping A's range -> no claim, though the median is faster
    blocks[1] = Block(blocks[1].order, (2.5, 2.0, 2.02, 1.01))
    verdict = compare(blocks, "A", "B", floor=0.01)
    assert verdict.speedup_of is None


def test_paired_ratios_and_control_floor_by_hand():
    blocks = [
        Block(("A", "C", "C", "A"), (1.0, 1.02, 1.02, 1.0)),
        Block(("C", "A", "A", "C"), (1.02, 1.0, 1.0, 1.02)),
    ]
    assert paired_ratios(blocks, "A", "C") == pytest.approx([1.02, 1.02])
    assert control_floor(blocks, "A", "C") == pytest.approx(0.02)


def test_judge_all_puts_the_control_first():
    blocks = [
        Block(("A", "A:control", "B", "B", "A:control", "A"), (1.0, 1.0, 3.0, 3.0, 1.0, 1.0)),
        Block(("B", "A:control", "A", "A", "A:control", "B"), (3.0, 1.0, 1.0, 1.0, 1.0, 3.0)),
    ]
    control, slowed = judge_all(blocks, "A", "A:control", ["B"])
    assert control.candidate == "A:control" and control.status == PASS and control.speedup_of is None
    assert slowed.status == FAIL and slowed.regression == pytest.approx(2.0)
    assert slowed.speedup_of == "A"


def test_palindrome_schedule():
    assert block_order(("A", "B"), 0) == ("A", "B", "B", "A")
    assert block_order(("A", "B"), 1) == ("B", "A", "A", "B")
    assert schedule(("A", "B", "C"), 2)[1] == ("B", "C", "A", "A", "C", "B")
    # over as many blocks as arms, every arm opens a block once
    assert sorted(order[0] for order in schedule(("A", "B", "C"), 3)) == ["A", "B", "C"]
    assert process_round_order(("A", "B"), 1) == ("B", "A")
    with pytest.raises(ValueError):
        block_order(("A", "A"), 0)


def test_block_json_round_trip():
    block = Block(("A", "B", "B", "A"), (1.0, 2.0, 2.0, 1.0))
    assert Block.from_json(block.to_json()) == block


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

times = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(times, times, times, times), min_size=2, max_size=6), st.floats(0.01, 100.0))
def test_verdict_is_unchanged_by_the_unit_of_time(rows, scale):
    blocks = [Block(("A", "B", "B", "A") if i % 2 == 0 else ("B", "A", "A", "B"), row) for i, row in enumerate(rows)]
    scaled = [Block(b.order, tuple(s * scale for s in b.seconds)) for b in blocks]
    first, second = compare(blocks, "A", "B", 0.01), compare(scaled, "A", "B", 0.01)
    assert first.status == second.status and first.speedup_of == second.speedup_of
    assert first.paired_median_ratio == pytest.approx(second.paired_median_ratio)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(times, times), min_size=1, max_size=6))
def test_an_arm_against_an_exact_copy_of_itself_passes_without_speedup(rows):
    # both arms see the very same time at each position of each block
    blocks = []
    for i, (first, last) in enumerate(rows):
        order = ("A", "B", "B", "A") if i % 2 == 0 else ("B", "A", "A", "B")
        blocks.append(Block(order, (first, first, last, last)))
    verdict = compare(blocks, "A", "B", floor=control_floor(blocks, "A", "B"))
    assert verdict.speedup_of is None
    assert verdict.status in (PASS, INCONCLUSIVE)  # inconclusive only when first/last drift > 5%
    if verdict.spread <= 0.05:
        assert verdict.status == PASS


def test_a_biased_control_is_reported_as_a_failed_control():
    """Synthetic rounds in place of the A/A retries: a control whose copy is 4% slower in
    every block, on a quiet machine (spread 0.5%), is a failed control, reported first."""
    blocks = [
        Block(("A", "A:control", "A:control", "A"), (1.0, 1.04, 1.045, 1.005)),
        Block(("A:control", "A", "A", "A:control"), (1.04, 1.0, 1.005, 1.045)),
    ] * 4
    control, candidate = judge_all(blocks, "A", "A:control", ["A:control"])
    assert control.candidate == "A:control" and control.status == FAIL
    assert control.regression == pytest.approx((1.04 + 1.045) / 2.005 - 1)
    # the same control with the copy's rounds identical to the arm's passes
    fair = [Block(b.order, tuple(1.0 if "control" in label else 1.0 for label in b.order)) for b in blocks]
    assert judge_all(fair, "A", "A:control", [])[0].status == PASS
    # and noise (spread over 5%) is inconclusive, never a pass
    noisy = [
        Block(("A", "A:control", "A:control", "A"), (1.0, 1.0, 1.1, 1.1)),
        Block(("A:control", "A", "A", "A:control"), (1.0, 1.0, 1.1, 1.1)),
    ]
    assert judge_all(noisy, "A", "A:control", [])[0].status == INCONCLUSIVE


def test_judge_against_another_arm_uses_the_baselines_floor():
    # A (baseline) and its control A' agree to 1%; B takes 1.5 s, C 1.2 s: against B, C is
    # 0.8 of it with every round clearing the A/A floor, and A is 1/1.5 of it.
    from weft.bench.verdict import judge_against

    order = ("A", "A'", "B", "C", "C", "B", "A'", "A")
    blocks = [Block(order, (1.0, 1.01, 1.5, 1.2, 1.2, 1.5, 1.01, 1.0)) for _ in range(4)]
    verdicts = judge_against(blocks, "A", "A'", "B", ["A", "B", "C"])
    assert [(v.baseline, v.candidate) for v in verdicts] == [("B", "A"), ("B", "C")]
    assert verdicts[0].paired_median_ratio == pytest.approx(1.0 / 1.5)
    assert verdicts[1].paired_median_ratio == pytest.approx(0.8)
    assert all(v.floor == pytest.approx(0.01) and v.status == PASS for v in verdicts)
    assert verdicts[1].speedup_of == "C" and verdicts[1].speedup_factor == pytest.approx(1.25)
