"""The pricer: its speed, its budget, and how well its prices rank measured times.

    PYTHONPATH=$PWD python benchmarks/pricing.py --out benchmarks/results/pricing-<date>.json
    PYTHONPATH=$PWD python benchmarks/pricing.py --skip-accuracy     # speed and budget only (~1 min)

Three parts, all in one process, on this machine's calibrated profile:

1. **Speed**: the whole pricing phase of ``vit-block`` and ``qwen-decode-step`` (and
   ``sam3-encoder`` where the workload exists) inside the default budget (2 s, so a 1 s
   pricing share), with the number of signatures left unpriced; then the median time of
   one price (one region x one tiling: ``price_function`` on cached facts) and of one
   signature (its first verdict: lowering its forms once, estimate, branch and bound).
2. **Budget**: pricing shares of 10 ms and 100 ms, repeated; the distribution of the
   phase's time over its share (1.00 = on time).
3. **Accuracy**: candidate programs cut out of every built-in workload (a region's
   members as their own plan), each compiled unfused and fused in several tilings,
   timed at 1 and 2 threads (median of repeated calls) beside its predicted cycles:
   the Spearman rank correlation of predicted vs measured, and, per fused-vs-unfused
   pair whose measured margin exceeds 10%, whether the predicted winner is the
   measured one (misses listed with both numbers). Under each contract of
   ``--contracts`` (default both: Inference's one-pass forms are priced too, and
   a Strict-only check never saw them), each with its own numbers in the JSON's
   ``accuracy[contract]``.

The machine is shared with other work: timings carry that noise (the JSON records the
load average before and after each part).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from weft.codegen.cpu import cpu_features, lanes_for
from weft.compose import choose_regions
from weft.compose.partition import Partition
from weft.compose.priced import survey_candidates
from weft.config import config_from_env
from weft.cost.machine import machine_profile
from weft.cost.model import price_function
from weft.cost.search import unfused_price
from weft.fuse import online_lowering_for, region_pricing
from weft.ir import DType
from weft.lower import Target
from weft.workloads import WORKLOADS

ACCURACY_WORKLOADS = {
    "attention": {"tokens": 1024, "heads": 4},
    "layernorm": {"rows": 4096, "dim": 1024},
    "softmax": {"rows": 4096, "cols": 1024},
    "adam": {"params": 2_000_000, "tensors": 2},
    "cross-entropy": {"tokens": 256, "vocab": 32000, "hidden": 256},
    "vit-block": {"tokens_side": 24, "dim": 256, "heads": 4, "window": 8, "mlp_dim": 1024},
    "qwen-decode-step": {"layers": 1},
}


def load() -> float:
    return os.getloadavg()[0]


# --------------------------------------------------------------------------- 1. speed


def pricing_phase(name: str, params: dict, contract: str, threads: int, budget_s: float, profile) -> dict:
    plan = WORKLOADS[name].plan(**params)
    config = config_from_env(contract=contract, threads=threads, fusion="priced", budget_s=budget_s)
    target = Target(lanes_for(cpu_features()), contract)
    pricing = region_pricing(plan, config, target, profile=profile)
    start = time.perf_counter()
    partition = choose_regions(plan, "priced", contract, pricing=pricing)
    policy_s = time.perf_counter() - start
    report = pricing.report
    unpriced_candidates = sum(d.unpriced for d in partition.decisions)
    per_signature = [v.seconds for v in pricing.pricer.verdicts.values()]
    # one price: price_function on cached facts, every (form, tiling) priced, timed again
    per_price = []
    for (_, what), forms in list(pricing.facts.items()):
        if what != "forms":
            continue
        for form in forms:
            for tiling in form.tilings:
                runs = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    price_function(form.facts, pricing.pricer.numbers, {}, dict(tiling))
                    runs.append(time.perf_counter() - t0)
                per_price.append(min(runs))
    return {
        "workload": name, "params": params, "contract": contract, "threads": threads, "budget_s": budget_s,
        "pricing_share_s": report.budget_s, "pricing_phase_s": report.seconds, "policy_s": policy_s,
        "signatures_surveyed": report.signatures, "signatures_priced": report.priced,
        "signatures_unpriced": len(report.unpriced), "candidates_unpriced": unpriced_candidates,
        "fused_regions": len(partition.fused), "regions": len(partition.regions),
        "median_price_us": statistics.median(per_price) * 1e6 if per_price else None, "prices_timed": len(per_price),
        "median_signature_ms": statistics.median(per_signature) * 1e3 if per_signature else None,
        "steps_interrupted": pricing.budget.interrupted, "pricing_phase_cpu_s": report.cpu_seconds,
        "load_before": None,
    }


def budget_overruns(name: str, params: dict, shares: tuple[float, ...], repeats: int, profile,
                    contracts: tuple[str, ...] = ("strict", "inference")) -> dict:
    """Phase time over share, per share, over ``repeats`` runs of each contract: the
    distribution (median, 90th percentile, max) and how many steps the timer cut short."""
    result = {}
    for share in shares:
        ratios, cpu_ratios, interrupted = [], [], 0
        for _ in range(repeats):
            for contract in contracts:
                row = pricing_phase(name, params, contract, 1, 2 * share, profile)
                ratios.append(row["pricing_phase_s"] / share)
                cpu_ratios.append(row["pricing_phase_cpu_s"] / share)
                interrupted += row["steps_interrupted"]
        ordered = sorted(ratios)
        result[f"{share * 1e3:.0f}ms"] = {
            "ratios": ratios, "median": statistics.median(ratios), "p90": ordered[int(0.9 * (len(ordered) - 1))],
            "max": max(ratios), "within_5_percent": sum(r <= 1.05 for r in ratios), "runs": len(ratios),
            "steps_interrupted": interrupted, "contracts": list(contracts),
            # the phase's CPU time over the share: what the process spent, without the time it
            # waited for a core (on a loaded machine the wall overrun is the scheduler's)
            "cpu_ratios": cpu_ratios, "cpu_max": max(cpu_ratios),
        }
    return result


# --------------------------------------------------------------------------- 3. accuracy


def _inputs(plan, rng) -> list[np.ndarray]:
    arrays = []
    buffers = plan.buffer_map()
    for name in plan.inputs:
        buffer = buffers[name]
        if buffer.dtype is DType.FLOAT32:
            arrays.append(rng.standard_normal(buffer.shape).astype(np.float32))
        else:
            from weft.oracle.interpreter import NUMPY_DTYPE

            arrays.append(np.zeros(buffer.shape, NUMPY_DTYPE[buffer.dtype]))  # index 0 is always in range
    return arrays


def _compile_program(plan, region, form, tiling, config, target):
    from weft.codegen.driver import build
    from weft.codegen.runner import render_source
    from weft.compile import CompiledPlan
    from weft.lower.fused import lower_partition, region_tiling
    from weft.runtime.memory import plan_arena

    if form == "unfused":
        regions = tuple(_alone(plan, member) for member in region.members)
        tilings, online = None, None
    else:
        regions = (region,)
        online = online_lowering_for(config.contract) if form == "one pass" else None
        tilings = None
        if form == "fused":
            primary, size = tiling[-1]
            tilings = {region.anchor: region_tiling(plan, region, size, primary)}
    partition = Partition(plan.name, "priced", config.contract, regions, (), ())
    lowered = lower_partition(plan, partition, target, online_lowering=online, tilings=tilings)
    if form == "one pass" and not any(type(n).__name__ == "OnlinePass" for f in lowered.functions for n in f.nests):
        return None
    arena = plan_arena(plan, lowered)
    artifact = build(render_source(plan, lowered, arena), config.cc, config.cache_dir, config.contract)
    return CompiledPlan(plan, config, lowered, arena, artifact)


def _alone(plan, member):
    from weft.compose.regions import grow

    return grow(plan, member, frozenset({member})).candidates[0]


def _race(compiled: list, inputs, threads: int, rounds: int = 7, calls: int = 3) -> list[float]:
    """Seconds per call of each compiled program, interleaved round by round (drift and load
    bursts hit every program alike); each program's *fastest* round: on a shared machine the
    slow rounds are another process's, the fast one is the program's."""
    from dataclasses import replace

    prepared = []
    for program in compiled:
        program.config = replace(program.config, threads=threads)
        ready = program.prepare(*inputs)
        ready()
        prepared.append(ready)
    best = [float("inf")] * len(prepared)
    for round_number in range(rounds):
        order = range(len(prepared)) if round_number % 2 == 0 else reversed(range(len(prepared)))
        for index in order:
            prepared[index]()  # untimed: the program's own data back in cache, not its neighbour's
            start = time.perf_counter()
            for _ in range(calls):
                prepared[index]()
            best[index] = min(best[index], (time.perf_counter() - start) / calls)
    return best


def accuracy(profile, contract: str, per_workload: int, threads_list=(1, 2), workloads=None) -> dict:
    from weft.cost.bridge import PlanPricing

    rng = np.random.default_rng(0)
    target = Target(lanes_for(cpu_features()), contract)
    programs = []
    for name, params in ACCURACY_WORKLOADS.items():
        if name not in WORKLOADS or (workloads and name not in workloads):
            continue
        plan = WORKLOADS[name].plan(**params)
        seen, chosen = set(), []
        probe = region_pricing(plan, config_from_env(contract=contract, threads=1, fusion="priced", budget_s=60),
                               target, profile=profile)
        for region in sorted(survey_candidates(plan), key=lambda r: -r.size):
            signature = probe.signature(region)
            if signature not in seen:
                seen.add(signature)
                chosen.append(region)
            if len(chosen) >= per_workload:
                break
        for region in chosen:
            sub = probe.subplan(region)
            inputs = _inputs(sub, rng)
            for threads in threads_list:
                config = config_from_env(contract=contract, threads=threads, fusion="priced", budget_s=60)
                pricing = region_pricing(sub, config, target, profile=profile)
                assert isinstance(pricing, PlanPricing)
                lowering = pricing.region_lowering(region)
                numbers = pricing.pricer.numbers
                call = profile.runner_call_s * numbers.clock_hz
                arms = [("unfused", (), unfused_price(lowering, numbers, None).cycles + call)]
                for form in lowering.forms():
                    for tiling in form.tilings[:3]:
                        price = pricing.pricer.price_tiling(lowering, form, tiling, None)
                        arms.append((form.name, tiling, price.cycles + call))
                built = []
                for form, tiling, cycles in arms:
                    compiled = _compile_program(sub, region, form, tiling, config, target)
                    if compiled is not None:
                        built.append((form, tiling, cycles, compiled))
                seconds = _race([entry[3] for entry in built], inputs, threads)
                for (form, tiling, cycles, _), took in zip(built, seconds, strict=True):
                    programs.append({
                        "workload": name, "region": list(region.members), "form": form,
                        "tiling": [list(t) for t in tiling], "threads": threads,
                        "predicted_s": cycles / numbers.clock_hz, "measured_s": took,
                    })
    return summary(contract, programs, threads_list)


def fused_pairs(programs: list[dict]) -> list[dict]:
    """Per (workload, region, threads): the members unfused against the fused program the
    pricer ranks first, predicted and measured."""
    groups: dict[tuple, list[dict]] = {}
    for program in programs:
        groups.setdefault((program["workload"], tuple(program["region"]), program["threads"]), []).append(program)
    pairs = []
    for (name, region, threads), group in groups.items():
        unfused = next((p for p in group if p["form"] == "unfused"), None)
        fused = [p for p in group if p["form"] != "unfused"]
        if unfused is None or not fused:
            continue
        best = min(fused, key=lambda p: p["predicted_s"])  # the pricer's pick among the fused forms
        margin = abs(best["measured_s"] - unfused["measured_s"]) / max(best["measured_s"], unfused["measured_s"])
        pairs.append({
            "workload": name, "region": list(region), "threads": threads, "form": best["form"],
            "tiling": best["tiling"], "predicted_unfused_s": unfused["predicted_s"],
            "predicted_fused_s": best["predicted_s"], "measured_unfused_s": unfused["measured_s"],
            "measured_fused_s": best["measured_s"], "measured_margin": margin,
            "agree": (best["predicted_s"] < unfused["predicted_s"]) == (best["measured_s"] < unfused["measured_s"]),
        })
    return pairs


def summary(contract: str, programs: list[dict], threads_list=(1, 2)) -> dict:
    """Spearman (all, per thread count) and winner agreement of predicted against measured."""
    pairs = fused_pairs(programs)
    predicted = np.array([p["predicted_s"] for p in programs])
    measured = np.array([p["measured_s"] for p in programs])
    decisive = [p for p in pairs if p["measured_margin"] > 0.10]
    by_threads = {}
    for threads in threads_list:
        chosen_rows = [p for p in programs if p["threads"] == threads]
        if len(chosen_rows) > 2:
            by_threads[threads] = spearman(np.array([p["predicted_s"] for p in chosen_rows]),
                                           np.array([p["measured_s"] for p in chosen_rows]))
    return {
        "contract": contract, "programs": programs, "pairs": pairs, "spearman_by_threads": by_threads,
        "spearman": spearman(predicted, measured) if len(programs) > 2 else None,
        "decisive_pairs": len(decisive), "agreeing": sum(p["agree"] for p in decisive),
        "misses": [p for p in decisive if not p["agree"]],
    }


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    def ranks(values):
        order = np.argsort(values, kind="stable")
        result = np.empty(len(values))
        result[order] = np.arange(len(values))
        return result

    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def reprice(path: Path, profile) -> dict:
    """The programs of a recorded accuracy run priced again by this checkout's model (on this
    machine's profile), against the times recorded: a model change judged on a quiet record
    without measuring again."""
    from weft.cost.search import unfused_price

    recorded = json.loads(Path(path).read_text())
    if recorded.get("profile_id") != profile.profile_id:
        print(f"note: {path} was measured with profile {recorded.get('profile_id')}; prices use this machine's"
              f" {profile.profile_id}", flush=True)
    result = {}
    for contract, acc in recorded.get("accuracy", {}).items():
        target = Target(lanes_for(cpu_features()), contract)
        lowered: dict[tuple, tuple] = {}
        programs = []
        for program in acc["programs"]:
            key = (program["workload"], tuple(program["region"]), program["threads"])
            if key not in lowered:
                plan = WORKLOADS[key[0]].plan(**ACCURACY_WORKLOADS[key[0]])
                probe = region_pricing(plan, config_from_env(contract=contract, threads=1, fusion="priced", budget_s=60),
                                       target, profile=profile)
                region = next(r for r in survey_candidates(plan) if list(r.members) == program["region"])
                config = config_from_env(contract=contract, threads=key[2], fusion="priced", budget_s=60)
                pricing = region_pricing(probe.subplan(region), config, target, profile=profile)
                lowered[key] = (pricing, pricing.region_lowering(region))
            pricing, lowering = lowered[key]
            numbers = pricing.pricer.numbers
            call = profile.runner_call_s * numbers.clock_hz
            if program["form"] == "unfused":
                cycles = unfused_price(lowering, numbers, None).cycles
            else:
                form = next(f for f in lowering.forms() if f.name == program["form"])
                tiling = tuple(tuple(t) for t in program["tiling"])
                tiling = next((t for t in form.tilings if tuple(tuple(x) for x in t) == tiling), tiling)
                cycles = pricing.pricer.price_tiling(lowering, form, tiling, None).cycles
            programs.append({**program, "recorded_predicted_s": program["predicted_s"],
                             "predicted_s": (cycles + call) / numbers.clock_hz})
        result[contract] = summary(contract, programs, tuple(sorted({p["threads"] for p in programs})))
        result[contract]["recorded_spearman"] = acc.get("spearman")
        result[contract]["recorded_agreeing"] = acc.get("agreeing")
    return result


def print_accuracy(contract: str, acc: dict) -> None:
    print(f"accuracy {contract}: {len(acc['programs'])} programs, Spearman {acc['spearman']:.3f} (by threads:"
          f" {', '.join(f'{t}: {r:.3f}' for t, r in acc['spearman_by_threads'].items())});"
          f" winner agreement {acc['agreeing']}/{acc['decisive_pairs']} pairs with a measured margin over 10%",
          flush=True)
    for miss in acc["misses"]:
        print(f"  miss {miss['workload']} [{' '.join(miss['region'])}] @{miss['threads']} ({miss['form']}):"
              f" predicted unfused {miss['predicted_unfused_s'] * 1e3:.3f} ms fused"
              f" {miss['predicted_fused_s'] * 1e3:.3f} ms; measured unfused {miss['measured_unfused_s'] * 1e3:.3f}"
              f" ms fused {miss['measured_fused_s'] * 1e3:.3f} ms")


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--per-workload", type=int, default=3, help="candidate regions per workload (accuracy)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats of each budget run")
    parser.add_argument("--skip-speed", action="store_true", help="accuracy only")
    parser.add_argument("--workloads", default="", help="accuracy over these workloads only (comma-separated)")
    parser.add_argument("--budget-only", action="store_true", help="the budget overruns only (no speed rows, no accuracy)")
    parser.add_argument("--contracts", default="strict,inference",
                        help="accuracy under these contracts (comma-separated; each reported on its own)")
    parser.add_argument("--reprice", type=Path, default=None, metavar="FILE",
                        help="price the programs of a recorded run (FILE, a pricing.py result) again with this model,"
                             " against its recorded times; nothing is measured")
    args = parser.parse_args()
    profile = machine_profile()
    if args.reprice is not None:
        repriced = reprice(args.reprice, profile)
        for contract, acc in repriced.items():
            print(f"recorded: Spearman {acc['recorded_spearman']:.3f}, winners {acc['recorded_agreeing']}; this model:")
            print_accuracy(contract, acc)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"schema": "weft-pricing-reprice/1", "recorded": str(args.reprice),
                                            "profile_id": profile.profile_id, "accuracy": repriced}, indent=1, default=str))
            print(f"wrote {args.out}")
        return
    result = {"schema": "weft-pricing/2", "profile_id": profile.profile_id, "cpu": profile.cpu_model,
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_start": load()}
    speed = []
    for name, params in (("vit-block", {}), ("qwen-decode-step", {}), ("sam3-encoder", {})):
        if name not in WORKLOADS or args.skip_speed or args.budget_only:
            continue
        for contract in ("strict", "inference"):
            row = pricing_phase(name, params, contract, 1, 2.0, profile)
            row["load_before"] = load()
            speed.append(row)
            print(f"{name:18s} {contract:9s} phase {row['pricing_phase_s'] * 1e3:7.1f} ms of {row['pricing_share_s'] * 1e3:.0f};"
                  f" signatures {row['signatures_surveyed']} surveyed, {row['signatures_priced']} priced,"
                  f" {row['signatures_unpriced']} unpriced; median price {row['median_price_us']:.1f} us over"
                  f" {row['prices_timed']}; median signature {row['median_signature_ms']:.2f} ms; policy {row['policy_s']:.2f} s",
                  flush=True)
    result["speed"] = speed
    result["budget"] = {}
    for name in () if args.skip_speed else ("vit-block", "qwen-decode-step", "sam3-encoder"):
        if name not in WORKLOADS:
            continue
        result["budget"][name] = budget_overruns(name, {}, (0.01, 0.1), args.repeats, profile)
        for share, row in result["budget"][name].items():
            print(f"budget {name:18s} share {share:>6s}: phase/share median {row['median']:.3f}, p90 {row['p90']:.3f},"
                  f" max {row['max']:.3f}; {row['within_5_percent']}/{row['runs']} within 5%;"
                  f" {row['steps_interrupted']} steps cut short; runs {', '.join(f'{r:.2f}' for r in row['ratios'])};"
                  f" CPU / share max {row['cpu_max']:.2f}; load {load():.1f}",
                  flush=True)
    if not args.skip_accuracy and not args.budget_only:
        result["load_accuracy_start"] = load()
        result["accuracy"] = {}
        for contract in filter(None, args.contracts.split(",")):
            if contract not in ("strict", "inference"):
                parser.error(f"--contracts: unknown contract {contract!r} (strict, inference)")
            acc = accuracy(profile, contract, args.per_workload,
                           workloads=set(filter(None, args.workloads.split(","))))
            result["accuracy"][contract] = acc
            print_accuracy(contract, acc)
        result["load_accuracy_end"] = load()
    result["load_end"] = load()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
