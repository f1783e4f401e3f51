"""The compiler driver and artifact cache: reuse, corruption, concurrency, failures."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import stat
import warnings

import numpy as np
import pytest

import weft
from weft.codegen import CacheWarning, build
from weft.codegen.driver import lookup
from weft.config import config_from_env
from weft.errors import CompileError
from weft.ir import Axis, AxisIndex, Binary, BinaryOp, Buffer, Const, DType, Kernel, Load, Plan, Role
from weft.oracle import run
from weft.testing import assert_strict_equal


def small_plan(scale: float = 3.0, name: str = "small") -> Plan:
    i, j = Axis("i", 3), Axis("j", 21)
    body = Binary(BinaryOp.MUL, Load("x", (AxisIndex("i"), AxisIndex("j"))), Const(scale))
    return Plan(
        (Buffer("x", (3, 21), DType.FLOAT32, Role.INPUT), Buffer("y", (3, 21), DType.FLOAT32, Role.OUTPUT)),
        (Kernel("y", (i, j), body),), ("x",), ("y",), name=name,
    )


@pytest.fixture
def counting_cc(tmp_path):
    """A compiler wrapper that logs each compile (not --version) and runs the real cc."""
    log = tmp_path / "cc.log"
    script = tmp_path / "counting-cc"
    script.write_text(f'#!/bin/sh\ncase "$*" in *-shared*) echo run >> "{log}";; esac\nexec cc "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)

    def runs() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    return str(script), runs


def _config(tmp_path, cc, contract="strict"):
    # unfused: the C compiler runs for the plan alone (a priced compile would calibrate the
    # machine profile in a fresh cache, and may race: more compiler runs than these count)
    return config_from_env(contract=contract, threads=1, cache_dir=tmp_path / "cache", cc=cc, fusion="off")


def test_second_compile_does_not_run_the_compiler(tmp_path, counting_cc):
    cc, runs = counting_cc
    plan = small_plan()
    x = np.arange(63, dtype=np.float32).reshape(3, 21)
    first = weft.compile(plan, config=_config(tmp_path, cc))
    assert runs() == 1 and first.compiled_now
    second = weft.compile(plan, config=_config(tmp_path, cc))
    assert runs() == 1 and not second.compiled_now
    assert second.so_path == first.so_path
    assert_strict_equal(second(x), run(plan, x))
    weft.compile(small_plan(4.0), config=_config(tmp_path, cc))  # a different plan does compile
    assert runs() == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "entry"])
def test_corrupted_entry_is_rebuilt_and_reported(tmp_path, counting_cc, damage):
    cc, runs = counting_cc
    plan = small_plan(5.0, name=f"damaged_{damage}")
    first = weft.compile(plan, config=_config(tmp_path, cc))
    # damage lands in a new file renamed over the entry: the loaded library keeps its
    # own mapping (writing into a mapped .so in place would crash this very process)
    damaged = tmp_path / "damaged.so"
    if damage == "truncate":
        data = first.so_path.read_bytes()
        damaged.write_bytes(data[: len(data) // 3])
        os.replace(damaged, first.so_path)
    elif damage == "flip":
        data = bytearray(first.so_path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        damaged.write_bytes(bytes(data))
        os.replace(damaged, first.so_path)
    else:
        entry = first.so_path.parent / (first.so_path.name.split("-")[0] + ".entry")
        entry.write_text("{ not json")
    with pytest.warns(CacheWarning, match="corrupted"):
        rebuilt = weft.compile(plan, config=_config(tmp_path, cc))
    assert runs() == 2 and rebuilt.compiled_now
    x = np.ones((3, 21), np.float32)
    assert_strict_equal(rebuilt(x), run(plan, x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not weft.compile(plan, config=_config(tmp_path, cc)).compiled_now


def _compile_in_child(cache_dir: str) -> str:
    config = config_from_env(contract="strict", threads=1, cache_dir=cache_dir, fusion="off")
    compiled = weft.compile(small_plan(7.0, name="raced"), config=config)
    x = np.full((3, 21), 2.0, np.float32)
    assert float(compiled(x)[0, 0]) == 14.0
    return compiled.so_path.name


def test_two_processes_compiling_at_once_leave_one_valid_entry(tmp_path):
    cache = str(tmp_path / "shared-cache")
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        names = pool.map(_compile_in_child, [cache, cache])
    assert len(names) == 2
    folder = tmp_path / "shared-cache" / "objects"
    entries = list(folder.glob("*.entry"))
    assert len(entries) == 1
    assert not list(folder.glob("*.tmp*")), "temporary files left behind"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lookup(folder, entries[0].name[: -len(".entry")]) is not None
    assert json.loads(entries[0].read_text())["so"] in names


def test_missing_compiler_raises_compile_error_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("WEFT_CC", "/nonexistent/cc")
    monkeypatch.setenv("WEFT_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(CompileError, match="not found") as info:
        weft.compile(small_plan(9.0))
    assert "apt-get install gcc" in str(info.value) and "WEFT_CC" in str(info.value)


def test_compile_failure_carries_command_stderr_and_source(tmp_path):
    with pytest.raises(CompileError) as info:
        build("int broken( {", "cc", tmp_path / "cache", "strict")
    error = info.value
    assert error.command and error.command[0].endswith("cc") and "-ffp-contract=off" in error.command
    assert "error" in error.stderr
    assert os.path.exists(error.source_path) and open(error.source_path).read() == "int broken( {"
    assert error.source_path in str(error)


def test_inference_flags_differ_from_strict(tmp_path):
    strict = build("int f(void) { return 1; }", "cc", tmp_path, "strict")
    inference = build("int f(void) { return 1; }", "cc", tmp_path, "inference")
    assert strict.key != inference.key
    assert "-ffp-contract=off" in strict.flags and "-ffast-math" not in strict.flags
    assert "-ffp-contract=fast" in inference.flags and "-ffinite-math-only" not in inference.flags


def test_unwritable_cache_folder_names_the_fix(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    from weft.errors import ConfigError

    with pytest.raises(ConfigError, match="WEFT_CACHE_DIR"):
        build("int f(void) { return 0; }", "cc", blocker, "strict")


def test_a_compiler_that_writes_nothing_does_not_poison_the_cache(tmp_path):
    """WEFT_CC=true exits 0 and writes nothing: the error says so and names the command,
    nothing is cached, and a working compiler afterwards builds the plan."""
    plan = small_plan(11.0, name="poison")
    with pytest.raises(CompileError, match="no loadable object") as info:
        weft.compile(plan, config=_config(tmp_path, "true"))
    message = str(info.value)
    assert "OpenMP" not in message and "libgomp" not in message
    assert info.value.command and info.value.command[0].endswith("true") and " ".join(info.value.command) in message
    folder = tmp_path / "cache" / "objects"
    assert not list(folder.glob("*.entry")) and not list(folder.glob("*.so")) and not list(folder.glob("*.tmp*"))
    with pytest.raises(CompileError, match="no loadable object"):  # still no cached object to reuse
        weft.compile(plan, config=_config(tmp_path, "true"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = weft.compile(plan, config=_config(tmp_path, "cc"))
    x = np.ones((3, 21), np.float32)
    assert compiled.compiled_now and float(compiled(x)[0, 0]) == 11.0


def test_a_cached_object_that_does_not_load_is_a_corrupt_entry(tmp_path, counting_cc):
    """An entry whose object matches its digest but cannot be loaded (what a compiler that
    wrote nothing used to leave behind) is reported, deleted and rebuilt."""
    cc, runs = counting_cc
    plan = small_plan(12.0, name="unloadable")
    first = weft.compile(plan, config=_config(tmp_path, cc))
    entry_path = first.so_path.parent / f"{first.so_path.name.split('-')[0]}.entry"
    entry = json.loads(entry_path.read_text())
    empty = first.so_path.parent / "empty.so"
    empty.write_bytes(b"")
    entry.update(so=empty.name, size=0, sha256=hashlib.sha256(b"").hexdigest())
    entry_path.write_text(json.dumps(entry))
    with pytest.warns(CacheWarning, match="does not load"):
        rebuilt = weft.compile(plan, config=_config(tmp_path, cc))
    assert rebuilt.compiled_now and runs() == 2
    assert float(rebuilt(np.ones((3, 21), np.float32))[0, 0]) == 12.0


def test_an_altered_cached_source_is_a_corrupt_entry(tmp_path, counting_cc):
    cc, runs = counting_cc
    plan = small_plan(13.0, name="altered_source")
    first = weft.compile(plan, config=_config(tmp_path, cc))
    original = first.source_path.read_text()
    first.source_path.write_text(original.replace("13.0", "14.0"))
    with pytest.warns(CacheWarning, match=r"\.c is truncated or altered"):
        rebuilt = weft.compile(plan, config=_config(tmp_path, cc))
    assert rebuilt.compiled_now and runs() == 2 and rebuilt.source_path.read_text() == original
    first.source_path.unlink()
    with pytest.warns(CacheWarning, match=r"\.c is missing"):
        assert weft.compile(plan, config=_config(tmp_path, cc)).compiled_now


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_cache_files_get_normal_permissions(tmp_path, umask):
    """mkstemp leaves 0600; a cache shared by a group must be group-readable (umask respected)."""
    previous = os.umask(umask)
    try:
        artifact = build(f"int f(void) {{ return {umask}; }}", "cc", tmp_path / "cache", "strict")
    finally:
        os.umask(previous)
    entry = artifact.so_path.parent / f"{artifact.key}.entry"
    for path, base in ((artifact.source_path, 0o666), (entry, 0o666), (artifact.so_path, 0o777)):
        assert stat.S_IMODE(path.stat().st_mode) == base & ~umask, path.name
