"""Plans and a fixed machine profile for the cycle model's hand-computable tests."""

from __future__ import annotations

from plans.profiles import READ, WRITE, fixed_profile  # noqa: F401 (re-exported for the model tests)

from weft.ir import Axis, AxisIndex, Binary, BinaryOp, Buffer, Combiner, DType, Fold, Kernel, Load, Plan, Role

F32 = DType.FLOAT32


def load(buffer: str, *axes: str) -> Load:
    return Load(buffer, tuple(AxisIndex(axis) for axis in axes))


def copy_plan(n: int) -> Plan:
    return Plan((Buffer("x", (n,), F32, Role.INPUT), Buffer("y", (n,), F32, Role.OUTPUT)),
                (Kernel("y", (Axis("i", n),), load("x", "i")),), ("x",), ("y",), "copy")


def row_sum_plan(rows: int, cols: int) -> Plan:
    return Plan((Buffer("x", (rows, cols), F32, Role.INPUT), Buffer("y", (rows,), F32, Role.OUTPUT)),
                (Kernel("y", (Axis("i", rows),), load("x", "i", "j"), Fold((Axis("j", cols),), Combiner.SUM)),),
                ("x",), ("y",), "row_sum")


def matmul_plan(m: int, n: int, k: int) -> Plan:
    body = Binary(BinaryOp.MUL, load("a", "i", "p"), load("b", "p", "j"))
    return Plan((Buffer("a", (m, k), F32, Role.INPUT), Buffer("b", (k, n), F32, Role.INPUT),
                 Buffer("c", (m, n), F32, Role.OUTPUT)),
                (Kernel("c", (Axis("i", m), Axis("j", n)), body, Fold((Axis("p", k),), Combiner.SUM)),),
                ("a", "b"), ("c",), "matmul")
