"""Fuzz tests compile in worker processes: they share one cache folder per session."""

import pytest


@pytest.fixture(scope="session")
def fuzz_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("weft-fuzz-cache")
