"""Compile time, cold and warm, of the built-in workloads and of user-written models.

    python benchmarks/compile_time_examples.py                         # every case, default policy
    python benchmarks/compile_time_examples.py --fusion greedy --cases minilm-1,minilm-2,minilm-3
    python benchmarks/compile_time_examples.py --quick                 # the small cases only

Each case is traced once, then compiled twice into a fresh, empty cache directory:
*cold* (every shared object built by the C compiler) and *warm* (the same compile
again, the cache full). User models are the examples (``examples/bert.py``,
``examples/minilm6.py`` at 1, 2, 3 and 6 layers), loaded as ``FILE.py:FUNCTION``
exactly as ``weft bench`` loads them, so compile time that grows with depth shows as
the ratio between the MiniLM rows.

The machine profile (``weft.cost.machine``: bandwidths, GEMM rate, first-touch cost;
what ``fusion="priced"`` prices with) is measured once per machine, not per compile: it
is calibrated once before the first case (its seconds are recorded as
``calibration_s``) and copied into every fresh cache, so *cold* is a compile with every
shared object to build on a machine Weft already knows. Without the copy a priced cold
compile would also pay the calibration (about 3 s here); the precompiled system headers
(``weft.codegen.pch``, about 1 s per contract once per machine) are copied the same way. The result (JSON, with the machine and load
average) goes to ``benchmarks/results/compile-time-examples-*.json``. Times on a shared
machine are noisy: compare rows of one run, not runs; the CPU seconds of the cold compile
(this process and the C compiler) are printed beside the wall time, as waiting for a
core does not count there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# name -> (workload reference, parameters)
CASES = {
    "attention": ("attention", {"tokens": 1024}),
    "vit-block": ("vit-block", {}),
    "qwen-decode-step": ("qwen-decode-step", {}),
    "bert-layer": (f"{EXAMPLES}/bert.py:build", {}),
    "minilm-1": (f"{EXAMPLES}/minilm6.py:build", {"layers": 1}),
    "minilm-2": (f"{EXAMPLES}/minilm6.py:build", {"layers": 2}),
    "minilm-3": (f"{EXAMPLES}/minilm6.py:build", {"layers": 3}),
    "minilm-6": (f"{EXAMPLES}/minilm6.py:build", {"layers": 6}),
    "cnn": (f"{EXAMPLES}/cnn.py:build", {}),
}
QUICK = ("attention", "cnn", "minilm-1", "minilm-2")


def calibrated_profile() -> tuple[Path, float]:
    """The machine profile file of the user's cache (calibrated now if absent) and the seconds it took."""
    from weft.codegen.driver import prepare_headers
    from weft.config import config_from_env
    from weft.cost.machine import hardware_facts, machine_profile, profile_id, profile_path

    config = config_from_env()
    start = time.perf_counter()
    machine_profile(config.cache_dir, cc=config.cc)
    prepare_headers(config.cc, config.cache_dir)  # the other one-time cost per machine (weft.codegen.pch)
    return profile_path(config.cache_dir, profile_id(hardware_facts())), time.perf_counter() - start


def warm_imports(contract: str, fusion: str, threads: int, profile_file: Path) -> None:
    """Compile a two-member plan once, untimed, so the first case does not pay Weft's lazy
    imports (process start-up, not compile time)."""
    import numpy as np

    import weft
    from weft import nn

    plan = weft.trace(lambda x: nn.relu(x) + 1.0, weft.spec((8, 16), np.float32), name="warm_imports")
    time_case_plan(plan, contract, fusion, threads, profile_file)


def time_case_plan(plan, contract: str, fusion: str, threads: int, profile_file: Path | None) -> tuple:
    """(compiled plan, cold seconds, warm seconds) in a fresh cache (seeded with the machine profile)."""
    import weft
    from weft.config import config_from_env

    with tempfile.TemporaryDirectory(prefix="weft-compile-time-") as cache:
        if profile_file is not None:  # the machine is known: only the compile is cold
            seeded = Path(cache) / profile_file.parent.name / profile_file.name
            seeded.parent.mkdir(parents=True)
            shutil.copyfile(profile_file, seeded)
            for headers in profile_file.parent.glob("pch-*"):  # the precompiled headers, built once per machine
                shutil.copytree(headers, seeded.parent / headers.name)
        config = config_from_env(contract=contract, threads=threads, fusion=fusion, cache_dir=Path(cache))
        start, cpu = time.perf_counter(), cpu_seconds()
        compiled = weft.compile(plan, config=config)
        cold_s, cold_cpu_s = time.perf_counter() - start, cpu_seconds() - cpu
        start = time.perf_counter()
        weft.compile(plan, config=config)
        warm_s = time.perf_counter() - start
    return compiled, cold_s, warm_s, cold_cpu_s


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the C compiler)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def time_case(reference: str, params: dict, contract: str, fusion: str, threads: int,
              profile_file: Path | None = None) -> dict:
    from weft.workloads import get_workload

    start = time.perf_counter()
    plan = get_workload(reference).plan(**params)
    trace_s = time.perf_counter() - start
    compiled, cold_s, warm_s, cold_cpu_s = time_case_plan(plan, contract, fusion, threads, profile_file)
    return {"reference": reference, "params": params, "members": len(plan.members), "inputs": len(plan.inputs),
            "functions": len(compiled.groups), "trace_s": trace_s, "cold_s": cold_s, "warm_s": warm_s,
            "cold_cpu_s": cold_cpu_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", help=f"comma-separated, from {', '.join(CASES)} (default: all)")
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--contract", default="strict", choices=("strict", "inference"))
    parser.add_argument("--fusion", default=None, help="fusion policy (default: weft.config.DEFAULT_FUSION)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="result file (default benchmarks/results/compile-time-STAMP.json)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from weft.config import DEFAULT_FUSION

    fusion = args.fusion or DEFAULT_FUSION
    names = args.cases.split(",") if args.cases else list(QUICK if args.quick else CASES)
    unknown = [name for name in names if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    profile_file, calibration_s = calibrated_profile()
    print(f"machine profile {profile_file} ({calibration_s:.2f} s to load or calibrate; not part of a cold compile)")
    warm_imports(args.contract, fusion, args.threads, profile_file)
    rows = {}
    for name in names:
        reference, params = CASES[name]
        row = time_case(reference, params, args.contract, fusion, args.threads, profile_file)
        rows[name] = row
        print(f"{name:18s} {row['members']:4d} members {row['functions']:4d} functions  trace {row['trace_s']:6.2f} s"
              f"  cold {row['cold_s']:7.2f} s (CPU {row['cold_cpu_s']:6.2f} s)  warm {row['warm_s']:6.2f} s", flush=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"compile-time-examples-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"contract": args.contract, "fusion": fusion, "threads": args.threads, "cases": rows,
              "calibration_s": calibration_s,
              "load_average": os.getloadavg(), "cpus": os.cpu_count(), "command": sys.argv}
    out.write_text(json.dumps(record, indent=1))
    print(f"result written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
