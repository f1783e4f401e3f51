"""Priced plans pay (issue 11's must-show): priced against unfused and greedy, whole plans.

For every built-in workload at threads 1 and 2, under Inference and Strict, this runs
``weft.bench`` with the arms ``unfused, greedy, priced`` (the contract and thread count
on each arm): palindrome blocks (ABBA / BAAB) in one process, warm-ups dropped, an A/A
control of the unfused arm, output parity checked, verdicts by docs/benchmarking.md.
From the same blocks it judges

* priced vs unfused and greedy vs unfused (the bench's own verdicts, baseline unfused);
* priced vs greedy (the same rule with greedy as the baseline, the unfused A/A floor);
* "faster than whichever loses": the loser of unfused vs greedy (the slower by paired
  median ratio), and whether priced is claimed faster than it (every round of priced beats
  every round of the loser by more than the A/A floor).

The issue asks that priced *passes* against both (non-regression) and is faster than the
loser. Each run is one JSON under ``benchmarks/results/priced-plans-<stamp>/`` (the bench
result, raw blocks included, so ``weft bench --recompute FILE`` re-derives the verdicts),
and ``summary.md`` beside them holds the table.

Sizes are chosen so the whole run takes about 15 minutes on a quiet two-core machine
(the estimate printed after each run projects the total from the time so far);
``--quick`` runs every workload at its small test size with two blocks (a smoke run of
the script, a minute or two; its timings mean nothing).

    python benchmarks/priced_plans.py                         # the recorded run, ~15 min quiet
    python benchmarks/priced_plans.py --quick                 # smoke
    python benchmarks/priced_plans.py --workloads layernorm,softmax --threads 1 --contracts inference

The priced arm compiles with the decision record in ``WEFT_CACHE_DIR``: the first run of
a plan prices it inside the compile budget (on a loaded machine the budget can leave
regions unpriced, hence unfused; the JSON's provenance has the load average).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

SIZES = {
    "attention": {"heads": 4, "tokens": 1024, "head_dim": 64},
    "layernorm": {"rows": 4096, "dim": 1024},
    "softmax": {"rows": 4096, "cols": 1024},
    "adam": {"params": 2_000_000, "tensors": 4},
    "cross-entropy": {"tokens": 512, "vocab": 32000, "hidden": 256},
    "vit-block": {"tokens_side": 24, "dim": 256, "heads": 4, "window": 8, "mlp_dim": 1024},
    "qwen-decode-step": {"layers": 24},
    "sam3-encoder": {"blocks": 4, "image_size": 336, "patch": 14, "dim": 256, "heads": 4, "window": 8,
                     "mlp_dim": 1024, "global_every": 2},
}
"""Whole plans of a few to tens of milliseconds per call (SAM3: 4 blocks, as the issue asks,
at 24 x 24 tokens and width 256 so that a round is not seconds long)."""


def bench_one(workload: str, params: dict, contract: str, threads: int, blocks: int, warmup: int, profile) -> dict:
    from weft.bench import BenchOptions, run_bench

    arms = ",".join(f"{name}+{contract}@{threads}" for name in ("unfused", "greedy", "priced"))
    options = BenchOptions(arms=arms, params=params, threads=threads, blocks=blocks, warmup=warmup)
    return run_bench(workload, options, profile)


def judge(result: dict) -> dict:
    """The verdicts this benchmark reports for one run (see module doc)."""
    from weft.bench.verdict import Block, compare, control_floor

    section = result["in_process"]
    blocks = [Block.from_json(block) for block in section["blocks"]]
    unfused, control = section["baseline"], section["control"]
    labels = {label.split("+")[0]: label for label in section["candidates"]}
    greedy, priced = labels.get("greedy"), labels.get("priced")
    floor = control_floor(blocks, unfused, control)
    verdicts = {v["candidate"]: v for v in section["verdicts"]}
    row = {"control": verdicts[control]["status"], "floor": floor, "unavailable": section["unavailable"]}
    if priced is None or greedy is None:
        return row
    against_greedy = compare(blocks, greedy, priced, floor)
    greedy_vs_unfused = verdicts[greedy]
    loser = greedy if greedy_vs_unfused["paired_median_ratio"] > 1.0 else unfused
    against_loser = compare(blocks, loser, priced, floor)
    row.update({
        "priced_vs_unfused": verdicts[priced]["status"], "priced_over_unfused": verdicts[priced]["paired_median_ratio"],
        "greedy_vs_unfused": greedy_vs_unfused["status"], "greedy_over_unfused": greedy_vs_unfused["paired_median_ratio"],
        "priced_vs_greedy": against_greedy.status, "priced_over_greedy": against_greedy.paired_median_ratio,
        "loser": loser.split("+")[0], "faster_than_loser": against_loser.speedup_of == priced,
        "faster_by": against_loser.speedup_factor if against_loser.speedup_of == priced else 0.0,
        "medians_ms": {label.split("+")[0]: statistics_median(blocks, label) * 1e3
                       for label in (unfused, greedy, priced)},
    })
    row["pays"] = (row["priced_vs_unfused"] == "pass" and row["priced_vs_greedy"] == "pass"
                   and row["faster_than_loser"])
    return row


def statistics_median(blocks, label: str) -> float:
    import statistics

    from weft.bench.verdict import arm_rounds

    return statistics.median(arm_rounds(blocks, label))


def summary_markdown(rows: list[dict], settings: dict) -> str:
    lines = [
        "# Priced plans against unfused and greedy", "",
        f"Command: `{settings['command']}`; blocks {settings['blocks']} (+{settings['warmup']} warm-up);"
        f" load average {settings['load_start']:.1f} at the start, {settings['load_end']:.1f} at the end"
        f" ({os.cpu_count()} CPUs; a load above the CPU count means the machine was shared).", "",
        "Verdicts by docs/benchmarking.md (pass = non-regression; ratios are paired medians, priced / other)."
        " *Loser*: the slower of unfused and greedy; *faster*: priced claimed faster than the loser (every"
        " round beats every round by more than the A/A floor).", "",
        "| workload | contract | threads | A/A | unfused ms | greedy ms | priced ms | priced vs unfused |"
        " priced vs greedy | greedy vs unfused | loser | priced faster than loser | pays |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "priced_vs_unfused" not in row:
            lines.append(f"| {row['workload']} | {row['contract']} | {row['threads']} | {row.get('control', '-')} |"
                         f" - | - | - | {row.get('error', 'an arm was unavailable')} | | | | | no |")
            continue
        medians = row["medians_ms"]
        lines.append(
            f"| {row['workload']} | {row['contract']} | {row['threads']} | {row['control']} |"
            f" {medians['unfused']:.3f} | {medians['greedy']:.3f} | {medians['priced']:.3f} |"
            f" {row['priced_vs_unfused']} ({row['priced_over_unfused']:.3f}) |"
            f" {row['priced_vs_greedy']} ({row['priced_over_greedy']:.3f}) |"
            f" {row['greedy_vs_unfused']} ({row['greedy_over_unfused']:.3f}) | {row['loser']} |"
            f" {'yes, ' + format(row['faster_by'], '.2f') + 'x' if row['faster_than_loser'] else 'no'} |"
            f" {'yes' if row['pays'] else 'no'} |")
    paying = sum(1 for row in rows if row.get("pays"))
    lines += ["", f"Priced pays (passes against both, faster than the loser) in {paying} of {len(rows)} runs."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default=",".join(SIZES))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--contracts", default="inference,strict")
    parser.add_argument("--blocks", type=int, default=4, help="timed palindrome blocks per run")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="small test sizes, two blocks: a smoke run")
    parser.add_argument("--out", type=Path, default=None, help="folder (default benchmarks/results/priced-plans-<stamp>)")
    args = parser.parse_args(argv)

    from weft.bench.result import save_result
    from weft.cost.machine import machine_profile
    from weft.workloads import get_workload

    workloads = [name.strip() for name in args.workloads.split(",") if name.strip()]
    unknown = [name for name in workloads if name not in SIZES]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {', '.join(SIZES)}")
    threads_list = [int(text) for text in args.threads.split(",")]
    contracts = [text.strip() for text in args.contracts.split(",")]
    blocks = 2 if args.quick else args.blocks
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    folder = args.out or HERE / "results" / f"priced-plans-{stamp}{'-quick' if args.quick else ''}"
    profile = machine_profile()
    runs = [(w, c, t) for w in workloads for c in contracts for t in threads_list]
    settings = {"command": " ".join(["python", *sys.argv]), "blocks": blocks, "warmup": args.warmup,
                "load_start": os.getloadavg()[0], "quick": args.quick}
    print(f"{len(runs)} runs (workload x contract x threads), {blocks} blocks each; writing {folder}", flush=True)
    rows = []
    started = time.perf_counter()
    for number, (workload, contract, threads) in enumerate(runs, 1):
        params = dict(get_workload(workload).small) if args.quick else dict(SIZES[workload])
        row = {"workload": workload, "contract": contract, "threads": threads, "params": params}
        try:
            result = bench_one(workload, params, contract, threads, blocks, args.warmup, profile)
        except Exception as error:  # a run that cannot be measured is reported, never dropped
            row["error"] = f"{type(error).__name__}: {error}"
            print(f"[{number}/{len(runs)}] {workload} {contract} @{threads}: {row['error']}", flush=True)
            rows.append(row)
            continue
        result["priced_plans"] = judge(result)
        row.update(result["priced_plans"])
        save_result(result, folder / f"{workload}-{contract}-t{threads}.json")
        rows.append(row)
        elapsed = time.perf_counter() - started
        projected = elapsed / number * len(runs)
        text = (f"priced vs unfused {row.get('priced_vs_unfused')}, vs greedy {row.get('priced_vs_greedy')},"
                f" loser {row.get('loser')}, faster than it: {row.get('faster_than_loser')}")
        print(f"[{number}/{len(runs)}] {workload} {contract} @{threads}: {text}  ({elapsed:.0f} s so far,"
              f" about {projected:.0f} s in all)", flush=True)
    settings["load_end"] = os.getloadavg()[0]
    text = summary_markdown(rows, settings)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.md").write_text(text)
    print(text)
    print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
