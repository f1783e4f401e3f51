"""Memory-bound workloads against their bandwidth floors, side by side with torch eager.

For each case (softmax 8192 x 1024, layer norm 8192 x 1024, cross-entropy from logits
4096 x 128 000, one 24-layer ``qwen-decode-step``) and each thread count, one
``weft.bench`` run times the arms interleaved (palindrome blocks, an A/A control of the
first arm; docs/benchmarking.md) and checks their parity. Beside each arm's median:

- **the floor**, from the machine profile's measured stream bandwidth of the case's
  access pattern at that thread count: the bytes it must read R and write W (the plan's
  inputs and outputs), min(R, W) of them paired as a copy at the copy bandwidth
  (which counts both directions), the rest read-only at the read bandwidth (or
  write-only at the write bandwidth). Cross-entropy from logits and decode are
  read-only streams (decode: the weights and KV cache per token over the read
  bandwidth); softmax and layer norm read one tensor and write one of the same size.
  The level is ``memory`` when R + W exceeds the L3, else ``l3``. The copy probe
  (``weft.cost.probes`` ``wp_copy``) is a plain load and a plain store per vector: each line it
  writes is first read for ownership, so a loop with non-temporal stores could beat this floor
  (a hand-written streamed copy of softmax's 32 MiB ran 1.39 ms against the plain copy's 1.67 ms
  at 1 thread; README, h28-rows1). Weft's row chains store plainly;
- **% of floor** = floor / median (100% is at the roof);
- **the exp roof**: the transcendental vectors the plan must evaluate (exp, log, ...: each
  member's points over the lanes) at the profile's measured exp rate per core, times the
  threads; **% of roof** uses max(stream floor, exp roof). Softmax and cross-entropy do one
  exp per element, and on one core of this machine that costs more than streaming it;
- the same floor from streams measured in this run (``weft.cost.probes``, the same
  working sets as the profile), so a profile calibrated on a busier or quieter
  machine is visible;
- each candidate's paired-median ratio against the first arm (< 1 is faster).

llama.cpp's Python package (llama-cpp-python) is not on this machine's package index
(no wheel, and a source build of llama.cpp is not available here), so decode has no
llama.cpp peer in this script.

    python benchmarks/memory_bound.py [--quick] [--threads 1,2] [--cases softmax,layernorm,cross-entropy,decode]
        [--arms greedy+inference,priced+inference,torch-eager] [--blocks 4] [--out FILE.json]

Results go to ``benchmarks/results/memory-bound[-quick]-STAMP.json`` (every raw round,
so ``weft bench --recompute`` style verdicts can be re-derived per case).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

CASES = {
    # name: (workload, full params, --quick params)
    "softmax": ("softmax", {"rows": 8192, "cols": 1024}, {"rows": 2048, "cols": 1024}),
    "layernorm": ("layernorm", {"rows": 8192, "dim": 1024}, {"rows": 2048, "dim": 1024}),
    "cross-entropy": ("cross-entropy", {"tokens": 4096, "vocab": 128000}, {"tokens": 256, "vocab": 32000}),
    "decode": ("qwen-decode-step", {"layers": 24}, {"layers": 2}),
}
DEFAULT_ARMS = "greedy+inference,priced+inference,torch-eager"
# rough seconds per call on a quiet machine (1 thread, the slowest arm), for the run-time estimate
CALL_ESTIMATE_S = {"softmax": 0.012, "layernorm": 0.012, "cross-entropy": 1.1, "decode": 0.11}
# seconds per case and thread count outside the timed rounds: inputs (2 GB of logits), compiles,
# pricing, parity and the stream check
BUILD_ESTIMATE_S = {"softmax": 5, "layernorm": 5, "cross-entropy": 25, "decode": 30}


def io_bytes(plan) -> tuple[int, int]:
    """(bytes read, bytes written): the plan's inputs and outputs, each once."""
    buffers = plan.index.buffers
    return (sum(buffers[name].nbytes for name in plan.inputs), sum(buffers[name].nbytes for name in plan.outputs))


def transcendental_vectors(plan, lanes: int) -> float:
    """Vectors of exp/log/tanh/erf/sigmoid the plan must evaluate (each member's points x its
    transcendental nodes, over the lanes): the compute side of a memory-bound roof."""
    import math

    from weft.ir import TRANSCENDENTAL, Unary, walk_expr

    total = 0.0
    for kernel in plan.kernels:
        count = sum(1 for node in walk_expr(kernel.body) if isinstance(node, Unary) and node.op in TRANSCENDENTAL)
        if count:
            total += count * math.prod(axis.extent for axis in kernel.all_axes) / lanes
    return total


def level_of(read: int, written: int, profile) -> str:
    return "memory" if read + written > profile.l3_bytes else "l3"


def stream_floor(read: int, written: int, rates: dict[str, float]) -> dict:
    """Seconds to move ``read`` + ``written`` bytes: paired bytes as a copy, the rest one-way."""
    paired = min(read, written)
    seconds = 2 * paired / rates["copy"] + (read - paired) / rates["read"] + (written - paired) / rates["write"]
    pattern = "read+write (copy)" if paired and paired * 4 >= read else "read-only stream"
    return {"seconds": seconds, "pattern": pattern, "paired_bytes": paired}


def profile_rates(profile, level: str, threads: int) -> dict[str, float]:
    return {kind: profile.level_bandwidth(level, kind, threads) for kind in ("read", "write", "copy")}


def measured_rates(profile, level: str, threads: int) -> dict[str, float] | None:
    """Read/write/copy bytes/s of ``level`` at ``threads``, measured now with the profile's probes."""
    from weft.config import default_cache_dir
    from weft.cost.machine import hardware_facts, level_working_sets
    from weft.cost.probes import Probes

    try:
        probes = Probes.build(profile.lanes, "cc", default_cache_dir() / "machine")
    except Exception as error:  # noqa: BLE001 - the in-run column is optional
        print(f"  (streams not measured in this run: {error})")
        return None
    probes.tries = 3
    size = level_working_sets(hardware_facts(), threads)[level]
    rates = {}
    for kind in ("read", "write", "copy"):
        floats = size // 4 // (2 if kind == "copy" else 1)
        rates[kind], _ = probes.stream(kind, floats, threads, 32e6 if level == "memory" else 16e6)
    return rates


def arm_medians(section: dict) -> dict[str, float]:
    verdicts = section["verdicts"]
    medians = {verdicts[0]["baseline"]: verdicts[0]["baseline_stats"]["median"]}
    medians.update({v["candidate"]: v["candidate_stats"]["median"] for v in verdicts})
    return medians


def run_case(name: str, threads: int, args, profile) -> dict:
    from weft.bench import BenchOptions, run_bench
    from weft.bench.context import build_context

    workload, full, quick = CASES[name]
    params = quick if args.quick else full
    plan = build_context(workload, params, 0).plan
    read, written = io_bytes(plan)
    level = level_of(read, written, profile)
    rates = profile_rates(profile, level, threads)
    floor = stream_floor(read, written, rates)
    vectors = transcendental_vectors(plan, profile.lanes)
    exp_rate = profile.unary_rate("exp") * min(threads, profile.cores)
    compute_s = vectors / exp_rate if exp_rate else 0.0
    roof_s = max(floor["seconds"], compute_s)
    here = measured_rates(profile, level, threads) if not args.no_stream_check else None
    floor_here = stream_floor(read, written, here)["seconds"] if here else None
    options = BenchOptions(arms=args.arms, params=params, threads=threads, blocks=args.blocks, warmup=1,
                           target_round_s=args.round_ms / 1e3)
    started = time.perf_counter()
    result = run_bench(workload, options, profile)
    section = result["in_process"]
    medians = arm_medians(section)
    arms = {}
    for label, median in medians.items():
        arms[label] = {"median_s": median, "of_floor": floor["seconds"] / median, "of_roof": roof_s / median,
                       "of_floor_this_run": floor_here / median if floor_here else None}
    ratios = {v["candidate"]: {"paired_median_ratio": v["paired_median_ratio"], "status": v["status"],
                               "speedup_of": v["speedup_of"]} for v in section["verdicts"]}
    return {
        "case": name, "workload": workload, "params": result["params"], "threads": threads,
        "bytes_read": read, "bytes_written": written, "level": level, "pattern": floor["pattern"],
        "profile_rates_bytes_per_s": rates, "floor_s": floor["seconds"],
        "transcendental_vectors": vectors, "exp_vectors_per_s": exp_rate, "compute_floor_s": compute_s,
        "roof_s": roof_s,
        "this_run_rates_bytes_per_s": here, "floor_this_run_s": floor_here,
        "arms": arms, "ratios_vs_first_arm": ratios, "unavailable": section["unavailable"],
        "seconds": time.perf_counter() - started, "bench": result,
    }


def estimate_seconds(cases: list[str], threads: list[int], args) -> float:
    arms = len([a for a in args.arms.split(",") if a.strip()]) + 1  # + the A/A control
    total = 0.0
    for name in cases:
        call = CALL_ESTIMATE_S[name] * (0.02 if args.quick else 1.0)
        rounds = (args.blocks + 1) * 2 * arms
        total += sum(BUILD_ESTIMATE_S[name] * (0.2 if args.quick else 1.0)
                     + rounds * max(args.round_ms / 1e3, call) / (1 if t == 1 else 1.6) for t in threads)
    return total


def print_table(records: list[dict]) -> None:
    print()
    print(f"{'case':<14}{'thr':>4}  {'pattern':<18}{'floor':>9}{'exp roof':>10}  {'arm':<25}{'median':>10}"
          f"{'% floor':>9}{'% roof':>8}{'(this run)':>11}{'vs first':>10}")
    for record in records:
        first = True
        for label, arm in record["arms"].items():
            ratio = record["ratios_vs_first_arm"].get(label, {}).get("paired_median_ratio")
            head = (f"{record['case']:<14}{record['threads']:>4}  {record['pattern']:<18}{record['floor_s'] * 1e3:>7.2f}ms"
                    f"{record['compute_floor_s'] * 1e3:>8.2f}ms" if first else " " * 55)
            here = f"{arm['of_floor_this_run']:>10.0%}" if arm["of_floor_this_run"] else f"{'-':>10}"
            versus = f"{ratio:>9.3f}x" if ratio is not None else f"{'':>10}"
            print(f"{head}  {label:<25}{arm['median_s'] * 1e3:>8.2f}ms{arm['of_floor']:>9.0%}{arm['of_roof']:>8.0%}"
                  f" {here}{versus}")
            first = False
        for label, why in record["unavailable"].items():
            print(" " * 57 + f"{label}: unavailable ({why})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test for a shared machine)")
    parser.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"cases (default {','.join(CASES)})")
    parser.add_argument("--arms", default=DEFAULT_ARMS, help=f"arms, first is the baseline (default {DEFAULT_ARMS})")
    parser.add_argument("--blocks", type=int, default=4, help="timed palindrome blocks per case (default 4)")
    parser.add_argument("--round-ms", type=float, default=50.0, help="target round duration in ms (default 50)")
    parser.add_argument("--no-stream-check", action="store_true", help="skip the in-run stream measurement")
    parser.add_argument("--out", help="result JSON (default benchmarks/results/memory-bound[-quick]-STAMP.json)")
    args = parser.parse_args()

    from weft.bench.result import json_ready, provenance
    from weft.cost.machine import machine_profile

    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    threads = [int(t) for t in args.threads.split(",")]
    print(f"estimated run time on a quiet machine: ~{estimate_seconds(cases, threads, args) / 60:.1f} min "
          f"({len(cases)} cases x threads {threads}, arms {args.arms})", flush=True)
    profile = machine_profile()
    records = []
    started = time.perf_counter()
    for name in cases:
        for count in threads:
            print(f"- {name} at {count} thread(s) ...", flush=True)
            records.append(run_case(name, count, args, profile))
            print(f"  done in {records[-1]['seconds']:.1f} s", flush=True)
    print_table(records)
    print(f"\nwhole run {time.perf_counter() - started:.0f} s; floors from machine profile {profile.profile_id}"
          " (measured stream bandwidth of each access pattern); '(this run)' uses streams measured now.")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = Path(args.out) if args.out else Path("benchmarks/results") / f"memory-bound{'-quick' if args.quick else ''}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {"schema": "weft-memory-bound/1", "quick": args.quick, "arms": args.arms, "records": records,
                "provenance": provenance(profile, [], {"stream_bytes_per_s": [list(s) for s in profile.stream_bytes_per_s]})}
    out.write_text(json.dumps(json_ready(document), indent=1))
    print(f"result written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
