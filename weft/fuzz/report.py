"""A program as the Python a user pastes into a bug report.

The printed script traces the program with ``weft.trace`` and ``weft.nn`` calls, builds
the inputs from their fill, shape, dtype and seed, compiles under the contract and
fusion policy of the failure, and checks the result with the fuzzer's own comparison,
so running it shows the failure (or passes once the bug is fixed)::

    import weft
    from weft import nn
    from weft.fuzz import make_input, check_outputs

    def program(in0, in1):
        v0 = nn.add(in0, in1)
        return v0

    plan = weft.trace(program, weft.spec((3, 4), "float32"), weft.spec((4,), "float32"))
    ...
"""

from __future__ import annotations

import math

from weft.fuzz.program import (
    Dim,
    Dims,
    Index,
    Program,
    Ref,
    Refs,
    extent,
    input_seed,
    resolved_fill,
    shape_of,
)


def _literal(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    return repr(value)


def _argument(value: object, dims: dict[str, int]) -> str:
    match value:
        case Ref(name):
            return name
        case Refs(names):
            return "[" + ", ".join(names) + "]"
        case Dims(exprs):
            shape = tuple(extent(e, dims) for e in exprs)
            return repr(shape)
        case Dim(expr):
            return str(extent(expr, dims))
    return _literal(value)


def _index_text(items: tuple) -> str:
    parts = []
    for item in items:
        if item == "...":
            parts.append("...")
        elif item is None:
            parts.append("None")
        elif isinstance(item, tuple):
            start, stop, step = item
            text = f"{'' if start is None else start}:{'' if stop is None else stop}"
            parts.append(text + ("" if step in (None, 1) else f":{step}"))
        else:
            parts.append(repr(item))
    return ", ".join(parts)


def op_line(op, dims: dict[str, int]) -> str:
    target = ", ".join(op.outs)
    if op.fn == "getitem" and len(op.args) == 2 and isinstance(op.args[1], Index):
        return f"{target} = {op.args[0].name}[{_index_text(op.args[1].items)}]"
    args = [_argument(a, dims) for a in op.args]
    args += [f"{k}={_argument(v, dims)}" for k, v in op.kwargs]
    return f"{target} = nn.{op.fn}({', '.join(args)})"


def render(program: Program, contract: str = "strict", fusion: str = "off", threads: int = 1) -> str:
    """A runnable script reproducing ``program`` under the given compile settings."""
    dims = program.dim_map
    shapes = [shape_of(item.shape, dims) for item in program.inputs]
    names = ", ".join(item.name for item in program.inputs)
    lines = [
        "import weft",
        "from weft import nn",
        "from weft.fuzz import check_outputs, make_input",
        "",
        "",
        f"def program({names}):",
    ]
    lines += [f"    {op_line(op, dims)}" for op in program.ops]
    outputs = ", ".join(program.outputs) + ("," if len(program.outputs) == 1 else "")
    lines.append(f"    return {outputs}")
    lines += ["", ""]
    spec_items = []
    for item, shape in zip(program.inputs, shapes, strict=True):
        param = ", param=True" if item.param else ""
        spec_items.append(f"    weft.spec({shape!r}, {item.dtype!r}{param}),")
    lines.append("plan = weft.trace(program,")
    lines += spec_items
    lines.append(")")
    lines.append("arrays = [")
    for item, shape in zip(program.inputs, shapes, strict=True):
        fill = resolved_fill(item, dims)
        lines.append(f"    make_input({fill!r}, {shape!r}, {item.dtype!r}, seed={input_seed(program, item)!r}),"
                     f"  # {item.name}")
    lines.append("]")
    lines.append(f"compiled = weft.compile(plan, contract={contract!r}, fusion={fusion!r}, threads={threads})")
    lines.append(f"check_outputs(plan, arrays, compiled(*arrays), contract={contract!r})")
    lines.append('print("ok: the compiled plan keeps the contract")')
    return "\n".join(lines) + "\n"
