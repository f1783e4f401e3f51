"""Outputs written over inputs (``weft.compile(..., in_place={output: input})``).

An optimizer step or a cache update reads a state and writes its next value; written
into fresh arrays it streams every state byte twice more than it must (a fresh output
line is read for ownership before it is written, or stored past the caches). Written
over the input, each line is read once and written back once.

Writing output ``O`` over input ``I`` is legal here when every read of ``I`` happens
before the element it reads is overwritten. This module proves a conservative form of
that on the lowered plan, or says why not:

- the member ``W`` that writes ``O`` is an elementwise map (no fold) that reads ``I``
  only at the element it writes (every ``Load`` of ``I`` indexes ``W``'s own axes, in
  order), and ``O`` and ``I`` have the same shape and dtype;
- every other member that reads ``I`` runs in a function before ``W``'s (none after,
  none in the same function: inside a fused function a later member would read a tile
  ``W`` already wrote);
- ``W`` is lowered as its own nest or inside the fused Adam body (both read an element
  before they store it); a member folded into another nest (a contraction's epilogue,
  which stores partial sums to its output between reduction blocks) is refused.

``in_place_lowering`` then marks, in each function that holds both pointers, their
parameter positions as ``aliased`` (rendered without ``restrict``), renames that
function so no call without the alias shares its C, and turns off the non-temporal
stores of an Adam body writing over its inputs (each line it writes was just read, so
a plain store writes it back from the cache; a streaming store would evict it first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from weft.errors import InputError
from weft.ir import AxisIndex, Plan
from weft.lower.library import LibraryCall
from weft.lower.nest import LoweredFunction, LoweredPlan, MemberNest

ELEMENTWISE_BODIES = ("fused adam",)  # library bodies that read each element before storing it


def check_in_place_names(plan: Plan, pairs: Mapping[str, str], bound: frozenset[str] = frozenset()) -> None:
    """Names, shapes and dtypes of ``pairs`` (output -> input): ``InputError`` naming the fix."""
    if not isinstance(pairs, Mapping):
        raise InputError(f"plan {plan.name}: in_place= takes a dict of output name -> input name, got "
                         f"{type(pairs).__name__}")
    buffers = plan.buffer_map()
    for output, source in pairs.items():
        if output not in plan.outputs:
            raise InputError(f"plan {plan.name}: in_place= names {output!r}, which is not an output; outputs: "
                             f"{', '.join(dict.fromkeys(plan.outputs))}")
        if source not in plan.inputs:
            raise InputError(f"plan {plan.name}: in_place= writes {output} over {source!r}, which is not an input;"
                             f" inputs: {', '.join(plan.inputs)}")
        if source in bound:
            raise InputError(f"plan {plan.name}: in_place= writes {output} over {source}, which params= binds"
                             " (a copy made at compile time); pass it per call instead")
        if source in plan.outputs:
            raise InputError(f"plan {plan.name}: in_place= writes {output} over {source}, which is also an output")
        out, into = buffers[output], buffers[source]
        if (out.shape, out.dtype) != (into.shape, into.dtype):
            raise InputError(f"plan {plan.name}: in_place= writes {output} ({out.dtype.value}{list(out.shape)}) "
                             f"over {source} ({into.dtype.value}{list(into.shape)}): shape and dtype must match")
    sources = list(pairs.values())
    for source in dict.fromkeys(sources):
        if sources.count(source) > 1:
            writers = ", ".join(output for output, into in pairs.items() if into == source)
            raise InputError(f"plan {plan.name}: in_place= writes {writers} over the same input {source}; "
                             "give each input at most one output")


def _function_of(lowered: LoweredPlan, member: str) -> int:
    return next(number for number, function in enumerate(lowered.functions) if member in function.members)


def _writer_nest_kind(function: LoweredFunction, member: str) -> str | None:
    """None when ``member`` is written by its own map nest or an elementwise library body;
    else what holds it (for the error)."""
    for nest in function.nests:
        if isinstance(nest, LibraryCall):
            if any(view.buffer == member for _, view in nest.views):
                return None if nest.body in ELEMENTWISE_BODIES else f"the library body {nest.body!r}"
        elif isinstance(nest, MemberNest) and nest.kernel.output == member:
            return None
    return "another member's nest (e.g. a contraction's epilogue, which stores partial sums first)"


def check_in_place(plan: Plan, lowered: LoweredPlan, pairs: Mapping[str, str]) -> None:
    """``InputError`` unless every pair is legal on this lowering (the module's rules)."""
    for output, source in pairs.items():
        writer = plan.kernel(output)
        where = f"plan {plan.name}: in_place= cannot write {output} over {source}"
        if writer.fold is not None:
            raise InputError(f"{where}: member {output} is a reduction (it stores partial results); only an "
                             "elementwise member can write over its input")
        own = tuple(AxisIndex(axis.name) for axis in writer.axes)
        if any(load.buffer == source and load.index != own for load in writer.loads):
            raise InputError(f"{where}: member {output} reads {source} at elements other than the one it writes")
        at = _function_of(lowered, output)
        for kernel in plan.kernels:
            if kernel.output == output or source not in kernel.reads:
                continue
            reader_at = _function_of(lowered, kernel.output)
            if reader_at >= at:
                when = "in the same fused function as" if reader_at == at else "after"
                raise InputError(f"{where}: member {kernel.output} reads {source} {when} {output} overwrites it;"
                                 " keep a separate output (or compile with fusion='off' if they were fused)")
        function = lowered.functions[at]
        # a reused function's nests are its first call's (weft.lower.reuse): the same position
        first = next(f for f in lowered.functions if f.name == function.name)
        held = _writer_nest_kind(first, first.members[function.members.index(output)])
        if held is not None:
            raise InputError(f"{where}: member {output} is lowered inside {held}; write it to its own output")


def in_place_lowering(plan: Plan, lowered: LoweredPlan, pairs: Mapping[str, str]) -> LoweredPlan:
    """``lowered`` with each function that receives both pointers of a pair marked (see the
    module docstring). Call ``check_in_place`` first."""
    if not pairs:
        return lowered
    joined = {buffer for pair in pairs.items() for buffer in pair}
    functions = []
    for function in lowered.functions:
        written = [output for output in pairs if output in function.members]
        pointers = {output for output in written} | {pairs[output] for output in written}
        positions = frozenset(n for n, view in enumerate(function.params) if view.buffer in pointers & joined)
        if len(positions) < 2:
            functions.append(function)
            continue
        nests = tuple(dataclasses.replace(nest, streaming=False)
                      if isinstance(nest, LibraryCall) and nest.streaming else nest for nest in function.nests)
        name = f"{function.name}_ip{'_'.join(str(n) for n in sorted(positions))}"
        functions.append(dataclasses.replace(function, name=name, nests=nests, aliased=positions))
    return dataclasses.replace(lowered, functions=tuple(functions))


__all__ = ["check_in_place", "check_in_place_names", "in_place_lowering"]
