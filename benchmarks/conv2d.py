"""conv2d against PyTorch eager: the example CNN's shapes, ResNet-like 3x3 (stride 1 and 2), grouped,
depthwise, unbatched, 1x1 and SAM 3's 14x14 stride-14 patch embedding.

    python benchmarks/conv2d.py --threads 1
    python benchmarks/conv2d.py --threads 2 --cases resnet3x3,depthwise

Three arms per case, interleaved ABC/CBA over ``--rounds`` rounds in one process
(docs/benchmarking.md): ``torch`` (``F.conv2d`` under ``inference_mode``, its best
path on CPU, oneDNN), ``weft`` (``weft.nn.conv2d`` compiled Inference at the same
thread count, as the library chooses its decomposition) and ``weft-direct`` (the direct
member forced: ``PATCHES_MIN_GROUP_CHANNELS`` raised past every case), so the choice in
``weft/nn/conv.py`` is checked by the same run. ``--fusion greedy`` (or ``priced``) compiles
the weft arms under that policy (greedy: the bias add in the contraction's epilogue).
Outputs are checked against PyTorch first. Prints the median per arm and torch / arm (above 1: faster than PyTorch); the
JSON result (every round, the load average) goes to ``--out``. On a shared machine
compare the arms of one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# name -> (input shape, weight shape, conv2d keywords)
CASES = {
    "cnn-conv1": ((4, 3, 32, 32), (16, 3, 3, 3), {"padding": 1}),  # examples/cnn.py
    "cnn-conv2": ((4, 16, 16, 16), (32, 16, 3, 3), {"stride": 2, "padding": 1}),  # examples/cnn.py
    "resnet3x3": ((1, 64, 56, 56), (64, 64, 3, 3), {"padding": 1}),
    "resnet3x3-128": ((1, 128, 28, 28), (128, 128, 3, 3), {"padding": "same"}),
    "grouped4": ((1, 64, 28, 28), (64, 16, 3, 3), {"padding": 1, "groups": 4}),
    "depthwise": ((1, 64, 56, 56), (64, 1, 3, 3), {"padding": 1, "groups": 64}),
    "unbatched": ((64, 28, 28), (64, 64, 3, 3), {"padding": 1}),
    "resnet3x3-s2": ((1, 64, 56, 56), (128, 64, 3, 3), {"stride": 2, "padding": 1}),
    "pointwise": ((1, 256, 28, 28), (128, 256, 1, 1), {}),  # 1x1
    "sam3-patch": ((1, 3, 1008, 1008), (1024, 3, 14, 14), {"stride": 14}),  # SAM 3's patch embedding
}


def compiled_conv(x_shape, w_shape, keywords, threads: int, direct: bool, fusion: str = "off"):
    import weft
    from weft import nn
    from weft.nn import conv

    saved = conv.PATCHES_MIN_GROUP_CHANNELS
    if direct:
        conv.PATCHES_MIN_GROUP_CHANNELS = sys.maxsize
    try:
        plan = weft.trace(lambda x, w, b: nn.conv2d(x, w, b, **keywords), weft.spec(x_shape), weft.spec(w_shape),
                          weft.spec((w_shape[0],)))
    finally:
        conv.PATCHES_MIN_GROUP_CHANNELS = saved
    return weft.compile(plan, contract="inference", threads=threads, fusion=fusion)


CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}
clock = time.perf_counter


def time_rounds(call, repeats: int) -> float:
    start = clock()
    for _ in range(repeats):
        call()
    return (clock() - start) / repeats


def run_case(name: str, threads: int, rounds: int, round_s: float, fusion: str = "off") -> dict:
    import torch
    import torch.nn.functional as F

    x_shape, w_shape, keywords = CASES[name]
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(x_shape, dtype=np.float32), rng.standard_normal(w_shape, dtype=np.float32)
    b = rng.standard_normal(w_shape[0], dtype=np.float32)
    torch.set_num_threads(threads)
    tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))

    def torch_conv():
        with torch.inference_mode():
            return F.conv2d(tx, tw, tb, **keywords)

    want = torch_conv().numpy()
    arms = {"torch": torch_conv}
    describe = {}
    for label, direct in (("weft", False), ("weft-direct", True)):
        compiled = compiled_conv(x_shape, w_shape, keywords, threads, direct, fusion)
        got = compiled(x, w, b)
        error = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
        if error > 1e-4:
            raise SystemExit(f"{name} {label}: differs from PyTorch by {error:.2e} (relative to the largest output)")
        arms[label] = compiled.prepare(x, w, b)
        describe[label] = compiled.describe()
    for call in arms.values():  # warm: pages, pools, packing buffers
        call()
    repeats = max(1, int(round_s / max(time_rounds(torch_conv, 1), 1e-6)))
    order = list(arms)
    times: dict[str, list[float]] = {label: [] for label in arms}
    for number in range(rounds):
        for label in order if number % 2 == 0 else order[::-1]:
            times[label].append(time_rounds(arms[label], repeats))
    medians = {label: float(np.median(values)) for label, values in times.items()}
    return {"case": name, "input": x_shape, "weight": w_shape, "keywords": keywords, "threads": threads, "fusion": fusion,
            "repeats": repeats, "rounds_s": times, "median_s": medians,
            "torch_over": {label: medians["torch"] / medians[label] for label in ("weft", "weft-direct")},
            "describe": describe}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", help=f"comma-separated, from {', '.join(CASES)} (default: all)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--round-ms", type=float, default=30.0)
    parser.add_argument("--fusion", choices=("off", "greedy", "priced"), default="off",
                        help="the weft arms' fusion policy (default off, as weft.compile): greedy runs the bias"
                             " add in the contraction's epilogue")
    parser.add_argument("--out", help="result file (default benchmarks/results/conv2d-STAMP.json)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall (default) or thread: the calling thread's CPU time, which leaves out the time"
                             " the thread waits for a core on a loaded machine (meaningful at --threads 1 only:"
                             " both arms then compute on the calling thread)")
    args = parser.parse_args(argv)
    if args.clock == "thread" and args.threads != 1:
        parser.error("--clock thread measures the calling thread only: use it with --threads 1")
    global clock
    clock = CLOCKS[args.clock]
    sys.path.insert(0, str(ROOT))
    names = args.cases.split(",") if args.cases else list(CASES)
    unknown = [name for name in names if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    rows = []
    for name in names:
        row = run_case(name, args.threads, args.rounds, args.round_ms / 1e3, args.fusion)
        rows.append(row)
        medians, ratio = row["median_s"], row["torch_over"]
        print(f"{name:14s} @{args.threads}  torch {medians['torch'] * 1e6:8.0f} us   weft {medians['weft'] * 1e6:8.0f} us"
              f" ({ratio['weft']:.2f}x torch)   weft-direct {medians['weft-direct'] * 1e6:8.0f} us"
              f" ({ratio['weft-direct']:.2f}x torch)", flush=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"conv2d-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"cases": rows, "threads": args.threads, "fusion": args.fusion, "clock": args.clock, "load_average": os.getloadavg(),
                               "cpus": os.cpu_count(), "command": sys.argv}, indent=1))
    print(f"result written to {out} (torch / arm above 1: faster than PyTorch; the machine's load is recorded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
