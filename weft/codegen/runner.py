"""The whole C file: prelude, one function per lowered group, and the runner.

The runner executes the plan in one call from Python (the CPU analogue of
capturing a graph)::

    int wf_run(void *const *wf_in, void *const *wf_out, char *wf_arena, int wf_threads);
    int wf_run_profile(..., double *wf_seconds);   /* same calls, timed per function */

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
    lines = []
    outputs = list(dict.fromkeys(plan.outputs))
    for name, view in views.items():
        ctype = STORAGE_TYPE[view.dtype]
        if name in plan.inputs:
            source = f"wf_in[{plan.inputs.index(name)}]"
        elif name in outputs:
            source = f"wf_out[{outputs.index(name)}]"
        else:
            source = f"wf_arena + {arena.offset(name)}"
        lines.append(f"    {ctype} *{view.pointer} = ({ctype} *)({source});")
    return lines


def _runner(name: str, plan: Plan, lowered: LoweredPlan, arena: ArenaPlan, profile: bool) -> str:
    extra = ", double *wf_seconds" if profile else ""
    lines = [
        f"int {name}(void *const *wf_in, void *const *wf_out, char *wf_arena, int wf_threads{extra}) {{",
        "#ifdef _OPENMP",
        "    if (wf_threads > 0) omp_set_num_threads(wf_threads);",
        "#endif",
        "    (void)wf_in; (void)wf_out; (void)wf_arena;",
    ]
    lines += _pointer_setup(plan, lowered, arena)
    for position, function in enumerate(lowered.functions):
        args = ", ".join(view.pointer for view in function.params)
        if profile:
            lines.append("    { double wf_t0 = wfc_now();")
            lines.append(f"      if ({function.name}({args})) return {position + 1};")
            lines.append(f"      wf_seconds[{position}] += wfc_now() - wf_t0; }}")
        else:
            lines.append(f"    if ({function.name}({args})) return {position + 1};")
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def render_source(plan: Plan, lowered: LoweredPlan, arena: ArenaPlan) -> str:
    """The complete C translation unit for a lowered plan: each distinct function once
    (``weft.lower.reuse``), called by the runner once per occurrence with its own buffers."""
    distinct = distinct_functions(lowered.functions)
    parts = [f"/* Weft plan {plan.name}: {len(distinct)} functions, {len(lowered.functions)} calls,"
             f" contract {lowered.contract} */", prelude(lowered.lanes), _GLOBALS]
    parts += [render_function(function) for function in distinct]
    parts.append(_runner("wf_run", plan, lowered, arena, profile=False))
    parts.append(_runner("wf_run_profile", plan, lowered, arena, profile=True))
    return "\n".join(parts)
