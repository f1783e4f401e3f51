"""A readable text form of plans, kernels and expressions.

    s[i:64, j:64] f32 = sum_{d:32} (q[i, d] * k[j, d])
"""

from __future__ import annotations

from weft.ir.nodes import (
    AxisIndex,
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    IndexAdd,
    IndexConst,
    IndexExpr,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    IndexValue,
    Kernel,
    Load,
    Plan,
    Unary,
    Where,
)

_INFIX = {
    BinaryOp.ADD: "+", BinaryOp.SUB: "-", BinaryOp.MUL: "*", BinaryOp.DIV: "/",
    BinaryOp.LT: "<", BinaryOp.LE: "<=", BinaryOp.GT: ">", BinaryOp.GE: ">=",
    BinaryOp.EQ: "==", BinaryOp.NE: "!=", BinaryOp.AND: "&", BinaryOp.OR: "|",
}


def format_index(index: IndexExpr) -> str:
    match index:
        case AxisIndex(axis):
            return axis
        case IndexConst(value):
            return str(value)
        case IndexAdd(left, IndexMul(operand, factor)) if factor < 0:
            return f"{format_index(left)} - {format_index(IndexMul(operand, -factor)) if factor != -1 else format_index(operand)}"
        case IndexAdd(left, IndexConst(value)) if value < 0:
            return f"{format_index(left)} - {-value}"
        case IndexAdd(left, right):
            return f"{format_index(left)} + {format_index(right)}"
        case IndexMul(operand, factor):
            return f"{factor}*{_wrap_index(operand)}"
        case IndexFloorDiv(operand, divisor):
            return f"{_wrap_index(operand)} // {divisor}"
        case IndexMod(operand, divisor):
            return f"{_wrap_index(operand)} % {divisor}"
        case IndexOf(value):
            return f"@{format_expr(value)}"
    raise TypeError(f"not an index expression: {index!r}")


def _wrap_index(index: IndexExpr) -> str:
    text = format_index(index)
    return f"({text})" if isinstance(index, IndexAdd | IndexFloorDiv | IndexMod) else text


def format_expr(expr: Expr) -> str:
    match expr:
        case Load(buffer, index, padding):
            pad = f" pad {padding:g}" if padding is not None else ""
            return f"{buffer}[{', '.join(format_index(i) for i in index)}{pad}]"
        case Const(value, dtype):
            if isinstance(value, float):
                return f"{value:.9g}"
            return f"{value}{'' if dtype.is_float else ':' + dtype.short}"
        case IndexValue(index, _):
            return f"#({format_index(index)})"
        case Unary(op, operand):
            return f"{op.value}({format_expr(operand)})"
        case Binary(op, left, right) if op in _INFIX:
            return f"({format_expr(left)} {_INFIX[op]} {format_expr(right)})"
        case Binary(op, left, right):
            return f"{op.value}({format_expr(left)}, {format_expr(right)})"
        case Where(condition, if_true, if_false):
            return f"where({format_expr(condition)}, {format_expr(if_true)}, {format_expr(if_false)})"
        case Cast(operand, dtype):
            return f"{dtype.short}({format_expr(operand)})"
    raise TypeError(f"not an expression: {expr!r}")


def format_axes(axes) -> str:
    return ", ".join(f"{axis.name}:{axis.extent}" for axis in axes)


def format_kernel(kernel: Kernel, dtype_short: str = "") -> str:
    head = f"{kernel.output}[{format_axes(kernel.axes)}]"
    if dtype_short:
        head += f" {dtype_short}"
    body = format_expr(kernel.body)
    if kernel.fold:
        body = f"{kernel.fold.combiner.value}_{{{format_axes(kernel.fold.axes)}}} {body}"
    return f"{head} = {body}"


def format_plan(plan: Plan) -> str:
    buffers = plan.buffer_map()

    def describe(name: str) -> str:
        buffer = buffers[name]
        return f"{name}[{', '.join(map(str, buffer.shape))}] {buffer.dtype.short}"

    lines = [
        f"plan {plan.name}: {len(plan.kernels)} members",
        f"  inputs:  {', '.join(describe(n) for n in plan.inputs) or '-'}",
        f"  outputs: {', '.join(describe(n) for n in plan.outputs) or '-'}",
    ]
    for number, kernel in enumerate(plan.kernels):
        dtype = buffers[kernel.output].dtype.short if kernel.output in buffers else "?"
        lines.append(f"  {number:>3}  {format_kernel(kernel, dtype)}")
    return "\n".join(lines)
