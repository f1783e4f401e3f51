
import pytest

from weft.config import config_from_env


@pytest.fixture(scope="session")
def compose_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("weft-compose-cache")


@pytest.fixture
def fused_config(compose_cache_dir):
    """A compile configuration with fusion on, a private artifact cache and two threads."""

    def make(contract="strict", fusion="greedy", threads=2):
        return config_from_env(contract=contract, threads=threads, fusion=fusion, cache_dir=compose_cache_dir)

    return make
