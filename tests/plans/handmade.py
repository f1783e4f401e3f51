"""Small plans built directly with weft.ir, for tests that must not depend on the front end.

Every member is written exactly as a front end would emit it; nothing here tells
the engine what attention or softmax is.
"""

from __future__ import annotations

from plans.build import Builder, add, ax, buffer, const, div, exp, load, mul, sub
from weft.ir import (
    Axis,
    Binary,
    BinaryOp,
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


def layer_norm_gain(rows: int, width: int) -> Plan:
    """mean, centred, var, rstd, y = centred * rstd * g (naive, three reads of x; no bias)."""
    b = Builder("layernorm")
    b.input("x", rows, width)
    b.input("g", width)
    b.member("mean", [("i", rows)], mul(load("x", "i", "j"), const(1.0 / width)), fold=[("j", width)])
    b.member("xc", [("i", rows), ("j", width)], sub(load("x", "i", "j"), load("mean", "i")))
    b.member("var", [("i", rows)], mul(mul(load("xc", "i", "j"), load("xc", "i", "j")), const(1.0 / width)),
             fold=[("j", width)])
    b.member("rstd", [("i", rows)], Unary(UnaryOp.RSQRT, add(load("var", "i"), const(1e-5))))
    b.member("y", [("i", rows), ("j", width)], mul(mul(load("xc", "i", "j"), load("rstd", "i")), load("g", "j")))
    return b.plan("y")


def matmul(size: int) -> Plan:
    b = Builder("matmul")
    b.input("a", size, size)
    b.input("b", size, size)
    b.member("c", [("i", size), ("j", size)], mul(load("a", "i", "k"), load("b", "k", "j")), fold=[("k", size)])
    return b.plan("c")


def ffn(tokens: int, width: int, hidden: int) -> Plan:
    """h = x @ w1; g = tanh(h); y = g @ w2: two big matrix products around an activation."""
    b = Builder("ffn")
    b.input("x", tokens, width)
    b.input("w1", width, hidden, param=True)
    b.input("w2", hidden, width, param=True)
    b.member("h", [("i", tokens), ("j", hidden)], mul(load("x", "i", "k"), load("w1", "k", "j")), fold=[("k", width)])
    b.member("g", [("i", tokens), ("j", hidden)], Unary(UnaryOp.TANH, load("h", "i", "j")))
    b.member("y", [("i", tokens), ("j", width)], mul(load("g", "i", "k"), load("w2", "k", "j")), fold=[("k", hidden)])
    return b.plan("y")


def matmul_softmax(m: int = 37, k: int = 19, n: int = 45) -> Plan:
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


def scaled_sum(shape=(5, 33)) -> Plan:
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
