"""The decision record: warm compiles reuse every verdict, processes share it, damage is survived."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import weft
from weft.config import config_from_env
from weft.decide.record import Decision, DecisionRecord, RecordError, RecordKey, RecordWarning
from weft.oracle import run
from weft.workloads import get_workload

ROOT = Path(__file__).resolve().parents[2]


def _compile(name, contract="strict", **config):
    workload = get_workload(name)
    plan, inputs = workload.plan(**workload.small), workload.inputs(**workload.small)
    settings = dict(contract=contract, threads=2, fusion="priced", budget_s=30)
    settings.update(config)
    return weft.compile(plan, config=config_from_env(**settings)), plan, inputs


@pytest.mark.parametrize("name", ["layernorm", "attention"])
def test_a_warm_compile_prices_nothing_and_runs_the_same_kernels(name, cache):
    cold, plan, inputs = _compile(name)
    assert cold.decide_report.priced > 0 and cold.decide_report.written == cold.decide_report.priced
    assert cold.decide_report.price_calls > 0
    warm, _, _ = _compile(name)
    report = warm.decide_report
    assert (report.priced, report.price_calls, report.raced, report.written) == (0, 0, 0, 0)
    assert report.recorded == cold.decide_report.priced
    assert warm.partition.pricing.priced == 0  # the pricer itself saw nothing
    assert warm.kernel_set() == cold.kernel_set()
    assert warm.output_digest(*inputs) == cold.output_digest(*inputs)
    want = run(plan, *inputs)
    got = warm(*inputs)
    for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    text = _explain(warm)
    assert "verdict from record" in text and "from the record, 0 priced now" in text


def _explain(compiled) -> str:
    import io

    stream = io.StringIO()
    compiled.explain(file=stream)
    return stream.getvalue()


def test_the_key_holds_the_thread_count_and_contract(cache):
    _compile("layernorm", threads=2)
    other_threads, _, _ = _compile("layernorm", threads=1)
    assert other_threads.decide_report.recorded == 0 and other_threads.decide_report.priced > 0
    other_contract, _, _ = _compile("layernorm", contract="inference")
    assert other_contract.decide_report.recorded == 0
    rows = DecisionRecord.in_cache(cache).all()
    assert {(d.key.threads, d.key.contract) for d in rows} == {(2, "strict"), (1, "strict"), (2, "inference")}


_WORKER = textwrap.dedent("""
    import json, sys, weft
    from weft.config import config_from_env
    from weft.workloads import get_workload
    w = get_workload("softmax")
    plan = w.plan(**w.small)
    # every margin counts as thin: verdicts are timed, so they could differ between processes
    config = config_from_env(contract="strict", threads=1, fusion="priced", budget_s=20, race_margin=10.0, race_share=0.5)
    compiled = weft.compile(plan, config=config)
    used = sorted((v.decision.key.signature, v.decision.choice, v.decision.created)
                  for d in compiled.partition.decisions for _, v in d.verdicts if hasattr(v, "decision"))
    r = compiled.decide_report  # what each process did, for the failure message
    report = dict(recorded=r.recorded, priced=r.priced, raced=r.raced, race_skipped=r.race_skipped,
                  written=r.written, taken_from_others=r.taken_from_others, undecided=len(r.undecided),
                  from_compile_record=r.from_compile_record)
    print(json.dumps({"kernel_set": compiled.kernel_set(), "used": used, "report": report}))
""")


def test_six_processes_compiling_cold_at_once_agree(cache):
    env = dict(os.environ, PYTHONPATH=str(ROOT), WEFT_CACHE_DIR=str(cache))
    processes = [subprocess.Popen([sys.executable, "-c", _WORKER], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    told = "\n".join(f"process {n}: {result['report']} used {result['used']}" for n, result in enumerate(results))
    assert len({result["kernel_set"] for result in results}) == 1, told
    assert all(result["used"] == results[0]["used"] for result in results), told
    record = DecisionRecord.in_cache(cache)
    assert record.integrity() == "ok"
    rows = record.all()
    assert len(rows) == len(results[0]["used"]) and len({d.key for d in rows}) == len(rows)
    assert sorted((d.key.signature, d.choice, d.created) for d in rows) == [tuple(u) for u in results[0]["used"]]


def test_a_corrupt_database_is_moved_aside_and_rebuilt(cache):
    path = cache / "decisions.sqlite"
    path.write_bytes(b"this is not a database" * 200)
    with pytest.warns(RecordWarning, match="moved aside"):
        record = DecisionRecord(path)
    assert record.integrity() == "ok" and record.all() == []
    assert any(p.name.startswith("decisions.sqlite.corrupt-") for p in cache.iterdir())
    record.close()
    path.write_bytes(b"\x00garbage" * 100)  # damaged again: a compile survives it too
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    with pytest.warns(RecordWarning):
        compiled, _, _ = _compile("layernorm")
    assert compiled.decide_report.written > 0


def test_a_foreign_database_is_moved_aside(cache):
    path = cache / "decisions.sqlite"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE other (x INTEGER)")
    connection.commit()
    connection.close()
    with pytest.warns(RecordWarning, match="not Weft's"):
        record = DecisionRecord(path)
    assert record.all() == []


def _decision(number: int, profile: str = "p") -> Decision:
    key = RecordKey(f"sig{number:06d}", "ctx", "strict", 1, profile, "v", "cc")
    return Decision(key, "fused", "model", "priced", "fused", (("i", 8),), 100.0 + number, 50.0,
                    race={"medians": {"fused": 1e-6, "unfused": 2e-6}, "spread": 0.01, "note": "x" * 500},
                    created=time.time())


_WRITER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[2])
    from weft.decide.record import Decision, DecisionRecord, RecordKey
    record = DecisionRecord(sys.argv[1])
    number = 0
    while True:
        batch = []
        for _ in range(50):
            key = RecordKey(f"sig{number:06d}", "ctx", "strict", 1, "p", "v", "cc")
            batch.append(Decision(key, "fused", "model", "priced", "fused", (("i", 8),), 1.0, 0.5,
                                  race={"rounds": list(range(200))}, created=time.time()))
            number += 1
        record.put_many(batch)
        print(number, flush=True)
""")


def test_a_compile_killed_mid_write_leaves_the_record_consistent(tmp_path):
    path = tmp_path / "decisions.sqlite"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(ROOT)], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(20):  # let it commit some batches, then kill it while it writes more
            writer.stdout.readline()
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.wait(timeout=60)
    record = DecisionRecord(path)
    assert record.integrity() == "ok"
    rows = record.all()
    assert len(rows) >= 20 * 50 and len(rows) % 50 == 0  # whole transactions only
    assert all(d.race == {"rounds": list(range(200))} for d in rows)
    record.put(_decision(999_999, "p"))
    assert record.get(_decision(999_999, "p").key) is not None


def test_export_and_import_refuse_another_profile(tmp_path):
    source = DecisionRecord(tmp_path / "a.sqlite")
    source.put_many([_decision(1, "mine"), _decision(2, "mine"), _decision(3, "theirs")])
    exported = tmp_path / "verdicts.json"
    assert source.export(exported) == 3
    target = DecisionRecord(tmp_path / "b.sqlite")
    assert target.import_file(exported, "mine") == (2, 1)
    assert {d.key.profile_id for d in target.all()} == {"mine"}
    assert target.get(_decision(1, "mine").key) == source.get(_decision(1, "mine").key)
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(RecordError, match="not a weft decision export"):
        target.import_file(tmp_path / "bad.json", "mine")


def test_put_keeps_the_first_writer(tmp_path):
    record = DecisionRecord(tmp_path / "r.sqlite")
    first = _decision(7)
    assert record.put(first) == first
    second = Decision(first.key, "unfused", "race", "priced", created=first.created + 1)
    assert record.put(second) == first  # another process's verdict wins: everyone compiles the same plan


def test_cli_lists_shows_exports_imports_and_clears(cache, capsys, tmp_path):
    from weft.cli import main

    _compile("layernorm")
    assert main(["record", "ls"]) == 0
    listed = capsys.readouterr().out
    assert "fused" in listed and "verdict(s) in" in listed
    signature = listed.split()[0]
    assert main(["record", "show", signature[:8]]) == 0
    assert json.loads(capsys.readouterr().out.split("\n}\n")[0] + "}")["signature"] == signature
    assert main(["record", "export", str(tmp_path / "e.json")]) == 0
    assert main(["record", "clear"]) == 0
    assert "cleared" in capsys.readouterr().out
    assert DecisionRecord.in_cache(cache).all() == []
    assert main(["record", "import", str(tmp_path / "e.json")]) == 0
    assert "imported" in capsys.readouterr().out and DecisionRecord.in_cache(cache).all()
    assert main(["record", "show", "nosuchsig"]) == 2
