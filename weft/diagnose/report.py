"""The diagnosis as a report a person new to the project can read top to bottom."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from weft.bench.report import format_seconds
from weft.cost.chains import FUSION_GAIN
from weft.diagnose.procedure import TOP, Diagnosis


def format_bytes(count: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count:.0f} B"


def print_diagnosis(console: Console, result: Diagnosis) -> None:
    params = ", ".join(f"{k}={v}" for k, v in result.params.items())
    console.rule(f"weft diagnose {result.workload} ({params})")
    console.print(
        f"Plan compiled as arm [bold]{result.arm}[/bold] on {result.threads} thread(s). Machine: copy bandwidth"
        f" {result.bandwidth / 1e9:.1f} GB/s, peak (float32 GEMM) {result.peak_flops / 1e9:.0f} GFLOP/s, so the"
        f" ridge point is {result.ridge_point:.1f} FLOP/byte: work doing fewer FLOPs per byte than that is limited"
        " by memory traffic (memory-bound), more by arithmetic (compute-bound)."
    )
    whole = result.plan_work
    console.print(
        f"The plan does {whole.flops:.3g} FLOP and must at least read its inputs and write its outputs"
        f" ({format_bytes(whole.bytes)}); run unfused, its members move {format_bytes(result.unfused.bytes)}."
    )

    console.print("\n[bold]1. Whole step[/bold]")
    if result.whole_step_s is None:
        console.print(f"  {result.timing_note}")
    else:
        console.print(f"  {format_seconds(result.whole_step_s)} per step called from Python"
                      f" ({format_seconds(result.c_call_s)} for the C call alone, outputs preallocated).")

    console.print(f"\n[bold]2. Where the time goes (top {TOP}, slowest first)[/bold]")
    if result.functions:
        table = Table(show_edge=False)
        for column in ("function", "members", "time", "share", "FLOP", "bytes", "FLOP/B", "bound", "floor", "of floor"):
            table.add_column(column)
        for row in result.functions[:TOP]:
            table.add_row(row.name, ", ".join(row.members), format_seconds(row.seconds), f"{row.share:.0%}",
                          f"{row.work.flops:.3g}", format_bytes(row.work.bytes), f"{row.work.intensity:.2f}",
                          row.bound, format_seconds(row.floor_s), f"{row.fraction_of_floor:.0%}")
        console.print(table)
        if len(result.functions) > TOP:
            console.print(f"  ({len(result.functions) - TOP} more functions take the remaining"
                          f" {sum(r.share for r in result.functions[TOP:]):.0%})")
        console.print("  'floor' is the least time the function could take here: its bytes over the bandwidth or its"
                      " FLOPs over the peak, whichever is larger; 'of floor' is how close it gets.")
    else:
        console.print(f"  {result.timing_note or 'no functions were profiled'}")

    console.print("\n[bold]3. Fusion opportunities[/bold] (a chain, an intermediate at least as large as its"
                  " inputs and outputs, low intensity: all three must hold)")
    if not result.chains:
        console.print("  none: no chain of members passes a large private intermediate.")
    bandwidth, peak = result.bandwidth, result.peak_flops
    for chain in result.chains[:5]:
        bound = chain.memory_bound_members(bandwidth, peak)
        marks = [
            ("chain of members", chain.is_chain, f"{len(chain.members)} members"),
            ("large intermediate", chain.large_intermediate,
             f"{chain.intermediate} is {format_bytes(chain.intermediate_bytes)} vs largest input/output"
             f" {format_bytes(chain.boundary_bytes)}"),
            ("low intensity", chain.low_intensity(bandwidth, peak),
             f"members below the ridge: {', '.join(bound) or 'none'}; per-member floors add up to"
             f" {format_seconds(chain.unfused_floor(bandwidth, peak))}, as one region"
             f" {format_seconds(chain.fused_floor(bandwidth, peak))}: fusing could save"
             f" {chain.fusion_gain(bandwidth, peak):.0%} (needs {FUSION_GAIN:.0%})"),
        ]
        verdict = "[green]FLAGGED[/green]" if chain.holds(bandwidth, peak) else "not flagged"
        console.print(f"  {' -> '.join(chain.members)}: {verdict}")
        for name, ok, detail in marks:
            console.print(f"    {'yes' if ok else 'no '}  {name}: {detail}")
        if chain.holds(bandwidth, peak):
            console.print(f"    fusing it avoids {format_bytes(chain.avoidable_bytes)} of memory traffic"
                          f" (~{format_seconds(chain.avoidable_bytes / bandwidth)} at copy bandwidth).")
    if len(result.chains) > 5:
        console.print(f"  ({len(result.chains) - 5} more candidate chains, none larger)")

    console.print("\n[bold]4. Memory at two lengths[/bold]")
    memory = result.memory
    if memory is None:
        console.print(f"  {result.memory_note}")
    else:
        console.print(f"  {memory.param} {memory.sizes[0]} -> {memory.sizes[1]}: {format_bytes(memory.bytes[0])} ->"
                      f" {format_bytes(memory.bytes[1])} (x{memory.ratio:.2f}, growth exponent"
                      f" {memory.exponent:.2f}; measured from the {memory.source}).")
        if memory.quadratic:
            console.print(f"  [red]Quadratic:[/red] memory grows with the square of {memory.param}. Some member"
                          f" holds a {memory.param} x {memory.param} tensor, so a fast path that never"
                          " materialises it (a fused region) is not running.")
        else:
            console.print(f"  Linear (or slower) in {memory.param}: no member holds a tensor that grows with its square.")
            kept_private = ", ".join(g.producer for g in memory.quadratic_in_ir)
            if kept_private:
                console.print(f"  The plan names {kept_private} as {memory.param} x {memory.param} buffers, but the"
                              " compiled plan never materialises them (fused: tile-local scratch or one pass).")
        responsible = memory.responsible
        if responsible:
            console.print("  Members responsible (output buffers growing quadratically or faster):")
            for growth in responsible:
                console.print(f"    {growth.producer}: {growth.shape_small} -> {growth.shape_large},"
                              f" {format_bytes(growth.bytes_small)} -> {format_bytes(growth.bytes_large)}")

    console.print("\n[bold]5. Time outside members[/bold] (faster members cannot remove it)")
    if result.python_s is None:
        console.print("  not measured (needs the compiled plan).")
        return
    whole = result.whole_step_s
    console.print(f"  Python around the C call: {format_seconds(result.whole_step_s)} -"
                  f" {format_seconds(result.c_call_s)} = {format_seconds(max(result.python_s, 0.0))}"
                  f" ({max(result.python_s, 0.0) / whole:.1%} of the step): argument checks, fresh output arrays, ctypes.")
    if result.runner_s is None:
        return
    if result.runner_s >= 0:
        console.print(f"  Inside the C call, between functions: {format_seconds(result.c_call_s)} -"
                      f" {format_seconds(result.members_s)} = {format_seconds(result.runner_s)}"
                      f" ({result.runner_s / whole:.1%}): the generated runner.")
    else:
        console.print(f"  Inside the C call, between functions: too small to see: the functions' profiled times"
                      f" ({format_seconds(result.members_s)}) add up to more than the C call"
                      f" ({format_seconds(result.c_call_s)}); the profile times each function on its own, with"
                      " timers around it, so its sum carries that much noise.")
