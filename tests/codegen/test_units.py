"""A plan's C cut into translation units compiled at once (weft.codegen.units, the driver)."""

from __future__ import annotations

import re
import stat
import subprocess
import time

import numpy as np
import pytest

import weft
import weft.codegen.driver as driver
import weft.codegen.units as units
from weft import nn
from weft.codegen.units import UNIT_BREAK, translation_units
from weft.config import config_from_env
from weft.errors import CompileError
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal


def _marked(chunks: list[str], head: str = "HEAD1\nHEAD2") -> str:
    return "\n".join([head] + [f"{UNIT_BREAK}\n{chunk}" for chunk in chunks])


def test_a_source_without_marks_or_a_single_job_is_one_unit():
    plain = "int f(void) { return 0; }\n"
    assert translation_units(plain, 4, "x.c", unit_bytes=1) == [plain]
    marked = _marked(["a" * 50, "b" * 50])
    assert translation_units(marked, 1, "x.c", unit_bytes=1) == [marked]
    # too little C to pay a second parse of the head
    assert translation_units(marked, 4, "x.c", unit_bytes=1000) == [marked]


def test_every_chunk_goes_to_one_unit_balanced_with_the_head_and_its_lines_in_each():
    chunks = [f"chunk{number} " + "x" * size for number, size in enumerate((400, 100, 300, 200, 250, 50))]
    source = _marked(chunks)
    cut = translation_units(source, 2, "/c/a b.c", unit_bytes=10)
    assert len(cut) == 2
    whole = source.split("\n")
    seen = []
    for unit in cut:
        assert unit.startswith("HEAD1\nHEAD2\n")
        found = re.findall(r'#line (\d+) "/c/a b\.c"\n(chunk\d+)', unit)
        for line, name in found:
            assert whole[int(line) - 1].startswith(name + " ")  # the directive names the chunk's own line
        seen += [name for _, name in found]
        assert [int(line) for line, _ in found] == sorted(int(line) for line, _ in found)  # in the source's order
    assert sorted(seen) == sorted(f"chunk{number}" for number in range(6))
    sizes = [sum(len(c) for c in chunks if c.split()[0] in unit) for unit in cut]
    assert max(sizes) - min(sizes) <= 100  # largest first to the lightest unit: 650 / 650 here
    # never more units than jobs, nor than chunks
    assert len(translation_units(source, 16, "a.c", unit_bytes=10)) == 6
    assert len(translation_units(source, 3, "a.c", unit_bytes=10)) == 3


@pytest.fixture
def cut_in_two(monkeypatch, tmp_path):
    """Every marked source cut into (up to) two units, and a cc that logs each command."""
    monkeypatch.setattr(units, "UNIT_BYTES", 1)
    monkeypatch.setattr(driver, "cpu_count", lambda: 2)
    monkeypatch.setattr(driver, "compile_jobs", lambda: 2)
    log = tmp_path / "cc.log"
    script = tmp_path / "logging-cc"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec cc "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)

    def commands() -> list[str]:
        return [line for line in log.read_text().splitlines() if "--version" not in line] if log.exists() else []

    return str(script), commands


def _two_layer_plan():
    x, w1, w2 = weft.spec((24, 40)), weft.spec((40, 56)), weft.spec((56, 40))
    return weft.trace(lambda x, w1, w2: nn.matmul(nn.gelu(nn.matmul(x, w1)), w2) + x, x, w1, w2)


def _inputs(plan, seed=7):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(plan.buffer(name).shape).astype(np.float32) for name in plan.inputs]


def test_a_plan_compiled_in_two_units_gives_the_oracles_bytes(tmp_path, cut_in_two, monkeypatch):
    cc, commands = cut_in_two
    plan = _two_layer_plan()
    inputs = _inputs(plan)
    config = config_from_env(contract="strict", threads=2, cache_dir=tmp_path / "cache", cc=cc, fusion="off")
    compiled = weft.compile(plan, config=config)
    ran = commands()
    assert sum(" -c " in f" {line} " for line in ran) == 2 and sum("-shared" in line for line in ran) == 1, ran
    assert_strict_equal(compiled(*inputs), run(plan, *inputs))
    # the same source in one unit: the same function C (the cut changes no function), the same bytes
    single = config_from_env(contract="strict", threads=2, cache_dir=tmp_path / "single", cc="cc", fusion="off")
    monkeypatch.setattr(driver, "compile_jobs", lambda: 1)
    alone = weft.compile(plan, config=single)
    assert alone.source_path.read_text() == compiled.source_path.read_text()
    assert_strict_equal(compiled(*inputs), alone(*inputs))


def test_library_bodies_in_another_unit_read_the_one_blas_pointer(tmp_path, cut_in_two, monkeypatch):
    """wf_sgemm is one object of the shared object: set once (wf_set_sgemm, in one unit), read
    by the GEMM calls of functions compiled in the other units (three units: the two GEMM
    functions, the runner and the pointer's definition cannot all share one)."""
    pytest.importorskip("scipy")
    cc, commands = cut_in_two
    monkeypatch.setattr(driver, "cpu_count", lambda: 3)
    monkeypatch.setattr(driver, "compile_jobs", lambda: 3)
    a, w, a2, w2 = (np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
                    for seed, shape in ((1, (33, 20)), (2, (20, 17)), (3, (29, 18)), (4, (18, 21))))
    plan = weft.trace(lambda a, w, a2, w2: (nn.matmul(a, w), nn.matmul(a2, w2)),
                      *[weft.spec(x.shape) for x in (a, w, a2, w2)])
    config = config_from_env(contract="inference", threads=2, cache_dir=tmp_path / "cache", cc=cc)
    compiled = weft.compile(plan, config=config, blas=True)
    assert sum(" -c " in f" {line} " for line in commands()) == 3
    for got, want in zip(compiled(a, w, a2, w2), (a.astype(np.float64) @ w, a2.astype(np.float64) @ w2),
                         strict=True):
        assert_inference_close(got, want)


def test_an_error_in_a_unit_names_the_line_of_the_stored_source(tmp_path, cut_in_two):
    cc, _ = cut_in_two
    source = _marked(["int f(void) { return 1; }", "int g(void) { return undeclared_name; }",
                      "int wf_h(void) { return 2; }"], head="#include <stdint.h>")
    with pytest.raises(CompileError) as info:
        driver.build(source, cc, tmp_path / "cache", "strict")
    stored = info.value.source_path
    line = next(number for number, text in enumerate(source.split("\n"), 1) if "undeclared_name" in text)
    assert f"{stored}:{line}:" in info.value.stderr
    assert not list((tmp_path / "cache" / "objects").glob("*.entry"))


def test_a_build_past_its_timeout_kills_every_unit_compiler_and_caches_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(units, "UNIT_BYTES", 1)
    slow = tmp_path / "slow-cc"
    slow.write_text('#!/bin/sh\ncase "$*" in *--version*) exec cc "$@";; esac\nexec sleep 30\n')
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    source = _marked(["int f(void) { return 1; }", "int g(void) { return 2; }"], head="#include <stdint.h>")
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        driver.build(source, str(slow), tmp_path / "cache", "strict", timeout_s=0.5, jobs=2)
    assert time.monotonic() - start < 10
    folder = tmp_path / "cache" / "objects"
    assert not list(folder.glob("*.entry")) and not list(folder.glob("*.so")) and not list(folder.glob(".*units*"))


def test_the_compilers_run_at_once_are_the_cpus_free_now(monkeypatch, tmp_path):
    """Two runnable tasks of others on four CPUs leave three (this process's own CPU is free
    while it waits for the compilers); a machine busier than its CPUs, one."""
    monkeypatch.setattr(driver, "cpu_count", lambda: 4)
    readings = iter(["0.5 0.4 0.3 3/100 1\n"] * 5 + ["9.0 8.0 7.0 9/100 1\n"] * 5)
    real_open = open

    def fake_open(path, *args, **kwargs):
        if str(path) == "/proc/loadavg":
            import io
            return io.StringIO(next(readings))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    assert driver.compile_jobs(interval_s=0) == 3
    assert driver.compile_jobs(interval_s=0) == 1
