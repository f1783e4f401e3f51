"""``weft diagnose WORKLOAD``: the profiling procedure, as a readable report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from weft.bench.report import wide_console
from weft.errors import WorkloadError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "diagnose",
        help="profile a workload: whole step, top functions, intensity vs ridge, fusion opportunities, memory scaling",
        description=(
            "Runs the profiling procedure, cheapest step first: the whole step's time; the per-function breakdown"
            " (top ten); bytes and FLOPs of each counted from shapes against the machine's ridge point; the"
            " fusion-opportunity signature; memory at two sizes of the sequence axis (quadratic growth means a fast"
            " path is not running); time outside members."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("workload", help="workload name (weft workloads lists them) or your program FILE.py:FUNCTION")
    parser.add_argument("--set", "--size", dest="size", action="append", default=[], metavar="KEY=VALUE", help="set a workload parameter")
    parser.add_argument("--sizes", metavar="N1,N2", help="two sizes of the sequence axis for memory scaling (default: N, 2N)")
    parser.add_argument("--arm", default="unfused", help="Weft arm to profile (default unfused; see weft bench --help)")
    parser.add_argument("--threads", type=int, default=1, help="threads (default 1)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per measurement (default 5)")
    parser.add_argument("--recalibrate", action="store_true", help="measure the machine profile again")
    parser.add_argument("--plot", metavar="FILE.png", help="draw a roofline chart of the functions (matplotlib)")
    parser.add_argument("--json", metavar="FILE.json", help="also write the diagnosis as JSON")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    from weft.cost.machine import machine_profile
    from weft.diagnose.procedure import diagnose
    from weft.diagnose.report import print_diagnosis
    from weft.workloads import get_workload
    from weft.workloads.params import parse_params

    sizes = None
    if args.sizes:
        try:
            first, second = (int(part) for part in args.sizes.split(","))
        except ValueError:
            raise WorkloadError(f"--sizes {args.sizes!r}: give two integers, e.g. --sizes 2048,4096") from None
        sizes = (first, second)
    console = wide_console()
    profile = machine_profile(recalibrate=args.recalibrate)
    workload = get_workload(args.workload)
    with console.status("profiling..."):
        result = diagnose(workload, parse_params(args.size, "--size"), profile, args.arm, args.threads, sizes, args.repeats)
    print_diagnosis(console, result)
    if args.json:
        from weft.bench.result import json_ready

        Path(args.json).write_text(json.dumps(json_ready(result.to_json()), indent=1))
        console.print(f"diagnosis written to {args.json}")
    if args.plot:
        from weft.bench.plot import _pyplot, plot_roofline

        pyplot = _pyplot()
        figure, axes = pyplot.subplots(figsize=(7, 5))
        points = [{"name": row.name, "intensity": row.work.intensity, "achieved": row.work.flops / row.seconds}
                  for row in result.functions if row.seconds > 0]
        plot_roofline(axes, points, result.bandwidth, result.peak_flops)
        figure.tight_layout()
        figure.savefig(args.plot, dpi=110)
        console.print(f"roofline chart written to {args.plot}")
    return 0
