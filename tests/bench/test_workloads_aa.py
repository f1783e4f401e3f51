"""A/A on every built-in workload at its small size: parity against the oracle, and the
control's verdict reported as its rounds say.

Each workload is measured once and never again until it passes: the verdict it reports
must be the rule applied to its own rounds (recomputed here), so a failed control is
reported as a failed control. Whether a control passes depends on the machine (these
cores are shared), so no timing is asserted; the verdict arithmetic itself, biased
controls included, is checked deterministically on synthetic rounds in ``test_verdict.py``.
"""

import pytest

from weft import workloads
from weft.bench.result import recompute
from weft.bench.run import BenchOptions, run_bench
from weft.cost.machine import machine_profile


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    return machine_profile(tmp_path_factory.mktemp("cache"), quick=True)


@pytest.mark.parametrize("name", sorted(workloads.WORKLOADS))
def test_aa_control_is_reported_as_its_rounds_say(name, profile):
    small = dict(workloads.get_workload(name).small)
    options = BenchOptions(arms="unfused", params=small, blocks=16, warmup=1, target_round_s=0.01)
    result = run_bench(name, options, profile)
    (control,) = result["in_process"]["verdicts"]
    assert result["in_process"]["parity"]["reference"] == "oracle"
    rows = recompute(result)
    assert rows and all(agree for *_, agree in rows), rows
    assert control["candidate"] == "unfused:control" and control["status"] in ("pass", "fail", "inconclusive")
    if control["status"] == "inconclusive":
        assert control["spread"] > 0.05, control  # inconclusive only for the stated reason
