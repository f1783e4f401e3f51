"""A cache folder per test module holding a fixed machine profile (no calibration in tests)."""

import pytest
from plans.profiles import seed_profile


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    folder.mkdir()
    seed_profile(folder)
    monkeypatch.setenv("WEFT_CACHE_DIR", str(folder))
    return folder
