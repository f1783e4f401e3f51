"""The verdict rule of docs/benchmarking.md, as pure arithmetic over raw rounds.

Rounds come in *blocks*: every arm runs twice per block, in a palindrome
(``A B B A``, then ``B A A B``), so each arm has a *first* and a *second*
position per block. From those raw times:

- **spread** of an arm: the relative gap between the median (over blocks) of its
  first-position times and the median of its second-position times; the spread of a
  comparison is the larger of its two arms' spreads. Drift inside a block shows up
  here, so a large spread means the machine moved under the measurement.
- **paired ratio** of a block: candidate time / baseline time inside that block (sum
  of the arm's two rounds); the comparison reports the median of these.
- **verdict**: spread over 5% is *inconclusive*; otherwise the allowed regression is
  ``max(2%, 2 x spread)``; a regression (paired-median ratio - 1) inside it is a
  *pass* (non-regression, not a speed-up), past it a *fail*.
- **speed-up**: claimed only when every round of one arm beats every round of the
  other by more than the A/A floor (``min(slow) / max(fast) - 1 > floor``).

Everything here is a pure function of the numbers, so ``weft bench --recompute``
reaches the same verdict from a result file as the run that wrote it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

INCONCLUSIVE_SPREAD = 0.05
"""A spread over this makes a comparison inconclusive."""
MIN_ALLOWED_REGRESSION = 0.02
"""The allowed regression is never below this, however quiet the machine."""

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass(frozen=True, slots=True)
class Block:
    """One palindrome block: arm labels in execution order and each round's seconds."""

    order: tuple[str, ...]
    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.order) != len(self.seconds):
            raise ValueError(f"block has {len(self.order)} arms in its order but {len(self.seconds)} times")

    def times_of(self, arm: str) -> tuple[float, ...]:
        """The arm's rounds in this block, in execution order (first, second)."""
        return tuple(seconds for label, seconds in zip(self.order, self.seconds, strict=False) if label == arm)

    def to_json(self) -> dict:
        return {"order": list(self.order), "seconds": list(self.seconds)}

    @staticmethod
    def from_json(data: dict) -> Block:
        return Block(tuple(data["order"]), tuple(float(s) for s in data["seconds"]))


@dataclass(frozen=True, slots=True)
class ArmStats:
    minimum: float
    median: float
    maximum: float
    rounds: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """One comparison: the candidate against the baseline, judged by the rule."""

    baseline: str
    candidate: str
    status: str  # pass | fail | inconclusive
    spread: float
    allowed_regression: float
    regression: float  # paired-median ratio - 1; positive = candidate slower
    paired_median_ratio: float  # candidate / baseline
    floor: float  # the A/A floor used for the speed-up claim
    speedup_of: str | None  # label of the arm that clears the other by more than the floor
    speedup_factor: float  # min(slow rounds) / max(fast rounds); 0 when none claimed
    baseline_stats: ArmStats
    candidate_stats: ArmStats

    def to_json(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        text = (
            f"{self.candidate} vs {self.baseline}: {self.status.upper()}"
            f" (ratio {self.paired_median_ratio:.3f}, spread {self.spread:.1%},"
            f" allowed regression {self.allowed_regression:.1%})"
        )
        if self.speedup_of:
            text += f"; speed-up of {self.speedup_of}: {self.speedup_factor:.2f}x (every round clears the floor {self.floor:.1%})"
        else:
            text += "; no speed-up claimed"
        return text


def allowed_regression(spread: float) -> float:
    """max(2%, 2 x spread)."""
    return max(MIN_ALLOWED_REGRESSION, 2.0 * spread)


def decide(spread: float, regression: float) -> str:
    """The verdict for a spread and a regression (both fractions, e.g. 0.03 = 3%)."""
    if spread > INCONCLUSIVE_SPREAD:
        return INCONCLUSIVE
    return PASS if regression <= allowed_regression(spread) else FAIL


def arm_rounds(blocks: Sequence[Block], arm: str) -> list[float]:
    return [seconds for block in blocks for seconds in block.times_of(arm)]


def arm_stats(blocks: Sequence[Block], arm: str) -> ArmStats:
    rounds = arm_rounds(blocks, arm)
    if not rounds:
        raise ValueError(f"arm {arm!r} has no rounds in these blocks")
    return ArmStats(min(rounds), statistics.median(rounds), max(rounds), len(rounds))


def position_medians(blocks: Sequence[Block], arm: str) -> tuple[float, float]:
    """Median over blocks of the arm's first-position and second-position times."""
    firsts, seconds = [], []
    for block in blocks:
        times = block.times_of(arm)
        if len(times) != 2:
            raise ValueError(f"arm {arm!r} runs {len(times)} times in block {block.order}; a palindrome block runs each arm twice")
        firsts.append(times[0])
        seconds.append(times[1])
    return statistics.median(firsts), statistics.median(seconds)


def arm_spread(blocks: Sequence[Block], arm: str) -> float:
    """Relative gap between the arm's two position medians."""
    first, second = position_medians(blocks, arm)
    return abs(first - second) / min(first, second)


def paired_ratios(blocks: Sequence[Block], baseline: str, candidate: str) -> list[float]:
    """Per block: the candidate's time over the baseline's (each summed over its rounds)."""
    return [sum(block.times_of(candidate)) / sum(block.times_of(baseline)) for block in blocks]


def speedup(slow_rounds: Sequence[float], fast_rounds: Sequence[float], floor: float) -> float:
    """min(slow)/max(fast) when every fast round clears every slow round by more than
    the floor, else 0.0 (no claim)."""
    factor = min(slow_rounds) / max(fast_rounds)
    return factor if factor - 1.0 > floor else 0.0


def control_floor(blocks: Sequence[Block], arm: str, control: str) -> float:
    """The A/A floor: the larger of the control pair's spread and its paired-ratio gap.

    Two runs of the same arm differ only by noise, so any difference between them,
    drift (spread) or offset (ratio), is what noise alone can produce here.
    """
    spread = max(arm_spread(blocks, arm), arm_spread(blocks, control))
    offset = abs(statistics.median(paired_ratios(blocks, arm, control)) - 1.0)
    return max(spread, offset)


def compare(blocks: Sequence[Block], baseline: str, candidate: str, floor: float = 0.0) -> Verdict:
    """Judge ``candidate`` against ``baseline`` from the raw blocks."""
    if not blocks:
        raise ValueError("no blocks to judge")
    spread = max(arm_spread(blocks, baseline), arm_spread(blocks, candidate))
    ratio = statistics.median(paired_ratios(blocks, baseline, candidate))
    regression = ratio - 1.0
    base_rounds, cand_rounds = arm_rounds(blocks, baseline), arm_rounds(blocks, candidate)
    faster_candidate = speedup(base_rounds, cand_rounds, floor)
    faster_baseline = speedup(cand_rounds, base_rounds, floor)
    if faster_candidate:
        speedup_of, factor = candidate, faster_candidate
    elif faster_baseline:
        speedup_of, factor = baseline, faster_baseline
    else:
        speedup_of, factor = None, 0.0
    return Verdict(
        baseline=baseline,
        candidate=candidate,
        status=decide(spread, regression),
        spread=spread,
        allowed_regression=allowed_regression(spread),
        regression=regression,
        paired_median_ratio=ratio,
        floor=floor,
        speedup_of=speedup_of,
        speedup_factor=factor,
        baseline_stats=arm_stats(blocks, baseline),
        candidate_stats=arm_stats(blocks, candidate),
    )


def judge_all(blocks: Sequence[Block], baseline: str, control: str, candidates: Sequence[str]) -> list[Verdict]:
    """The A/A verdict first, then each candidate against the baseline, all with the A/A floor."""
    floor = control_floor(blocks, baseline, control)
    return [compare(blocks, baseline, control, floor)] + [compare(blocks, baseline, c, floor) for c in candidates]


def judge_against(blocks: Sequence[Block], baseline: str, control: str, against: str,
                  labels: Sequence[str]) -> list[Verdict]:
    """Every arm of ``labels`` but ``against`` (and the control) judged against ``against``,
    with the baseline's A/A floor: the same rule as ``judge_all`` with another reference
    (priced against matchers, say, beside both against unfused)."""
    floor = control_floor(blocks, baseline, control)
    return [compare(blocks, against, label, floor) for label in labels if label not in (against, control)]
