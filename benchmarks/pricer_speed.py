"""One price (one region x one tiling: ``price_function`` on cached facts), in a base checkout
and in this one, side by side: every price must be bit-identical, the time per price is timed
interleaved.

    python benchmarks/pricer_speed.py --base /work/main [--blocks 6] [--out FILE] [--base-commit REV]
    python benchmarks/pricer_speed.py --digest        # this checkout's prices: count and digest

Each arm is a child process (``PYTHONPATH`` = its checkout) that lowers the built-in workloads'
survey candidates once, under both contracts, and keeps the facts of every price the pricing
phase can ask for: each member unfused (at its member homes) and each fused form in each of its
tilings (at the region's homes and at none, as ``benchmarks/pricing.py`` times it), at 1 and 2
threads. The children stay alive; the parent asks them for a round at a time, in blocks of
base, head, control, control, head, base (``control``: a second base child, the A/A floor).
A round prices every entry 5 times and keeps each entry's fastest (as ``pricing.py``): its
median over the entries is the round's time per price. Before timing, the parent checks that
the arms' digests (every field of every ``Price``, ``repr`` of each float) are equal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEED_WORKLOADS = ("vit-block", "qwen-decode-step", "sam3-encoder")


def corpus(workloads: tuple[str, ...], params: dict | None = None, profiles: tuple = (),
           contracts: tuple[str, ...] = ("strict", "inference")) -> list[tuple]:
    """(label, facts, numbers, homes, sizes) of every price the pricing phase can ask for, on
    ``profiles`` (default: this machine's calibrated one); ``params``: workload -> its sizes.
    ``tests/cost/test_price_plans.py`` checks every one of them."""
    from weft.codegen.cpu import cpu_features, lanes_for
    from weft.compose.priced import survey_candidates
    from weft.config import config_from_env
    from weft.cost.machine import machine_profile
    from weft.cost.model import machine_numbers
    from weft.fuse import region_pricing
    from weft.lower import Target
    from weft.workloads import WORKLOADS

    profiles = profiles or (machine_profile(),)
    entries = []
    for name in workloads:
        plan = WORKLOADS[name].plan(**(params or {}).get(name, {}))
        for contract in contracts:
            config = config_from_env(contract=contract, threads=1, fusion="priced", budget_s=600)
            pricing = region_pricing(plan, config, Target(lanes_for(cpu_features()), contract), profile=profiles[0])
            numbers = [machine_numbers(profile, threads) for profile in profiles for threads in (1, 2)]
            seen = set()
            for region in survey_candidates(plan):
                lowering = pricing.region_lowering(region)
                key = (lowering.signature, tuple(sorted(lowering.homes.items())))
                if key in seen:
                    continue
                seen.add(key)
                for numbers_at in numbers:
                    tag = f"{name}/{contract}/{numbers_at.threads}/{lowering.signature[:12]}"
                    tag += f"/line {numbers_at.line}" if numbers_at.line != 64 else ""
                    for facts in lowering.unfused():
                        homes = lowering.member_homes.get(facts.members[0], {})
                        entries.append((f"{tag}/unfused/{facts.name}", facts, numbers_at, homes, None))
                    for form in lowering.forms():
                        for tiling in form.tilings:
                            for homes in (lowering.homes, {}):
                                label = f"{tag}/{form.name}/{tiling}/{'homes' if homes else 'none'}"
                                entries.append((label, form.facts, numbers_at, homes, dict(tiling)))
    return entries


def price_text(price) -> str:
    fields = (price.cycles, price.compute, price.data, price.overhead, *price.served)
    return " ".join(repr(float(value)) for value in fields) + f" {price.memory_bytes} {price.detail}"


def digest(entries) -> tuple[str, list[str]]:
    from weft.cost.model import price_function

    lines = [f"{label} {price_text(price_function(facts, numbers, homes, sizes))}"
             for label, facts, numbers, homes, sizes in entries]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest(), lines


def as_pricing_py(label: str) -> bool:
    """Whether ``benchmarks/pricing.py`` times this price: a fused form's tiling, no homes, 1 thread."""
    _, _, threads, _, form, *_ = label.split("/")
    return threads == "1" and form != "unfused" and label.endswith("/none")


def timed_round(entries, repeats: int = 5) -> dict:
    from weft.cost.model import price_function

    clock = time.perf_counter
    fastest = []
    start = clock()
    for _, facts, numbers, homes, sizes in entries:
        best = float("inf")
        for _ in range(repeats):
            t0 = clock()
            price_function(facts, numbers, homes, sizes)
            best = min(best, clock() - t0)
        fastest.append(best)
    forms = [took for (label, *_), took in zip(entries, fastest, strict=True) if as_pricing_py(label)]
    return {"median_price_us": statistics.median(fastest) * 1e6, "mean_price_us": statistics.fmean(fastest) * 1e6,
            "forms_median_price_us": statistics.median(forms) * 1e6, "forms": len(forms), "round_s": clock() - start}


def child(workloads: tuple[str, ...], speed_workloads: tuple[str, ...]) -> None:
    """Build the corpus, print its digest, then answer one round per line read from stdin."""
    import weft

    entries = corpus(workloads)
    value, lines = digest(entries)
    timed = [entry for entry in entries if entry[0].split("/")[0] in speed_workloads]
    print(json.dumps({"weft": weft.__file__, "digest": value, "prices": len(lines), "timed": len(timed),
                      "lines": lines}), flush=True)
    for command in sys.stdin:
        if command.strip() != "round":
            break
        print(json.dumps(timed_round(timed)), flush=True)


def provenance(base: Path, base_commit: str | None) -> dict:
    """The commits, the machine and its profile (docs/benchmarking.md, rule 7)."""
    import platform

    from weft.cost.machine import machine_profile

    def commit(checkout: Path) -> str | None:
        done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    profile = machine_profile()
    return {"head_commit": commit(ROOT), "head_dirty": bool(dirty), "base_commit": base_commit or commit(base),
            "cpu": profile.cpu_model, "profile_id": profile.profile_id, "python": platform.python_version(),
            "threads": "1 (the pricer is single-threaded; 1- and 2-thread prices are priced)",
            "load_average": os.getloadavg()}


def spawn(checkout: Path, workloads, speed_workloads) -> subprocess.Popen:
    env = {key: value for key, value in os.environ.items() if key not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env["PYTHONPATH"] = str(checkout)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--workloads", ",".join(workloads),
               "--speed-workloads", ",".join(speed_workloads)]
    return subprocess.Popen(command, cwd=checkout, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def ask(process: subprocess.Popen) -> dict:
    process.stdin.write("round\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def summary(rounds: list[float]) -> dict:
    return {"min": min(rounds), "median": statistics.median(rounds), "max": max(rounds)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, help="the other checkout's root")
    parser.add_argument("--base-commit", help="the base's commit, where it is no git checkout (an archive)")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--workloads", default="", help="comma-separated (default: every built-in workload)")
    parser.add_argument("--speed-workloads", default=",".join(SPEED_WORKLOADS))
    parser.add_argument("--digest", action="store_true", help="this checkout's price digest only")
    parser.add_argument("--lines", type=Path, help="with --digest: write every price, one a line")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from weft.workloads import WORKLOADS

    workloads = tuple(filter(None, args.workloads.split(","))) or tuple(WORKLOADS)
    speed_workloads = tuple(filter(None, args.speed_workloads.split(",")))
    if args.child:
        child(workloads, speed_workloads)
        return 0
    if args.digest:
        value, lines = digest(corpus(workloads))
        if args.lines:
            args.lines.write_text("\n".join(lines) + "\n")
        print(f"{len(lines)} prices, sha256 {value}")
        return 0
    if args.base is None:
        parser.error("--base (or --digest) is required")
    context = provenance(args.base, args.base_commit)
    arms = {"base": spawn(args.base.resolve(), workloads, speed_workloads), "head": spawn(ROOT, workloads, speed_workloads),
            "control": spawn(args.base.resolve(), workloads, speed_workloads)}
    heads = {name: json.loads(process.stdout.readline()) for name, process in arms.items()}
    for name, head in heads.items():
        print(f"{name:8s} {head['weft']}: {head['prices']} prices ({head['timed']} timed), sha256 {head['digest']}")
    if heads["base"]["lines"] != heads["head"]["lines"]:
        changed = [(a, b) for a, b in zip(heads["base"]["lines"], heads["head"]["lines"], strict=False) if a != b]
        print(f"PRICES DIFFER: {len(changed)} of {heads['base']['prices']} (lengths {heads['base']['prices']},"
              f" {heads['head']['prices']}); first: {changed[:3]}")
        return 1
    print("prices bit-identical: base == head")
    rounds: dict[str, list[dict]] = {name: [] for name in arms}
    for name in ("base", "head", "control"):
        ask(arms[name])  # warm-up, discarded
    order = ("base", "head", "control", "control", "head", "base")
    for block in range(args.blocks):
        for name in order if block % 2 == 0 else tuple(reversed(order)):
            rounds[name].append(ask(arms[name]))
    for process in arms.values():
        process.stdin.close()
        process.wait()
    verdicts = {}
    for metric, what in (("median_price_us", f"every price ({heads['head']['timed']})"),
                         ("forms_median_price_us", f"pricing.py's prices ({rounds['head'][0]['forms']}: fused forms,"
                                                   " no homes, 1 thread)")):
        medians = {name: [r[metric] for r in rows] for name, rows in rounds.items()}
        # a block holds each arm twice: pair the block's mean of each
        per_block = {name: [statistics.fmean(values[2 * i: 2 * i + 2]) for i in range(args.blocks)]
                     for name, values in medians.items()}
        speedups = [b / h for b, h in zip(per_block["base"], per_block["head"], strict=True)]
        floor = [c / b for b, c in zip(per_block["base"], per_block["control"], strict=True)]
        print(f"median time per price over {what}:")
        for name in arms:
            s = summary(medians[name])
            print(f"  {name:8s} us: min {s['min']:.2f} median {s['median']:.2f} max {s['max']:.2f}"
                  f"  (rounds {', '.join(f'{v:.2f}' for v in medians[name])})")
        beats = max(medians["head"]) < min(medians["base"])
        print(f"  base / head per block: median {statistics.median(speedups):.2f}x (min {min(speedups):.2f}, max"
              f" {max(speedups):.2f}); A/A control / base: median {statistics.median(floor):.3f}"
              f" (min {min(floor):.3f}, max {max(floor):.3f}); every head round faster than every base round: {beats}")
        verdicts[metric] = {"speedup_per_block": speedups, "control_per_block": floor, "head_always_faster": beats}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"schema": "weft-pricer-speed/1", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                        "base": str(args.base), "provenance": context,
                                        "load_average_end": os.getloadavg(), "heads": {k: {x: y for x, y in v.items() if x != "lines"}
                                                                          for k, v in heads.items()},
                                        "rounds": rounds, "verdicts": verdicts},
                                       indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
