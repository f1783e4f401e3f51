"""Adam written over its state (``weft.compile(..., in_place=...)``) against
``torch.optim.Adam(fused=True)``, which also steps in place, and against Weft's Adam into
fresh outputs (the ``adam`` workload as ``weft bench`` runs it).

Each arm steps its own copy of the workload's state (parameters, gradients, moments), one
step per call, so every call does the same work; interleaved palindrome blocks with an A/A
control of the torch arm (docs/benchmarking.md). Before timing, one in-place step from the
workload's inputs is checked against the oracle (Strict: the same bytes; Inference: within
tolerance). Every arm's state arrays start at the same place in their pages
(``--page-offset``, NumPy's +16 by default): an in-place loop's loads are checked against
its older stores by the low 12 bits of their addresses, so streams that start at different
page offsets make it wait ("4K aliasing"; measured here: the same Weft step 22.4 ms on
arrays at one offset, 26.1 ms on arrays NumPy packed into one mapping at scattered offsets).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/adam_in_place.py \\
        [--threads 1,2] [--contract inference] [--params 50000000] [--tensors 10]

Writes ``benchmarks/results/adam-in-place-STAMP.json``.
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


def in_place_pairs(tensors: int) -> dict[str, str]:
    """Each step's new parameter, first and second moment written over the old ones."""
    pairs = {}
    for n in range(tensors):
        pairs.update({f"t{n}_adam_param": f"param{n}", f"t{n}_adam_m": f"m{n}", f"t{n}_adam_v": f"v{n}"})
    return pairs


def one_case(params: dict, contract: str, threads: int, blocks: int, round_s: float, page_offset: int) -> dict:
    import numpy as np

    import weft
    from weft import oracle
    from weft.bench.arms import ArmSpec, build_adam_fused_runner
    from weft.bench.driver import calibrate_inner, run_interleaved
    from weft.bench.verdict import arm_rounds, judge_all
    from weft.testing import assert_inference_close, at_page_offset
    from weft.workloads import get_workload

    workload = get_workload("adam")
    plan = workload.plan(**params)
    state = list(workload.inputs(**params))
    pairs = in_place_pairs(params["tensors"])
    in_place = weft.compile(plan, contract=contract, threads=threads, in_place=pairs)
    fresh = weft.compile(plan, contract=contract, threads=threads)

    # parity: one in-place step from the workload's state, against the oracle
    check = [array.copy() for array in state]
    got = in_place(*check)
    expected = oracle.run(plan, *state)
    if contract == "strict":
        if any(a.tobytes() != b.tobytes() for a, b in zip(got, expected, strict=True)):
            raise SystemExit("the in-place Adam step differs from the oracle under Strict")
    else:
        assert_inference_close(tuple(got), tuple(expected))
    del check, got, expected

    def placed():
        return [at_page_offset(array, page_offset) for array in state]

    def torch_arm(label: str):
        spec = ArmSpec(label, "torch-adam-fused", "peer", None, "peer", threads)
        return build_adam_fused_runner(spec, params, placed(), copy=False).call

    calls = {
        "torch-adam-fused": torch_arm("torch-adam-fused"),
        "weft-in-place": in_place.prepare(*placed()),
        "weft-fresh-outputs": fresh.prepare(*placed()),
        "torch-adam-fused:control": torch_arm("torch-adam-fused:control"),
    }
    inner = calibrate_inner(calls, round_s)
    timed = run_interleaved(calls, blocks, warmup_blocks=1, inner=inner)
    verdicts = judge_all(timed, "torch-adam-fused", "torch-adam-fused:control", ["weft-in-place", "weft-fresh-outputs"])
    medians = {label: float(np.median(arm_rounds(timed, label))) for label in calls}
    for verdict in verdicts:
        print(f"adam {params['params']} {contract} @{threads}: {verdict.summary()}")
    print("  medians: " + ", ".join(f"{label} {seconds * 1e3:.2f} ms" for label, seconds in medians.items()))
    return {"params": params, "contract": contract, "threads": threads, "page_offset": page_offset, "inner": inner,
            "medians_s": medians,
            "kernel_set": in_place.kernel_set(), "blocks": [block.to_json() for block in timed],
            "verdicts": [v.to_json() for v in verdicts]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--contract", default="inference")
    parser.add_argument("--params", type=int, default=50_000_000)
    parser.add_argument("--tensors", type=int, default=10)
    parser.add_argument("--step", type=int, default=10)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--round-s", type=float, default=0.3, help="seconds per round (about)")
    parser.add_argument("--page-offset", type=int, default=16,
                        help="where every state array of every arm starts in its page (NumPy's own large arrays: 16)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from weft.bench.result import weft_commit

    params = {"params": args.params, "tensors": args.tensors, "step": args.step}
    started = time.time()
    cases = [one_case(params, args.contract, int(threads), args.blocks, args.round_s, args.page_offset)
             for threads in args.threads.split(",")]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    out = args.out or HERE / "results" / f"adam-in-place-{stamp}.json"
    out.write_text(json.dumps({
        "schema": "weft-adam-in-place/1", "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "this": weft_commit(), "settings": {**vars(args), "out": None}, "cases": cases,
        "load_average": os.getloadavg(),
    }, indent=1))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
