"""A/A on every built-in workload at its small size: pass, and no speed-up claimed."""

import pytest

import weft.workloads as workloads
from weft.bench.run import BenchOptions, run_bench  # noqa: E402
from weft.cost.machine import machine_profile  # noqa: E402


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    return machine_profile(tmp_path_factory.mktemp("cache"), quick=True)


@pytest.mark.parametrize("name", sorted(workloads.WORKLOADS))
def test_aa_passes_without_speedup(name, profile):
    small = dict(workloads.get_workload(name).small)
    options = BenchOptions(arms="unfused", params=small, blocks=16, warmup=1, target_round_s=0.01)
    # Other engineers' jobs share these two cores: a burst inside one run can make it
    # inconclusive (correctly). Such a run is measured again, up to eight times.
    for _attempt in range(8):
        result = run_bench(name, options, profile)
        (control,) = result["in_process"]["verdicts"]
        if control["status"] == "pass":
            break
    assert result["in_process"]["parity"]["reference"] == "oracle"
    assert control["status"] == "pass", control
    assert control["speedup_of"] is None
