"""One plan's C from another checkout (a base: main, a commit) and from this one, timed side by
side in one process: for a change to rendering alone, where the lowering is the same.

A child process with ``PYTHONPATH=BASE`` compiles the workload and prints its shared object
and kernel set; this process compiles it with its own code, checks that the kernel sets are
equal (the same lowered functions, so the same arena and entry points), loads the base's
shared object beside its own and times them interleaved in palindrome blocks with an A/A
control of the base (docs/benchmarking.md), on the same inputs. Each arm's output digest is
printed; under Inference they may differ in the last bits (the tolerance is checked).

    python benchmarks/against_base.py --base /work/main --workload qwen-decode-step --params layers=24 \\
        [--threads 1] [--contract inference] [--fusion off] [--blocks 8] [--offset 16] [--entry-points-only]

``--offset B``: the inputs are copied to start B bytes past a 64-byte line (NumPy's large
arrays sit 16 bytes in; 0 is a line). Writes ``benchmarks/results/against-base-STAMP.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _params(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if item)


def compile_arm(plan, contract: str, fusion: str, threads: int, races: bool):
    """``weft.compile`` of ``plan`` as both arms do it; ``races=False`` sets ``race_share=0``, so a
    priced plan is the pricer's alone and two checkouts choose the same regions where their prices
    agree (a race on a thin margin may choose either way from compile to compile)."""
    import dataclasses

    import weft
    from weft.config import config_from_env

    config = config_from_env(contract=contract, threads=threads, fusion=fusion)
    if not races:
        config = dataclasses.replace(config, race_share=0.0)
    return weft.compile(plan, config=config)


def child(workload: str, params: dict, contract: str, fusion: str, threads: int, races: bool = True) -> dict:
    import weft
    from weft.workloads import get_workload

    compiled = compile_arm(get_workload(workload).plan(**params), contract, fusion, threads, races)
    return {"so": str(compiled.so_path), "kernel_set": compiled.kernel_set(), "weft": weft.__file__,
            "entry_points": entry_points(compiled)}


def entry_points(compiled) -> list:
    """What two shared objects must share to be called alike: the functions, in order, and the arena."""
    return [[function.name for function in compiled.lowered.functions], compiled.arena_bytes]


def placed(array, offset: int):
    from weft.testing import at_line_offset

    return at_line_offset(array, offset)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other checkout's root (its weft is imported there)")
    parser.add_argument("--workload", default="qwen-decode-step")
    parser.add_argument("--params", default="", help="name=value,... for the workload")
    parser.add_argument("--contract", default="inference")
    parser.add_argument("--fusion", default="off")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--round-s", type=float, default=0.5, help="seconds per round (about)")
    parser.add_argument("--offset", type=int, default=16, help="bytes past a 64-byte line for every input")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--entry-points-only", action="store_true",
                        help="a change that also changes a nest's lowering (a new flag): require only the same "
                             "functions and arena, not the same kernel set")
    parser.add_argument("--no-races", action="store_true",
                        help="fusion=priced without races (race_share=0) in both arms: the same regions where the"
                             " prices agree, so a priced plan can be compared")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    params = _params(args.params)
    if args.child:
        print(json.dumps(child(args.workload, params, args.contract, args.fusion, args.threads, not args.no_races)))
        return 0

    from weft.bench.driver import calibrate_inner, run_interleaved
    from weft.bench.result import weft_commit
    from weft.bench.verdict import judge_all
    from weft.compile import output_digest
    from weft.runtime.binding import NativeRunner
    from weft.testing import assert_inference_close
    from weft.workloads import get_workload

    with tempfile.TemporaryDirectory(prefix="weft-against-base-") as cache:
        environment = {**os.environ, "PYTHONPATH": str(Path(args.base).resolve()), "WEFT_CACHE_DIR": cache}
        command = [sys.executable, str(Path(__file__).resolve()), "--child", "--base", args.base,
                   "--workload", args.workload, "--params", args.params, "--contract", args.contract,
                   "--fusion", args.fusion, "--threads", str(args.threads), *(["--no-races"] if args.no_races else [])]
        done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        base = json.loads(done.stdout.strip().splitlines()[-1])
        workload = get_workload(args.workload)
        compiled = compile_arm(workload.plan(**params), args.contract, args.fusion, args.threads, not args.no_races)
        if args.entry_points_only:
            if entry_points(compiled) != base["entry_points"]:
                raise SystemExit("the base lowers this plan into other functions or another arena: compare with weft bench")
        elif compiled.kernel_set() != base["kernel_set"]:
            raise SystemExit("the base lowers this plan otherwise (kernel sets differ): compare with weft bench")
        other = copy.copy(compiled)
        other.runner = NativeRunner(Path(base["so"]), compiled.arena_bytes, len(compiled.lowered.functions))
        inputs = [placed(array, args.offset) for array in workload.inputs(**params)]
        calls = {"base": other.prepare(*inputs), "this": compiled.prepare(*inputs)}
        calls["base-again"] = other.prepare(*inputs)
        digests = {}
        for label in ("base", "this"):
            calls[label]()
            digests[label] = output_digest(tuple(calls[label].outputs))
        assert_inference_close(tuple(calls["this"].outputs), tuple(calls["base"].outputs))
        inner = calibrate_inner(calls, args.round_s)
        started = time.time()
        blocks = run_interleaved(calls, args.blocks, warmup_blocks=1, inner=inner)
        verdicts = judge_all(blocks, "base", "base-again", ["this"])
    load = os.getloadavg()
    for verdict in verdicts:
        print(verdict.summary())
    print(f"digests: {digests}; inputs at +{args.offset} bytes; {inner} calls per round; load {load[0]:.2f}")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    out = args.out or HERE / "results" / f"against-base-{stamp}.json"
    out.write_text(json.dumps({
        "schema": "weft-against-base/1", "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "base": {"root": str(Path(args.base).resolve()), "weft": base["weft"]}, "this": weft_commit(),
        "settings": {**vars(args), "out": None, "params": params}, "inner": inner, "digests": digests,
        "blocks": [block.to_json() for block in blocks], "verdicts": [v.to_json() for v in verdicts],
        "load_average": load,
    }, indent=1))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
