"""Result files: raw rounds, verdicts and provenance, and recomputing the verdict.

A result is plain JSON (``schema: weft-bench/1``) holding every raw round, so
``weft bench --recompute FILE`` re-derives each verdict from the numbers alone and
says whether it agrees with the one recorded.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import weft.version
from weft.bench.arms import BenchError
from weft.bench.verdict import Block, Verdict, judge_against, judge_all
from weft.files import write_atomic

SCHEMA = "weft-bench/1"
DEFAULT_RESULTS_DIR = Path("benchmarks") / "results"


def weft_commit() -> dict:
    """The Weft commit of the source tree in use, and whether it had local changes."""
    folder = Path(weft.version.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "weft"], cwd=folder,
                               capture_output=True, text=True, timeout=10).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": None}
    return {"commit": commit, "dirty": dirty}


def thread_pools_outside_calls() -> list[dict]:
    """Every thread pool loaded (OpenMP, BLAS) and its size between calls; each Weft
    arm's ``thread_pools`` says what its calls ran at."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return []
    keys = ("user_api", "internal_api", "prefix", "version", "num_threads", "threading_layer")
    return [{key: pool.get(key) for key in keys} for pool in threadpool_info()]


def provenance(profile, runners, extra: dict | None = None) -> dict:
    """docs/benchmarking.md rule 7: commit, compiler and flags, CPU, threads, profile id, peers."""
    record = {
        "weft_version": weft.version.__version__,
        **weft_commit(),
        "cpu_model": profile.cpu_model,
        "cpu_features": list(profile.cpu_flags),
        "logical_cpus": profile.logical_cpus,
        "machine_profile_id": profile.profile_id,
        "copy_bandwidth_bytes_per_s": dict(profile.copy_bandwidth_bytes_per_s),
        "gemm_flops_per_s": dict(profile.gemm_flops_per_s),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "openblas_env": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
        "command": sys.argv,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "arms": {runner.spec.label: {"threads": runner.spec.threads, **runner.provenance} for runner in runners},
    }
    if "torch" in sys.modules:
        record["torch"] = sys.modules["torch"].__version__
    record["thread_pools"] = thread_pools_outside_calls()
    record.update(extra or {})
    return record


def json_ready(value):
    """JSON without NaN/inf (written as null) so any reader can load it."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


def default_result_path(workload: str, labels: list[str]) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    arms = "-".join(label.replace("@", "t").replace("+", "_") for label in labels)
    workload = re.sub(r"[^A-Za-z0-9_.-]+", "-", workload.replace(".py:", "-"))  # a program: model.py:build
    return DEFAULT_RESULTS_DIR / f"{workload}-{arms}-{stamp}.json"


def save_result(result: dict, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, json.dumps(json_ready(result), indent=1))


def load_result(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise BenchError(f"cannot read benchmark result {path}: {error}") from None
    if data.get("schema") != SCHEMA:
        raise BenchError(f"{path} is not a Weft benchmark result (schema {data.get('schema')!r}, expected {SCHEMA!r})")
    return data


def verdicts_from_section(section: dict) -> list[Verdict]:
    """Re-derive the verdicts of one timing section (in-process or across processes)."""
    blocks = [Block.from_json(block) for block in section["blocks"]]
    return judge_all(blocks, section["baseline"], section["control"], section["candidates"])


def verdicts_against(data: dict, against: str) -> list[tuple[str, Verdict]]:
    """(section name, verdict) for every other arm of every timing section judged against the
    arm labelled ``against`` (``weft bench --against LABEL``), with each section's A/A floor."""
    rows = []
    for name in ("in_process", "processes", "whole"):
        section = data.get(name)
        if not section:
            continue
        labels = [section["baseline"], *section["candidates"]]
        if against not in labels:
            raise BenchError(f"--against {against!r} is not an arm of this result's {name.replace('_', '-')}"
                             f" section; its arms are {', '.join(labels)} (use one of those labels exactly)")
        blocks = [Block.from_json(block) for block in section["blocks"]]
        verdicts = judge_against(blocks, section["baseline"], section["control"], against, labels)
        rows += [(name, verdict) for verdict in verdicts]
    return rows


def recompute(data: dict) -> list[tuple[str, Verdict, dict, bool]]:
    """For every section: (section name, recomputed verdict, recorded verdict, agree?)."""
    rows = []
    for name in ("in_process", "processes", "whole"):
        section = data.get(name)
        if not section:
            continue
        recorded = section.get("verdicts", [])
        for index, verdict in enumerate(verdicts_from_section(section)):
            stored = recorded[index] if index < len(recorded) else {}
            agree = (
                stored.get("status") == verdict.status
                and stored.get("speedup_of") == verdict.speedup_of
                and math.isclose(stored.get("paired_median_ratio") or 0.0, verdict.paired_median_ratio, rel_tol=1e-9)
            )
            rows.append((name, verdict, stored, agree))
    return rows
