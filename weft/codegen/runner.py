"""The whole C file: prelude, one function per lowered group, and the runner, marked where
the driver may cut it into translation units (``weft.codegen.units``).

The runner executes the plan in one call from Python (the CPU analogue of
capturing a graph)::

    int wf_run(void *const *wf_in, void *const *wf_out, char *wf_arena, int wf_threads);
    int wf_run_profile(..., double *wf_seconds);   /* same calls, timed per call */

Both run ``wf_steps``: a loop over a table of steps, each calling one lowered
function through a small ``wf_call_N`` with the pointers of its buffers (a function
shared by identical regions is called once per occurrence, each time with that
occurrence's buffers). Only the table grows with the depth of a plan.

Both return 0, or 1 + the index of the function whose gather index was out of
range. ``wf_set_sgemm`` receives SciPy's BLAS sgemm pointer for library bodies.
``wf_prepack(wf_in, wf_arena, wf_threads)``, called once when the plan is loaded, packs
the weights bound with ``params=`` into the arena (``weft.lower.contraction_prepack``):
each function with a packed view has a ``wf_pack_<name>`` twin, called per occurrence.
"""

from __future__ import annotations

import dataclasses
import re

from weft.codegen.contraction import pack_signature, render_pack_function
from weft.codegen.contraction_tiles import microkernels
from weft.codegen.function import function_signature, render_function
from weft.codegen.prelude import prelude
from weft.codegen.units import HIDDEN, UNIT_BREAK
from weft.ir import Plan
from weft.lower.contraction_prepack import has_packed
from weft.lower.nest import LoweredFunction, LoweredPlan
from weft.lower.reuse import distinct_functions
from weft.runtime.memory import ArenaPlan

# in the head every unit repeats (weft.codegen.units): the BLAS pointer is one object of the
# shared object (defined in one chunk, _SGEMM), read by any unit's library bodies
_GLOBALS = f"""\
typedef void (*wfc_sgemm_fn)(char *, char *, int *, int *, int *, float *, const float *, int *,
                             const float *, int *, float *, float *, int *);
extern {HIDDEN} void *wf_sgemm;
static double wfc_now(void) {{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}}
"""
_SGEMM = f"{HIDDEN} void *wf_sgemm = 0;\nvoid wf_set_sgemm(void *fn) {{ wf_sgemm = fn; }}"


def _buffer_table(plan: Plan, lowered: LoweredPlan, arena: ArenaPlan) -> tuple[dict[str, int], list[tuple[int, int]]]:
    """Every buffer a call passes -> its slot, and per slot (kind, where): 0 = ``wf_in[where]``,
    1 = ``wf_out[where]``, 2 = ``wf_arena + where``."""
    inputs = {name: position for position, name in reversed(list(enumerate(plan.inputs)))}
    outputs = {name: position for position, name in enumerate(dict.fromkeys(plan.outputs))}
    offsets = {placement.buffer: placement.offset for placement in arena.placements}
    slots: dict[str, int] = {}
    table: list[tuple[int, int]] = []
    for function in lowered.functions:
        for view in function.params:
            if view.buffer in slots:
                continue
            slots[view.buffer] = len(table)
            if view.buffer in inputs:
                table.append((0, inputs[view.buffer]))
            elif view.buffer in outputs:
                table.append((1, outputs[view.buffer]))
            else:
                table.append((2, offsets[view.buffer]))
    return slots, table


def _array(ctype: str, name: str, values: list[int]) -> str:
    rows = [", ".join(str(v) for v in values[start:start + 24]) for start in range(0, len(values), 24)]
    body = ",\n    ".join(rows) if rows else "0"
    return f"static const {ctype} {name}[{max(1, len(values))}] = {{\n    {body}\n}};"


def _runner(plan: Plan, lowered: LoweredPlan, arena: ArenaPlan) -> str:
    """The runner as data: a slot per buffer (where its pointer comes from), one small
    ``wf_call_N`` per distinct function (its arguments taken from slots), and the steps
    (which call, which slots). The C the compiler sees grows with distinct functions;
    a deeper plan only adds table entries."""
    slots, table = _buffer_table(plan, lowered, arena)
    callers: dict[str, int] = {}
    lines = ["typedef int (*wf_step_fn)(void *const *wf_p, const int *wf_a);"]
    for function in distinct_functions(lowered.functions):
        callers[function.name] = len(callers)
        args = ", ".join(f"wf_p[wf_a[{n}]]" for n in range(len(function.params)))
        lines.append(f"static int wf_call_{callers[function.name]}(void *const *wf_p, const int *wf_a) "
                     f"{{ (void)wf_p; (void)wf_a; return {function.name}({args}); }}")
    steps, starts, arguments = [], [], []
    for function in lowered.functions:
        steps.append(callers[function.name])
        starts.append(len(arguments))
        arguments += [slots[view.buffer] for view in function.params]
    lines.append(f"static const wf_step_fn wf_callers[{max(1, len(callers))}] = {{"
                 + ", ".join(f"wf_call_{n}" for n in range(len(callers))) + "};")
    lines.append(_array("int", "wf_step_caller", steps))
    lines.append(_array("int", "wf_step_args", starts))
    lines.append(_array("int", "wf_args", arguments))
    packers: dict[str, int] = {}
    pack_lines = []
    for function in distinct_functions(lowered.functions):
        if has_packed(function):
            packers[function.name] = len(packers)
            args = ", ".join(f"wf_p[wf_a[{n}]]" for n in range(len(function.params)))
            lines.append(f"static int wf_pack_call_{packers[function.name]}(void *const *wf_p, const int *wf_a) "
                         f"{{ return wf_pack_{function.name}({args}); }}")
    for step, function in enumerate(lowered.functions):
        if function.name in packers:
            pack_lines.append(f"    wf_pack_call_{packers[function.name]}(wf_p, wf_args + wf_step_args[{step}]);")
    lines.append(_array("signed char", "wf_slot_kind", [kind for kind, _ in table]))
    lines.append(_array("long", "wf_slot_where", [where for _, where in table]))
    lines += [
        "static int wf_steps(void *const *wf_in, void *const *wf_out, char *wf_arena, double *wf_seconds) {",
        *_slot_pointers(len(table), "wf_out[wf_w]"),
        f"    for (int wf_k = 0; wf_k < {len(steps)}; wf_k++) {{",
        "        double wf_t0 = wf_seconds ? wfc_now() : 0.0;",
        "        if (wf_callers[wf_step_caller[wf_k]](wf_p, wf_args + wf_step_args[wf_k])) return wf_k + 1;",
        "        if (wf_seconds) wf_seconds[wf_k] += wfc_now() - wf_t0;",
        "    }",
        "    return 0;", "}", "",
        "/* weights packed at bind (weft.lower.contraction_prepack): run once when the plan is loaded,",
        "   with the bound inputs (others may be null) */",
        "static int wf_prepack_steps(void *const *wf_in, char *wf_arena) {",
        *_slot_pointers(len(table), "(void *)0"),  # no outputs yet
        "    (void)wf_p;",
        *pack_lines,
        "    return 0;", "}", "",
        "int wf_prepack(void *const *wf_in, char *wf_arena, int wf_threads) {",
        *_with_threads("wf_prepack_steps(wf_in, wf_arena)"), "}", "",
        "int wf_run(void *const *wf_in, void *const *wf_out, char *wf_arena, int wf_threads) {",
        *_with_threads("wf_steps(wf_in, wf_out, wf_arena, 0)"), "}", "",
        "int wf_run_profile(void *const *wf_in, void *const *wf_out, char *wf_arena, int wf_threads,"
        " double *wf_seconds) {",
        *_with_threads("wf_steps(wf_in, wf_out, wf_arena, wf_seconds)"), "}", "",
    ]
    return "\n".join(lines)


def _with_threads(call: str) -> list[str]:
    """An entry point's body: ``call`` at ``wf_threads`` OpenMP threads, the caller's count
    restored after it (the OpenMP runtime is shared with the host process: PyTorch reads that
    count, and dynamo guards on it, so a call must leave it as it found it)."""
    return [
        "#ifdef _OPENMP",
        "    int wf_saved_threads = omp_get_max_threads();",
        "    int wf_change = wf_threads > 0 && wf_threads != wf_saved_threads;",
        "    if (wf_change) omp_set_num_threads(wf_threads);",
        "#endif",
        f"    int wf_status = {call};",
        "#ifdef _OPENMP",
        "    if (wf_change) omp_set_num_threads(wf_saved_threads);",
        "#endif",
        "    return wf_status;",
    ]


def _slot_pointers(slots: int, output: str) -> list[str]:
    """An entry point's first lines: ``wf_p``, the pointer of every argument slot (an input,
    an output: ``output``, or a place in the arena)."""
    return [
        f"    void *wf_p[{max(1, slots)}];",
        f"    for (long wf_s = 0; wf_s < {slots}; wf_s++) {{",
        "        long wf_w = wf_slot_where[wf_s];",
        f"        wf_p[wf_s] = wf_slot_kind[wf_s] == 0 ? wf_in[wf_w] : wf_slot_kind[wf_s] == 1 ? {output}"
        " : (void *)(wf_arena + wf_w);",
        "    }",
    ]


def render_source(plan: Plan, lowered: LoweredPlan, arena: ArenaPlan) -> str:
    """The complete C for a lowered plan: each distinct function once (``weft.lower.reuse``),
    called by the runner once per occurrence with its own buffers. One translation unit, marked
    where the driver may cut it in several (``weft.codegen.units``): a head (prelude, globals,
    every function's prototype), then one chunk per function and one for the runner."""
    distinct = distinct_functions(lowered.functions)
    title = (f"/* Weft plan {plan.name}: {len(distinct)} functions, {len(lowered.functions)} calls,"
             f" contract {lowered.contract} */")
    return _assemble(title, lowered.lanes, [(distinct, _runner(plan, lowered, arena))])


def _assemble(title: str, lanes: int, programs: list[tuple[list[LoweredFunction], str]]) -> str:
    """Head (title, prelude, globals, the prototypes of every program's functions), then a
    chunk per function and per runner (``programs``: each one's distinct functions and runner)."""
    head = [title, prelude(lanes), _GLOBALS]
    prototypes, chunks = [], [_SGEMM]
    for distinct, runner in programs:
        prototypes += [f"{function_signature(function)};" for function in distinct]
        prototypes += [f"{pack_signature(function)};" for function in distinct if has_packed(function)]
        chunks += [render_function(function) for function in distinct]
        chunks += [render_pack_function(function) for function in distinct if has_packed(function)]
        chunks.append(runner)
    head += microkernels(chunks, lanes)  # static: compiled in each unit that calls one, once
    return "\n".join(head + prototypes + [f"{UNIT_BREAK}\n{chunk}" for chunk in chunks])


_RUNNER_NAMES = re.compile(
    r"\bwf_(call_\d+|callers|step_caller|step_args|args|slot_kind|slot_where|steps|run|run_profile|step_fn|prepack|prepack_steps)\b")


def _renamed(lowered: LoweredPlan, prefix: str) -> LoweredPlan:
    """``lowered`` with every function's name prefixed (shared functions stay shared)."""
    functions = tuple(dataclasses.replace(function, name=f"{prefix}{function.name}") for function in lowered.functions)
    return dataclasses.replace(lowered, functions=functions)


def batch_prefix(number: int) -> str:
    """The symbol prefix of contender ``number`` in a batched source: its runner is
    ``{prefix}run`` / ``{prefix}run_profile`` (``weft.runtime.NativeRunner(entry_prefix=...)``)."""
    return f"wf_c{number}_"


def render_batch(contenders: list[tuple[Plan, LoweredPlan, ArenaPlan]]) -> str:
    """One C translation unit holding several lowered plans (a race's contenders), so one
    compiler run builds them all: the prelude once, then per contender its functions and
    runner under the names of ``batch_prefix(number)``. All must share lanes and contract."""
    lanes = {lowered.lanes for _, lowered, _ in contenders}
    contracts = {lowered.contract for _, lowered, _ in contenders}
    if len(lanes) != 1 or len(contracts) != 1:
        raise ValueError("a batched source holds plans of one vector width and one contract")
    programs = []
    for number, (plan, lowered, arena) in enumerate(contenders):
        prefix = batch_prefix(number)
        renamed = _renamed(lowered, prefix.removeprefix("wf_"))
        runner = _RUNNER_NAMES.sub(lambda found, prefix=prefix: f"{prefix}{found.group(1)}",
                                   _runner(plan, renamed, arena))
        programs.append((distinct_functions(renamed.functions), f"/* contender {number}: plan {plan.name} */\n{runner}"))
    title = f"/* Weft batch of {len(contenders)} plans (a race's contenders), contract {contracts.pop()} */"
    return _assemble(title, lanes.pop(), programs)
