"""The precompiled system headers (``weft.codegen.pch``): used by every GCC unit, built once
per cache, never by a timed build, and a damaged one is dropped with a warning."""

from __future__ import annotations

import warnings

import pytest

import weft
from weft.codegen import CacheWarning, build
from weft.codegen.driver import find_compiler
from weft.codegen.pch import HEADER_NAME, uses_gcc_headers
from weft.config import config_from_env
from weft.oracle import run
from weft.testing import assert_strict_equal
from weft.workloads import get_workload

pytestmark = pytest.mark.skipif(not uses_gcc_headers(find_compiler("cc").version),
                                reason="the precompiled header is GCC's (this cc is not GCC)")

SOURCE = "#include <immintrin.h>\nint wf_probe(int x) { return x + 1; }\n"


def _headers(cache):
    return sorted((cache / "machine").glob("pch-*"))


def test_an_untimed_build_makes_the_header_once_and_every_build_uses_it(tmp_path):
    first = build(SOURCE, "cc", tmp_path, "strict")
    (folder,) = _headers(tmp_path)
    assert (folder / HEADER_NAME).is_file() and (folder / f"{HEADER_NAME}.gch").is_file()
    assert "-include" in first.command and str(folder) in first.command
    made = (folder / f"{HEADER_NAME}.gch").stat().st_mtime_ns
    second = build(SOURCE + "/* another source */\n", "cc", tmp_path, "strict")
    assert second.compiled and str(folder) in second.command
    assert (folder / f"{HEADER_NAME}.gch").stat().st_mtime_ns == made  # reused, not rebuilt
    build(SOURCE, "cc", tmp_path, "inference")
    assert len(_headers(tmp_path)) == 2  # one per contract's flags


def test_a_timed_build_does_not_spend_its_time_on_the_header(tmp_path):
    artifact = build(SOURCE, "cc", tmp_path, "strict", timeout_s=30)  # a race's build
    assert artifact.compiled and "-include" not in artifact.command
    assert _headers(tmp_path) == []


def test_a_plan_built_on_the_header_is_bit_identical_to_the_oracle(tmp_path):
    workload = get_workload("softmax")
    plan = workload.plan(**workload.small)
    compiled = weft.compile(plan, config=config_from_env(contract="strict", threads=1, fusion="off",
                                                         cache_dir=str(tmp_path)))
    assert _headers(tmp_path)
    inputs = workload.inputs(**workload.small)
    assert_strict_equal(compiled(*inputs), run(plan, *inputs))


def test_a_truncated_header_is_dropped_with_a_warning_and_the_build_still_succeeds(tmp_path):
    build(SOURCE, "cc", tmp_path, "strict")
    (folder,) = _headers(tmp_path)
    gch = folder / f"{HEADER_NAME}.gch"
    gch.write_bytes(gch.read_bytes()[:1000])  # GCC fails on a truncated .gch (a foreign one it ignores)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        artifact = build(SOURCE + "/* after the damage */\n", "cc", tmp_path, "strict")
    assert artifact.compiled and "-include" not in artifact.command
    assert any(issubclass(w.category, CacheWarning) and "precompiled header" in str(w.message) for w in caught)
    assert not folder.exists()  # removed: the next untimed build makes it again
    again = build(SOURCE + "/* rebuilt */\n", "cc", tmp_path, "strict")
    assert "-include" in again.command
