"""Where a plan's outputs start in their pages, timed side by side: one compiled plan called
into outputs placed as ``weft.runtime.memory.aligned_outputs`` places them (at or just below
the inputs' page offset) and into outputs on the next 64-byte line up from NumPy's own
placement (what Weft did before: NumPy's large arrays start 16 bytes into a page, so the
output sat 48 bytes above every input and its stores 4K-aliased the loads running ahead).

Same inputs (NumPy's placement), same shared object, interleaved palindrome blocks with an
A/A control of the old placement (docs/benchmarking.md); the outputs' bytes are checked equal.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/output_placement.py \\
        [--workloads adam,softmax,layernorm,cross-entropy] [--contracts inference,strict] [--threads 1,2]

Writes ``benchmarks/results/output-placement-STAMP.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def line_above(specs):
    """Each output on the first 64-byte line at or above where NumPy put it (the old placement)."""
    from weft.runtime.memory import aligned_empty

    return [aligned_empty(shape, dtype) for shape, dtype in specs]


def one_case(workload_name: str, contract: str, threads: int, blocks: int, round_s: float) -> dict:
    import weft
    from weft.bench.driver import calibrate_inner, run_interleaved
    from weft.bench.verdict import judge_all
    from weft.runtime.memory import page_offset
    from weft.workloads import get_workload

    workload = get_workload(workload_name)
    compiled = weft.compile(workload.plan(), contract=contract, threads=threads)
    inputs = list(workload.inputs())
    calls = {
        "line-above": compiled.prepare(*inputs, out=tuple(line_above(compiled._output_specs))),
        "beside": compiled.prepare(*inputs),
        "line-above-again": compiled.prepare(*inputs, out=tuple(line_above(compiled._output_specs))),
    }
    for call in calls.values():
        call()
    reference = [array.tobytes() for array in calls["line-above"].outputs]
    if [array.tobytes() for array in calls["beside"].outputs] != reference:
        raise SystemExit(f"{workload_name}: the outputs differ between placements")
    inner = calibrate_inner(calls, round_s)
    timed = run_interleaved(calls, blocks, warmup_blocks=1, inner=inner)
    verdicts = judge_all(timed, "line-above", "line-above-again", ["beside"])
    offsets = {label: [page_offset(array) for array in call.outputs] for label, call in calls.items()}
    for verdict in verdicts:
        print(f"{workload_name} {contract} @{threads}: {verdict.summary()}")
    return {"workload": workload_name, "contract": contract, "threads": threads, "inner": inner,
            "input_page_offsets": [page_offset(array) for array in inputs], "output_page_offsets": offsets,
            "blocks": [block.to_json() for block in timed], "verdicts": [v.to_json() for v in verdicts]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="adam,softmax,layernorm,cross-entropy")
    parser.add_argument("--contracts", default="inference,strict")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--round-s", type=float, default=0.3, help="seconds per round (about)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from weft.bench.result import weft_commit

    started = time.time()
    cases = [one_case(name, contract, int(threads), args.blocks, args.round_s)
             for name in args.workloads.split(",") for contract in args.contracts.split(",")
             for threads in args.threads.split(",")]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    out = args.out or HERE / "results" / f"output-placement-{stamp}.json"
    out.write_text(json.dumps({
        "schema": "weft-output-placement/1", "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "this": weft_commit(), "settings": {**vars(args), "out": None}, "cases": cases,
        "load_average": os.getloadavg(),
    }, indent=1))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
