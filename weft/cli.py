"""The ``weft`` command. Each subcommand lives with the stage it drives and
registers itself through a ``register(subparsers)`` function."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from weft.errors import WeftError

# module that provides register(subparsers) for each subcommand
SUBCOMMAND_MODULES = (
    "weft.workloads.cli",   # weft plan, weft workloads
    "weft.explain_command",  # weft explain (a compile for priced and matchers: beside weft.explain, not in it)
    "weft.bench.cli",       # weft bench
    "weft.diagnose.cli",    # weft diagnose
    "weft.cost.cli",        # weft machine
    "weft.decide.cli",      # weft record
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="weft", description="Weft: a tensor compiler for CPUs that fuses only when a price says it pays.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except WeftError as error:
        print(f"weft: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader (e.g. `weft plan ... | head`) closed the pipe: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
