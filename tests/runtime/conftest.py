"""Compiled-plan tests share one cache folder per session (compiles cost ~0.5 s each)."""

import pytest

from weft.config import config_from_env


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("weft-cache")


@pytest.fixture
def make_config(cache_dir):
    def make(contract="strict", threads=2, fusion="off", **extra):
        # the runtime's tests run plans as lowered member by member unless they ask for a policy
        return config_from_env(contract=contract, threads=threads, cache_dir=cache_dir, fusion=fusion, **extra)

    return make
