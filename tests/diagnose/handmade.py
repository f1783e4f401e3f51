"""Plans written member by member in the test, independent of weft.nn."""

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
    verify,
)

F32 = DType.FLOAT32


def attention_plan(tokens: int, dim: int) -> Plan:
    """s = q k^T * scale; m = max_j s; e = exp(s - m); l = sum_j e; p = e / l; o = p v."""
    i, j, d, e_axis = AxisIndex("i"), AxisIndex("j"), AxisIndex("d"), AxisIndex("e")
    T = tokens
    buffers = (
        Buffer("q", (T, dim), F32, Role.INPUT), Buffer("k", (T, dim), F32, Role.INPUT),
        Buffer("v", (T, dim), F32, Role.INPUT), Buffer("s", (T, T), F32, Role.INTERMEDIATE),
        Buffer("m", (T,), F32, Role.INTERMEDIATE), Buffer("e", (T, T), F32, Role.INTERMEDIATE),
        Buffer("l", (T,), F32, Role.INTERMEDIATE), Buffer("p", (T, T), F32, Role.INTERMEDIATE),
        Buffer("o", (T, dim), F32, Role.OUTPUT),
    )
    rows, cols = Axis("i", T), Axis("j", T)
    kernels = (
        Kernel("s", (rows, cols), Binary(BinaryOp.MUL, Binary(BinaryOp.MUL, Load("q", (i, d)), Load("k", (j, d))),
                                         Const(dim ** -0.5)), Fold((Axis("d", dim),), Combiner.SUM)),
        Kernel("m", (rows,), Load("s", (i, j)), Fold((cols,), Combiner.MAX)),
        Kernel("e", (rows, cols), Unary(UnaryOp.EXP, Binary(BinaryOp.SUB, Load("s", (i, j)), Load("m", (i,))))),
        Kernel("l", (rows,), Load("e", (i, j)), Fold((cols,), Combiner.SUM)),
        Kernel("p", (rows, cols), Binary(BinaryOp.DIV, Load("e", (i, j)), Load("l", (i,)))),
        Kernel("o", (rows, Axis("e", dim)), Binary(BinaryOp.MUL, Load("p", (i, j)), Load("v", (j, e_axis))),
               Fold((cols,), Combiner.SUM)),
    )
    plan = Plan(buffers, kernels, ("q", "k", "v"), ("o",), name="attention")
    verify(plan)
    return plan


def layernorm_plan(rows: int, width: int) -> Plan:
    """mean, centred, var, rstd, y = centred * rstd * g (naive, three reads of x)."""
    i, j = AxisIndex("i"), AxisIndex("j")
    R, W = Axis("i", rows), Axis("j", width)
    buffers = (
        Buffer("x", (rows, width), F32, Role.INPUT), Buffer("g", (width,), F32, Role.INPUT),
        Buffer("mean", (rows,), F32, Role.INTERMEDIATE), Buffer("xc", (rows, width), F32, Role.INTERMEDIATE),
        Buffer("var", (rows,), F32, Role.INTERMEDIATE), Buffer("rstd", (rows,), F32, Role.INTERMEDIATE),
        Buffer("y", (rows, width), F32, Role.OUTPUT),
    )
    kernels = (
        Kernel("mean", (R,), Binary(BinaryOp.MUL, Load("x", (i, j)), Const(1.0 / width)), Fold((W,), Combiner.SUM)),
        Kernel("xc", (R, W), Binary(BinaryOp.SUB, Load("x", (i, j)), Load("mean", (i,)))),
        Kernel("var", (R,), Binary(BinaryOp.MUL, Binary(BinaryOp.MUL, Load("xc", (i, j)), Load("xc", (i, j))),
                                   Const(1.0 / width)), Fold((W,), Combiner.SUM)),
        Kernel("rstd", (R,), Unary(UnaryOp.RSQRT, Binary(BinaryOp.ADD, Load("var", (i,)), Const(1e-5)))),
        Kernel("y", (R, W), Binary(BinaryOp.MUL, Binary(BinaryOp.MUL, Load("xc", (i, j)), Load("rstd", (i,))),
                                   Load("g", (j,)))),
    )
    plan = Plan(buffers, kernels, ("x", "g"), ("y",), name="layernorm")
    verify(plan)
    return plan


def matmul_plan(size: int) -> Plan:
    i, j, k = AxisIndex("i"), AxisIndex("j"), AxisIndex("k")
    buffers = (Buffer("a", (size, size), F32, Role.INPUT), Buffer("b", (size, size), F32, Role.INPUT),
               Buffer("c", (size, size), F32, Role.OUTPUT))
    kernel = Kernel("c", (Axis("i", size), Axis("j", size)), Binary(BinaryOp.MUL, Load("a", (i, k)), Load("b", (k, j))),
                    Fold((Axis("k", size),), Combiner.SUM))
    return Plan(buffers, (kernel,), ("a", "b"), ("c",), name="matmul")


def ffn_plan(tokens: int, width: int, hidden: int) -> Plan:
    """h = x @ w1; g = tanh(h); y = g @ w2: two big matrix products around an activation."""
    i, j, k = AxisIndex("i"), AxisIndex("j"), AxisIndex("k")
    buffers = (
        Buffer("x", (tokens, width), F32, Role.INPUT), Buffer("w1", (width, hidden), F32, Role.PARAM),
        Buffer("w2", (hidden, width), F32, Role.PARAM), Buffer("h", (tokens, hidden), F32, Role.INTERMEDIATE),
        Buffer("g", (tokens, hidden), F32, Role.INTERMEDIATE), Buffer("y", (tokens, width), F32, Role.OUTPUT),
    )
    kernels = (
        Kernel("h", (Axis("i", tokens), Axis("j", hidden)), Binary(BinaryOp.MUL, Load("x", (i, k)), Load("w1", (k, j))),
               Fold((Axis("k", width),), Combiner.SUM)),
        Kernel("g", (Axis("i", tokens), Axis("j", hidden)), Unary(UnaryOp.TANH, Load("h", (i, j)))),
        Kernel("y", (Axis("i", tokens), Axis("j", width)), Binary(BinaryOp.MUL, Load("g", (i, k)), Load("w2", (k, j))),
               Fold((Axis("k", hidden),), Combiner.SUM)),
    )
    plan = Plan(buffers, kernels, ("x", "w1", "w2"), ("y",), name="ffn")
    verify(plan)
    return plan
