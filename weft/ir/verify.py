"""Type inference, static index ranges, and ``verify(plan)``.

``verify`` raises ``WeftIRError`` with the offending member printed in context
(the members around it), for: unknown buffer, wrong index rank, an index that can
leave its buffer's range, an axis the member does not own (e.g. another member's
fold axis), a read of a buffer produced later (cycle), and dtype mismatches.
"""

from __future__ import annotations

from collections.abc import Mapping

from weft.errors import WeftIRError
from weft.ir.nodes import (
    COMPARISONS,
    LOGICAL,
    AxisIndex,
    Binary,
    Buffer,
    Cast,
    Combiner,
    Const,
    DType,
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
    Role,
    Unary,
    UnaryOp,
    Where,
    expr_axes,
    walk_expr,
)
from weft.ir.printer import format_kernel


class _Problem(WeftIRError):
    """A problem found inside one member; ``verify`` re-raises it with context."""


def expr_dtype(expr: Expr, buffers: Mapping[str, Buffer]) -> DType:
    """The dtype an expression evaluates to; raises ``_Problem`` on a mismatch."""
    match expr:
        case Load(buffer, _, _):
            if buffer not in buffers:
                raise _Problem(f"reads unknown buffer {buffer!r}")
            return buffers[buffer].dtype
        case Const(_, dtype) | IndexValue(_, dtype):
            return dtype
        case Cast(operand, dtype):
            expr_dtype(operand, buffers)
            return dtype
        case Unary(op, operand):
            inner = expr_dtype(operand, buffers)
            if op is UnaryOp.NOT:
                if inner is not DType.BOOL:
                    raise _Problem(f"not() needs bool, got {inner.value}")
                return inner
            if op in (UnaryOp.NEG, UnaryOp.ABS):
                if inner is DType.BOOL:
                    raise _Problem(f"{op.value}() needs a number, got bool")
                return inner
            if inner is not DType.FLOAT32:
                raise _Problem(f"{op.value}() needs float32, got {inner.value}: insert a cast")
            return inner
        case Binary(op, left, right):
            lhs, rhs = expr_dtype(left, buffers), expr_dtype(right, buffers)
            if lhs is not rhs:
                raise _Problem(f"dtype mismatch in {op.value}: {lhs.value} vs {rhs.value}: insert a cast")
            if op in LOGICAL:
                if lhs is not DType.BOOL:
                    raise _Problem(f"{op.value} needs bool operands, got {lhs.value}")
                return DType.BOOL
            if op in COMPARISONS:
                return DType.BOOL
            if lhs is DType.BOOL:
                raise _Problem(f"arithmetic {op.value} on bool operands")
            return lhs
        case Where(condition, if_true, if_false):
            cond = expr_dtype(condition, buffers)
            if cond is not DType.BOOL:
                raise _Problem(f"where() condition must be bool, got {cond.value}")
            lhs, rhs = expr_dtype(if_true, buffers), expr_dtype(if_false, buffers)
            if lhs is not rhs:
                raise _Problem(f"where() branches differ: {lhs.value} vs {rhs.value}")
            return lhs
    raise _Problem(f"not an expression: {expr!r}")


def index_range(index: IndexExpr, extents: Mapping[str, int]) -> tuple[int, int] | None:
    """Inclusive [low, high] an index can take over the axes, or None if data-dependent."""
    match index:
        case AxisIndex(axis):
            return (0, extents[axis] - 1)
        case IndexConst(value):
            return (value, value)
        case IndexAdd(left, right):
            a, b = index_range(left, extents), index_range(right, extents)
            if a is None or b is None:
                return None
            return (a[0] + b[0], a[1] + b[1])
        case IndexMul(operand, factor):
            r = index_range(operand, extents)
            if r is None:
                return None
            lo, hi = r[0] * factor, r[1] * factor
            return (min(lo, hi), max(lo, hi))
        case IndexFloorDiv(operand, divisor):
            r = index_range(operand, extents)
            return None if r is None else (r[0] // divisor, r[1] // divisor)
        case IndexMod(operand, divisor):
            r = index_range(operand, extents)
            if r is None:
                return (0, divisor - 1)
            if 0 <= r[0] and r[1] < divisor:
                return r
            return (0, divisor - 1)
        case IndexOf():
            return None
    raise _Problem(f"not an index expression: {index!r}")


def _check_index_divisors(index: IndexExpr) -> None:
    match index:
        case IndexFloorDiv(operand, divisor) | IndexMod(operand, divisor):
            if divisor <= 0:
                raise _Problem(f"floor-div/mod by {divisor}: divisors must be positive")
            _check_index_divisors(operand)
        case IndexAdd(left, right):
            _check_index_divisors(left)
            _check_index_divisors(right)
        case IndexMul(operand, _):
            _check_index_divisors(operand)


def verify_kernel(kernel: Kernel, buffers: Mapping[str, Buffer], available: set[str]) -> None:
    """Check one member; raises ``_Problem``. ``available`` = buffers already written."""
    if kernel.output not in buffers:
        raise _Problem(f"writes unknown buffer {kernel.output!r}")
    names = [axis.name for axis in kernel.all_axes]
    if len(set(names)) != len(names):
        raise _Problem(f"repeats an axis name among {names}")
    for axis in kernel.all_axes:
        if axis.extent < 0:  # 0: an empty tensor (a loop that runs no times; a fold over it is its identity)
            raise _Problem(f"axis {axis.name} has extent {axis.extent}; extents must be >= 0")
    extents = {axis.name: axis.extent for axis in kernel.all_axes}
    used = expr_axes(kernel.body)
    foreign = sorted(used - set(extents))
    if foreign:
        raise _Problem(
            f"uses axis {', '.join(foreign)} which is neither an output axis nor this member's fold axis"
            " (a fold axis is visible only inside its own member's fold)"
        )
    output = buffers[kernel.output]
    if output.shape != kernel.shape:
        raise _Problem(f"output axes {kernel.shape} do not match buffer {output.name} shape {output.shape}")
    dtype = expr_dtype(kernel.body, buffers)
    if dtype is not output.dtype:
        raise _Problem(f"body is {dtype.value} but output buffer {output.name} is {output.dtype.value}")
    if kernel.fold:
        if dtype is DType.BOOL:
            raise _Problem("folds over bool values are not supported: cast to float32 or int")
        if kernel.fold.combiner not in Combiner:
            raise _Problem(f"unknown combiner {kernel.fold.combiner!r}")
    never_evaluated = any(axis.extent == 0 for axis in kernel.all_axes)  # an empty loop: no index is read
    for node in walk_expr(kernel.body):
        if not isinstance(node, Load):
            continue
        if node.buffer == kernel.output:
            raise _Problem(f"reads its own output {node.buffer!r} (a cycle)")
        if node.buffer not in available:
            raise _Problem(f"reads {node.buffer!r} before it is written (a cycle or wrong member order)")
        target = buffers[node.buffer]
        if len(node.index) != len(target.shape):
            raise _Problem(
                f"indexes {node.buffer} (rank {len(target.shape)}) with {len(node.index)} indices"
            )
        for position, (index, extent) in enumerate(zip(node.index, target.shape, strict=True)):
            _check_index_divisors(index)
            for inner in _index_of_values(index):
                if not expr_dtype(inner, buffers).is_int:
                    raise _Problem(f"gather index into {node.buffer} must be an integer expression")
            if node.padding is not None or never_evaluated:
                continue
            bounds = index_range(index, extents)
            if bounds is not None and (bounds[0] < 0 or bounds[1] >= extent):
                raise _Problem(
                    f"index {position} of {node.buffer} ranges over [{bounds[0]}, {bounds[1]}]"
                    f" but the axis has extent {extent} (out of range; use padding for a halo)"
                )


def _index_of_values(index: IndexExpr):
    match index:
        case IndexOf(value):
            yield value
        case IndexAdd(left, right):
            yield from _index_of_values(left)
            yield from _index_of_values(right)
        case IndexMul(operand, _) | IndexFloorDiv(operand, _) | IndexMod(operand, _):
            yield from _index_of_values(operand)


def _context(plan: Plan, position: int) -> str:
    buffers = plan.buffer_map()
    lines = []
    for number in range(max(0, position - 2), min(len(plan.kernels), position + 3)):
        kernel = plan.kernels[number]
        marker = ">>" if number == position else "  "
        dtype = buffers[kernel.output].dtype.short if kernel.output in buffers else "?"
        lines.append(f"  {marker} {number:>3}  {format_kernel(kernel, dtype)}")
    return "\n".join(lines)


def verify(plan: Plan) -> Plan:
    """Check every invariant of a plan; return it unchanged or raise ``WeftIRError``."""
    buffers: dict[str, Buffer] = {}
    for buffer in plan.buffers:
        if buffer.name in buffers:
            raise WeftIRError(f"plan {plan.name}: buffer {buffer.name!r} declared twice")
        if any(extent < 0 for extent in buffer.shape):
            raise WeftIRError(f"plan {plan.name}: buffer {buffer.name} has shape {buffer.shape}; extents must be >= 0")
        buffers[buffer.name] = buffer
    for name in plan.inputs:
        if name not in buffers:
            raise WeftIRError(f"plan {plan.name}: input {name!r} is not a declared buffer")
        if buffers[name].role not in (Role.INPUT, Role.PARAM):
            raise WeftIRError(f"plan {plan.name}: input {name!r} has role {buffers[name].role.value}")
    available = set(plan.inputs)
    for position, kernel in enumerate(plan.kernels):
        try:
            if kernel.output in available:
                raise _Problem(f"writes {kernel.output!r}, which is an input or already written")
            verify_kernel(kernel, buffers, available)
        except _Problem as problem:
            raise WeftIRError(
                f"plan {plan.name}: member {position} ({kernel.output}) {problem}\n{_context(plan, position)}"
            ) from None
        available.add(kernel.output)
    for name in plan.outputs:
        if name not in available or name in plan.inputs:
            raise WeftIRError(f"plan {plan.name}: output {name!r} is not written by any member")
    return plan
