"""``weft explain WORKLOAD``: print the regions the engine forms for a workload, and why.

    weft explain attention --contract inference --set tokens=256
    weft explain softmax --lowering          # lower too: tiles, scratch, one-pass form

Without ``--lowering`` each region shows its *preferred* tile axis; with it, the axes
the lowering actually tiled and their tile sizes (they can differ: multi-head
attention is tiled along the heads).
"""

from __future__ import annotations

import argparse

from weft.compose.partition import POLICIES
from weft.config import CONTRACTS
from weft.explain.report import explain_lowering, explain_plan
from weft.workloads import get_workload
from weft.workloads.params import parse_params


def run_explain(args: argparse.Namespace) -> int:
    params = parse_params(args.set)
    plan = get_workload(args.workload).plan(**params)
    if args.lowering:  # lower too, and show what each region became
        print(explain_lowering(plan, policy=args.fusion, contract=args.contract))
        return 0
    print(explain_plan(plan, policy=args.fusion, contract=args.contract).text())
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="show anchors, candidate regions, the chosen regions, the rewrite and every member left unfused",
    )
    parser.add_argument("workload", help="a workload name (see `weft workloads`)")
    parser.add_argument("--contract", choices=CONTRACTS, default="strict")
    parser.add_argument("--fusion", choices=POLICIES, default="greedy", help="region policy (default: greedy)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="a workload parameter (repeatable)")
    parser.add_argument("--lowering", action="store_true", help="also lower, and show the axes each region is actually tiled along, its tile loop and scratch")
    parser.set_defaults(handler=run_explain)
