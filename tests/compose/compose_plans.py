"""Small plans built directly with weft.ir, for tests that must not depend on the front end.

Every member is written exactly as a front end would emit it; nothing here tells
the engine what attention or softmax is.
"""

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
    IndexOf,
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

    def input(self, name: str, *shape: int, dtype: DType = F32) -> str:
        self.buffers[name] = Buffer(name, shape, dtype, Role.INPUT)
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


def attention(t: int = 16, d: int = 8, e: int = 8, tk: int | None = None, name: str = "attention") -> Plan:
    """The six members of docs/design.md §5 (QKᵀ·scale, row max, exp, row sum, divide, PV)."""
    tk = tk or t
    b = Builder(name)
    b.input("q", t, d)
    b.input("k", tk, d)
    b.input("v", tk, e)
    scale = 1.0 / d**0.5
    b.member("s", [("i", t), ("j", tk)], mul(mul(load("q", "i", "c"), load("k", "j", "c")), const(scale)), fold=[("c", d)])
    b.member("m", [("i1", t)], load("s", "i1", "j1"), fold=[("j1", tk)], combiner=Combiner.MAX)
    b.member("e", [("i2", t), ("j2", tk)], exp(sub(load("s", "i2", "j2"), load("m", "i2"))))
    b.member("l", [("i3", t)], load("e", "i3", "j3"), fold=[("j3", tk)])
    b.member("p", [("i4", t), ("j4", tk)], div(load("e", "i4", "j4"), load("l", "i4")))
    b.member("o", [("i5", t), ("e5", e)], mul(load("p", "i5", "j5"), load("v", "j5", "e5")), fold=[("j5", tk)])
    return b.plan("o")


def softmax(rows: int = 8, cols: int = 32, name: str = "softmax") -> Plan:
    b = Builder(name)
    b.input("x", rows, cols)
    b.member("m", [("r", rows)], load("x", "r", "c"), fold=[("c", cols)], combiner=Combiner.MAX)
    b.member("e", [("r1", rows), ("c1", cols)], exp(sub(load("x", "r1", "c1"), load("m", "r1"))))
    b.member("l", [("r2", rows)], load("e", "r2", "c2"), fold=[("c2", cols)])
    b.member("y", [("r3", rows), ("c3", cols)], div(load("e", "r3", "c3"), load("l", "r3")))
    return b.plan("y")


def cross_entropy(rows: int = 4, vocab: int = 64, name: str = "cross_entropy") -> Plan:
    """Mean negative log-likelihood: logsumexp(x[r]) - x[r, target[r]], averaged."""
    b = Builder(name)
    b.input("x", rows, vocab)
    b.input("target", rows, dtype=DType.INT64)
    b.member("m", [("r", rows)], load("x", "r", "v"), fold=[("v", vocab)], combiner=Combiner.MAX)
    b.member("l", [("r1", rows)], exp(sub(load("x", "r1", "v1"), load("m", "r1"))), fold=[("v1", vocab)])
    picked = Load("x", (ax("r2"), IndexOf(load("target", "r2"))))
    b.member("nll", [("r2", rows)], sub(add(Unary(UnaryOp.LOG, load("l", "r2")), load("m", "r2")), picked))
    b.member("loss", [], div(load("nll", "r3"), const(rows)), fold=[("r3", rows)])
    return b.plan("loss")


def layer_norm(rows: int = 4, width: int = 16, eps: float = 1e-5, name: str = "layer_norm") -> Plan:
    b = Builder(name)
    b.input("x", rows, width)
    b.input("w", width)
    b.input("bias", width)
    b.member("mean", [("r", rows)], div(load("x", "r", "c"), const(width)), fold=[("c", width)])
    b.member("xc", [("r1", rows), ("c1", width)], sub(load("x", "r1", "c1"), load("mean", "r1")))
    b.member("var", [("r2", rows)], div(mul(load("xc", "r2", "c2"), load("xc", "r2", "c2")), const(width)), fold=[("c2", width)])
    b.member("rstd", [("r3", rows)], Unary(UnaryOp.RSQRT, add(load("var", "r3"), const(eps))))
    b.member(
        "y", [("r4", rows), ("c4", width)],
        add(mul(mul(load("xc", "r4", "c4"), load("rstd", "r4")), load("w", "c4")), load("bias", "c4")),
    )
    return b.plan("y")


def linear_bias_gelu(rows: int = 4, k: int = 16, n: int = 8, name: str = "linear_gelu") -> Plan:
    b = Builder(name)
    b.input("x", rows, k)
    b.input("w", n, k)
    b.input("bias", n)
    b.member("mm", [("t", rows), ("n", n)], mul(load("x", "t", "kk"), load("w", "n", "kk")), fold=[("kk", k)])
    b.member("biased", [("t1", rows), ("n1", n)], add(load("mm", "t1", "n1"), load("bias", "n1")))
    x = load("biased", "t2", "n2")
    erf = Unary(UnaryOp.ERF, mul(x, const(0.7071067811865476)))
    b.member("gelu", [("t2", rows), ("n2", n)], mul(mul(x, const(0.5)), add(const(1.0), erf)))
    return b.plan("gelu")


def late_input(rows: int = 6, cols: int = 20, name: str = "late_input") -> Plan:
    """m = max_c x; u = sum_k exp(w) (another axis); t = sum_c exp(x - m) * u: the one pass
    reads u, which comes after m in member order, so it must run after u."""
    b = Builder(name)
    b.input("x", rows, cols)
    b.input("w", rows, 9)
    b.member("m", [("r", rows)], load("x", "r", "c"), fold=[("c", cols)], combiner=Combiner.MAX)
    b.member("u", [("r1", rows)], exp(load("w", "r1", "k")), fold=[("k", 9)])
    term = mul(exp(sub(load("x", "r2", "c2"), load("m", "r2"))), load("u", "r2"))
    b.member("t", [("r2", rows)], term, fold=[("c2", cols)])
    return b.plan("t")


def cofolds(rows: int = 4, cols: int = 16, name: str = "cofolds") -> Plan:
    """m = max_c x; q = sum_c x*x (an independent fold over the same axis); t = sum_c exp(x - m) * q."""
    b = Builder(name)
    b.input("x", rows, cols)
    b.member("m", [("r", rows)], load("x", "r", "c"), fold=[("c", cols)], combiner=Combiner.MAX)
    b.member("q", [("r1", rows)], mul(load("x", "r1", "c1"), load("x", "r1", "c1")), fold=[("c1", cols)])
    term = mul(exp(sub(load("x", "r2", "c2"), load("m", "r2"))), load("q", "r2"))
    b.member("t", [("r2", rows)], term, fold=[("c2", cols)])
    return b.plan("t")
