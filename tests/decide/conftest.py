"""A cache folder per test module holding a fixed machine profile (no calibration in tests)."""

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "cost"))
from model_cases import fixed_profile  # noqa: E402

from weft.cost.machine import hardware_facts, profile_id, profile_path, save_profile  # noqa: E402


def seed_profile(cache_dir: Path) -> str:
    identifier = profile_id(hardware_facts())
    save_profile(dataclasses.replace(fixed_profile(), profile_id=identifier), profile_path(cache_dir, identifier))
    return identifier


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    folder.mkdir()
    seed_profile(folder)
    monkeypatch.setenv("WEFT_CACHE_DIR", str(folder))
    return folder
