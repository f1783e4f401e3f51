"""``weft plan WORKLOAD [--set key=value ...]`` and ``weft workloads``."""

from __future__ import annotations

import argparse

from weft.ir import format_plan
from weft.workloads.params import parse_params


def _plan(args: argparse.Namespace) -> int:
    from weft.workloads import get_workload

    workload = get_workload(args.workload)
    plan = workload.plan(**parse_params(args.set))
    print(format_plan(plan))
    return 0


def _workloads(args: argparse.Namespace) -> int:
    from weft.workloads import WORKLOADS

    for workload in WORKLOADS.values():
        print(f"{workload.name}")
        print(f"    {workload.description}")
        print(f"    defaults: {' '.join(f'{k}={v}' for k, v in workload.defaults.items())}")
    print("\nor your own program, FILE.py:FUNCTION, where FUNCTION(**params) returns (fn, inputs[, torch_fn])"
          " (docs/user-guide.md, examples/)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    plan = subparsers.add_parser("plan", help="print a workload's (or FILE.py:FUNCTION's) traced plan (its members)")
    plan.add_argument("workload", help="workload name (see `weft workloads`) or your program FILE.py:FUNCTION")
    plan.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a size parameter (repeatable)")
    plan.set_defaults(handler=_plan)
    listing = subparsers.add_parser("workloads", help="list the built-in workloads and their default sizes")
    listing.set_defaults(handler=_workloads)
