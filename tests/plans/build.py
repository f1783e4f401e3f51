"""Building plans member by member with weft.ir: expression helpers and ``Builder``."""

from __future__ import annotations

from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    Combiner,
    Const,
    DType,
    Fold,
    IndexAdd,
    IndexConst,
    IndexExpr,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    UnaryOp,
)

F32 = DType.FLOAT32


def index_value(index: IndexExpr, point: dict[str, int]) -> int:
    """``index`` at ``point`` (axis name to value), with Python's integer semantics (floor
    division and modulo), as the IR defines them: the tests' reference for index arithmetic."""
    match index:
        case AxisIndex(axis):
            return point[axis]
        case IndexConst(value):
            return value
        case IndexAdd(left, right):
            return index_value(left, point) + index_value(right, point)
        case IndexMul(operand, factor):
            return index_value(operand, point) * factor
        case IndexFloorDiv(operand, divisor):
            return index_value(operand, point) // divisor
        case IndexMod(operand, divisor):
            return index_value(operand, point) % divisor
    raise TypeError(index)


def ax(name: str) -> AxisIndex:
    return AxisIndex(name)


def buffer(name: str, shape, role=Role.INTERMEDIATE, dtype=F32) -> Buffer:
    return Buffer(name, tuple(shape), dtype, role)


def load(buffer: str, *axes: str) -> Load:
    return Load(buffer, tuple(AxisIndex(a) for a in axes))


def add(a, b):
    return Binary(BinaryOp.ADD, a, b)


def sub(a, b):
    return Binary(BinaryOp.SUB, a, b)


def mul(a, b):
    return Binary(BinaryOp.MUL, a, b)


def div(a, b):
    return Binary(BinaryOp.DIV, a, b)


def exp(a):
    return Unary(UnaryOp.EXP, a)


def const(value: float) -> Const:
    return Const(float(value))


class Builder:
    """Collects buffers and members; ``plan()`` marks inputs/outputs."""

    def __init__(self, name: str):
        self.name = name
        self.buffers: dict[str, Buffer] = {}
        self.kernels: list[Kernel] = []
        self.inputs: list[str] = []

    def input(self, name: str, *shape: int, dtype: DType = F32, param: bool = False) -> str:
        self.buffers[name] = Buffer(name, shape, dtype, Role.PARAM if param else Role.INPUT)
        self.inputs.append(name)
        return name

    def member(self, name, axes, body, fold=None, combiner=Combiner.SUM, dtype=F32) -> str:
        axes_t = tuple(Axis(n, e) for n, e in axes)
        fold_t = Fold(tuple(Axis(n, e) for n, e in fold), combiner) if fold else None
        shape = tuple(e for _, e in axes)
        self.buffers[name] = Buffer(name, shape, dtype, Role.INTERMEDIATE)
        self.kernels.append(Kernel(name, axes_t, body, fold_t))
        return name

    def plan(self, *outputs: str) -> Plan:
        buffers = []
        for buffer in self.buffers.values():
            if buffer.name in outputs:
                buffer = Buffer(buffer.name, buffer.shape, buffer.dtype, Role.OUTPUT)
            buffers.append(buffer)
        return Plan(tuple(buffers), tuple(self.kernels), tuple(self.inputs), tuple(outputs), self.name)
