"""The pricing budget is hard, and what it leaves unpriced stays unfused and is reported."""

import pytest

from weft.compose import choose_regions
from weft.config import config_from_env
from weft.fuse import region_pricing
from weft.lower import Target
from weft.workloads import get_workload

NOISE_S = 0.08  # a shared machine (load 10 on 2 cores seen): one step can take this long in wall time


@pytest.mark.parametrize("share_s", [0.01, 0.1])
def test_pricing_phase_ends_within_its_share(share_s, tmp_path):
    plan = get_workload("vit-block").plan()
    config = config_from_env(contract="strict", threads=1, fusion="priced", budget_s=2 * share_s, cache_dir=tmp_path)
    pricing = region_pricing(plan, config, Target(16, "strict"), profile=_profile())
    partition = choose_regions(plan, "priced", "strict", pricing=pricing)
    report = pricing.report
    assert report.budget_s == pytest.approx(share_s)
    assert report.seconds <= share_s * 1.05 + NOISE_S
    assert report.overrun_s == pytest.approx(max(0.0, report.seconds - share_s))
    # what the budget left unpriced stayed unfused, and explain says so
    unpriced = [verdict for decision in partition.decisions for _, verdict in decision.verdicts
                if verdict.status == "budget"]
    assert unpriced, "a 10-100 ms share cannot price all of vit-block's signatures"
    for decision in partition.decisions:
        for members, verdict in decision.verdicts:
            if verdict.status == "budget":
                assert members != decision.taken
    from weft.explain import explain_partition

    text = explain_partition(plan, partition).text()
    assert "left unpriced" in text and "raise WEFT_BUDGET_S" in text


def test_a_generous_budget_prices_every_candidate(tmp_path):
    plan = get_workload("layernorm").plan()
    config = config_from_env(contract="strict", threads=1, fusion="priced", budget_s=60, cache_dir=tmp_path)
    pricing = region_pricing(plan, config, Target(16, "strict"), profile=_profile())
    partition = choose_regions(plan, "priced", "strict", pricing=pricing)
    assert not pricing.report.unpriced
    assert all(verdict.status != "budget" for d in partition.decisions for _, verdict in d.verdicts)


def _profile():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from model_cases import fixed_profile

    return fixed_profile()
