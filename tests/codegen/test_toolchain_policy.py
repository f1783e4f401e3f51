"""In CI a missing C compiler fails the tests that need one; elsewhere they skip with a reason."""

import pytest
from toolchain import need_c_compiler


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_compiler_fails_in_ci_and_skips_with_a_reason_elsewhere(monkeypatch, ci, outcome):
    monkeypatch.setenv("WEFT_CC", "/nonexistent/cc")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="no C compiler"):
        need_c_compiler()


def test_present_compiler_is_returned(monkeypatch):
    monkeypatch.setenv("WEFT_CC", "cc")
    monkeypatch.setenv("CI", "true")
    assert need_c_compiler().endswith("cc")
