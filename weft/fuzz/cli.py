"""``python -m weft.fuzz``: run N random programs, report and shrink every failure.

    python -m weft.fuzz --programs 300 --contract inference --fusion greedy --seed 0

Programs are checked in batches in a worker process (``weft.fuzz.worker``); a batch
that fails as a whole is re-run one program at a time, so a segfault is pinned to its
program. Outcomes are counted apart: mismatches (an output breaks the contract),
crashes (an exception that is not a ``WeftError``, or the process died), refusals (a
``WeftError`` for a program the generator considers legal, counted by message). Up to
``--shrink-limit`` failures of different kinds are shrunk and printed as runnable
Python. Exit status 1 on any mismatch or crash.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from weft.config import FUSION_POLICIES
from weft.fuzz.check import Outcome, Settings
from weft.fuzz.generate import KNOWN_BUGS, Options
from weft.fuzz.makers import generate
from weft.fuzz.program import Program
from weft.fuzz.report import render
from weft.fuzz.shrink import shrink
from weft.fuzz.worker import Pool


@dataclass
class Failure:
    index: int
    program: Program
    outcome: Outcome
    shrunk: Program | None = None
    tried: int = 0
    shrunk_outcome: Outcome | None = None

    def to_dict(self, settings: Settings) -> dict:
        smallest = self.shrunk or self.program
        return {
            "index": self.index, "status": self.outcome.status, "stage": self.outcome.stage,
            "message": self.outcome.message, "functions": list(self.program.functions()),
            "shrunk": self.shrunk is not None, "shrink_runs": self.tried,
            "reproducer_message": (self.shrunk_outcome or self.outcome).message,
            "reproducer_functions": list(smallest.functions()),
            "reproducer": render(smallest, settings.contract, settings.fusion, settings.threads),
        }


@dataclass
class Result:
    settings: Settings
    seed: int
    programs: int = 0
    counts: collections.Counter = field(default_factory=collections.Counter)
    refusals: collections.Counter = field(default_factory=collections.Counter)
    failures: list[Failure] = field(default_factory=list)
    coverage: collections.Counter = field(default_factory=collections.Counter)
    unchecked: int = 0
    seconds: float = 0.0
    avoided: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return bool(self.counts["mismatch"] or self.counts["crash"])

    def summary(self) -> str:
        s = self.settings
        return (f"weft fuzz: {self.programs} programs (contract={s.contract}, fusion={s.fusion}, "
                f"threads={s.threads}, seed={self.seed}): {self.counts['mismatch']} mismatches, "
                f"{self.counts['crash']} crashes, {self.counts['refusal']} refusals, "
                f"{self.unchecked} elements unchecked, {self.seconds:.1f} s")

    def to_dict(self) -> dict:
        return {
            "contract": self.settings.contract, "fusion": self.settings.fusion, "threads": self.settings.threads,
            "seed": self.seed, "programs": self.programs, "mismatches": self.counts["mismatch"],
            "crashes": self.counts["crash"], "refusals": self.counts["refusal"], "ok": self.counts["ok"],
            "refusals_by_message": dict(self.refusals), "unchecked_elements": self.unchecked,
            "seconds": round(self.seconds, 1), "avoided_known_bugs": list(self.avoided),
            "coverage": dict(sorted(self.coverage.items())),
            "failures": [f.to_dict(self.settings) for f in self.failures],
        }


def message_head(message: str) -> str:
    """A failure's kind: its first line with numbers, shapes and names blurred."""
    first = message.splitlines()[0] if message else ""
    return re.sub(r"\d+", "#", first)[:120]


def mismatch_kind(message: str) -> str:
    """What went wrong in a mismatch: a NaN where a number belongs, a wrong integer, the
    oracle off float64, or a number off (so shrinking does not drift to another bug)."""
    if "oracle itself" in message:
        return "oracle"
    if re.search(r"compiled=np\.float\d+\(nan\)", message):
        return "nan"
    if "compiled=np.int" in message or "compiled=np.bool" in message:
        return "integer"
    return "value"


def signature(program: Program, outcome: Outcome) -> tuple:
    if outcome.status == "mismatch":
        return ("mismatch", mismatch_kind(outcome.message), tuple(sorted(set(program.functions()))))
    return (outcome.status, outcome.stage, message_head(outcome.message))


def same_failure(outcome: Outcome, reference: Outcome) -> bool:
    if outcome.status != reference.status:
        return False
    if outcome.status == "mismatch":
        return mismatch_kind(outcome.message) == mismatch_kind(reference.message)
    return message_head(outcome.message) == message_head(reference.message)


def run_fuzz(programs: int, settings: Settings, seed: int = 0, start: int = 0, batch: int = 10, jobs: int = 1,
             avoid: frozenset[str] = frozenset(), shrink_limit: int = 5, shrink_seconds: float = 120.0,
             log=print) -> Result:
    """Generate, check, shrink; the whole run as a ``Result``."""
    began = time.monotonic()
    options = Options(contract=settings.contract, avoid_known_bugs=avoid)
    result = Result(settings, seed, avoided=tuple(sorted(avoid)))
    indices = list(range(start, start + programs))
    batches = [indices[n:n + batch] for n in range(0, len(indices), batch)]
    pools = [Pool(settings) for _ in range(max(1, jobs))]

    def check(numbered: tuple[int, list[int]]) -> list[tuple[int, Program, Outcome]]:
        position, chunk = numbered
        generated = [generate(seed, i, options) for i in chunk]
        outcomes = pools[position % len(pools)].check(generated)
        return list(zip(chunk, generated, outcomes, strict=True))

    done = 0
    try:
        with ThreadPoolExecutor(max_workers=len(pools)) as executor:
            for checked in executor.map(check, enumerate(batches)):
                for index, program, outcome in checked:
                    result.programs += 1
                    result.counts[outcome.status] += 1
                    result.unchecked += outcome.unchecked
                    result.coverage.update(program.functions())
                    if outcome.status == "refusal":
                        result.refusals[f"{outcome.stage}: {message_head(outcome.message)}"] += 1
                    elif outcome.status in ("mismatch", "crash"):
                        result.failures.append(Failure(index, program, outcome))
                        log(f"  program {index}: {outcome.status} ({outcome.stage}) in "
                            f"{', '.join(program.functions())}: {outcome.message.splitlines()[0][:200]}")
                done += len(checked)
                if len(batches) > 4 and (done // batch) % max(1, len(batches) // 10) == 0:
                    log(f"  {done}/{programs} programs, {result.counts['mismatch']} mismatches, "
                        f"{result.counts['crash']} crashes, {time.monotonic() - began:.0f} s")
        _shrink_failures(result, pools[0], shrink_limit, shrink_seconds, log)
    finally:
        for pool in pools:
            pool.close()
    result.seconds = time.monotonic() - began
    return result


def _shrink_failures(result: Result, pool: Pool, limit: int, seconds: float, log) -> None:
    kinds: set[tuple] = set()
    for failure in result.failures:
        kind = signature(failure.program, failure.outcome)
        if kind in kinds or len(kinds) >= limit:
            continue
        kinds.add(kind)
        log(f"  shrinking program {failure.index} ({failure.outcome.status})...")

        def still_fails(candidate: Program, reference: Outcome = failure.outcome) -> bool:
            return same_failure(pool.check([candidate])[0], reference)

        failure.shrunk, failure.tried = shrink(failure.program, still_fails, seconds)
        failure.shrunk_outcome = pool.check([failure.shrunk])[0]


def print_report(result: Result, out=None) -> None:
    out = out or sys.stdout
    shown = [f for f in result.failures if f.shrunk is not None]
    for failure in shown:
        s = result.settings
        print(f"\n=== program {failure.index}: {failure.outcome.status} at {failure.outcome.stage} "
              f"({len(failure.program.ops)} ops -> {len(failure.shrunk.ops)} after {failure.tried} runs)", file=out)
        print("\n".join((failure.shrunk_outcome or failure.outcome).message.splitlines()[:8]), file=out)
        print("--- reproducer ---", file=out)
        print(render(failure.shrunk, s.contract, s.fusion, s.threads), file=out, end="")
    if len(result.failures) > len(shown):
        print(f"\n({len(result.failures) - len(shown)} more failures of kinds already shown, or past "
              "--shrink-limit; --json has each)", file=out)
    if result.refusals:
        print("\nrefusals by message:", file=out)
        for message, count in result.refusals.most_common():
            print(f"  {count:5d}  {message}", file=out)
    if result.avoided:
        print(f"\nknown bugs avoided: {', '.join(result.avoided)}", file=out)
    print("\n" + result.summary(), file=out)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m weft.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=100, help="how many programs (default 100)")
    parser.add_argument("--contract", choices=("strict", "inference"), default="strict")
    parser.add_argument("--fusion", choices=FUSION_POLICIES, default="off")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="index of the first program (to re-run one)")
    parser.add_argument("--threads", type=int, default=1, help="OpenMP threads of each compiled plan")
    parser.add_argument("--batch", type=int, default=10, help="programs per compile (default 10)")
    parser.add_argument("--in-place", action="store_true",
                        help="also write each output over an input of its shape where Weft proves it legal"
                             " (weft.compile(in_place=...)), run on copies, against the oracle on the originals")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--avoid-known-bugs", nargs="?", const="all", default="",
                        help="steer around issue 8's open defects: 'all' or a comma list of "
                             f"{', '.join(KNOWN_BUGS)}")
    parser.add_argument("--shrink-limit", type=int, default=5, help="failures of different kinds to shrink")
    parser.add_argument("--shrink-seconds", type=float, default=120.0, help="time to shrink each")
    parser.add_argument("--json", help="write the result (counts, failures with reproducers) here")
    return parser.parse_args(argv)


def known_bugs(spec: str) -> frozenset[str]:
    if not spec:
        return frozenset()
    if spec == "all":
        return frozenset(KNOWN_BUGS)
    names = frozenset(n.strip() for n in spec.split(",") if n.strip())
    unknown = names - set(KNOWN_BUGS)
    if unknown:
        raise SystemExit(f"--avoid-known-bugs: unknown {sorted(unknown)}; choose from {sorted(KNOWN_BUGS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    settings = Settings(args.contract, args.fusion, args.threads, args.in_place)
    result = run_fuzz(args.programs, settings, args.seed, args.start, args.batch, args.jobs,
                      known_bugs(args.avoid_known_bugs), args.shrink_limit, args.shrink_seconds,
                      log=lambda text: print(text, flush=True))
    print_report(result)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result.to_dict(), handle, indent=1)
    return 1 if result.failed else 0
