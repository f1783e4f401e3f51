"""Cold compiles of this checkout beside another (a base), side by side in one run.

Each round compiles the workload once per checkout, in a fresh process and a fresh cache seeded
with the same machine folder (the profile, and this checkout's precompiled headers, which a base
without them ignores), the order reversed every round (ABBA), so load drift hits both alike.
Reports per checkout the median wall seconds of ``weft.compile`` and the median CPU seconds of
its children (the C compiler), and the ratio this / base of the wall medians. The compile-time
benchmark (``compile_time.py --against``) compares warm compiles; this one, cold ones.

    python benchmarks/cold_compile_against.py --base /tmp/base-checkout --workload sam3-encoder --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_time import calibrated_profile  # noqa: E402

CHILD = """
import json, resource, sys, time
import weft
from weft.workloads import get_workload
plan = get_workload(sys.argv[1]).plan()
start = time.perf_counter()
compiled = weft.compile(plan, sys.argv[2], int(sys.argv[3]), sys.argv[4])
wall = time.perf_counter() - start
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall_s": wall, "cc_cpu_s": children.ru_utime + children.ru_stime, "weft": weft.__file__}))
"""


def cold(root: Path, machine: Path, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="weft-cold-against-") as cache:
        shutil.copytree(machine / "machine", Path(cache) / "machine")
        done = subprocess.run([sys.executable, "-c", CHILD, args.workload, args.contract, str(args.threads), args.fusion],
                              capture_output=True, text=True, timeout=1800, check=False,
                              env={**os.environ, "WEFT_CACHE_DIR": cache, "PYTHONPATH": str(root)}, cwd=root)
    if done.returncode:
        raise SystemExit(f"{root}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # ``python -c`` puts its working folder first on sys.path: run from another checkout, the
    # child would import that one's weft whatever PYTHONPATH says (before 2026-12-04 it did).
    if not Path(result["weft"]).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"the child for {root} imported {result['weft']}: not the checkout asked for")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, type=Path, help="the other checkout's root")
    parser.add_argument("--workload", default="sam3-encoder")
    parser.add_argument("--contract", default="inference")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fusion", default="priced")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds (each compiles both checkouts twice)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    arms = {"base": args.base.resolve(), "this": ROOT}
    runs: dict[str, list[dict]] = {"base": [], "this": []}
    with tempfile.TemporaryDirectory(prefix="weft-cold-against-machine-") as machine:
        calibrated_profile(Path(machine))  # the profile and the precompiled headers (compile_time.py)
        for number in range(args.rounds):
            order = ["base", "this", "this", "base"] if number % 2 == 0 else ["this", "base", "base", "this"]
            for arm in order:
                runs[arm].append(cold(arms[arm], Path(machine), args))
                print(f"round {number + 1} {arm}: {runs[arm][-1]['wall_s']:.2f} s (C compiler CPU"
                      f" {runs[arm][-1]['cc_cpu_s']:.2f} s)", flush=True)
    medians = {arm: {key: statistics.median(run[key] for run in values) for key in ("wall_s", "cc_cpu_s")}
               for arm, values in runs.items()}
    ratio = medians["this"]["wall_s"] / medians["base"]["wall_s"]
    print(f"{args.workload} {args.fusion} {args.contract} @{args.threads}: base {medians['base']['wall_s']:.2f} s, this"
          f" {medians['this']['wall_s']:.2f} s (this / base {ratio:.3f}); C compiler CPU {medians['base']['cc_cpu_s']:.2f}"
          f" -> {medians['this']['cc_cpu_s']:.2f} s; load {os.getloadavg()[0]:.2f}")
    if args.out:
        args.out.write_text(json.dumps({"schema": "weft-cold-compile-against/1", "settings": {**vars(args),
                            "base": str(args.base), "out": None}, "runs": runs, "medians": medians, "ratio": ratio,
                            "load_average": os.getloadavg()}, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
