"""How a round is sized, on a fake clock: deterministic, no timing asserted."""

import pytest

from weft.bench.arms import ArmSpec, Runner, control_runner
from weft.bench.driver import MIN_BATCH_S, MIN_ROUND_TICKS, calibrate_inner, round_calls, seconds_per_call


class FakeMachine:
    """A clock that advances only when the fake call runs: the first ``cold`` calls take
    ``cold_s`` each (page faults, lazy set-up), every later one ``warm_s``."""

    def __init__(self, warm_s: float, cold_s: float = 0.0, cold: int = 0):
        self.now, self.calls = 0.0, 0
        self.warm_s, self.cold_s, self.cold = warm_s, cold_s, cold

    def clock(self) -> float:
        return self.now

    def call(self) -> None:
        self.now += self.cold_s if self.calls < self.cold else self.warm_s
        self.calls += 1


def test_a_round_of_a_short_call_lasts_the_target_and_many_clock_ticks():
    assert round_calls(10e-6, 0.01, 1e-9) == 1000  # 10 us calls, 10 ms rounds
    # a coarse clock (1 us ticks): a round lasts at least MIN_ROUND_TICKS of them
    calls = round_calls(10e-6, 0.001, 1e-6)
    assert calls * 10e-6 >= MIN_ROUND_TICKS * 1e-6 and calls == 1000
    # a call faster than one tick is counted as one tick, never as zero (no division by 0)
    assert round_calls(0.0, 0.01, 1e-9) == 100_000
    assert round_calls(2.0, 0.01, 1e-9) == 1  # a slow call: one per round


def test_calibration_times_a_warm_batch_not_the_first_calls():
    """Before: inner came from the median of three single calls, so a 10 us arm whose first
    calls paid 1 ms of page faults got rounds of 10 calls (100 us), well inside the noise."""
    machine = FakeMachine(warm_s=10e-6, cold_s=1e-3, cold=3)
    per_call = seconds_per_call(machine.call, machine.clock)
    assert per_call == pytest.approx(10e-6, rel=0.2)
    assert machine.calls * 10e-6 >= MIN_BATCH_S  # it ran a batch of at least MIN_BATCH_S
    machine = FakeMachine(warm_s=10e-6, cold_s=1e-3, cold=3)
    inner = calibrate_inner({"a": machine.call}, 0.01, clock=machine.clock, resolution_s=1e-9)
    assert inner * 10e-6 >= 0.008, inner  # rounds of ~10 ms, not ~100 us


def test_the_fastest_arm_sizes_every_round():
    slow, fast = FakeMachine(warm_s=1e-3), FakeMachine(warm_s=5e-6)
    fakes = {"slow": slow, "fast": fast}

    def clock():
        return sum(m.now for m in fakes.values())

    inner = calibrate_inner({name: m.call for name, m in fakes.items()}, 0.01, clock=clock, resolution_s=1e-9)
    assert abs(inner - round_calls(5e-6, 0.01, 1e-9)) <= 1, inner  # float rounding of the batch time


def test_the_control_is_the_very_same_call_as_its_twin():
    """An A/A pair must differ only by noise: same callable, same output arrays."""
    twin = Runner(ArmSpec("unfused", "unfused", "weft", "off", "strict", 1), lambda: None, (), {}, None, 0.0, None)
    control = control_runner(twin, ArmSpec("unfused:control", "unfused", "weft", "off", "strict", 1), None, None)
    assert control.call is twin.call and control.outputs is twin.outputs and control.spec.label == "unfused:control"
