"""conv2d with bias under two fusion policies in one process: ``off`` (the convolution and its bias
add as two functions) against ``greedy`` (one function: the bias added in the contraction's
epilogue, ``weft.lower.contraction_epilogue``), with an A/A control of the first policy.

    python benchmarks/conv2d_fusion.py --cases resnet3x3-s2,resnet3x3-128 [--policies off,greedy]

The cases are those of ``benchmarks/conv2d.py``; Inference, 1 thread, timed by the calling
thread's CPU time (``time.thread_time``: on a loaded machine it leaves out the waits for a
core), arms interleaved ABBA over ``--rounds`` rounds of about ``--round-ms`` each. Prints
the median per arm with its interquartile range and first / arm (above 1: the arm is
faster); the JSON (every round, the load average) goes to ``--out``. Run it with
``PYTHONPATH`` set to the checkout to time (this one, or a base to compare with).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the cases; weft itself from PYTHONPATH (so a base checkout can be timed)

from conv2d import CASES  # noqa: E402


def _timed(call, repeats: int) -> float:
    start = time.thread_time()
    for _ in range(repeats):
        call()
    return (time.thread_time() - start) / repeats


def run_case(name: str, policies: list[str], rounds: int, round_s: float) -> dict:
    import weft
    from weft import nn

    x_shape, w_shape, keywords = CASES[name]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in (x_shape, w_shape, (w_shape[0],))]
    plan = weft.trace(lambda x, w, b: nn.conv2d(x, w, b, **keywords), weft.spec(x_shape), weft.spec(w_shape),
                      weft.spec((w_shape[0],)))
    calls, functions = {}, {}
    for policy in policies:
        compiled = weft.compile(plan, contract="inference", threads=1, fusion=policy)
        calls[policy] = compiled.prepare(*arrays)
        functions[policy] = list(compiled.function_names)
    calls["A/A"] = calls[policies[0]]
    for call in calls.values():
        call()
    repeats = max(1, int(round_s / max(_timed(calls[policies[0]], 1), 1e-6)))
    order = list(calls)
    times: dict[str, list[float]] = {arm: [] for arm in order}
    for number in range(rounds):
        for arm in order if number % 2 == 0 else order[::-1]:
            times[arm].append(_timed(calls[arm], repeats))
    medians = {arm: float(np.median(values)) for arm, values in times.items()}
    quartiles = {arm: (float(np.percentile(v, 25)), float(np.percentile(v, 75))) for arm, v in times.items()}
    return {"case": name, "functions": functions, "repeats": repeats, "rounds_s": times, "median_s": medians,
            "quartiles_s": quartiles, "first_over": {arm: medians[policies[0]] / medians[arm] for arm in order[1:]}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="resnet3x3-s2,resnet3x3-128,resnet3x3")
    parser.add_argument("--policies", default="off,greedy")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--round-ms", type=float, default=30.0)
    parser.add_argument("--out", help="result file (default benchmarks/results/conv2d-fusion-STAMP.json)")
    args = parser.parse_args(argv)
    names, policies = args.cases.split(","), args.policies.split(",")
    unknown = [name for name in names if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    rows = []
    for name in names:
        row = run_case(name, policies, args.rounds, args.round_ms / 1e3)
        rows.append(row)
        medians, quartiles = row["median_s"], row["quartiles_s"]
        arms = "  ".join(f"{arm} {medians[arm] * 1e6:.0f} us ({quartiles[arm][0] * 1e6:.0f}-{quartiles[arm][1] * 1e6:.0f})"
                         for arm in medians)
        ratios = " ".join(f"{policies[0]}/{arm} {ratio:.3f}" for arm, ratio in row["first_over"].items())
        print(f"{name:14s} {arms}   {ratios}", flush=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = Path(args.out) if args.out else HERE / "results" / f"conv2d-fusion-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"cases": rows, "policies": policies, "threads": 1, "clock": "thread",
                               "load_average": os.getloadavg(), "cpus": os.cpu_count(), "command": sys.argv}, indent=1))
    print(f"result written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
