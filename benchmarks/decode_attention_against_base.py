"""A decode step's attention alone (qwen-decode-step's shapes: 14 query heads, 2 K/V heads, a
cache of 1024 keys plus the new one, head dim 64), this checkout against a base checkout, side
by side in one process as ``benchmarks/against_base.py`` does for a workload: a child with
``PYTHONPATH=BASE`` compiles it, this process loads the base's shared object beside its own
(the same entry points and arena) and times them interleaved, with an A/A control of the base.

The KV cache is rotated over ``--sets`` input sets (48 x 1 MiB, past a 32 MiB L3: each call reads
its K and V from memory, as in the 24-layer step, where 1.4 GB of weights stream between two
layers' attention); ``--sets 1`` keeps it in cache.

    PYTHONPATH=$PWD python benchmarks/decode_attention_against_base.py --base /work/main [--threads 1] [--sets 48]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HEADS, KV_HEADS, CACHE, DEPTH = 14, 2, 1024, 64
SHAPES = ((HEADS, 1, DEPTH), (KV_HEADS, CACHE, DEPTH), (KV_HEADS, 1, DEPTH), (KV_HEADS, CACHE, DEPTH),
          (KV_HEADS, 1, DEPTH))


def compiled_attention(threads: int, fusion: str):
    import weft
    import weft.nn as nn

    def step(q, k_cache, k_new, v_cache, v_new):
        keys, values = nn.concat([k_cache, k_new], axis=1), nn.concat([v_cache, v_new], axis=1)
        return nn.attention(q, keys, values)

    plan = nn.trace(step, *(nn.spec(shape) for shape in SHAPES))
    return weft.compile(plan, "inference", threads=threads, fusion=fusion)


def entry_points(compiled) -> list:
    return [[function.name for function in compiled.lowered.functions], compiled.arena_bytes]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sets", type=int, default=48, help="input sets rotated (1: the KV cache stays in cache)")
    parser.add_argument("--fusion", default="greedy")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--calls", type=int, default=400, help="calls per round")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        compiled = compiled_attention(args.threads, args.fusion)
        print(json.dumps({"so": str(compiled.so_path), "entry_points": entry_points(compiled)}))
        return 0
    from weft.runtime.binding import NativeRunner

    with tempfile.TemporaryDirectory(prefix="weft-decode-attention-") as cache:
        environment = {**os.environ, "PYTHONPATH": str(Path(args.base).resolve()), "WEFT_CACHE_DIR": cache}
        command = [sys.executable, str(Path(__file__).resolve()), "--child", "--base", args.base,
                   "--threads", str(args.threads), "--fusion", args.fusion]
        done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False, cwd="/")
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        base = json.loads(done.stdout.strip().splitlines()[-1])
        mine = compiled_attention(args.threads, args.fusion)
        if entry_points(mine) != base["entry_points"]:
            raise SystemExit("the base lowers this plan into other functions or another arena")
        other = copy.copy(mine)
        other.runner = NativeRunner(Path(base["so"]), mine.arena_bytes, len(mine.lowered.functions))
        rng = np.random.default_rng(0)
        inputs = [[rng.standard_normal(shape).astype(np.float32) for shape in SHAPES] for _ in range(args.sets)]
        arms = (("base", other), ("this", mine), ("base-again", other))
        calls = {label: [compiled.prepare(*arrays) for arrays in inputs] for label, compiled in arms}
        for label in calls:
            calls[label][0]()
        difference = np.max(np.abs(np.asarray(calls["this"][0].outputs[0]) - np.asarray(calls["base"][0].outputs[0])))

        def round_time(label: str, count: int) -> float:
            prepared, started = calls[label], time.perf_counter()
            for n in range(count):
                prepared[n % args.sets]()
            return (time.perf_counter() - started) / count

        for label in calls:  # warm-up
            round_time(label, args.calls // 4)
        times: dict[str, list[float]] = {label: [] for label in calls}
        for block in range(args.blocks):
            order = ["base", "this", "base-again", "this", "base-again", "base"]
            for label in order if block % 2 == 0 else order[::-1]:
                times[label].append(round_time(label, args.calls))
    print(f"max |this - base| {difference:.3g}; threads {args.threads}; {args.sets} input sets; load {os.getloadavg()[0]:.2f}")
    for label, values in times.items():
        print(f"{label:11s} per call: median {statistics.median(values) * 1e6:7.1f} us, "
              f"min {min(values) * 1e6:7.1f}, max {max(values) * 1e6:7.1f}")
    for label in ("this", "base-again"):
        ratios = [a / b for a, b in zip(times[label], times["base"], strict=True)]
        print(f"{label} / base: median paired ratio {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
