"""``weft bench``: interleaved ABBA/BAAB timing with an A/A control and verdicts."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from weft.bench import arms as arms_module
from weft.bench.report import wide_console

EPILOG = arms_module.__doc__.split("\n", 2)[2] + """
Verdicts (docs/benchmarking.md): spread over 5% is inconclusive; otherwise the allowed regression is
max(2%, 2 x spread): inside it is a pass (non-regression, not a speed-up), past it a fail. A speed-up is
claimed only when every round of one arm beats every round of the other by more than the A/A floor.
The first arm is the baseline; an A/A control of it (label BASELINE:control) always runs beside it.

Examples:
  weft bench attention --arms unfused,torch-sdpa --size tokens=2048
  weft bench layernorm --arms unfused@1,unfused@2 --processes 4
  weft bench attention --arms unfused,greedy --stage auto
  weft bench examples/bert.py:build --arms inference,torch-eager --set tokens=64
  weft bench --recompute benchmarks/results/attention-unfused-torch-sdpa-....json
  weft bench vit-block --arms unfused,priced,matchers --against matchers+inference
"""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench", help="compare arms of a workload: interleaved ABBA/BAAB, A/A control, verdicts",
        description="Time arms of a workload side by side and judge them by the rule of docs/benchmarking.md.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("workload", nargs="?", help="workload name (weft workloads lists them) or your program FILE.py:FUNCTION")
    parser.add_argument("--arms", default=None,
                        help="comma-separated arms, baseline first (default: unfused; with --stage: unfused,greedy)")
    parser.add_argument("--set", "--size", dest="size", action="append", default=[], metavar="KEY=VALUE",
                        help="set a workload parameter (repeatable), e.g. --size tokens=2048")
    parser.add_argument("--threads", type=int, default=1, help="threads for arms without @N (default 1)")
    parser.add_argument("--rounds", type=int, default=6, help="timed palindrome blocks (default 6)")
    parser.add_argument("--warmup", type=int, default=1, help="discarded warm-up blocks (default 1)")
    parser.add_argument("--round-ms", type=float, default=50.0, help="target duration of one round in ms (default 50)")
    parser.add_argument("--processes", type=int, default=0, metavar="N",
                        help="also run N rounds of fresh processes per arm, order reversed each round")
    parser.add_argument("--stage", metavar="REGION",
                        help="time one region in isolation (members a,b,c or 'auto'), then the whole plan")
    parser.add_argument("--occurrences", type=int, default=1, help="how often the stage occurs per step (budget)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--out", metavar="FILE.json", help="result file (default benchmarks/results/...)")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the rounds and a roofline of the members")
    parser.add_argument("--recompute", metavar="FILE.json", help="recompute the verdicts of a result file and compare")
    parser.add_argument("--against", action="append", default=[], metavar="LABEL",
                        help="also judge every other arm against this one (an arm label as the tables print it,"
                             " e.g. matchers+inference), with the baseline's A/A floor; repeatable; works with --recompute")
    parser.add_argument("--recalibrate", action="store_true", help="measure the machine profile again")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--test-arms", action="store_true", help=argparse.SUPPRESS)  # enables the 'slowed' arm
    parser.set_defaults(handler=main)


def check_against(arms: str, args: argparse.Namespace) -> None:
    """Refuse an ``--against`` label that is not one of the arms, before anything is timed."""
    from weft.bench.arms import BenchError, parse_arms

    labels = [spec.label for spec in parse_arms(arms, args.threads, args.test_arms)]
    for label in args.against:
        if label not in labels:
            raise BenchError(f"--against {label!r} is not one of the arms ({', '.join(labels)}); give an arm label"
                             " exactly as in --arms, e.g. --arms unfused,priced,matchers --against matchers")


def judged_against(result: dict, labels: list[str]) -> dict:
    """label -> [(section, verdict)]: every other arm judged against each of ``labels``."""
    from weft.bench.result import verdicts_against

    return {label: verdicts_against(result, label) for label in labels}


def print_against(console: Console, judged: dict) -> None:
    """The tables of ``--against`` (``judged_against``), per label and section."""
    from weft.bench.report import verdict_table

    for label, rows in judged.items():
        for section in dict.fromkeys(row[0] for row in rows):
            console.print(verdict_table(f"{section.replace('_', ' ')}: against {label}",
                                        [verdict for name, verdict in rows if name == section]))


def recompute_main(console: Console, path: str, against: list[str]) -> int:
    from weft.bench.report import verdict_table
    from weft.bench.result import load_result, recompute

    result = load_result(Path(path))
    rows = recompute(result)
    agree = all(row[3] for row in rows)
    for section in dict.fromkeys(row[0] for row in rows):
        console.print(verdict_table(f"{section} (recomputed from raw rounds)", [r[1] for r in rows if r[0] == section]))
    for section, verdict, stored, same in rows:
        if not same:
            console.print(f"[red]DIFFERS[/red] {section} {verdict.candidate} vs {verdict.baseline}: recorded"
                          f" {stored.get('status')} / ratio {stored.get('paired_median_ratio')}, recomputed"
                          f" {verdict.status} / ratio {verdict.paired_median_ratio}")
    console.print("recomputed verdicts agree with the recorded ones" if agree else "[red]verdicts differ[/red]")
    print_against(console, judged_against(result, against))
    return 0 if agree else 1


def main(args: argparse.Namespace) -> int:
    from weft.bench.arms import BenchError
    from weft.bench.report import print_budget, print_section, progress_bars
    from weft.bench.result import default_result_path, recompute, save_result
    from weft.bench.run import BenchOptions, run_bench
    from weft.cost.machine import machine_profile
    from weft.workloads.params import parse_params

    console = wide_console()
    if args.recompute:
        return recompute_main(console, args.recompute, args.against)
    if not args.workload:
        raise BenchError("weft bench needs a WORKLOAD (or --recompute FILE)")
    arms = args.arms or ("unfused,greedy" if args.stage else "unfused")
    check_against(arms, args)
    options = BenchOptions(
        arms=arms, params=parse_params(args.size, "--size"), threads=args.threads, blocks=args.rounds,
        warmup=args.warmup, target_round_s=args.round_ms / 1e3, processes=args.processes, seed=args.seed,
        allow_test_arms=args.test_arms, stage=args.stage, occurrences=args.occurrences,
    )
    profile = machine_profile(recalibrate=args.recalibrate)
    with progress_bars(console, enabled=not args.no_progress) as progress:
        result = run_bench(args.workload, options, profile, progress)
    section = result["in_process"]
    labels = [section["baseline"]] + section["candidates"]
    timed = set(labels)
    for label in [label for label in args.against if label not in timed]:
        console.print(f"[yellow]--against {label}: that arm was unavailable, so nothing is judged against it[/yellow]")
    judged = judged_against(result, [label for label in args.against if label in timed])
    if judged:
        result["against"] = {label: [{"section": name, **verdict.to_json()} for name, verdict in rows]
                             for label, rows in judged.items()}
    path = save_result(result, Path(args.out) if args.out else default_result_path(result["workload"], labels))
    rows = recompute(result)
    title = f"{result['workload']} {result['params']}" + (f" stage {','.join(result['stage'])}" if result["stage"] else "")
    print_section(console, f"{title}: in one process", section, [r[1] for r in rows if r[0] == "in_process"])
    if result.get("processes"):
        from weft.bench.report import verdict_table

        console.print(verdict_table(f"across {result['processes']['rounds']} rounds of fresh processes",
                                    [r[1] for r in rows if r[0] == "processes"]))
    if result.get("whole"):
        print_section(console, f"{result['workload']}: whole plan", result["whole"], [r[1] for r in rows if r[0] == "whole"])
        print_budget(console, result["budget"])
    print_against(console, judged)
    if args.plot:
        plot_result(console, result, profile, args.plot)
    console.print(f"result written to {path} (recompute with: weft bench --recompute {path})")
    return 0  # a completed comparison, whatever its verdict; errors (parity, arms) exit 2


def plot_result(console: Console, result: dict, profile, path: str) -> None:
    from weft.bench.context import build_context
    from weft.bench.plot import save_bench_plot
    from weft.cost.work import group_work

    section = result["in_process"]
    members = []
    baseline = next(arm for arm in section["arms"] if arm["label"] == section["baseline"])
    if baseline["kind"] == "weft":
        from weft.compile import compile as weft_compile
        from weft.config import DEFAULT_FUSION

        context = build_context(result["workload"], result["params"], result["settings"]["seed"],
                                ",".join(result["stage"]) if result["stage"] else None)
        compiled = weft_compile(context.plan, contract=baseline["contract"], threads=baseline["threads"],
                                fusion=baseline["fusion"] or DEFAULT_FUSION)
        for name, group, seconds in compiled.profile(*context.arrays, repeats=3):
            work = group_work(context.plan, group)
            if seconds > 0:
                members.append({"name": name, "intensity": work.intensity, "achieved": work.flops / seconds})
    threads = baseline["threads"]
    save_bench_plot(Path(path), section, members, profile.bandwidth(threads), profile.peak_flops(threads))
    console.print(f"plot written to {path}")
