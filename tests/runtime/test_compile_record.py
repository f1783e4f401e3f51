"""The compile record: a warm compile reuses the lowering and C of an earlier one."""

from __future__ import annotations

import numpy as np

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
