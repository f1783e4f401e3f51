"""fusion="priced": decisions follow the prices, compiled plans stay exact, seams hold."""

import sys
from pathlib import Path

import pytest
from plans.workloads import assert_agrees_with_oracle

import weft
from weft.compose import choose_regions
from weft.config import config_from_env
from weft.explain import explain_partition
from weft.fuse import region_pricing
from weft.lower import Target
from weft.workloads import get_workload

sys.path.insert(0, str(Path(__file__).parent))
from model_cases import fixed_profile  # noqa: E402


def _partition(plan, contract="strict", threads=1):
    config = config_from_env(contract=contract, threads=threads, fusion="priced", budget_s=60)
    pricing = region_pricing(plan, config, Target(16, contract), profile=fixed_profile())
    return choose_regions(plan, "priced", contract, pricing=pricing), pricing


@pytest.mark.parametrize("name", ["layernorm", "softmax", "attention"])
def test_taken_regions_are_those_whose_price_pays(name):
    plan = get_workload(name).plan()
    partition, _ = _partition(plan)
    for decision in partition.decisions:
        chosen = decision.chosen
        if chosen is None:  # the anchor alone: no fused candidate paid by the margin
            assert not any(v.pays() for _, v in decision.verdicts)
        else:
            assert chosen.pays()
            assert chosen.saving == max(v.saving for _, v in decision.verdicts if v.pays())
            assert partition.region_of(decision.anchor).members == decision.taken


def test_layernorm_fuses_under_prices_and_explain_shows_them():
    """Four passes over a 8 MiB activation against one: the fused price is far below."""
    plan = get_workload("layernorm").plan()
    partition, _ = _partition(plan)
    assert len(partition.fused) == 1 and partition.fused[0].size == 4
    verdict = partition.decisions[-1].chosen
    assert verdict.margin > 0.2
    assert verdict.fused.served[3] < verdict.unfused.served[3]
    text = explain_partition(plan, partition).text()
    assert "price (chosen)" in text and "margin" in text and "cycles" in text


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")  # one calibration and one object cache for the module


@pytest.mark.parametrize("contract", ["strict", "inference"])
@pytest.mark.parametrize("name", ["attention", "layernorm", "cross-entropy"])
def test_priced_plans_match_the_oracle(name, contract, shared_cache, monkeypatch):
    monkeypatch.setenv("WEFT_CACHE_DIR", str(shared_cache))
    workload = get_workload(name)
    plan = workload.plan(**workload.small)
    inputs = workload.inputs(**workload.small)
    compiled = weft.compile(plan, contract, threads=2, fusion="priced")
    assert compiled.partition is not None and compiled.partition.policy == "priced"
    assert_agrees_with_oracle(compiled, plan, inputs, contract)


def test_priced_without_a_pricer_is_a_clear_error():
    from weft.errors import ConfigError

    with pytest.raises(ConfigError, match="needs a pricer"):
        choose_regions(get_workload("softmax").plan(), "priced", "strict")
