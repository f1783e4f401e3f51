"""Fusion off vs greedy under Inference, one thread: median of 9 prepared calls (ms).

    python benchmarks/online_probe.py [softmax layernorm attention cross_entropy]

A quick probe for the one-pass lowering (median of single calls, not an ABBA verdict;
for claims use `weft bench WORKLOAD --arms unfused+inference,greedy+inference`).
"""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

import weft
import weft.nn as nn
from weft.config import config_from_env

CASES = {
    "softmax": lambda: nn.trace(lambda x: nn.softmax(x), nn.spec((4096, 1024))),
    "layernorm": lambda: nn.trace(
        lambda x, w, b: nn.layer_norm(x, 1024, w, b), nn.spec((8192, 1024)), nn.spec((1024,)), nn.spec((1024,))
    ),
    "attention": lambda: nn.trace(lambda q, k, v: nn.attention(q, k, v), *[nn.spec((1, 2048, 64))] * 3),
    "cross_entropy": lambda: nn.trace(
        lambda x, t: nn.cross_entropy(x, t), nn.spec((512, 32000)), nn.spec((512,), "int64")
    ),
}


def inputs(plan):
    rng = np.random.default_rng(0)
    arrays = []
    for name in plan.inputs:
        buffer = plan.buffer(name)
        if buffer.dtype.is_int:
            arrays.append(rng.integers(0, buffer.shape[0] if False else 1000, buffer.shape).astype(np.int64))
        else:
            arrays.append(rng.standard_normal(buffer.shape).astype(np.float32))
    return arrays


def median_ms(compiled, arrays, calls: int = 9) -> float:
    prepared = compiled.prepare(*arrays)
    prepared()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        prepared()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main(names) -> None:
    cache = tempfile.mkdtemp(prefix="weft-bench-")
    for name in names:
        plan = CASES[name]()
        arrays = inputs(plan)
        row = []
        for fusion in ("off", "greedy"):
            config = config_from_env(contract="inference", threads=1, fusion=fusion, cache_dir=cache)
            row.append(median_ms(weft.compile(plan, config=config), arrays))
        print(f"{name:14s} off {row[0]:8.2f} ms   greedy {row[1]:8.2f} ms   ratio {row[1] / row[0]:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(CASES))
