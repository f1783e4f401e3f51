"""Fixtures shared by the lowering tests."""

import pytest

from weft.config import config_from_env


@pytest.fixture(scope="module")
def make_config(tmp_path_factory):
    """config_from_env(contract, threads=2, ...) with one artifact cache per test module."""
    cache = tmp_path_factory.mktemp("weft-cache")

    def make(contract="strict", threads=2, **extra):
        return config_from_env(contract=contract, threads=threads, cache_dir=cache, **extra)

    return make
