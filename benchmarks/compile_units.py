"""The C compiler stage alone: a plan's source built in one translation unit against the
cut into units compiled at once (``weft.codegen.units``), side by side.

The workload is compiled once (its source kept); then each round builds that source into a
fresh cache with ``jobs=1`` and as ``weft.compile`` does (``auto``: as many units as CPUs are
free, ``weft.codegen.driver.compile_jobs``; or ``--jobs N`` units), in ABBA / BAAB order, and
records the wall time of ``weft.codegen.driver.build`` (the compilers and the link), the load
average and, for ``auto``, the free CPUs read just before.

    python benchmarks/compile_units.py --workload sam3-encoder --params blocks=32 --rounds 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _params(text: str) -> dict[str, int]:
    return {key: int(value) for key, value in (item.split("=", 1) for item in text.split(",") if item)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="sam3-encoder")
    parser.add_argument("--params", default="blocks=32", help="name=value,... for the workload")
    parser.add_argument("--fusion", default="greedy")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=None, help="units of the cut arm (default: auto, the free CPUs)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import weft
    from weft.codegen import driver
    from weft.codegen.units import translation_units
    from weft.config import config_from_env
    from weft.workloads import get_workload

    jobs = args.jobs
    with tempfile.TemporaryDirectory(prefix="weft-compile-units-") as scratch:
        plan = get_workload(args.workload).plan(**_params(args.params))
        config = config_from_env(contract="inference", fusion=args.fusion, cache_dir=Path(scratch) / "first")
        compiled = weft.compile(plan, config=config)
        source = compiled.source_path.read_text()
        cut = f"{len(translation_units(source, jobs, 'x.c'))} units" if jobs else "auto"
        arms = {"one unit": 1, cut: jobs}
        rounds = []
        for number in range(args.rounds):
            order = list(arms) if number % 2 == 0 else list(arms)[::-1]
            for position, arm in enumerate(order + order[::-1]):
                cache = Path(scratch) / f"r{number}-{position}"
                load = os.getloadavg()[0]
                free = driver.compile_jobs() if arms[arm] is None else None
                start = time.perf_counter()
                artifact = driver.build(source, config.cc, cache, config.contract, jobs=arms[arm])
                seconds = time.perf_counter() - start
                assert artifact.compiled
                rounds.append({"round": number, "position": position, "arm": arm, "seconds": seconds, "load": load,
                               "free_cpus": free})
                print(f"round {number} {arm:>9}: {seconds:6.2f} s (load {load:.2f}"
                      + (f", free CPUs {free})" if free else ")"), flush=True)
    names = list(arms)
    medians = {arm: statistics.median(r["seconds"] for r in rounds if r["arm"] == arm) for arm in names}
    paired = []
    for number in range(args.rounds):
        mine = {arm: [r["seconds"] for r in rounds if r["round"] == number and r["arm"] == arm] for arm in names}
        paired.append(statistics.mean(mine[names[1]]) / statistics.mean(mine[names[0]]))
    print(f"{args.workload} {args.params}: {len(source) // 1000} kB of C; median build {names[0]} {medians[names[0]]:.2f} s,"
          f" {names[1]} {medians[names[1]]:.2f} s; paired ratio {names[1]} / {names[0]}: median"
          f" {statistics.median(paired):.2f} ({min(paired):.2f}-{max(paired):.2f})")
    if args.out:
        Path(args.out).write_text(json.dumps({"workload": args.workload, "params": args.params, "fusion": args.fusion,
                                              "source_bytes": len(source), "jobs": jobs, "rounds": rounds,
                                              "medians": medians, "paired_ratios": paired}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
