"""Records of the C backend on this machine, at 1 and 2 threads.

Every figure stands beside the machine's own yardstick, measured in the same run:

- elementwise and row-reduction members: achieved GB/s (bytes read + written) vs the
  copy bandwidth of the machine profile (goal >= 70%);
- contraction at 1024^3 and 4096^3 (512^3 and 1024^3 with --quick): GFLOP/s vs NumPy's float32
  matmul at the same thread count (goal >= 0.8x), under Strict (the generated nest)
  and Inference (where SciPy's BLAS may serve the member: recorded as served_by);
- the unfused attention plan at 5184 x 32 (one head) and layer norm 8192 x 1024,
  beside PyTorch eager when it is installed;
- the contraction shapes of ``vit-block`` (each linear through its window or head
  view, attention's two products) and ``qwen-decode-step``'s matrix-vector products,
  Weft (Inference and Strict) beside NumPy, with the fraction of the measured FMA peak
  (``benchmarks/contraction_shapes.py``; ``--shapes-only`` runs just these).

Each pair is timed interleaved (palindrome blocks, weft.bench.driver) and reported as
medians with the spread; a pair whose call takes over 2 s gets one block (recorded). NumPy's BLAS is slowed here by OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE, so the script re-executes itself without them.

    python benchmarks/backend.py [--quick] [--shapes-only] [--threads 1,2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

SLOW_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
LONG_CALL_S = 2.0


def reexec_without_slow_blas_env() -> None:
    if any(name in os.environ for name in SLOW_BLAS_ENV):
        env = {k: v for k, v in os.environ.items() if k not in SLOW_BLAS_ENV}
        env["WEFT_BACKEND_BENCH_UNSET"] = ",".join(n for n in SLOW_BLAS_ENV if n in os.environ)
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def elementwise_plan(rows: int, cols: int):
    from weft.ir import Axis, AxisIndex, Binary, BinaryOp, Buffer, Const, DType, Kernel, Load, Plan, Role

    i, j = AxisIndex("i"), AxisIndex("j")
    f32 = DType.FLOAT32
    body = Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, Load("x", (i, j)), Const(1.5)), Load("y", (i, j)))
    buffers = (Buffer("x", (rows, cols), f32, Role.INPUT), Buffer("y", (rows, cols), f32, Role.INPUT),
               Buffer("z", (rows, cols), f32, Role.OUTPUT))
    return Plan(buffers, (Kernel("z", (Axis("i", rows), Axis("j", cols)), body),), ("x", "y"), ("z",), "axpy")


def row_sum_plan(rows: int, cols: int):
    from weft.ir import Axis, AxisIndex, Buffer, Combiner, DType, Fold, Kernel, Load, Plan, Role

    i, j = AxisIndex("i"), AxisIndex("j")
    f32 = DType.FLOAT32
    buffers = (Buffer("x", (rows, cols), f32, Role.INPUT), Buffer("s", (rows,), f32, Role.OUTPUT))
    kernel = Kernel("s", (Axis("i", rows),), Load("x", (i, j)), Fold((Axis("j", cols),), Combiner.SUM))
    return Plan(buffers, (kernel,), ("x",), ("s",), "row_sum")


def matmul_plan(size: int):
    from weft.ir import (
        Axis,
        AxisIndex,
        Binary,
        BinaryOp,
        Buffer,
        Combiner,
        DType,
        Fold,
        Kernel,
        Load,
        Plan,
        Role,
    )

    i, j, k = AxisIndex("i"), AxisIndex("j"), AxisIndex("k")
    f32 = DType.FLOAT32
    buffers = (Buffer("a", (size, size), f32, Role.INPUT), Buffer("b", (size, size), f32, Role.INPUT),
               Buffer("c", (size, size), f32, Role.OUTPUT))
    kernel = Kernel("c", (Axis("i", size), Axis("j", size)), Binary(BinaryOp.MUL, Load("a", (i, k)), Load("b", (k, j))),
                    Fold((Axis("k", size),), Combiner.SUM))
    return Plan(buffers, (kernel,), ("a", "b"), ("c",), f"matmul{size}")


def interleaved(calls: dict, blocks: int, target_round_s: float) -> dict:
    """Median seconds per call of each arm, and the spread of the comparison."""
    from weft.bench.driver import calibrate_inner, run_interleaved, time_round
    from weft.bench.verdict import arm_spread

    first = {label: time_round(call, 1) for label, call in calls.items()}  # warm-up call of each arm
    if max(first.values()) > LONG_CALL_S:
        # a call this long averages over its own noise; one block keeps the record within minutes
        inner, blocks, warmup = 1, 1, 0
    else:
        inner, warmup = calibrate_inner(calls, target_round_s, max_inner=1000), 1
    result = run_interleaved(calls, blocks, warmup_blocks=warmup, inner=inner)
    medians = {label: statistics.median(s for b in result for s in b.times_of(label)) for label in calls}
    spread = max(arm_spread(result, label) for label in calls)
    return {"median_s": medians, "spread": spread, "inner": inner, "blocks": blocks}


def compiled_call(plan, arrays, contract: str, threads: int):
    from weft.compile import compile as weft_compile

    compiled = weft_compile(plan, contract=contract, threads=threads)
    return compiled, compiled.prepare(*arrays)


def bandwidth_records(profile, threads: int, blocks: int, rows: int, cols: int) -> list[dict]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    y = rng.standard_normal((rows, cols), dtype=np.float32)
    records = []
    for name, plan, arrays, nbytes in (
        ("elementwise z = 1.5 x + y", elementwise_plan(rows, cols), (x, y), 3 * x.nbytes),
        ("row reduction s = sum_j x", row_sum_plan(rows, cols), (x,), x.nbytes + rows * 4),
    ):
        compiled, call = compiled_call(plan, arrays, "strict", threads)
        timing = interleaved({"weft": call}, blocks, 0.05)
        seconds = timing["median_s"]["weft"]
        achieved = nbytes / seconds
        copy = profile.bandwidth(threads)
        records.append({
            "record": name, "shape": [rows, cols], "threads": threads, "contract": "strict", "median_s": seconds,
            "bytes": nbytes, "achieved_bytes_per_s": achieved, "copy_bandwidth_bytes_per_s": copy,
            "fraction_of_copy": achieved / copy, "goal": ">= 0.70 of copy bandwidth", "met": achieved / copy >= 0.7,
            "spread": timing["spread"],
        })
    return records


def contraction_records(threads: int, blocks: int, sizes: list[int]) -> list[dict]:
    from weft.cost.machine import set_blas_threads

    records = []
    for size in sizes:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((size, size), dtype=np.float32)
        b = rng.standard_normal((size, size), dtype=np.float32)
        out = np.empty((size, size), np.float32)
        set_blas_threads(threads)
        plan = matmul_plan(size)
        flops = 2.0 * size**3
        for contract in ("strict", "inference"):
            compiled, call = compiled_call(plan, (a, b), contract, threads)
            timing = interleaved({"weft": call, "numpy": lambda a=a, b=b, out=out: np.matmul(a, b, out=out)}, blocks,
                                 0.05 if size <= 2048 else 0.0)
            weft_s, numpy_s = timing["median_s"]["weft"], timing["median_s"]["numpy"]
            served = "BLAS (SciPy sgemm)" if compiled.provenance.get("blas") else "generated nest"
            records.append({
                "record": f"contraction {size}^3", "threads": threads, "contract": contract, "served_by": served,
                "median_s": weft_s, "numpy_median_s": numpy_s, "gflop_per_s": flops / weft_s / 1e9,
                "numpy_gflop_per_s": flops / numpy_s / 1e9, "ratio_to_numpy": numpy_s / weft_s,
                "goal": ">= 0.8x numpy matmul", "met": numpy_s / weft_s >= 0.8, "spread": timing["spread"],
                "blocks": timing["blocks"],
            })
    set_blas_threads(os.cpu_count() or 1)
    return records


def workload_records(profile, threads: int, blocks: int, quick: bool) -> list[dict]:
    from weft.bench.arms import ArmUnavailable, build_peer_runner, build_weft_runner, parse_arm
    from weft.cost.work import floor, plan_work, unfused_work
    from weft.workloads import get_workload

    cases = [("attention", {"batch": 1, "heads": 1, "tokens": 2592 if quick else 5184, "head_dim": 32}),
             ("layernorm", {"rows": 8192, "dim": 1024})]
    records = []
    for name, params in cases:
        workload = get_workload(name)
        plan = workload.plan(**params)
        arrays = workload.inputs(seed=0, **params)
        weft_runner = build_weft_runner(parse_arm(f"unfused@{threads}"), plan, arrays)
        calls = {"weft unfused": weft_runner.call}
        peer_note = "PyTorch not installed"
        try:
            peer = build_peer_runner(parse_arm(f"torch-eager@{threads}"), workload, params, arrays)
            from weft.bench.parity import relative_error

            error = relative_error(peer.outputs, weft_runner.outputs)
            calls["torch eager"] = peer.call
            peer_note = f"torch {peer.provenance['torch']}, max relative difference {error:.2g}"
        except ArmUnavailable as error:
            peer_note = str(error)
        timing = interleaved(calls, blocks, 0.0 if name == "attention" else 0.05)
        work = plan_work(plan)
        bound = floor(work, profile.bandwidth(threads), profile.peak_flops(threads))
        weft_s = timing["median_s"]["weft unfused"]
        torch_s = timing["median_s"].get("torch eager")
        records.append({
            "record": f"{name} unfused plan", "params": params, "threads": threads, "contract": "strict",
            "median_s": weft_s, "torch_eager_median_s": torch_s,
            "ratio_torch_over_weft": (torch_s / weft_s) if torch_s else None, "peer": peer_note,
            "flops": work.flops, "compulsory_bytes": work.bytes, "unfused_bytes": unfused_work(plan).bytes,
            "floor_s": bound.seconds, "fraction_of_floor": bound.seconds / weft_s,
            "copy_bandwidth_bytes_per_s": profile.bandwidth(threads), "gemm_flops_per_s": profile.peak_flops(threads),
            "spread": timing["spread"],
        })
    return records


def print_records(records: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Weft C backend records", title_justify="left")
    for column in ("record", "threads", "contract", "time", "figure", "yardstick", "goal met", "spread"):
        table.add_column(column)
    for r in records:
        if "fraction_of_copy" in r:
            figure = f"{r['achieved_bytes_per_s'] / 1e9:.1f} GB/s ({r['fraction_of_copy']:.0%})"
            yardstick = f"copy {r['copy_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s"
            met = str(r["met"])
        elif "gflop_per_s" in r:
            figure = f"{r['gflop_per_s']:.1f} GFLOP/s ({r['ratio_to_numpy']:.2f}x numpy, {r['served_by']})"
            yardstick = f"numpy {r['numpy_gflop_per_s']:.1f} GFLOP/s"
            met = str(r["met"])
        else:
            torch = f"torch eager {r['torch_eager_median_s'] * 1e3:.1f} ms" if r["torch_eager_median_s"] else r["peer"]
            figure = f"{r['fraction_of_floor']:.0%} of floor {r['floor_s'] * 1e3:.2f} ms"
            yardstick, met = torch, "-"
        table.add_row(r["record"], str(r["threads"]), r["contract"], f"{r['median_s'] * 1e3:.2f} ms", figure,
                      yardstick, met, f"{r['spread']:.1%}")
    Console(width=170).print(table)


def main() -> int:
    reexec_without_slow_blas_env()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few rounds (a minute, for a shared machine)")
    parser.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    parser.add_argument("--shapes-only", action="store_true",
                        help="only the contraction shapes of vit-block and qwen-decode-step")
    parser.add_argument("--out", help="result JSON (default benchmarks/results/backend[-quick]-STAMP.json)")
    args = parser.parse_args()
    from weft.bench.result import provenance, save_result
    from weft.cost.machine import machine_profile

    profile = machine_profile()
    blocks = 2 if args.quick else 4
    sizes = [512, 1024] if args.quick else [1024, 4096]
    rows, cols = 8192, 1024  # 32 MiB per array: past the 32 MiB L3 together, as the copy yardstick is
    sys.path.insert(0, str(Path(__file__).parent))
    from contraction_shapes import contraction_shape_records, print_shape_records

    records, shape_records = [], []
    for threads in (int(t) for t in args.threads.split(",")):
        if not args.shapes_only:
            records += bandwidth_records(profile, threads, blocks, rows, cols)
            records += contraction_records(threads, blocks, sizes)
            records += workload_records(profile, threads, blocks, args.quick)
        shape_records += contraction_shape_records(threads, blocks, interleaved, args.quick)
    if records:
        print_records(records)
    print_shape_records(shape_records)
    records += shape_records
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    kind = "-shapes" if args.shapes_only else ""
    path = Path(args.out or f"benchmarks/results/backend{kind}{'-quick' if args.quick else ''}-{stamp}.json")
    result = {"schema": "weft-backend-records/1", "quick": args.quick, "records": records,
              "unset_env": os.environ.get("WEFT_BACKEND_BENCH_UNSET", ""),
              "provenance": provenance(profile, [])}
    save_result(result, path)
    print(f"records written to {path}")
    print(json.dumps({"records": len(records)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
