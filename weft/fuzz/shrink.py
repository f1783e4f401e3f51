"""Shrink a failing program to a small one that fails the same way.

Greedy, to a fixed point: each pass tries smaller candidates in order and keeps the
first that still fails (``still_fails(candidate)``), then starts over::

    one output      keep a single output of several
    drop an op      its result replaced by one of its operands of the same shape and
                    dtype, or by a new input
    drop a keyword  mask=, causal=, weight=, bias=, keepdims=... back to the default
    shrink extents  every axis sharing a named extent at once: to 1, to half, by one
    simplify inputs ones, small integers, plain normal values

A candidate that no longer traces is skipped without running it. The predicate is
whatever the caller says "fails the same way" means (the CLI: the same outcome status,
and for a crash or refusal the same exception type and message head).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator

from weft.errors import WeftError
from weft.fuzz.generate import prune
from weft.fuzz.program import InputDef, Program, Ref, Refs, trace_program


def _value_types(program: Program) -> dict[str, tuple[tuple[str, ...], str]]:
    types = {item.name: (item.shape, item.dtype) for item in program.inputs}
    for op in program.ops:
        for name, shape, dtype in zip(op.outs, op.shapes, op.dtypes, strict=False):
            types[name] = (shape, dtype)
    return types


def _rename(value: object, old: str, new: str) -> object:
    if isinstance(value, Ref) and value.name == old:
        return Ref(new)
    if isinstance(value, Refs):
        return Refs(tuple(new if n == old else n for n in value.names))
    return value


def _replace_value(program: Program, op_index: int, old: str, new: str, extra: tuple[InputDef, ...] = ()) -> Program:
    """Drop op ``op_index`` and read ``new`` wherever its result ``old`` was read."""
    ops = []
    for position, op in enumerate(program.ops):
        if position == op_index:
            continue
        args = tuple(_rename(a, old, new) for a in op.args)
        kwargs = tuple((k, _rename(v, old, new)) for k, v in op.kwargs)
        ops.append(dataclasses.replace(op, args=args, kwargs=kwargs))
    outputs = tuple(dict.fromkeys(new if n == old else n for n in program.outputs))
    return prune(dataclasses.replace(program, inputs=program.inputs + extra, ops=tuple(ops), outputs=outputs))


def _reads(op, name: str) -> bool:
    for arg in list(op.args) + [v for _, v in op.kwargs]:
        if (isinstance(arg, Ref) and arg.name == name) or (isinstance(arg, Refs) and name in arg.names):
            return True
    return False


def _fresh_input(program: Program, shape: tuple[str, ...], dtype: str) -> InputDef:
    taken = {int("".join(c for c in i.name if c.isdigit()) or 0) for i in program.inputs}
    number = max(taken, default=-1) + 1
    fill = {"float32": "normal", "bool": "bool:0.5"}.get(dtype, "ints:-3:4")
    return InputDef(f"in{number}", tuple(shape), dtype, fill)


def _drop_ops(program: Program) -> Iterator[Program]:
    types = _value_types(program)
    for index in reversed(range(len(program.ops))):
        op = program.ops[index]
        if len(op.outs) != 1 or not op.shapes:
            continue
        out = op.outs[0]
        # a result only returned (read by no later op) may be replaced by an operand of any shape
        only_returned = not any(_reads(later, out) for later in program.ops[index + 1:])
        for arg in list(op.args) + [v for _, v in op.kwargs]:
            if isinstance(arg, Ref) and (only_returned or types.get(arg.name) == types[out]):
                yield _replace_value(program, index, out, arg.name)
        shape, dtype = types[out]
        fresh = _fresh_input(program, shape, dtype)
        yield _replace_value(program, index, out, fresh.name, (fresh,))


def _drop_keywords(program: Program) -> Iterator[Program]:
    for index, op in enumerate(program.ops):
        for position in range(len(op.kwargs)):
            kwargs = op.kwargs[:position] + op.kwargs[position + 1:]
            ops = program.ops[:index] + (dataclasses.replace(op, kwargs=kwargs),) + program.ops[index + 1:]
            yield prune(dataclasses.replace(program, ops=ops))


def _shrink_extents(program: Program) -> Iterator[Program]:
    for position, (name, value) in enumerate(program.dims):
        for smaller in dict.fromkeys((1, value // 2, value - 1)):
            if 1 <= smaller < value:
                dims = program.dims[:position] + ((name, smaller),) + program.dims[position + 1:]
                yield dataclasses.replace(program, dims=dims)


SIMPLER_FILLS = {"float32": ("ones", "small", "normal"), "int32": ("ints:0:2", "ints:-3:4"),
                 "int64": ("ints:0:2", "ints:-3:4"), "bool": ("bool:1.0", "bool:0.5")}


def _simplify_inputs(program: Program) -> Iterator[Program]:
    for position, item in enumerate(program.inputs):
        if item.fill.startswith(("ids", "keymask", "addmask")):
            continue
        simpler = SIMPLER_FILLS[item.dtype]
        rank = simpler.index(item.fill) if item.fill in simpler else len(simpler)
        for fill in simpler[:rank]:
            inputs = program.inputs[:position] + (dataclasses.replace(item, fill=fill),) + program.inputs[position + 1:]
            yield dataclasses.replace(program, inputs=inputs)


def _single_outputs(program: Program) -> Iterator[Program]:
    if len(program.outputs) > 1:
        for name in program.outputs:
            yield prune(dataclasses.replace(program, outputs=(name,)))


def candidates(program: Program) -> Iterator[Program]:
    yield from _single_outputs(program)
    yield from _drop_ops(program)
    yield from _drop_keywords(program)
    yield from _shrink_extents(program)
    yield from _simplify_inputs(program)


def traces(program: Program) -> bool:
    try:
        trace_program(program)
    except (WeftError, KeyError, ValueError, TypeError, IndexError, AssertionError):
        return False
    return True


SIMPLE_FILLS = ("ones", "small", "ints:0:2", "ints:-3:4", "bool:1.0", "bool:0.5")


def size(program: Program) -> tuple[int, int, int, int]:
    """Smaller is simpler: ops, then elements over all inputs, then extents, then fancier fills."""
    elements = sum(math.prod(s) for s in program.input_shapes())
    fancy = sum(0 if i.fill in SIMPLE_FILLS else 1 if i.fill == "normal" else 2 for i in program.inputs)
    return len(program.ops), elements, sum(e for _, e in program.dims), fancy


def shrink(program: Program, still_fails: Callable[[Program], bool], seconds: float = 120.0,
           max_tries: int = 400) -> tuple[Program, int]:
    """The smallest program found that still fails, and how many candidates were run."""
    deadline = time.monotonic() + seconds
    tried = 0
    seen = {program}
    improved = True
    while improved and time.monotonic() < deadline and tried < max_tries:
        improved = False
        for candidate in candidates(program):
            if candidate in seen or size(candidate) >= size(program):
                continue
            seen.add(candidate)
            if not traces(candidate):
                continue
            tried += 1
            if still_fails(candidate):
                program, improved = candidate, True
                break
            if time.monotonic() >= deadline or tried >= max_tries:
                break
    return program, tried
