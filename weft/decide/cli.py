"""``weft record``: the decision record (``WEFT_CACHE_DIR/decisions.sqlite``).

    weft record ls [PREFIX]        one line per verdict
    weft record show SIG           every row of a signature (prefix), in full
    weft record clear              delete every verdict (the next compile decides again)
    weft record export FILE        write every verdict as JSON (for identical machines)
    weft record import FILE        read an export; rows of another machine profile are refused
"""

from __future__ import annotations

import argparse
import json

from weft.config import config_from_env
from weft.decide.record import Decision, DecisionRecord, RecordError


def _record() -> DecisionRecord:
    return DecisionRecord.in_cache(config_from_env().cache_dir)


def format_line(decision: Decision) -> str:
    key = decision.key
    tiling = ",".join(f"{axis}:{size}" for axis, size in decision.tiling) or "-"
    raced = ""
    if decision.race:
        medians = decision.race.get("medians", {})
        raced = " race " + " ".join(f"{name}={value * 1e6:.1f}us" for name, value in medians.items())
        raced += f" spread={decision.race.get('spread', 0):.1%}"
    return (f"{key.signature} {key.contract:9s} {key.threads:>2} thr  {decision.choice:8s} by {decision.source:5s}"
            f" margin {decision.margin:+6.1%} tiles {tiling}{raced}")


def run_record(args: argparse.Namespace) -> int:
    record = _record()
    try:
        if args.action == "ls":
            decisions = record.all(args.target or "")
            for decision in decisions:
                print(format_line(decision))
            print(f"{len(decisions)} verdict(s) in {record.path}")
        elif args.action == "show":
            if not args.target:
                raise RecordError("weft record show needs a signature (or its prefix): weft record show SIG")
            decisions = record.all(args.target)
            if not decisions:
                raise RecordError(f"no verdict recorded for signature {args.target!r}; `weft record ls` lists them")
            for decision in decisions:
                print(json.dumps(decision.to_row(), indent=1, sort_keys=True))
        elif args.action == "clear":
            print(f"cleared {record.clear()} verdict(s) from {record.path}")
        elif args.action == "export":
            if not args.target:
                raise RecordError("weft record export needs a file: weft record export FILE")
            print(f"exported {record.export(args.target)} verdict(s) to {args.target}")
        elif args.action == "import":
            if not args.target:
                raise RecordError("weft record import needs a file: weft record import FILE")
            from weft.cost.machine import hardware_facts, profile_id

            written, refused = record.import_file(args.target, profile_id(hardware_facts()))
            print(f"imported {written} verdict(s) from {args.target}"
                  + (f"; refused {refused} of another machine profile" if refused else ""))
    finally:
        record.close()
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("record", help="list, show, clear, export or import the decision record")
    parser.add_argument("action", choices=("ls", "show", "clear", "export", "import"))
    parser.add_argument("target", nargs="?", help="ls: signature prefix; show: signature; export/import: file")
    parser.set_defaults(handler=run_record)
