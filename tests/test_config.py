"""The one Config: environment mapping, validation, and its export from ``weft``."""

import pytest

import weft
from weft.config import Config, config_from_env
from weft.errors import ConfigError


def test_config_is_exported_and_has_only_used_fields():
    assert weft.Config is Config
    assert [f for f in Config.__slots__] == ["contract", "threads", "fusion", "cache_dir", "cc", "budget_s",
                                             "race_margin", "race_share"]  # the last two: weft.fuse.lower_decided


def test_race_fields_are_checked():
    with pytest.raises(ConfigError, match="race_margin"):
        Config(race_margin=-0.1)
    with pytest.raises(ConfigError, match="race_share"):
        Config(race_share=1.5)


def test_budget_from_the_environment(monkeypatch):
    """budget_s is read by fusion='priced' (tests/cost/test_budget.py checks the pricing share)."""
    monkeypatch.setenv("WEFT_BUDGET_S", "3.5")
    assert config_from_env(fusion="priced").budget_s == 3.5
    assert config_from_env(fusion="priced", budget_s=7.0).budget_s == 7.0
    monkeypatch.setenv("WEFT_BUDGET_S", "soon")
    with pytest.raises(ConfigError, match="WEFT_BUDGET_S"):
        config_from_env()


def test_generic_fusion_off_maps_priced_to_matchers(monkeypatch):
    monkeypatch.setenv("WEFT_GENERIC_FUSION", "off")
    assert config_from_env(fusion="priced").fusion == "matchers"
    assert config_from_env(fusion="greedy").fusion == "greedy"  # only the priced engine is switched
    monkeypatch.setenv("WEFT_GENERIC_FUSION", "on")
    assert config_from_env(fusion="priced").fusion == "priced"
    monkeypatch.delenv("WEFT_GENERIC_FUSION")
    assert config_from_env(fusion="priced").fusion == "priced"


def test_bad_environment_is_a_config_error(monkeypatch):
    monkeypatch.setenv("WEFT_GENERIC_FUSION", "sometimes")
    with pytest.raises(ConfigError, match="WEFT_GENERIC_FUSION"):
        config_from_env(fusion="priced")
    monkeypatch.delenv("WEFT_GENERIC_FUSION")
    monkeypatch.setenv("WEFT_THREADS", "two")
    with pytest.raises(ConfigError, match="WEFT_THREADS"):
        config_from_env()
    with pytest.raises(ConfigError, match="fusion="):
        Config(fusion="everything")
    with pytest.raises(ConfigError, match="budget_s"):
        Config(budget_s=0)


def test_a_config_passed_by_position_is_named_in_the_error():
    """``weft.compile(plan, Config(...))`` read the Config as the contract and said
    "contract=Config(...) is not one of ('strict', 'inference')"."""
    import weft
    from weft.workloads import WORKLOADS

    plan = WORKLOADS["softmax"].plan(rows=4, cols=8)
    with pytest.raises(ConfigError, match=r"config=\.\.\."):
        weft.compile(plan, Config(contract="inference"))
