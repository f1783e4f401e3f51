"""Small hand-built plans used by several runtime tests."""

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
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    UnaryOp,
)

F32 = DType.FLOAT32


def ax(name: str) -> AxisIndex:
    return AxisIndex(name)


def buffer(name: str, shape, role=Role.INTERMEDIATE, dtype=F32) -> Buffer:
    return Buffer(name, tuple(shape), dtype, role)


def matmul_softmax_plan(m: int = 37, k: int = 19, n: int = 45) -> Plan:
    """c = a @ b; mx = max_j c; e = exp(c - mx); s = sum_j e; p = e / s."""
    i, j, kk = Axis("i", m), Axis("j", n), Axis("k", k)
    kernels = (
        Kernel("c", (i, j), Binary(BinaryOp.MUL, Load("a", (ax("i"), ax("k"))), Load("b", (ax("k"), ax("j")))),
               Fold((kk,), Combiner.SUM)),
        Kernel("mx", (i,), Load("c", (ax("i"), ax("j"))), Fold((j,), Combiner.MAX)),
        Kernel("e", (i, j), Unary(UnaryOp.EXP, Binary(BinaryOp.SUB, Load("c", (ax("i"), ax("j"))),
                                                          Load("mx", (ax("i"),))))),
        Kernel("s", (i,), Load("e", (ax("i"), ax("j"))), Fold((j,), Combiner.SUM)),
        Kernel("p", (i, j), Binary(BinaryOp.DIV, Load("e", (ax("i"), ax("j"))), Load("s", (ax("i"),)))),
    )
    buffers = (
        buffer("a", (m, k), Role.INPUT), buffer("b", (k, n), Role.INPUT), buffer("c", (m, n)),
        buffer("mx", (m,)), buffer("e", (m, n)), buffer("s", (m,)), buffer("p", (m, n), Role.OUTPUT),
    )
    return Plan(buffers, kernels, ("a", "b"), ("p",), name="matmul_softmax")


def scaled_sum_plan(shape=(5, 33)) -> Plan:
    """y = x * 2 + 1 (elementwise) and t = sum over every axis of y (rank-0 output)."""
    axes = tuple(Axis(f"d{n}", e) for n, e in enumerate(shape))
    index = tuple(ax(a.name) for a in axes)
    body = Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, Load("x", index), Const(2.0)), Const(1.0))
    kernels = (
        Kernel("y", axes, body),
        Kernel("t", (), Load("y", index), Fold(axes, Combiner.SUM)),
    )
    buffers = (buffer("x", shape, Role.INPUT), buffer("y", shape, Role.OUTPUT), buffer("t", (), Role.OUTPUT))
    return Plan(buffers, kernels, ("x",), ("y", "t"), name="scaled_sum")
