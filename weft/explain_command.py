"""``weft explain WORKLOAD``: print the regions the engine forms for a workload, and why.

A module of its own beside ``weft.explain`` (which ``weft.compile`` imports): under
``fusion="priced"`` and ``"matchers"`` it compiles the plan and prints what the compile decided.

    weft explain attention --contract inference --set tokens=256
    weft explain softmax --lowering          # lower too: tiles, scratch, one-pass form

Without ``--lowering`` each region shows its *preferred* tile axis; with it, the axes
the lowering actually tiled and their tile sizes (they can differ: multi-head
attention is tiled along the heads).
"""

from __future__ import annotations

import argparse

from weft.compile import compile as compile_plan
from weft.config import CONTRACTS, DEFAULT_FUSION, FUSION_POLICIES, config_from_env
from weft.explain.report import explain_lowering, explain_plan
from weft.workloads import get_workload
from weft.workloads.params import parse_params


def run_explain(args: argparse.Namespace) -> int:
    params = parse_params(args.set)
    plan = get_workload(args.workload).plan(**params)
    fusion = "priced" if args.prices else args.fusion
    if fusion in ("priced", "matchers"):  # what a compile decides: prices, library bodies, race, record
        config = config_from_env(contract=args.contract, threads=args.threads, fusion=fusion)
        compile_plan(plan, config=config).explain(every_price=args.prices)
        return 0
    if args.lowering:  # lower too, and show what each region became
        print(explain_lowering(plan, policy=fusion, contract=args.contract, threads=args.threads))
        return 0
    print(explain_plan(plan, policy=fusion, contract=args.contract).text())
    if fusion == "off":
        print(f"(fusion {fusion!r}: every member its own function; the default, {DEFAULT_FUSION!r} as in"
              " weft.compile, compiles the plan and shows what its prices chose)")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="show anchors, candidate regions, the chosen regions, the rewrite and every member left unfused",
    )
    parser.add_argument("workload", help="a workload name (see `weft workloads`) or your program FILE.py:FUNCTION")
    parser.add_argument("--contract", choices=CONTRACTS, default="strict")
    parser.add_argument("--fusion", choices=FUSION_POLICIES, default=DEFAULT_FUSION,
                        help=f"region policy (default: {DEFAULT_FUSION}, as weft.compile); priced and matchers"
                             " compile the plan and show what the compile decided (prices, library bodies, races,"
                             " the record)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="a workload parameter (repeatable)")
    parser.add_argument("--prices", action="store_true",
                        help="fusion='priced' (a compile) with every candidate's predicted unfused and fused cycles,"
                             " tiling and margin, the library bodies admitted and where each verdict came from")
    parser.add_argument("--threads", type=int, default=1, help="threads the prices (and --lowering) assume (default 1)")
    parser.add_argument("--lowering", action="store_true", help="also lower, and show the axes each region is actually tiled along, its tile loop and scratch")
    parser.set_defaults(handler=run_explain)
