"""``weft bench``: build the arms, check parity, time interleaved, judge, record.

One section of a result is one timing of a set of arms on one plan::

    arms [A, A:control, B, ...] -> parity against the reference -> palindrome blocks
    -> verdicts (A/A first, then each candidate vs A, all with the A/A floor)
    -> roofline of each arm (compulsory bytes / bandwidth vs FLOPs / peak)

``--stage`` adds a second section, the whole plan with the same arms, and the
budget illustration between them (docs/benchmarking.md rule 6).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from weft.bench.arms import (
    ArmUnavailable,
    BenchError,
    Runner,
    as_tuple,
    build_runner,
    control_runner,
    parse_arms,
)
from weft.bench.context import CONTROL_SUFFIX, Context, build_context
from weft.bench.driver import calibrate_inner, run_interleaved
from weft.bench.parity import check_parity, oracle_affordable
from weft.bench.processes import run_across_processes
from weft.bench.result import SCHEMA, provenance
from weft.bench.verdict import judge_all
from weft.cost.work import floor, fraction_of_floor, plan_work, unfused_work
from weft.workloads import WORKLOADS


@dataclass(frozen=True)
class BenchOptions:
    arms: str
    params: dict = field(default_factory=dict)
    threads: int = 1
    blocks: int = 6
    warmup: int = 1
    target_round_s: float = 0.05
    processes: int = 0
    process_reps: int = 3
    seed: int = 0
    allow_test_arms: bool = False
    stage: str | None = None
    occurrences: int = 1


def _reference(context: Context, runners: list[Runner]) -> tuple[tuple, str]:
    if oracle_affordable(context.plan):
        from weft.oracle import interpreter

        return as_tuple(interpreter.run(context.plan, *context.arrays)), "oracle"
    for runner in runners:
        if runner.spec.exact:
            return runner.outputs, f"Strict arm {runner.spec.label} (the plan is too large for the oracle)"
    return runners[0].outputs, f"arm {runners[0].spec.label} (no Strict arm; the plan is too large for the oracle)"


def measure(context: Context, options: BenchOptions, profile, progress: Callable[[str, int], Callable[[], None]] | None = None) -> tuple[dict, list[Runner]]:
    """Time one plan: returns the section dict and the runners (for provenance)."""
    specs = parse_arms(options.arms, options.threads, options.allow_test_arms)
    baseline = specs[0]
    control = replace(baseline, label=baseline.label + CONTROL_SUFFIX)
    try:
        twin = build_runner(baseline, context.workload, context.params, context.plan, context.arrays)
    except ArmUnavailable as error:
        raise BenchError(f"the baseline arm cannot run: {error}") from None
    runners = [twin, control_runner(twin, control, context.plan, context.arrays)]
    unavailable = {}
    for spec in specs[1:]:
        try:
            runners.append(build_runner(spec, context.workload, context.params, context.plan, context.arrays))
        except ArmUnavailable as error:
            unavailable[spec.label] = str(error)
    candidates = [r.spec.label for r in runners[2:]]
    if specs[1:] and not candidates:
        raise BenchError("no candidate arm can run here: " + "; ".join(unavailable.values()))
    reference, reference_name = _reference(context, runners)
    parity = check_parity(runners, reference, reference_name)
    calls = {runner.spec.label: runner.call for runner in runners}
    inner = calibrate_inner(calls, options.target_round_s)
    total_rounds = (options.warmup + options.blocks) * 2 * len(calls)
    tick = progress("timing in one process", total_rounds) if progress else None
    blocks = run_interleaved(calls, options.blocks, options.warmup, inner, tick)
    verdicts = judge_all(blocks, baseline.label, control.label, candidates)
    section = {
        "plan": context.plan.name,
        "members": [kernel.output for kernel in context.plan.kernels],
        "baseline": baseline.label,
        "control": control.label,
        "candidates": candidates,
        "arms": [{**r.spec.to_json(), "build_seconds": r.build_seconds, "memory_bytes": r.memory_bytes} for r in runners],
        "unavailable": unavailable,
        "parity": {"reference": reference_name, "checks": [check.to_json() for check in parity]},
        "inner_calls_per_round": inner,
        "warmup_blocks": options.warmup,
        "blocks": [block.to_json() for block in blocks],
        "verdicts": [verdict.to_json() for verdict in verdicts],
        "roofline": roofline_section(context.plan, runners, verdicts, profile),
    }
    return section, runners


def roofline_section(plan, runners: list[Runner], verdicts, profile) -> dict:
    compulsory, unfused = plan_work(plan), unfused_work(plan)
    medians = {verdicts[0].baseline: verdicts[0].baseline_stats.median}
    medians.update({v.candidate: v.candidate_stats.median for v in verdicts})
    arms = {}
    for runner in runners:
        threads = runner.spec.threads
        bound = floor(compulsory, profile.bandwidth(threads), profile.peak_flops(threads))
        median = medians[runner.spec.label]
        arms[runner.spec.label] = {
            "median_s": median, "floor_s": bound.seconds, "bound": bound.bound,
            "memory_floor_s": bound.memory_seconds, "compute_floor_s": bound.compute_seconds,
            "fraction_of_floor": fraction_of_floor(bound.seconds, median),
            "bandwidth_bytes_per_s": profile.bandwidth(threads), "peak_flops_per_s": profile.peak_flops(threads),
        }
    return {"flops": compulsory.flops, "compulsory_bytes": compulsory.bytes, "unfused_bytes": unfused.bytes, "arms": arms}


def budget_illustration(stage: dict, whole: dict, occurrences: int) -> list[dict]:
    """Stage saving x occurrences / whole-plan time, per candidate, beside the measured whole saving."""
    rows = []
    stage_verdicts = {v["candidate"]: v for v in stage["verdicts"][1:]}
    whole_verdicts = {v["candidate"]: v for v in whole["verdicts"][1:]}
    for label, verdict in stage_verdicts.items():
        if label not in whole_verdicts:
            continue
        base_stage = verdict["baseline_stats"]["median"]
        saving = base_stage - verdict["candidate_stats"]["median"]
        whole_base = whole_verdicts[label]["baseline_stats"]["median"]
        rows.append({
            "candidate": label,
            "stage_saving_s": saving,
            "occurrences": occurrences,
            "whole_plan_s": whole_base,
            "predicted_whole_saving": saving * occurrences / whole_base,
            "measured_whole_saving": 1.0 - whole_verdicts[label]["paired_median_ratio"],
            "stage_ratio": verdict["paired_median_ratio"],
            "whole_ratio": whole_verdicts[label]["paired_median_ratio"],
        })
    return rows


def process_reference(workload) -> str:
    """How a fresh process loads ``workload`` again: a built-in's name, a program's FILE.py:FUNCTION."""
    source = getattr(workload, "source", None)
    if source:
        return source
    if workload.name in WORKLOADS:
        return workload.name
    raise BenchError(f"workload {workload.name} lives only in this process, so --processes cannot load it in a"
                     " fresh one; put it in a file and bench FILE.py:FUNCTION instead")


def run_bench(workload_name, options: BenchOptions, profile, progress=None) -> dict:
    """Run the whole benchmark and return the result (JSON-ready dict)."""
    context = build_context(workload_name, options.params, options.seed, options.stage)
    section, runners = measure(context, options, profile, progress)
    result = {
        "schema": SCHEMA,
        "workload": context.workload.name,
        "params": context.params,
        "stage": list(context.stage_members) if context.stage_members else None,
        "settings": {"blocks": options.blocks, "warmup_blocks": options.warmup, "threads": options.threads,
                     "target_round_s": options.target_round_s, "processes": options.processes, "seed": options.seed},
        "in_process": section,
    }
    if options.processes:
        labels = [section["baseline"], section["control"]] + section["candidates"]
        job = {"workload": process_reference(context.workload), "params": context.params, "seed": options.seed,
               "stage": options.stage, "threads": options.threads, "allow_test_arms": options.allow_test_arms,
               "warmup": 1, "reps": options.process_reps, "inner": section["inner_calls_per_round"]}
        rounds = options.processes + options.processes % 2
        tick = progress("timing across processes", rounds * len(labels)) if progress else None
        blocks, answers = run_across_processes(job, labels, options.processes, tick)
        digests = {a["arm"]: a["digest"] for a in answers}
        expected = {c["label"]: c["digest"] for c in section["parity"]["checks"]}
        exact = {arm["label"] for arm in section["arms"] if arm["kind"] in ("weft", "test") and arm["contract"] == "strict"}
        changed = [label for label in exact if digests.get(label) != expected[label]]
        if changed:
            raise BenchError(f"arms {changed} produced different outputs in a fresh process than in this one")
        verdicts = judge_all(blocks, section["baseline"], section["control"], section["candidates"])
        result["processes"] = {
            "baseline": section["baseline"], "control": section["control"], "candidates": section["candidates"],
            "rounds": rounds, "reps_per_process": options.process_reps,
            "blocks": [block.to_json() for block in blocks], "verdicts": [v.to_json() for v in verdicts],
        }
    if context.stage_members:
        whole_context = Context(context.workload, context.params, context.whole_plan, context.whole_arrays,
                                context.whole_plan, context.whole_arrays)
        whole, whole_runners = measure(whole_context, options, profile, progress)
        result["whole"] = whole
        result["budget"] = budget_illustration(section, whole, options.occurrences)
        runners = runners + whole_runners
    result["provenance"] = provenance(profile, runners)
    return result


def stage_summary(section: dict) -> dict:
    """Median seconds per arm label (for reports)."""
    medians = {}
    for block in section["blocks"]:
        for label, seconds in zip(block["order"], block["seconds"], strict=False):
            medians.setdefault(label, []).append(seconds)
    return {label: statistics.median(values) for label, values in medians.items()}
