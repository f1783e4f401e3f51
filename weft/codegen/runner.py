"""The whole C file: prelude, one function per lowered group, and the runner.

The runner executes the plan in one call from Python (the CPU analogue of
capturing a graph)::

    int wf_run(void *const *wf_in, void *const *wf_out, char *wf_arena, int wf_threads);
    int wf_run_profile(..., double *wf_seconds);   /* same calls, timed per call */

Both run ``wf_steps``, which holds one call per occurrence of a lowered function
(a function shared by identical regions is called once per occurrence, each time
with that occurrence's buffers).

Both return 0, or 1 + the index of the function whose gather index was out of
range. ``wf_set_sgemm`` receives SciPy's BLAS sgemm pointer for library bodies.
"""

from __future__ import annotations

from weft.codegen.body import STORAGE_TYPE
from weft.codegen.prelude import prelude
from weft.codegen.render import render_function
from weft.ir import Plan
from weft.lower.nest import LoweredPlan
from weft.lower.reuse import distinct_functions
from weft.runtime.memory import ArenaPlan

_GLOBALS = """\
typedef void (*wfc_sgemm_fn)(char *, char *, int *, int *, int *, float *, const float *, int *,
                             const float *, int *, float *, float *, int *);
static void *wf_sgemm = 0;
void wf_set_sgemm(void *fn) { wf_sgemm = fn; }
static double wfc_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
"""


def _pointer_setup(plan: Plan, lowered: LoweredPlan, arena: ArenaPlan) -> list[str]:
    views = {}
    for function in lowered.functions:
        for view in function.params:
            views.setdefault(view.buffer, view)
    inputs = {name: position for position, name in reversed(list(enumerate(plan.inputs)))}
    outputs = {name: position for position, name in enumerate(dict.fromkeys(plan.outputs))}
    offsets = {placement.buffer: placement.offset for placement in arena.placements}
    lines = []
    for name, view in views.items():
        ctype = STORAGE_TYPE[view.dtype]
        if name in inputs:
            source = f"wf_in[{inputs[name]}]"
        elif name in outputs:
            source = f"wf_out[{outputs[name]}]"
        else:
            source = f"wf_arena + {offsets[name]}"
        lines.append(f"    {ctype} *{view.pointer} = ({ctype} *)({source});")
    return lines


def _runner(plan: Plan, lowered: LoweredPlan, arena: ArenaPlan) -> str:
    """``wf_steps`` (every call in order, timed when given ``wf_seconds``) and the two entry
    points over it: one call site per step keeps the C file (and its compile) small."""
    lines = [
        "static int wf_steps(void *const *wf_in, void *const *wf_out, char *wf_arena, int wf_threads,"
        " double *wf_seconds) {",
        "#ifdef _OPENMP",
        "    if (wf_threads > 0) omp_set_num_threads(wf_threads);",
        "#endif",
        "    (void)wf_in; (void)wf_out; (void)wf_arena;",
        "    double wf_t0 = 0.0;",
    ]
    lines += _pointer_setup(plan, lowered, arena)
    for position, function in enumerate(lowered.functions):
        args = ", ".join(view.pointer for view in function.params)
        lines.append("    if (wf_seconds) wf_t0 = wfc_now();")
        lines.append(f"    if ({function.name}({args})) return {position + 1};")
        lines.append(f"    if (wf_seconds) wf_seconds[{position}] += wfc_now() - wf_t0;")
    lines += [
        "    return 0;", "}", "",
        "int wf_run(void *const *wf_in, void *const *wf_out, char *wf_arena, int wf_threads) {",
        "    return wf_steps(wf_in, wf_out, wf_arena, wf_threads, 0);", "}", "",
        "int wf_run_profile(void *const *wf_in, void *const *wf_out, char *wf_arena, int wf_threads,"
        " double *wf_seconds) {",
        "    return wf_steps(wf_in, wf_out, wf_arena, wf_threads, wf_seconds);", "}", "",
    ]
    return "\n".join(lines)


def render_source(plan: Plan, lowered: LoweredPlan, arena: ArenaPlan) -> str:
    """The complete C translation unit for a lowered plan: each distinct function once
    (``weft.lower.reuse``), called by the runner once per occurrence with its own buffers."""
    distinct = distinct_functions(lowered.functions)
    parts = [f"/* Weft plan {plan.name}: {len(distinct)} functions, {len(lowered.functions)} calls,"
             f" contract {lowered.contract} */", prelude(lowered.lanes), _GLOBALS]
    parts += [render_function(function) for function in distinct]
    parts.append(_runner(plan, lowered, arena))
    return "\n".join(parts)
