"""Compile time: cold and warm, by depth, with the share of each stage.

For ``qwen-decode-step`` (1, 4, 16, 24 layers), ``sam3-encoder`` (1, 4, 16, 32 blocks)
and a user-written BERT-like encoder (``user_encoder`` below: hidden 384, 12 heads,
padding mask, post-LN, written with ``weft.nn`` as a user would; 1, 4, 6 layers, the
6-layer MiniLM-sized stack of issue 13), this compiles each plan with
``contract="inference", fusion="greedy"`` (``--fusion priced``: the priced policy, below):

* **cold**: in a fresh process with a fresh, empty ``WEFT_CACHE_DIR`` (the C compiler runs);
* **warm**: in another fresh process with that cache full: the compile record
  (``weft.runtime.record``) gives the regions, lowering and C, the shared object is cached;
* **engine**: warm again with the compile record deleted (the shared object still cached):
  the composition engine, lowering and rendering run in full, nothing is compiled.

Each measurement is its own process (``--child``), so no Python-level memo survives
between them. Imports (``weft``, SciPy for the BLAS pointer) happen before the clock
starts: they are process start-up, not compile. Stages: ``trace`` (building the plan),
``compose`` (choosing regions; it asks the lowering which fit), ``lower``, ``render``
(arena and C source), ``build`` (the C compiler when cold, the cache lookup when warm)
and ``load`` (``CompiledPlan``, the shared object opened). Besides wall time each row
records the CPU seconds of the process and of its children (the C compiler): the
machine is shared, so wall time includes waiting for a core.

``--fusion priced`` (issue 12's must-show): the cold compile prices (and may race) every
region signature and writes the decision record; the warm one must price nothing and race
nothing (its compile record is reused while every verdict it rests on is still recorded),
run the same kernel set and produce the same output digest (random inputs, never zeros),
in under 10% of the cold time; a third process (``engine``: the compile record deleted, every
verdict read back from the decision record) must run the same kernel set with the same digest
too, unless the cold compile's budget left candidates undecided (then the engine prices them).
Each row reports the prices, races and verdicts of each
compile, the kernel-set and digest equality and warm / cold. The machine profile is
calibrated once beforehand and copied into every fresh cache (calibration is a one-time
cost per machine, not part of a compile); so are the precompiled system headers every unit
starts from (``weft.codegen.pch``, about 1 s per contract once per machine; every run); its
seconds are reported.

    python benchmarks/compile_time.py                  # all rows, ~2-4 min
    python benchmarks/compile_time.py --fusion priced --workloads qwen-decode-step,sam3-encoder --depths full
    python benchmarks/compile_time.py --fusion priced --workloads vit-block,qwen-decode-step,sam3-encoder --depths 4
    python benchmarks/compile_time.py --quick          # 1 and 4 layers only
    python benchmarks/compile_time.py --workloads qwen-decode-step --repeats 3

Writes ``benchmarks/results/compile-time-<UTC stamp>.json`` (every measurement, the
settings, provenance) and prints a table. The growth column is full-depth time over
4-layer time (issue 9: under 2x), of wall time and of CPU time (this process and the C
compiler), for ``weft.compile`` alone and with the trace (building the plan, which
grows with its members however it is compiled).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEPTHS = {"qwen-decode-step": (1, 4, 16, 24), "sam3-encoder": (1, 4, 16, 32), "user-encoder": (1, 4, 6),
          "vit-block": (1,)}
DEPTH_PARAM = {"qwen-decode-step": "layers", "sam3-encoder": "blocks", "user-encoder": "layers",
               "vit-block": None}  # one SAM 3 block (72 x 72 tokens, width 1024): no depth
KINDS = ("cold", "warm", "engine")
STAGES = ("trace", "record", "compose", "lower", "render", "build", "load")


def user_encoder(layers: int = 6, batch: int = 1, tokens: int = 128, hidden: int = 384, heads: int = 12,
                 ffn: int = 1536):
    """A BERT-style encoder as a user writes it with ``weft.nn``: flat weight list, a
    padding mask, post-LN residual blocks, GELU feed-forward."""
    import weft.nn as nn

    head_dim = hidden // heads

    def split_heads(t):
        return t.reshape(batch, tokens, heads, head_dim).permute(0, 2, 1, 3)

    def encoder(x, mask, *w):
        for layer in range(layers):
            wq, bq, wk, bk, wv, bv, wo, bo, g1, b1, wi, bi, wf, bf, g2, b2 = w[16 * layer: 16 * layer + 16]
            q, k, v = (split_heads(nn.linear(x, weight, bias)) for weight, bias in ((wq, bq), (wk, bk), (wv, bv)))
            attended = nn.attention(q, k, v, mask=mask).permute(0, 2, 1, 3).reshape(batch, tokens, hidden)
            x = nn.layer_norm(x + nn.linear(attended, wo, bo), hidden, g1, b1)
            x = nn.layer_norm(x + nn.linear(nn.gelu(nn.linear(x, wi, bi)), wf, bf), hidden, g2, b2)
        return x

    layer_shapes = [(hidden, hidden), (hidden,)] * 4 + [
        (hidden,), (hidden,), (ffn, hidden), (ffn,), (hidden, ffn), (hidden,), (hidden,), (hidden,)]
    specs = [nn.spec((batch, tokens, hidden)), nn.spec((batch, 1, 1, tokens), "bool")]
    specs += [nn.spec(shape) for _ in range(layers) for shape in layer_shapes]
    return nn.trace(encoder, *specs, name="user_encoder")


def _trace(workload: str, depth: int):
    if workload == "user-encoder":
        return user_encoder(depth)
    from weft.workloads import get_workload

    parameter = DEPTH_PARAM[workload]
    return get_workload(workload).plan(**({parameter: depth} if parameter else {}))


def child(workload: str, depth: int, fusion: str = "greedy", digest: bool = True) -> dict:
    """One measurement in this (fresh) process: trace and compile, timed by stage."""
    import weft
    import weft.compose
    import weft.lower.fused
    import weft.lower.online
    import weft.workloads  # noqa: F401 - imports are process start-up, not compile
    from weft.runtime.binding import scipy_sgemm_pointer

    if fusion == "priced":
        import weft.decide.verdicts  # noqa: F401 - start-up too
    scipy_sgemm_pointer()  # import SciPy's BLAS now: process start-up, not compile
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, wall = time.process_time(), time.perf_counter()
    plan = _trace(workload, depth)
    traced = time.perf_counter()
    compile_cpu = time.process_time()
    compiled = weft.compile(plan, contract="inference", fusion=fusion)
    done, done_cpu = time.perf_counter(), time.process_time()
    total = done - wall
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    functions = compiled.lowered.functions  # a warm compile reads the lowered plan now (first use)
    lowered_cpu = time.process_time() - done_cpu
    row = {
        "workload": workload, "depth": depth, "fusion": fusion, "members": len(plan.kernels),
        "calls": len(functions), "distinct_functions": len({function.name for function in functions}),
        "compiled_now": compiled.compiled_now, "from_record": compiled.from_record, "seconds": total,
        "compile_seconds": done - traced, "compile_cpu_seconds": done_cpu - compile_cpu,
        "first_lowered_cpu_seconds": lowered_cpu,
        "stages": {"trace": traced - wall, **compiled.stage_seconds},
        "cpu_seconds": done_cpu - cpu,
        "compiler_cpu_seconds": (children.ru_utime + children.ru_stime) - (usage.ru_utime + usage.ru_stime),
        "kernel_set": compiled.kernel_set(),
    }
    if fusion == "priced":
        from weft.decide.race import RaceInputs

        report = compiled.decide_report
        row["decide"] = {"recorded": report.recorded, "priced": report.priced, "raced": report.raced,
                         "race_skipped": report.race_skipped, "written": report.written,
                         "price_calls": report.price_calls, "from_compile_record": report.from_compile_record,
                         "undecided": len(report.undecided)}
        row["output_digest"] = compiled.output_digest(*RaceInputs(seed=1).for_plan(plan)) if digest else None
    return row


def runs_cheaply(workload: str, depth: int) -> bool:
    """Whether one run of the plan takes seconds, not minutes (the output digest runs it): the
    32-block SAM3 encoder (72 x 72 tokens, width 1024) takes minutes per run on two cores."""
    return not (workload == "sam3-encoder" and depth > 4)


def measure(workload: str, depth: int, cache_dir: str, fusion: str = "greedy", digest: bool = True,
            root: Path = ROOT) -> dict:
    """One child process (``--child``) of the checkout at ``root`` (``--against``: another one)."""
    environment = {**os.environ, "WEFT_CACHE_DIR": cache_dir, "PYTHONPATH": str(root)}
    command = [sys.executable, str(root / "benchmarks" / "compile_time.py"), "--child", workload, str(depth),
               "--fusion", fusion, *(() if digest else ("--no-digest",))]
    result = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def calibrated_profile(folder: Path, profile: bool = True) -> float:
    """Prepare ``folder/machine`` (copied into every fresh cache: a one-time cost per machine,
    not a compile's): the precompiled headers (``weft.codegen.pch``) and, for a priced run,
    the machine profile; returns its seconds."""
    environment = {**os.environ, "WEFT_CACHE_DIR": str(folder), "PYTHONPATH": str(ROOT)}
    code = "from weft.codegen.driver import prepare_headers; from weft.config import config_from_env; " \
           "c = config_from_env(); prepare_headers(c.cc, c.cache_dir)"
    if profile:
        code += "; from weft.cost.machine import machine_profile; machine_profile()"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=environment, timeout=900)
    return time.perf_counter() - start


def fresh_cache(profile_folder: Path | None) -> tempfile.TemporaryDirectory:
    folder = tempfile.TemporaryDirectory(prefix="weft-compile-time-")
    if profile_folder is not None:
        shutil.copytree(profile_folder / "machine", Path(folder.name) / "machine")
    return folder


def wanted_depths(workload: str, depths_wanted: str, quick: bool = False) -> tuple[int, ...]:
    """The depths ``--depths`` names for ``workload``: ``all``, ``full`` (its deepest) or a
    comma-separated list of numbers and ``full`` (``4,full``); a workload without a depth
    parameter has its one depth whatever is asked."""
    depths = DEPTHS[workload][:2] if quick else DEPTHS[workload]
    if depths_wanted == "all" or not DEPTH_PARAM[workload]:
        return depths
    chosen = []
    for word in depths_wanted.split(","):
        word = word.strip()
        if word == "full":
            chosen.append(DEPTHS[workload][-1])
        elif word.isdigit() and int(word) > 0:
            chosen.append(int(word))
        else:
            raise SystemExit(f"--depths {depths_wanted!r}: {word!r} is neither a positive number nor 'full'"
                             " (give all, full, or a list such as 4,16,full)")
    return tuple(dict.fromkeys(chosen))


def run(workloads, repeats: int, quick: bool, fusion: str = "greedy", depths_wanted: str = "all",
        digest: str = "auto") -> list[dict]:
    rows = []
    profile_folder = Path(tempfile.mkdtemp(prefix="weft-compile-time-machine-"))
    what = "precompiled headers and machine profile" if fusion == "priced" else "precompiled headers"
    print(f"{what} prepared in {calibrated_profile(profile_folder, fusion == 'priced'):.1f} s (once; copied into"
          " each fresh cache)", flush=True)
    for workload in workloads:
        for depth in wanted_depths(workload, depths_wanted, quick):
            for repeat in range(repeats):
                outputs = digest == "always" or (digest == "auto" and runs_cheaply(workload, depth))
                with fresh_cache(profile_folder) as cache_dir:
                    cold = measure(workload, depth, cache_dir, fusion, outputs)
                    warm = measure(workload, depth, cache_dir, fusion, outputs)
                    shutil.rmtree(Path(cache_dir) / "records", ignore_errors=True)
                    engine = measure(workload, depth, cache_dir, fusion, outputs and fusion == "priced")
                if fusion != "priced":
                    assert cold["compiled_now"] and not cold["from_record"], "cold must compose, lower and compile"
                    assert warm["from_record"] and not warm["compiled_now"], "warm must reuse the record and object"
                    assert not engine["from_record"] and not engine["compiled_now"], "engine: no record, cached object"
                row = {"repeat": repeat, "cold": cold, "warm": warm, "engine": engine}
                if fusion == "priced":
                    row["priced"] = priced_checks(cold, warm, engine)
                rows.append(row)
                print(_row_text(rows[-1]), flush=True)
    if profile_folder is not None:
        shutil.rmtree(profile_folder, ignore_errors=True)
    return rows


def run_against(workloads, repeats: int, fusion: str, against: Path) -> dict:
    """Warm compiles of this checkout ("this") beside another ("base", ``against``) in one run,
    per workload at 4 layers and at full depth, each in a fresh process. Every (arm, depth)
    cache is filled first (a cold compile, then compiles until one reuses its record); then
    ``repeats`` rounds, the arms in ABBA / BAAB order and at each arm's turn both depths back
    to back (their order alternating), so each growth full / 4 layers is a *paired* ratio of
    two compiles made moments apart: load drift between depths cancels. Reports per arm and
    depth the median CPU seconds of ``weft.compile``, the spread (the gap between the
    medians of an arm's two positions) and the growth: the median of the paired ratios."""
    arms = {"base": Path(against).resolve(), "this": ROOT}
    profile_folder = Path(tempfile.mkdtemp(prefix="weft-compile-time-machine-"))
    calibrated_profile(profile_folder, fusion == "priced")
    cells = []
    for workload in workloads:
        depths = (4, DEPTHS[workload][-1])
        caches = {(arm, depth): fresh_cache(profile_folder) for arm in arms for depth in depths}
        fills, rounds = {}, []
        try:
            for (arm, depth), cache in caches.items():  # a cold compile, then until one reuses the record:
                for fills[f"{arm} {depth}"] in range(1, 4):  # a priced cold compile that left a region
                    if measure(workload, depth, cache.name, fusion, False, arms[arm])["from_record"]:
                        break  # undecided (its budget, on a loaded machine) writes none; the next one does
            for number in range(repeats):
                order = ("base", "this", "this", "base") if number % 2 == 0 else ("this", "base", "base", "this")
                for position, arm in enumerate(order):
                    for depth in depths if (number + position) % 2 == 0 else depths[::-1]:
                        warm = measure(workload, depth, caches[(arm, depth)].name, fusion, False, arms[arm])
                        rounds.append({"round": number, "position": position, "arm": arm, "depth": depth,
                                       "compile_cpu_seconds": warm["compile_cpu_seconds"],
                                       "compile_seconds": warm["compile_seconds"], "from_record": warm["from_record"],
                                       "first_lowered_cpu_seconds": warm.get("first_lowered_cpu_seconds")})
        finally:
            for cache in caches.values():
                cache.cleanup()
        cell = {"workload": workload, "depths": depths, "filling_compiles": fills, "rounds": rounds}
        for arm in arms:
            mine = [r for r in rounds if r["arm"] == arm]
            assert all(r["from_record"] for r in mine), f"{arm}: a warm compile did not reuse its record"
            cpu = {(r["round"], r["position"], r["depth"]): r["compile_cpu_seconds"] for r in mine}
            paired = [cpu[(n, p, depths[1])] / cpu[(n, p, depths[0])] for n, p, d in cpu if d == depths[0]]
            cell[arm] = {"growth_median_paired": _median(paired), "growth_min": min(paired), "growth_max": max(paired)}
            for depth in depths:
                values = [r["compile_cpu_seconds"] for r in mine if r["depth"] == depth]
                # ABBA: an arm sits at the ends in one round and in the middle in the next
                ends = [r["compile_cpu_seconds"] for r in mine if r["depth"] == depth and r["position"] in (0, 3)]
                middle = [r["compile_cpu_seconds"] for r in mine if r["depth"] == depth and r["position"] in (1, 2)]
                cell[arm][str(depth)] = {
                    "median_cpu_s": _median(values), "min_cpu_s": min(values), "max_cpu_s": max(values),
                    "spread": abs(_median(ends) - _median(middle)) / min(_median(ends), _median(middle))
                    if ends and middle else None}  # one round: each arm at one position only
        cells.append(cell)
        for depth in depths:
            print(f"{workload:18} {depth:>3}  warm weft.compile CPU median: base"
                  f" {1e3 * cell['base'][str(depth)]['median_cpu_s']:6.1f} ms, this"
                  f" {1e3 * cell['this'][str(depth)]['median_cpu_s']:6.1f} ms (spread"
                  f" {_percent(cell['base'][str(depth)]['spread'])} / {_percent(cell['this'][str(depth)]['spread'])},"
                  f" {repeats * 2} compiles each)", flush=True)
        print(f"{workload}: warm growth {depths[1]} / 4 layers (median of {repeats * 2} paired ratios): base"
              f" {cell['base']['growth_median_paired']:.2f}x ({cell['base']['growth_min']:.2f}-"
              f"{cell['base']['growth_max']:.2f}), this {cell['this']['growth_median_paired']:.2f}x"
              f" ({cell['this']['growth_min']:.2f}-{cell['this']['growth_max']:.2f})", flush=True)
    if profile_folder is not None:
        shutil.rmtree(profile_folder, ignore_errors=True)
    return {"arms": {arm: str(root) for arm, root in arms.items()}, "cells": cells,
            "warm_growth": {cell["workload"]: {arm: cell[arm]["growth_median_paired"] for arm in arms}
                            for cell in cells}}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def priced_checks(cold: dict, warm: dict, engine: dict | None = None) -> dict:
    """Issue 12's must-show for one row: the warm compile prices and races nothing, runs the
    same kernel set, gives the same output digest, in under 10% of the cold compile's time.
    ``engine`` (a third process: the compile record deleted, every verdict read back from the
    decision record) must price nothing either and agree with both."""
    ratio = warm["compile_seconds"] / cold["compile_seconds"]
    checks = {
        "cold_prices": cold["decide"]["price_calls"], "cold_races": cold["decide"]["raced"],
        "cold_signatures_priced": cold["decide"]["priced"], "cold_left_undecided": cold["decide"]["undecided"],
        "warm_prices": warm["decide"]["price_calls"], "warm_races": warm["decide"]["raced"],
        "warm_from_compile_record": warm["decide"]["from_compile_record"],
        "same_kernel_set": cold["kernel_set"] == warm["kernel_set"],
        "same_output_digest": None if cold["output_digest"] is None else cold["output_digest"] == warm["output_digest"],
        "warm_over_cold": ratio,
    }
    if engine is not None:
        checks["engine_prices"] = engine["decide"]["price_calls"]
        checks["engine_races"] = engine["decide"]["raced"]
        checks["engine_same_kernel_set"] = engine["kernel_set"] == cold["kernel_set"]
        checks["engine_same_output_digest"] = (None if engine.get("output_digest") is None
                                               else engine["output_digest"] == cold["output_digest"])
    checks["pass"] = (checks["warm_prices"] == 0 and checks["warm_races"] == 0 and checks["same_kernel_set"]
                      and checks["same_output_digest"] is not False and ratio < 0.10
                      # the engine decides again: it prices what the cold budget left undecided
                      and (bool(checks["cold_left_undecided"]) or (checks.get("engine_same_kernel_set") is not False
                           and checks.get("engine_same_output_digest") is not False)))
    return checks


def _shares(measured: dict) -> str:
    total = measured["seconds"]
    return " ".join(f"{stage} {100 * measured['stages'].get(stage, 0.0) / total:3.0f}%" for stage in STAGES)


def _row_text(row: dict) -> str:
    cold, warm, engine = row["cold"], row["warm"], row["engine"]
    priced = ""
    if "priced" in row:
        c = row["priced"]
        priced = (f"\n{'':24}priced: cold {c['cold_signatures_priced']} verdicts priced ({c['cold_prices']} prices),"
                  f" {c['cold_races']} races{', some left undecided' if c['cold_left_undecided'] else ''};"
                  f" warm {c['warm_prices']} prices, {c['warm_races']} races"
                  f" (compile record {'reused' if c['warm_from_compile_record'] else 'not reused'});"
                  + (f" engine (third process, decision record only) {c['engine_prices']} prices,"
                     f" {c['engine_races']} races, same kernel set {c['engine_same_kernel_set']}, same digest"
                     f" {c['engine_same_output_digest']};" if "engine_prices" in c else "")
                  + f" same kernel set {c['same_kernel_set']}, same output digest"
                  f" {'not run (--digest always runs it)' if c['same_output_digest'] is None else c['same_output_digest']};"
                  f" warm/cold {c['warm_over_cold']:.1%} -> {'PASS' if c['pass'] else 'FAIL'}")
    return (f"{cold['workload']:18} {cold['depth']:>3} {cold['members']:>5} {cold['calls']:>5} "
            f"{cold['distinct_functions']:>4}  compile only: cold {cold['compile_seconds']:5.2f} s, warm"
            f" {warm['compile_seconds']:5.2f} s, engine {engine['compile_seconds']:5.2f} s;  with the trace:"
            f"  cold {cold['seconds']:6.2f} s (cpu {cold['cpu_seconds']:5.2f}"
            f" + cc {cold['compiler_cpu_seconds']:5.2f})  warm {warm['seconds']:5.2f} s (cpu {warm['cpu_seconds']:5.2f})"
            f"  engine {engine['seconds']:5.2f} s (cpu {engine['cpu_seconds']:5.2f})\n"
            f"{'':24}cold: {_shares(cold)}\n{'':24}warm: {_shares(warm)}\n{'':24}engine: {_shares(engine)}"
            + priced)


def _cpu(measured: dict) -> float:
    return measured["cpu_seconds"] + measured["compiler_cpu_seconds"]


def _compile_only(measured: dict) -> float:
    return measured["compile_seconds"]


def _compile_only_cpu(measured: dict) -> float:
    return measured["compile_cpu_seconds"] + measured["compiler_cpu_seconds"]


def growth(rows: list[dict], value=lambda measured: measured["seconds"]) -> dict:
    """Full depth over 4 layers of ``value`` (wall seconds by default), medians over repeats."""
    result = {}
    for workload in dict.fromkeys(row["cold"]["workload"] for row in rows):
        times: dict[tuple[str, int], list[float]] = {}
        for kind in KINDS:
            for row in rows:
                if row["cold"]["workload"] == workload:
                    times.setdefault((kind, row["cold"]["depth"]), []).append(value(row[kind]))
        medians = {key: sorted(values)[len(values) // 2] for key, values in times.items()}
        depths = sorted({depth for _, depth in medians})
        if 4 in depths and depths[-1] > 4:
            result[workload] = {kind: medians[(kind, depths[-1])] / medians[(kind, 4)] for kind in KINDS}
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default=",".join(DEPTHS), help="comma-separated (default: all three)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="the first two depths only")
    parser.add_argument("--fusion", choices=("greedy", "priced"), default="greedy")
    parser.add_argument("--depths", default="all",
                        help="all, full (the deepest only) or a comma-separated list (e.g. 4: smaller under load)")
    parser.add_argument("--digest", choices=("auto", "always", "never"), default="auto",
                        help="priced: run the plan for its output digest (auto: not the 32-block SAM3, minutes per run)")
    parser.add_argument("--no-digest", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--against", type=Path, default=None, metavar="CHECKOUT",
                        help="warm compiles only, beside another checkout of Weft (the base), ABBA, --repeats rounds")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "DEPTH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.fusion, not args.no_digest)))
        return 0
    workloads = [name.strip() for name in args.workloads.split(",") if name.strip()]
    unknown = [name for name in workloads if name not in DEPTHS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {', '.join(DEPTHS)}")
    started = time.time()
    if args.against is not None:
        result = run_against(workloads, args.repeats, args.fusion, args.against)
        return _write(args, started, {"settings": {"contract": "inference", "fusion": args.fusion,
                                                   "repeats": args.repeats, "against": str(args.against)},
                                      **result}, "-against")
    print(f"{'workload':18} {'n':>3} {'memb':>5} {'calls':>5} {'fns':>4}  seconds (wall; cpu of this process +"
          " of the C compiler) and the share of each stage")
    rows = run(workloads, args.repeats, args.quick, args.fusion, args.depths, args.digest)
    grown = {"wall": growth(rows), "cpu": growth(rows, _cpu), "compile_wall": growth(rows, _compile_only),
             "compile_cpu": growth(rows, _compile_only_cpu)}
    for workload in grown["wall"]:
        print(f"{workload}: full depth / 4 layers (cold, warm, engine):"
              + "".join(f"  {label} " + ", ".join(f"{grown[key][workload][kind]:.2f}x" for kind in KINDS)
                        for label, key in (("trace+compile wall", "wall"), ("cpu", "cpu"),
                                           ("weft.compile wall", "compile_wall"), ("cpu", "compile_cpu"))))
    return _write(args, started, {
        "settings": {"contract": "inference", "fusion": args.fusion, "repeats": args.repeats, "quick": args.quick,
                     "depths_wanted": args.depths, "depths": {w: DEPTHS[w] for w in workloads}},
        "rows": rows, "growth_full_over_4": grown,
    }, "-quick" if args.quick else "")


def _write(args, started: float, content: dict, tag: str) -> int:
    """Write the result JSON (with the command and provenance) to ``--out`` or results/."""
    sys.path.insert(0, str(ROOT))
    from weft.bench.result import weft_commit

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    tag = ("-priced" if args.fusion == "priced" else "") + tag
    out = args.out or HERE / "results" / f"compile-time-{stamp}{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "schema": "weft-compile-time/1", "command": " ".join([Path(sys.executable).name, *sys.argv]),
        **content,
        "provenance": {**weft_commit(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
                       "load_average_at_end": os.getloadavg()},
    }, indent=1))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
