"""One lowered function (``weft.lower.nest.LoweredFunction``) as one C function: its
tile loop, tile-local scratch, and each nest by its writer (member nests, library
calls, the packed contraction, the one pass)."""

from __future__ import annotations

from weft.codegen.body import STORAGE_TYPE, Counter, c_parameters
from weft.codegen.contraction import render_contraction
from weft.codegen.library import render_library
from weft.codegen.online import OnlinePassWriter
from weft.codegen.online_tile import write_pass_packing, write_pass_release
from weft.codegen.render import NestWriter, render_gemm, write_stage_buffers
from weft.codegen.units import HIDDEN
from weft.lower.contraction import ContractionNest
from weft.lower.library import LibraryCall
from weft.lower.nest import GemmCall, LoweredFunction, MemberNest
from weft.lower.online import OnlinePass


def function_signature(function: LoweredFunction) -> str:
    """The C function's declarator, for its prototype and definition: not static (the runner
    calling it may sit in another translation unit) but hidden (``weft.codegen.units.HIDDEN``)."""
    written = set(function.members)
    params = c_parameters(function, lambda view: view.buffer in written)
    return f"{HIDDEN} int {function.name}({', '.join(params) or 'void'})"



def render_function(function: LoweredFunction) -> str:
    """One C function; returns nonzero if a gather index was out of range."""
    lines = [f"{function_signature(function)} {{", "    int wf_bad_gather = 0;"]
    counter = Counter()
    indent = 1
    # a one pass's K (and a strided V) packed once per call, shared by every tile (weft.lower.online_scores)
    packed = [nest for nest in function.nests if isinstance(nest, OnlinePass) and nest.scores is not None]
    for nest in packed:
        parallel = function.tile_loop is not None and function.tile_loop.parallel
        write_pass_packing(nest, lines, indent, counter, parallel)
    # a serial fold-laned nest inside the tile loop stages its x once per thread, not per tile
    # (a tile of one output row would copy as many floats as it streams)
    stages = {}
    if function.tile_loop is not None:
        for nest in function.nests:
            if isinstance(nest, MemberNest) and nest.staged and not nest.parallel:
                stages[id(nest)] = {load: counter.fresh("wf_stage") for load in nest.staged}
    if function.tile_loop is not None:
        loop = function.tile_loop
        if stages:
            lines.append("    #pragma omp parallel" if loop.parallel else "    /* staged copies */")
            lines.append("    {")
            for nest in function.nests:
                if id(nest) in stages:
                    write_stage_buffers(lines, 1, nest, stages[id(nest)].values())
            if loop.parallel:
                lines.append("    #pragma omp for schedule(static)")
        elif loop.parallel:
            lines.append("    #pragma omp parallel for schedule(static)")
        lines.append(f"    for (long {loop.variable} = 0; {loop.variable} < {loop.extent}; "
                     f"{loop.variable} += {loop.size}) {{")
        indent = 2
    for scratch in function.scratch:
        lines.append(f"{'    ' * indent}{STORAGE_TYPE[scratch.dtype]} {scratch.pointer}[{scratch.elements}]"
                     " __attribute__((aligned(64)));")
    for nest in function.nests:
        if isinstance(nest, GemmCall):
            render_gemm(nest, lines, indent)
        elif isinstance(nest, MemberNest):
            NestWriter(nest, lines, counter, stages.get(id(nest))).write(indent)
        elif isinstance(nest, OnlinePass):
            OnlinePassWriter(nest).write(lines, indent, counter)
        elif isinstance(nest, ContractionNest):
            render_contraction(nest, lines, indent, counter)
        elif isinstance(nest, LibraryCall):
            render_library(nest, lines, indent, counter)
        else:
            raise TypeError(f"function {function.name}: no C writer for {type(nest).__name__}")
    if function.tile_loop is not None:
        lines.append("    }")
    if stages:
        lines += [f"    free({pointer});" for by_load in stages.values() for pointer in by_load.values()]
        lines.append("    }")
    for nest in packed:
        write_pass_release(nest, lines, 1)
    lines += ["    return wf_bad_gather;", "}", ""]
    return "\n".join(lines)
