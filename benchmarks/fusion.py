"""Fused vs unfused: every workload, 1 and 2 threads, Inference and Strict.

For each workload of ``weft.workloads`` and each thread count, this times the arm
``unfused`` (every member its own function) against ``greedy`` (regions chosen by
the composition engine, ``weft/compose``) under a contract, with the A/A control
of ``unfused`` beside them. All timing, parity and judging is ``weft bench``'s own
(``weft.bench.run.run_bench``: palindrome ABBA/BAAB blocks, parity against the
oracle before any time is kept, verdicts by the rule of docs/benchmarking.md);
this script only chooses the sizes, loops, and summarises. Each comparison writes
a ``weft-bench/1`` result (raw rounds, verdicts, provenance) that
``weft bench --recompute FILE`` re-judges.

A comparison that cannot run (the fused arm does not compile, or computes something
else) is kept as a *failed* row with the error text; the unfused arm is then timed
alone with its A/A control so the row still has the unfused time and the floor.
Beside each time the row records what the engine chose and what the compile lowered
(a chosen region may be lowered member by member; a fused GEMM member loses BLAS).
``--regions`` also times each distinct fused region alone, as a stage plan.
The markdown is made by ``fusion_report.py`` (beside this file).

Sizes: ``STANDARD_SIZES`` below keep the whole run (7 workloads x 2 thread counts x
2 contracts) within about ten minutes on a 2-core machine; ``--scale F`` multiplies the
principal size of every workload (``SCALED_PARAM``); ``--set W:KEY=VALUE`` sets one
parameter; ``--quick`` uses each workload's ``small`` sizes and two blocks (a smoke
run: its times mean nothing). The sizes used are written into every output.

    python benchmarks/fusion.py --quick
    python benchmarks/fusion.py                      # standard sizes, ~5-10 min
    python benchmarks/fusion.py --regions            # ... and every distinct fused region alone
    python benchmarks/fusion.py --write-doc          # also refresh benchmarks/FUSION.md
    python benchmarks/fusion.py --workloads softmax --threads 1 --contracts inference

Outputs (``--out-dir``, default ``benchmarks/results/fusion-<UTC stamp>[-quick]``):
one ``<workload>-<contract>-t<threads>.json`` per comparison (and a
``...-unfused-only.json`` where the fused arm failed), ``summary.json`` (the rows,
sizes, settings, provenance; rewritten after every comparison, ``complete`` once
done) and ``summary.md`` (the tables).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

from fusion_report import (  # a sibling module: the script's folder is on sys.path
    FUSED,
    UNFUSED,
    format_median,
    format_params,
    outcome,
    row_name,
    summary_markdown,
    write_doc,
)

SLOW_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
"""Inference arms may serve GEMM members by SciPy's OpenBLAS, which these slow down."""

STANDARD_SIZES: dict[str, dict[str, object]] = {
    # one step is roughly 5-300 ms at one thread on the project's 2-core machine
    "attention": {"batch": 1, "heads": 2, "tokens": 1024, "head_dim": 64},
    "layernorm": {"rows": 4096, "dim": 1024},
    "softmax": {"rows": 4096, "cols": 1024},
    "adam": {"params": 4_000_000, "tensors": 4, "step": 10},
    "cross-entropy": {"tokens": 512, "vocab": 32000, "hidden": 1024, "projection": False},
    "vit-block": {"batch": 1, "tokens_side": 24, "dim": 256, "heads": 4, "window": 8, "mlp_dim": 1024},
    "qwen-decode-step": {"layers": 2, "cache_len": 512},
    # two windowed blocks of the full width over a 336 x 336 image (one 24 x 24 window): the
    # default 32 blocks over 1008 x 1008 take about a minute per call at one thread
    "sam3-encoder": {"blocks": 2, "image_size": 336},
}
"""The documented standard size set (parameters not named keep the workload's defaults)."""

SCALED_PARAM: dict[str, tuple[str, str | int]] = {
    # workload -> (parameter --scale multiplies, the multiple it is rounded to: a number or a parameter name)
    "attention": ("tokens", 16),
    "layernorm": ("rows", 16),
    "softmax": ("rows", 16),
    "adam": ("params", 1024),
    "cross-entropy": ("tokens", 16),
    "vit-block": ("tokens_side", "window"),
    "qwen-decode-step": ("cache_len", 16),
}

ROOT = Path(__file__).resolve().parent.parent
"""The repository root: default outputs go under it, wherever the script is run from."""

WEFT_FUSION = {FUSED: "greedy", UNFUSED: "off"}
CONTRACTS = ("inference", "strict")


def reexec_without_slow_blas_env() -> None:
    """Run again without the OpenBLAS overrides (same as benchmarks/backend.py)."""
    if any(name in os.environ for name in SLOW_BLAS_ENV):
        env = {k: v for k, v in os.environ.items() if k not in SLOW_BLAS_ENV}
        env["WEFT_FUSION_BENCH_UNSET"] = ",".join(n for n in SLOW_BLAS_ENV if n in os.environ)
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def parse_sets(items: list[str]) -> dict[str, dict[str, object]]:
    """``["attention:tokens=2048"]`` -> {"attention": {"tokens": 2048}} (the workload checks values)."""
    from weft.workloads.params import parse_setting

    sets: dict[str, dict[str, object]] = {}
    for item in items:
        workload, colon, pair = item.partition(":")
        if not colon:
            raise SystemExit(f"--set {item!r}: write WORKLOAD:KEY=VALUE, e.g. --set attention:tokens=2048")
        key, value = parse_setting(pair, f"--set {workload.strip()}:")
        sets.setdefault(workload.strip(), {})[key] = value
    return sets


def sizes_for(workload, quick: bool, scale: float, overrides: dict[str, str]) -> dict[str, object]:
    """The resolved parameters of one workload: standard (or small), scaled, then overridden."""
    params = dict(workload.small if quick else STANDARD_SIZES.get(workload.name, {}))
    if scale != 1.0 and workload.name in SCALED_PARAM:
        key, multiple = SCALED_PARAM[workload.name]
        base = int(workload.resolve(**params)[key])
        step = int(workload.resolve(**params)[multiple]) if isinstance(multiple, str) else multiple
        step = max(1, min(step, base))
        params[key] = max(step, round(base * scale / step) * step)
    params.update(overrides)
    return workload.resolve(**params)


def fusion_explanation(plan, contract: str, threads: int) -> dict:
    """What the greedy engine chose for this plan, and what the compile actually lowered.

    A chosen region may be lowered member by member (its scratch over budget), and a
    member inside a fused region never calls BLAS, so both are recorded beside the time:
    a "fused" arm that lowered nothing fused, or lost a BLAS call, explains its ratio.
    """
    record: dict = {}
    try:
        from weft.explain import explain_plan

        explanation = explain_plan(plan, FUSED, contract)
        regions = explanation.partition.regions
        record.update(
            {
                "members": len(plan.kernels),
                "regions": len(regions),
                "fused_regions": sum(1 for region in regions if region.is_fused),
                "fused_members": sum(len(region.members) for region in regions if region.is_fused),
                "fused": [list(region.members) for region in regions if region.is_fused],
                "text": explanation.text(),
            }
        )
        import weft

        for policy in (UNFUSED, FUSED):  # both were just built by the benchmark: the compile cache answers
            lowered = weft.compile(
                plan, contract=contract, threads=threads, fusion=WEFT_FUSION[policy]
            ).lowered
            record[f"{policy}_lowered"] = [lowered_function(function) for function in lowered.functions]
        record["lowered_fused_regions"] = sum(1 for f in record[f"{FUSED}_lowered"] if len(f["members"]) > 1)
        record["blas_calls"] = {
            policy: sum(f["blas"] for f in record[f"{policy}_lowered"]) for policy in (UNFUSED, FUSED)
        }
    except Exception as error:  # noqa: BLE001 - an explanation failure is recorded, not fatal
        record["error"] = f"{type(error).__name__}: {error}"
    return record


def lowered_function(function) -> dict:
    kinds = [type(nest).__name__ for nest in function.nests]
    return {
        "name": function.name,
        "members": list(function.members),
        "one_pass": "OnlinePass" in kinds,
        "blas": kinds.count("GemmCall"),
        "tile": function.tile_loop.size if function.tile_loop else None,
    }


def arm_label(name: str, contract: str, threads: int) -> str:
    return f"{name}+{contract}@{threads}"


def stats_json(stats: dict) -> dict:
    return {"min_s": stats["minimum"], "median_s": stats["median"], "max_s": stats["maximum"]}


def bench(workload_name: str, options, profile, members: tuple[str, ...] | None = None) -> dict:
    """One weft-bench/1 result: the whole plan (``run_bench``), or one region cut out as a
    stage plan (``weft.bench.stage``, as ``weft bench --stage`` does, without re-timing the whole)."""
    from weft.bench.context import build_context
    from weft.bench.result import SCHEMA, provenance
    from weft.bench.run import measure, run_bench

    if members is None:
        return run_bench(workload_name, options, profile)
    context = build_context(workload_name, options.params, options.seed, ",".join(members))
    section, runners = measure(context, options, profile)
    return {
        "schema": SCHEMA,
        "workload": context.workload.name,
        "params": context.params,
        "stage": list(context.stage_members),
        "settings": {
            "blocks": options.blocks,
            "warmup_blocks": options.warmup,
            "threads": options.threads,
            "target_round_s": options.target_round_s,
            "processes": 0,
            "seed": options.seed,
        },
        "in_process": section,
        "provenance": provenance(profile, runners),
    }


def run_one(
    workload_name: str,
    params: dict,
    contract: str,
    threads: int,
    settings: dict,
    profile,
    out_dir: Path,
    region: dict | None = None,
) -> dict:
    """One comparison, unfused vs greedy (+ A/A control) of the whole plan or of one region
    (``region``: members, signature, occurrences): a summary row; failures are rows too."""
    from weft.bench.result import save_result
    from weft.bench.run import BenchOptions
    from weft.workloads import get_workload

    unfused, fused = arm_label(UNFUSED, contract, threads), arm_label(FUSED, contract, threads)
    row = {
        "workload": workload_name,
        "threads": threads,
        "contract": contract,
        "params": params,
        "region": region,
        "unfused_label": unfused,
        "fused_label": fused,
        "status": "ok",
        "error": None,
        "verdict": None,
        "speedup_of": None,
        "speedup_factor": 0.0,
        "result_file": None,
    }
    members = tuple(region["members"]) if region else None
    plan = get_workload(workload_name).plan(**params)
    if members is not None:
        from weft.bench.stage import stage_plan

        plan = stage_plan(plan, members)
    row["fusion"] = fusion_explanation(plan, contract, threads)

    def options(arms: str):
        return BenchOptions(
            arms=arms,
            params=params,
            threads=threads,
            blocks=settings["blocks"],
            warmup=settings["warmup"],
            target_round_s=settings["round_s"],
            seed=settings["seed"],
        )

    stem = f"{workload_name}-{contract}-t{threads}" + (
        f"-region-{region['signature'][:10]}" if region else ""
    )
    start = time.perf_counter()
    try:
        result = bench(workload_name, options(f"{unfused},{fused}"), profile, members)
    except Exception as error:  # noqa: BLE001 - every failure is recorded with its text, never dropped
        row.update(
            status="failed", error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc(limit=6)
        )
        row.update(
            unfused_only(
                workload_name, options(unfused), profile, members, out_dir / f"{stem}-unfused-only.json"
            )
        )
    else:
        path = save_result(result, out_dir / f"{stem}.json")
        row.update(summarise_section(result["in_process"], unfused, fused), result_file=shown(path))
    row["seconds"] = time.perf_counter() - start
    return row


def fused_regions(workload_name: str, params: dict, contract: str) -> list[dict]:
    """The distinct fused regions of the greedy partition (by signature), with how often each occurs."""
    from weft.explain import explain_plan
    from weft.workloads import get_workload

    explanation = explain_plan(get_workload(workload_name).plan(**params), FUSED, contract)
    regions: dict[str, dict] = {}
    for report in explanation.reports:
        if report.region.is_fused:
            entry = regions.setdefault(
                report.signature,
                {"signature": report.signature, "occurrences": 0, "members": list(report.region.members)},
            )
            entry["occurrences"] += 1
    return list(regions.values())


def summarise_section(section: dict, unfused: str, fused: str) -> dict:
    """The fields of a row from one ``in_process`` section of a weft-bench/1 result."""
    control, verdict = section["verdicts"][0], section["verdicts"][1]
    assert verdict["candidate"] == fused and verdict["baseline"] == unfused, (verdict["candidate"], fused)
    return {
        "unfused": stats_json(verdict["baseline_stats"]),
        "fused": stats_json(verdict["candidate_stats"]),
        "paired_ratio": verdict["paired_median_ratio"],
        "verdict": verdict["status"],
        "spread": verdict["spread"],
        "allowed_regression": verdict["allowed_regression"],
        "speedup_of": verdict["speedup_of"],
        "speedup_factor": verdict["speedup_factor"],
        "aa_floor": verdict["floor"],
        "aa_verdict": control["status"],
        "aa_ratio": control["paired_median_ratio"],
        "parity": section["parity"],
        "inner_calls_per_round": section["inner_calls_per_round"],
        "memory_bytes": {arm["label"]: arm["memory_bytes"] for arm in section["arms"]},
    }


def unfused_only(workload_name: str, options, profile, members, path: Path) -> dict:
    """After a failed comparison: the unfused arm and its A/A control alone (times, floor)."""
    from weft.bench.result import save_result

    try:
        result = bench(workload_name, options, profile, members)
    except Exception as error:  # noqa: BLE001
        return {"unfused_error": f"{type(error).__name__}: {error}"}
    save_result(result, path)
    control = result["in_process"]["verdicts"][0]
    return {
        "unfused": stats_json(control["baseline_stats"]),
        "aa_floor": control["floor"],
        "aa_verdict": control["status"],
        "aa_ratio": control["paired_median_ratio"],
        "unfused_only_file": shown(path),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="See the module docstring and benchmarks/FUSION.md."
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, 2 blocks, short rounds (a smoke run)"
    )
    parser.add_argument("--workloads", default="", help="comma-separated workloads (default: all)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--contracts", default=",".join(CONTRACTS), help="inference,strict (default both)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply each workload's principal size")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="WORKLOAD:KEY=VALUE",
        help="set one workload parameter (repeatable)",
    )
    parser.add_argument("--rounds", type=int, help="timed palindrome blocks (default 6; 2 with --quick)")
    parser.add_argument("--warmup", type=int, default=1, help="discarded warm-up blocks (default 1)")
    parser.add_argument(
        "--round-ms", type=float, help="target round length in ms (default 50; 5 with --quick)"
    )
    parser.add_argument(
        "--regions",
        action="store_true",
        help="also time each distinct fused region alone (a stage plan), unfused vs greedy",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out-dir", type=Path, help="where results go (default benchmarks/results/fusion-STAMP)"
    )
    parser.add_argument(
        "--write-doc",
        nargs="?",
        const=ROOT / "benchmarks" / "FUSION.md",
        type=Path,
        metavar="FILE.md",
        help="also write the summary between the result markers of FILE.md (default benchmarks/FUSION.md)",
    )
    return parser.parse_args(argv)


def shown(path: Path) -> str:
    """A path relative to the repository root where it lies inside it (for the summary)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def report(row: dict) -> dict:
    """Print one row as it completes (a long run shows progress); returns it."""
    ratio = f"ratio {row['paired_ratio']:.3f}" if row.get("paired_ratio") is not None else ""
    print(
        f"{row_name(row)}: unfused {format_median(row.get('unfused'))}  fused {format_median(row.get('fused'))}"
        f"  {ratio}  {row.get('verdict') or 'failed'}: {outcome(row)}  ({row['seconds']:.0f} s)"
        + (f"\n    error: {row['error'].splitlines()[0]}" if row["error"] else ""),
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    reexec_without_slow_blas_env()
    args = parse_args(argv)
    from weft.bench.result import provenance, save_result
    from weft.cost.machine import machine_profile
    from weft.workloads import WORKLOADS, get_workload

    names = [get_workload(n).name for n in args.workloads.split(",") if n.strip()] or list(WORKLOADS)
    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    contracts = [c.strip() for c in args.contracts.split(",") if c.strip()]
    unknown = [c for c in contracts if c not in CONTRACTS]
    if unknown:
        raise SystemExit(f"--contracts: unknown {unknown}; valid: {', '.join(CONTRACTS)}")
    sets = parse_sets(args.set)
    settings = {
        "quick": args.quick,
        "blocks": args.rounds or (2 if args.quick else 6),
        "warmup": args.warmup,
        "round_s": (args.round_ms or (5.0 if args.quick else 50.0)) / 1e3,
        "seed": args.seed,
        "scale": args.scale,
        "threads": threads,
        "contracts": contracts,
    }
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out_dir = (
        args.out_dir or ROOT / "benchmarks" / "results" / f"fusion-{stamp}{'-quick' if args.quick else ''}"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = {
        name: sizes_for(get_workload(name), args.quick, args.scale, sets.get(name, {})) for name in names
    }
    profile = machine_profile()
    command = " ".join(["python", "benchmarks/fusion.py", *sys.argv[1:]])
    print(f"fusion benchmark -> {shown(out_dir)}", flush=True)
    for name, params in sizes.items():
        print(f"  {name}: {format_params(params)}", flush=True)
    rows: list[dict] = []
    summary = {
        "schema": "weft-bench-fusion/1",
        "command": command,
        "settings": settings,
        "sizes": sizes,
        "out_dir": shown(out_dir),
        "unset_env": os.environ.get("WEFT_FUSION_BENCH_UNSET", ""),
        "provenance": provenance(profile, []),
        "complete": False,
        "rows": rows,
    }

    def record(row: dict) -> None:
        """Keep the row and rewrite summary.json, so an interrupted run keeps what it measured."""
        rows.append(report(row))
        summary["recorded_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        save_result(summary, out_dir / "summary.json")

    for name in names:
        for count in threads:
            for contract in contracts:
                record(run_one(name, sizes[name], contract, count, settings, profile, out_dir))
    if args.regions:
        for name in names:
            for contract in contracts:
                try:
                    found = fused_regions(name, sizes[name], contract)
                except Exception as error:  # noqa: BLE001
                    print(
                        f"{name}: cannot list the fused regions under {contract}: {type(error).__name__}: {error}"
                    )
                    continue
                for region in found:
                    for count in threads:
                        record(
                            run_one(name, sizes[name], contract, count, settings, profile, out_dir, region)
                        )
    summary.update(complete=True, recorded_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    save_result(summary, out_dir / "summary.json")  # atomic, NaN-free JSON
    markdown = summary_markdown(summary)
    (out_dir / "summary.md").write_text(markdown)
    print("\n" + markdown)
    if args.write_doc:
        write_doc(markdown, args.write_doc)
        print(f"summary written into {args.write_doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
