"""The compile record: a warm compile reuses the lowering and C of an earlier one."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.config import Config
from weft.oracle import run
from weft.runtime.record import record_key


def _plan(rows: int = 8):
    return nn.trace(lambda x, w: nn.softmax(nn.matmul(x, w)), nn.spec((rows, 16)), nn.spec((16, 24)))


def _compile(plan, cache_dir, contract="strict"):
    config = Config(contract=contract, threads=1, fusion="greedy", cache_dir=cache_dir)
    return weft.compile(plan, config=config, lanes=4)


def test_a_warm_compile_reuses_the_record_and_computes_the_same(tmp_path):
    plan = _plan()
    cold = _compile(plan, tmp_path)
    warm = _compile(_plan(), tmp_path)  # traced again: an equal plan, a new object
    assert not cold.from_record and cold.compiled_now
    assert warm.from_record and not warm.compiled_now
    assert warm.source_path == cold.source_path and warm.lowered == cold.lowered
    assert "compose" not in warm.stage_seconds and "compose" in cold.stage_seconds
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(plan.buffer(name).shape, dtype=np.float32) for name in plan.inputs]
    assert warm(*arrays).tobytes() == run(plan, *arrays).tobytes()


def test_a_different_plan_or_contract_misses_the_record(tmp_path):
    _compile(_plan(), tmp_path)
    assert not _compile(_plan(rows=9), tmp_path).from_record
    assert not _compile(_plan(), tmp_path, contract="inference").from_record
    assert record_key(_plan(), "greedy", "strict", 4, False) != record_key(_plan(), "greedy", "strict", 8, False)


def test_an_unreadable_record_is_ignored_and_rewritten(tmp_path):
    plan = _plan()
    _compile(plan, tmp_path)
    (record,) = (tmp_path / "records").iterdir()
    record.write_bytes(b"not a pickle")
    again = _compile(plan, tmp_path)
    assert not again.from_record  # recomputed, not trusted
    assert _compile(plan, tmp_path).from_record  # and written whole again


def test_the_record_reads_back_equal_sharing_the_plans_buffers_and_members(tmp_path):
    """The record refers to the plan's own buffers and members by name (no copies) and
    reads back equal, field for field, to what the cold compile lowered; files are
    group-readable like the rest of the cache."""
    plan = nn.trace(lambda q, k, v: nn.layer_norm(nn.attention(q, k, v), 8), *[nn.spec((2, 40, 8))] * 3)
    cold = _compile(plan, tmp_path, contract="inference")
    warm = _compile(plan, tmp_path, contract="inference")
    assert warm.from_record and warm.arena == cold.arena
    assert repr(warm.lowered) == repr(cold.lowered)  # OnlinePass compares by identity (eq=False)
    assert all(buffer is plan.buffer(buffer.name) for buffer in warm.lowered.buffers)
    (record,) = (tmp_path / "records").iterdir()
    assert record.stat().st_mode & 0o040, oct(record.stat().st_mode)


def test_a_record_of_another_plan_with_the_same_key_is_not_trusted(tmp_path):
    """A record naming a buffer the plan does not have is unreadable, not a crash."""
    plan = _plan()
    _compile(plan, tmp_path)
    (record,) = (tmp_path / "records").iterdir()
    renamed = nn.trace(lambda a, b: nn.softmax(nn.matmul(a, b)), nn.spec((8, 16)), nn.spec((16, 24)), name="other")
    other_key = record_key(renamed, "greedy", "strict", 4, False)
    record.rename(record.parent / f"{other_key}.pickle")
    assert set(renamed.inputs) != set(plan.inputs)
    again = _compile(renamed, tmp_path)
    assert not again.from_record and again.compiled_now is not None


def _key(plan) -> str:
    return record_key(plan, "greedy", "strict", 4, False)


def test_plans_that_differ_in_one_constant_shape_role_index_or_combiner_get_other_keys():
    """The key covers everything the generated program depends on: one scalar, one
    extent, one buffer's role, one index map or one fold's combiner changes it."""
    def scaled(factor, transposed=False, combine=nn.sum):
        def program(x, w):
            product = nn.matmul(x, w.permute(1, 0) if transposed else w)
            return combine(product * factor, axis=1)
        return program

    base = nn.trace(scaled(0.5), nn.spec((8, 16)), nn.spec((16, 16)))
    variants = {
        "constant": nn.trace(scaled(0.25), nn.spec((8, 16)), nn.spec((16, 16))),
        "negative zero": nn.trace(scaled(-0.0), nn.spec((8, 16)), nn.spec((16, 16))),
        "shape": nn.trace(scaled(0.5), nn.spec((9, 16)), nn.spec((16, 16))),
        "role": nn.trace(scaled(0.5), nn.spec((8, 16)), nn.spec((16, 16), param=True)),
        "index map": nn.trace(scaled(0.5, transposed=True), nn.spec((8, 16)), nn.spec((16, 16))),
        "combiner": nn.trace(scaled(0.5, combine=nn.max), nn.spec((8, 16)), nn.spec((16, 16))),
    }
    assert _key(nn.trace(scaled(0.5), nn.spec((8, 16)), nn.spec((16, 16)))) == _key(base)  # traced again
    zero = nn.trace(scaled(0.0), nn.spec((8, 16)), nn.spec((16, 16)))
    keys = {name: _key(plan) for name, plan in {**variants, "zero": zero}.items()}
    assert _key(base) not in keys.values()
    assert len(set(keys.values())) == len(keys), keys


def test_the_ir_repr_is_the_text_dataclasses_would_write():
    """``weft.ir.nodes`` writes each node's ``repr`` itself (faster); the key hashes that
    text, so it must stay the generated one, field for field."""
    import dataclasses

    from weft.ir import nodes

    plan = nn.trace(lambda q, k, v: nn.layer_norm(nn.attention(q, k, v), 8), *[nn.spec((2, 40, 8))] * 3)
    seen = {}
    for node in _walk(plan.kernels):
        cls = type(node)
        if cls in seen:
            continue
        shown = ", ".join(f"{f.name}={getattr(node, f.name)!r}" for f in dataclasses.fields(cls) if f.repr)
        seen[cls] = repr(node) == f"{cls.__qualname__}({shown})"
    assert {nodes.Kernel, nodes.Load, nodes.Binary, nodes.AxisIndex, nodes.Fold, nodes.Axis} <= set(seen)
    assert all(seen.values()), seen


def _walk(value):
    import dataclasses

    if isinstance(value, tuple):
        for item in value:
            yield from _walk(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield value
        for field in dataclasses.fields(value):
            if field.repr:
                yield from _walk(getattr(value, field.name))


def test_a_warm_compile_reads_the_lowered_plan_only_when_asked(tmp_path):
    """A warm compile loads and runs from the record's summary and source; the lowered
    plan (explain, describe, the groups) is unpickled on first use and equals the cold one."""
    plan = _plan()
    cold = _compile(plan, tmp_path)
    warm = _compile(_plan(), tmp_path)
    assert warm.from_record and warm._lowering is None
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(plan.buffer(name).shape, dtype=np.float32) for name in plan.inputs]
    assert warm(*arrays).tobytes() == cold(*arrays).tobytes()
    assert warm._lowering is None  # running needs none of it
    assert warm.groups == cold.groups and warm.lowered == cold.lowered and warm.arena == cold.arena
    assert warm.arena_bytes == cold.arena_bytes and warm.provenance["lanes"] == cold.provenance["lanes"]


def test_a_damaged_lowered_part_is_a_clear_error_when_first_read(tmp_path):
    from weft.errors import CompileError
    from weft.runtime.record import load_record

    plan = _plan()
    _compile(plan, tmp_path)
    recorded = load_record(tmp_path, _key(plan), plan)
    assert recorded is not None
    recorded._body = recorded._body[: len(recorded._body) // 2]
    with pytest.raises(CompileError, match="cannot be read"):
        recorded.lowering()


def test_the_plan_text_is_made_once_and_is_not_part_of_the_value():
    """``Plan.text`` (what the key hashes) is kept with the plan: a second compile of the same
    plan object does not walk it again; equal plans still compare and hash equal."""
    import dataclasses

    plan, again = _plan(), _plan()
    text = plan.text()
    assert plan.text() is text and again.text() == text
    assert plan == again and hash(plan) == hash(again)
    renamed = dataclasses.replace(plan, name="renamed")
    assert renamed.text() != text and _key(renamed) != _key(plan)
