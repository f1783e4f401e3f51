"""One maker per ``weft.nn`` function: pick operands, append one call; ``generate`` draws
a program from them (the builder it fills is ``weft.fuzz.generate``'s).

``COVERAGE`` names every public ``weft.nn`` function the generator calls; ``EXCLUDED``
names, with the reason, every public name it does not.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable

from weft import nn
from weft.fuzz.generate import BOOL, FLOAT, INT32, INT64, WEIGHTS, Builder, Options, Value, broadcast, prune
from weft.fuzz.program import Dims, Program, Ref
from weft.fuzz.views import (
    make_concat,
    make_expand,
    make_getitem,
    make_permute,
    make_reshape,
    make_slice,
    make_squeeze,
    make_window_partition,
    make_window_unpartition,
)

EXCLUDED = {
    "Spec": "a type: weft.spec's result",
    "Tensor": "a type: the traced tensor",
    "TraceError": "an exception type",
    "spec": "describes an input; every program calls it for each input",
    "trace": "traces the function; every program calls it once",
    "name_scope": "names members only; the batch runner nests every program in one",
    "broadcast_shapes": "a shape utility on Python tuples, no traced operation",
}

COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
UNARY_FLOAT = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "sin", "cos", "relu", "silu", "gelu")
ARITHMETIC = ("add", "sub", "mul", "div", "maximum", "minimum", "fmod")


def _refs(*values: Value) -> tuple[Ref, ...]:
    return tuple(Ref(v.name) for v in values)


# ----------------------------------------------------------------------------- elementwise


def make_unary(b: Builder, fn: str) -> Value:
    if fn in ("log", "sqrt", "rsqrt") and b.chance(0.6):
        x = b.new_input(b.new_shape(b.rng.randint(0, 3)), FLOAT, b.rng.choice(["uniform:0.01:10", "uniform:1:1e4"]))
    else:
        x = b.operand(FLOAT)
    kwargs = {"approximate": b.rng.choice(["none", "tanh"])} if fn == "gelu" and b.chance(0.5) else {}
    return b.emit(fn, _refs(x), kwargs, x.shape, FLOAT, exact=fn == "relu" and x.exact)


def make_sign(b: Builder, fn: str) -> Value:
    """neg / abs: floats and ints."""
    x = b.operand(b.rng.choice([FLOAT, FLOAT, INT32, INT64]))
    return b.emit(fn, _refs(x), {}, x.shape, x.dtype, x.exact)


def make_pow(b: Builder, fn: str) -> Value:
    x = b.operand(b.rng.choice([FLOAT, FLOAT, INT32]))
    if fn == "square":
        return b.emit("square", _refs(x), {}, x.shape, x.dtype, x.dtype != FLOAT)
    exponent = b.rng.choice([0, 1, 2, 3, 4, 5, 8] + ([0.5] if x.dtype == FLOAT else []))
    exact = x.dtype != FLOAT or (exponent in (0, 1) and x.exact)
    return b.emit("pow", _refs(x) + (exponent,), {}, x.shape, x.dtype, exact)


def make_arithmetic(b: Builder, fn: str) -> Value:
    dtype = b.rng.choice([FLOAT, FLOAT, INT32, INT64])
    tame = dtype != FLOAT and fn in ("div", "fmod") and not b.allows("int-min-div")
    # steering around INT_MIN in integer division: both operands new, without extremes
    # fmod jumps by the divisor where a / b crosses an integer: under Inference, exact operands only
    exact_only = b.inference and fn == "fmod"
    x = b.new_input(b.new_shape(b.rng.randint(0, 3)), dtype, "ints:-20:21") if tame else \
        b.operand(dtype, exact=exact_only)
    extremes = dtype != FLOAT and fn in ("div", "fmod") and not tame and b.chance(0.4)
    if extremes:  # INT_MIN / -1 and friends, at the same positions often enough to be met
        x = b.new_input(b.new_shape(b.rng.randint(1, 2), 4096), dtype, "int_extremes")
    if b.chance(0.25):
        y = b.scalar(dtype)
        args = (Ref(x.name), y) if b.chance(0.7) else (y, Ref(x.name))
        shape, exact_y = x.shape, True
    else:
        if tame or extremes:
            other = b.new_input(b.partner_shape(x.shape), dtype, "int_extremes" if extremes else "ints:-20:21")
        else:
            other = b.partner(x, exact=exact_only)
        args = _refs(x, other) if b.chance(0.8) else _refs(other, x)
        shape, exact_y = broadcast(x.shape, other.shape), other.exact
    exact = dtype != FLOAT or (fn in ("maximum", "minimum") and x.exact and exact_y)
    return b.emit(fn, args, {}, shape, dtype, exact)


def make_compare(b: Builder, fn: str) -> Value:
    # Inference: only exact values, so a tolerated rounding cannot flip the answer
    dtype = b.rng.choice([FLOAT, FLOAT, INT32, INT64])
    x = b.operand(dtype, exact=b.inference)
    if b.chance(0.3):
        args = (Ref(x.name), b.scalar(dtype))
        shape = x.shape
    else:
        other = b.partner(x, exact=b.inference)
        args = _refs(x, other)
        shape = broadcast(x.shape, other.shape)
    return b.emit(fn, args, {}, shape, BOOL, True)


def make_logical(b: Builder, fn: str) -> Value:
    x = b.operand(BOOL)
    if fn == "logical_not":
        return b.emit(fn, _refs(x), {}, x.shape, BOOL, True)
    other = b.partner(x)
    return b.emit(fn, _refs(x, other), {}, broadcast(x.shape, other.shape), BOOL, True)


def _broadcasts(*shapes: tuple[str, ...]) -> bool:
    try:
        broadcast(*shapes)
    except AssertionError:
        return False
    return True


def make_where(b: Builder, fn: str) -> Value:
    condition = b.operand(BOOL)
    dtype = b.rng.choice([FLOAT, FLOAT, INT32])
    branches, shapes, exact = [], [condition.shape], True
    for _ in range(2):
        if b.chance(0.25):
            branches.append(b.scalar(dtype))
            continue
        value = b.operand(dtype) if b.chance(0.5) else b.new_input(b.partner_shape(condition.shape), dtype)
        if not _broadcasts(*shapes, value.shape):
            value = b.new_input(condition.shape, dtype)
        shapes.append(value.shape)
        branches.append(Ref(value.name))
        exact = exact and value.exact
    if not any(isinstance(x, Ref) for x in branches):
        branches[0] = Ref(b.new_input(condition.shape, dtype).name)
    return b.emit("where", (Ref(condition.name), *branches), {}, broadcast(*shapes), dtype, exact)


def make_cast(b: Builder, fn: str) -> Value:
    source = b.rng.choice([FLOAT, FLOAT, INT32, INT64, BOOL])
    targets = [t for t in (FLOAT, INT32, INT64, BOOL) if t != source]
    target = b.rng.choice(targets)
    if source == FLOAT and target != FLOAT:
        if not b.allows("float-int-cast") and target != BOOL:
            x = b.new_input(b.new_shape(b.rng.randint(0, 3)), FLOAT, b.rng.choice(["normal:100", "small"]))
        elif b.chance(0.4):
            x = b.new_input(b.new_shape(b.rng.randint(0, 3)), FLOAT,
                            b.rng.choice(["special", "normal:1e10", "normal:100"]))
        else:
            x = b.operand(FLOAT, exact=b.inference)
    else:
        x = b.operand(source)
    return b.emit("cast", (Ref(x.name), target), {}, x.shape, target, x.exact or target == FLOAT)


# ----------------------------------------------------------------------------- reductions


def _axes(b: Builder, x: Value, allow_none: bool = True):
    rank = len(x.shape)
    if rank == 0 or (allow_none and b.chance(0.15)):
        return None, tuple(range(rank))
    count = b.rng.randint(1, rank)
    chosen = tuple(sorted(b.rng.sample(range(rank), count)))
    if count == 1 and b.chance(0.6):
        axis = chosen[0] - (rank if b.chance(0.3) else 0)
        return axis, chosen
    return tuple(a - rank if b.chance(0.2) else a for a in chosen), chosen


def _fold_fits(b: Builder, x: Value, axes: tuple[int, ...]) -> bool:
    extents = [b.size((x.shape[a],)) for a in axes]
    terms = 1
    for e in extents:
        terms *= e
    return terms <= b.budget.fold and b.size(x.shape) <= b.budget.work


def make_reduce(b: Builder, fn: str) -> Value:
    dtype = FLOAT if fn == "mean" or b.chance(0.7) else b.rng.choice([INT32, INT64])
    for _attempt in range(6):
        x = b.operand(dtype, min_rank=1 if b.chance(0.9) else 0)
        axis, axes = _axes(b, x)
        if _fold_fits(b, x, axes):
            break
    else:
        x = b.new_input(b.new_shape(2, 512), dtype)
        axis, axes = -1, (1,)
    keepdims = b.chance(0.3)
    shape = tuple(("1" if keepdims else None) if d in axes else e for d, e in enumerate(x.shape))
    shape = tuple(e for e in shape if e is not None)
    kwargs = {"keepdims": True} if keepdims else {}
    exact = dtype != FLOAT or (fn in ("max", "min") and x.exact)
    return b.emit(fn, (Ref(x.name), axis), kwargs, shape, dtype, exact)


def _row_operand(b: Builder, fold_limit: int | None = None) -> tuple[Value, int]:
    """A float value of rank >= 1 and one axis whose extent fits a fold."""
    limit = fold_limit or b.budget.fold
    for _attempt in range(6):
        x = b.operand(FLOAT, min_rank=1)
        axis = b.rng.randrange(len(x.shape))
        if b.size((x.shape[axis],)) <= limit:
            return x, axis
    x = b.new_input(b.new_shape(2, 2048), FLOAT)
    return x, 1


def make_softmax(b: Builder, fn: str) -> Value:
    x, axis = _row_operand(b)
    axis = axis - len(x.shape) if b.chance(0.5) else axis
    kwargs = {"axis": axis} if axis != -1 or b.chance(0.5) else {}
    return b.emit(fn, _refs(x), kwargs, x.shape, FLOAT, False)


def _trailing_params(b: Builder, x: Value, count: int, fill: str) -> Value:
    return b.new_input(x.shape[len(x.shape) - count:], FLOAT, fill, param=True)


def make_layer_norm(b: Builder, fn: str) -> Value:
    x = b.operand(FLOAT, min_rank=1)
    count = 1 if len(x.shape) == 1 or b.chance(0.7) else 2
    if b.size(x.shape[len(x.shape) - count:]) > b.budget.fold:
        x = b.new_input(b.new_shape(2, 4096), FLOAT)
        count = 1
    args, kwargs = [Ref(x.name)], {}
    if count == 2 or b.chance(0.4):
        args.append(Dims(x.shape[len(x.shape) - count:]))
    if b.chance(0.6):
        kwargs["weight"] = Ref(_trailing_params(b, x, count, "normal").name)
        if b.chance(0.7):
            kwargs["bias"] = Ref(_trailing_params(b, x, count, "normal").name)
    if b.chance(0.3):
        kwargs["eps"] = b.rng.choice([1e-6, 1e-3, 0.0])
    return b.emit(fn, tuple(args), kwargs, x.shape, FLOAT, False)


def make_rms_norm(b: Builder, fn: str) -> Value:
    x = b.operand(FLOAT, min_rank=1)
    if b.size(x.shape[-1:]) > b.budget.fold:
        x = b.new_input(b.new_shape(2, 4096), FLOAT)
    kwargs = {}
    if b.chance(0.6):
        kwargs["weight"] = Ref(_trailing_params(b, x, 1, "normal").name)
    if b.chance(0.3):
        kwargs["eps"] = b.rng.choice([1e-5, 0.0])
    return b.emit(fn, _refs(x), kwargs, x.shape, FLOAT, False)


def make_cross_entropy(b: Builder, fn: str) -> Value:
    logits, _ = _row_operand(b)
    if len(logits.shape) > 3:
        logits = b.new_input(b.new_shape(2, 4096), FLOAT)
    classes = logits.shape[-1]
    targets = b.new_input(logits.shape[:-1], b.rng.choice([INT32, INT64]), f"ids:{classes}")
    reduction = b.rng.choice(["mean", "sum", "none"])
    kwargs = {} if reduction == "mean" and b.chance(0.5) else {"reduction": reduction}
    shape = logits.shape[:-1] if reduction == "none" or len(logits.shape) == 1 else ()
    return b.emit(fn, _refs(logits, targets), kwargs, shape, FLOAT, False)


# ----------------------------------------------------------------------------- contractions


def _contraction_dims(b: Builder, rows_limit: int = 200) -> tuple[str, str, str]:
    k = b.new_dim(high=min(300, b.budget.fold))
    m = b.new_dim(high=rows_limit)
    n = b.new_dim(high=max(1, min(300, b.budget.work // max(1, b.dims[k] * b.dims[m]))))
    return m, k, n


def make_matmul(b: Builder, fn: str) -> Value:
    m, k, n = _contraction_dims(b)
    existing = b.existing((FLOAT,), 1, 3, limit=8192)
    form = b.rng.choice(["2d", "2d", "batched", "broadcast", "vector_left", "vector_right"])
    if existing is not None and b.chance(0.5) and b.size(existing.shape[-1:]) <= b.budget.fold:
        a = existing
        k = a.shape[-1]
        n = b.new_dim(high=max(1, min(128, b.budget.work // max(1, b.size(a.shape)))))
        other = b.new_input((k, n), FLOAT)
        shape = a.shape[:-1] + (n,)
        return b.emit("matmul", _refs(a, other), {}, shape, FLOAT, False)
    batch = b.new_dim(high=max(1, min(8, b.budget.work // max(1, b.dims[m] * b.dims[k] * b.dims[n]))))
    if form == "batched":
        a, c = b.new_input((batch, m, k)), b.new_input((batch, k, n))
        shape = (batch, m, n)
    elif form == "broadcast":
        a, c = b.new_input((batch, "1", m, k)), b.new_input((b.new_dim(high=3), k, n))
        shape = broadcast((batch, "1"), (c.shape[0],)) + (m, n)
    elif form == "vector_left":
        a, c = b.new_input((k,)), b.new_input((k, n))
        shape = (n,)
    elif form == "vector_right":
        a, c = b.new_input((m, k)), b.new_input((k,))
        shape = (m,)
    else:
        a, c = b.new_input((m, k)), b.new_input((k, n))
        shape = (m, n)
    if b.size(shape) > b.budget.elements:
        a, c = b.new_input(("3", k)), b.new_input((k, "5"))
        shape = ("3", "5")
    return b.emit("matmul", _refs(a, c), {}, shape, FLOAT, False)


def make_bmm(b: Builder, fn: str) -> Value:
    m, k, n = _contraction_dims(b, rows_limit=64)
    batch = b.new_dim(high=max(1, min(8, b.budget.work // max(1, b.dims[m] * b.dims[k] * b.dims[n]))))
    a, c = b.new_input((batch, m, k)), b.new_input((batch, k, n))
    return b.emit("bmm", _refs(a, c), {}, (batch, m, n), FLOAT, False)


def make_linear(b: Builder, fn: str) -> Value:
    x = b.operand(FLOAT, min_rank=1, max_rank=3, limit=8192)
    if b.size(x.shape[-1:]) > b.budget.fold:
        x = b.new_input(b.new_shape(2, 4096), FLOAT)
    out = b.new_dim(high=max(1, min(200, b.budget.work // max(1, b.size(x.shape)))))
    weight = b.new_input((out, x.shape[-1]), FLOAT, param=True)
    args = _refs(x, weight)
    if b.chance(0.5):
        args += (Ref(b.new_input((out,), FLOAT, param=True).name),)
    return b.emit("linear", args, {}, x.shape[:-1] + (out,), FLOAT, False)


def make_attention(b: Builder, fn: str) -> Value:
    rank = b.rng.choice([2, 3, 4, 4])
    tq = b.new_dim(high=200)
    tk = b.new_dim(high=300, low=64) if b.chance(0.5) else b.new_dim(high=300)  # several one-pass blocks
    depth = b.rng.choice(["1", "3", "8", "16", "32", "64", b.new_dim(high=64)])
    value_depth = b.rng.choice([depth, depth, "1", "5", b.new_dim(high=64)])
    if value_depth == "1" or b.dims.get(value_depth, 0) == 1:
        if not b.allows("value-dim-1") and b.inference and b.dims[tk] >= 16:
            value_depth = "4"
    lead: tuple[str, ...] = ()
    q_heads = kv_heads = None
    if rank >= 3:
        kv_heads = b.rng.choice(["1", "2", "3"])
        group = b.rng.choice(["1", "1", "2", "4"])
        q_heads = kv_heads if group == "1" else f"{group}*{kv_heads}"
        lead = (b.rng.choice(["1", "2"]),) if rank == 4 else ()
    rows = lead + ((q_heads,) if q_heads else ())
    kv_rows = lead + ((kv_heads,) if kv_heads else ())
    while b.size(rows + (tq, tk)) > 4 * b.budget.elements:
        tq, tk = b.new_dim(high=64), b.new_dim(high=64)
    huge = b.allows("huge-score-nan") and b.chance(0.12)
    q = b.new_input(rows + (tq, depth), FLOAT, "normal:1e10" if huge else None)
    k = b.new_input(kv_rows + (tk, depth), FLOAT)
    v = b.new_input(kv_rows + (tk, value_depth), FLOAT)
    kwargs: dict[str, object] = {}
    masked_ok = b.allows("masked-attention-nan") or not b.inference or b.dims[tk] < 64
    if b.chance(0.25) and masked_ok:
        kwargs["causal"] = True
    if b.chance(0.5) and masked_ok:
        score_shape = rows + (tq, tk)
        mask_shape = b.rng.choice([(tq, tk), (tk,), score_shape, tuple("1" for _ in rows) + (tq, tk)])
        kind = b.rng.choice(["keymask", "addmask", "bool"])
        pattern = b.rng.choice(["lead", "trail", "alternate", "one", "random"])
        if kind == "bool":
            mask = b.new_input(mask_shape, BOOL, "bool:0.7")
        else:
            mask = b.new_input(mask_shape, BOOL if kind == "keymask" else FLOAT, f"{kind}:{pattern}")
        kwargs["mask"] = Ref(mask.name)
    if b.chance(0.3):
        kwargs["scale"] = b.rng.choice([1.0, 0.125, 2.0])
    return b.emit("attention", _refs(q, k, v), kwargs, rows + (tq, value_depth), FLOAT, False)


def make_conv2d(b: Builder, fn: str) -> Value:
    kh, kw = b.rng.choice(["1", "2", "3"]), b.rng.choice(["1", "3"])
    stride, padding, dilation = b.rng.choice([1, 1, 2]), b.rng.choice([0, 0, 1, 2]), b.rng.choice([1, 1, 2])
    n, c, o = b.new_dim(high=2), b.new_dim(high=8), b.new_dim(high=8)
    reach = dilation * 2 + 1
    h, w = b.new_dim(high=40, low=reach), b.new_dim(high=40, low=reach)
    x = b.new_input((n, c, h, w))
    weight = b.new_input((o, c, kh, kw), FLOAT, param=True)
    args = _refs(x, weight)
    if b.chance(0.5):
        args += (Ref(b.new_input((o,), FLOAT, param=True).name),)
    kwargs = {"stride": stride, "padding": padding, "dilation": dilation}
    sizes = {name: b.size((name,)) for name in (h, w)}
    out = [str((sizes[d] + 2 * padding - dilation * (int(k) - 1) - 1) // stride + 1) for d, k in ((h, kh), (w, kw))]
    return b.emit("conv2d", args, kwargs, (n, o, *out), FLOAT, False)


def make_pool(b: Builder, fn: str) -> Value:
    """max_pool2d / avg_pool2d over NCHW: kernel, stride, padding (at most half the kernel,
    as PyTorch requires), dilation for max, count_include_pad for avg."""
    kh, kw = b.rng.choice([1, 2, 3]), b.rng.choice([1, 2, 3])
    stride = b.rng.choice([None, 1, 2])
    padding = b.rng.choice([0, 0, min(kh, kw) // 2])
    dilation = b.rng.choice([1, 1, 2]) if fn == "max_pool2d" else 1
    n, c = b.new_dim(high=2), b.new_dim(high=6)
    reach = max(dilation * (max(kh, kw) - 1) + 1, 2)
    h, w = b.new_dim(high=40, low=reach), b.new_dim(high=40, low=reach)
    x = b.new_input((n, c, h, w))
    kwargs = {"kernel_size": (kh, kw), "padding": padding}
    if stride is not None:
        kwargs["stride"] = stride
    if fn == "max_pool2d":
        kwargs["dilation"] = dilation
    elif padding and b.chance(0.5):
        kwargs["count_include_pad"] = False
    step = (kh, kw) if stride is None else (stride, stride)
    sizes = {name: b.size((name,)) for name in (h, w)}
    out = [str((sizes[d] + 2 * padding - dilation * (k - 1) - 1) // s + 1)
           for d, k, s in ((h, kh, step[0]), (w, kw, step[1]))]
    return b.emit(fn, _refs(x), kwargs, (n, c, *out), FLOAT, False)


def make_batch_norm(b: Builder, fn: str) -> Value:
    """Inference batch norm over channel axis 1 of (N, C, ...), with or without weight and bias."""
    n, c = b.new_dim(high=4), b.new_dim(high=16)
    x = b.new_input((n, c) + b.new_shape(b.rng.randint(0, 2), 24))
    mean = b.new_input((c,), FLOAT, param=True)
    var = b.new_input((c,), FLOAT, "uniform:0:2", param=True)
    args = _refs(x, mean, var)
    if b.chance(0.7):
        args += (Ref(b.new_input((c,), FLOAT, param=True).name), Ref(b.new_input((c,), FLOAT, param=True).name))
    return b.emit("batch_norm", args, {"eps": b.rng.choice([1e-5, 1e-3])}, x.shape, FLOAT, False)


def make_embedding(b: Builder, fn: str) -> Value:
    vocab, width = b.new_dim(high=300), b.new_dim(high=64)
    ids = b.new_input(b.new_shape(b.rng.randint(1, 2), 256), b.rng.choice([INT32, INT64]), f"ids:{vocab}")
    table = b.new_input((vocab, width), FLOAT, param=True)
    return b.emit("embedding", _refs(ids, table), {}, ids.shape + (width,), FLOAT, False)


def make_rope(b: Builder, fn: str) -> Value:
    tokens, half = b.new_dim(high=128), b.new_dim(high=32)
    lead = b.new_shape(b.rng.randint(0, 2), 8)
    x = b.new_input(lead + (tokens, f"2*{half}"))
    cos, sin = (b.new_input((tokens, half), FLOAT, "uniform:-1:1") for _ in range(2))
    kwargs = {"interleaved": True} if b.chance(0.5) else {}
    return b.emit("rope", _refs(x, cos, sin), kwargs, x.shape, FLOAT, False)


def make_rope_2d(b: Builder, fn: str) -> Value:
    height, width, quarter = b.new_dim(high=12), b.new_dim(high=12), b.new_dim(high=16)
    x = b.new_input(b.new_shape(b.rng.randint(0, 1), 4) + (f"{height}*{width}", f"4*{quarter}"))
    tables = [b.new_input((d, quarter), FLOAT, "uniform:-1:1") for d in (width, width, height, height)]
    return b.emit("rope_2d", _refs(x, *tables), {}, x.shape, FLOAT, False)


def make_adam(b: Builder, fn: str) -> Value:
    param = b.operand(FLOAT, min_rank=1)
    grad, m = b.new_input(param.shape), b.new_input(param.shape)
    v = b.new_input(param.shape, FLOAT, "uniform:0:2")
    kwargs = {"lr": b.rng.choice([1e-3, 0.1]), "weight_decay": b.rng.choice([0.0, 0.0, 0.01])}
    outs = b.emit_many("adam_step", _refs(param, grad, m, v) + (b.rng.randint(1, 10),), kwargs,
                       [param.shape] * 3, FLOAT)
    return outs[b.rng.randrange(3)]


# ----------------------------------------------------------------------------- the table


def _table() -> dict[str, Callable[[Builder], Value]]:
    makers: dict[str, Callable[[Builder, str], Value]] = {
        **{name: make_unary for name in UNARY_FLOAT},
        "neg": make_sign, "abs": make_sign, "pow": make_pow, "square": make_pow,
        **{name: make_arithmetic for name in ARITHMETIC},
        **{name: make_compare for name in COMPARISONS},
        "logical_and": make_logical, "logical_or": make_logical, "logical_not": make_logical,
        "where": make_where, "cast": make_cast,
        "sum": make_reduce, "max": make_reduce, "min": make_reduce, "mean": make_reduce,
        "softmax": make_softmax, "log_softmax": make_softmax,
        "layer_norm": make_layer_norm, "rms_norm": make_rms_norm, "cross_entropy": make_cross_entropy,
        "matmul": make_matmul, "bmm": make_bmm, "linear": make_linear, "attention": make_attention,
        "conv2d": make_conv2d, "embedding": make_embedding, "rope": make_rope, "rope_2d": make_rope_2d,
        "adam_step": make_adam, "max_pool2d": make_pool, "avg_pool2d": make_pool, "batch_norm": make_batch_norm,
        "reshape": make_reshape, "flatten": make_reshape, "permute": make_permute, "transpose": make_permute,
        "expand": make_expand, "broadcast_to": make_expand, "squeeze": make_squeeze, "unsqueeze": make_squeeze,
        "slice": make_slice, "slice_axis": make_slice, "getitem": make_getitem, "concat": make_concat,
        "window_partition": make_window_partition, "window_unpartition": make_window_unpartition,
    }
    # functions this build of weft.nn lacks (fmod arrives with issue 8's integer semantics)
    return {name: functools.partial(maker, fn=name) for name, maker in makers.items() if hasattr(nn, name)}


COVERAGE: dict[str, Callable[[Builder], Value]] = _table()


def generate(seed: int, index: int, options: Options) -> Program:
    """Program ``index`` of the run seeded ``seed``."""
    rng = random.Random(f"{seed}:{index}:{options.contract}")
    builder = Builder(rng, options, seed)
    names = sorted(COVERAGE)
    weights = [WEIGHTS.get(name, 1) for name in names]
    for _ in range(rng.randint(1, options.max_ops)):
        COVERAGE[rng.choices(names, weights)[0]](builder)
    computed = [v for v in builder.values if not v.name.startswith("in")]
    outputs = [computed[-1].name]
    if len(computed) > 1 and rng.random() < 0.3:
        other = rng.choice(computed[:-1]).name
        if other not in outputs:
            outputs.append(other)
    program = Program(seed * 1_000_003 + index, tuple(builder.dims.items()), tuple(builder.inputs),
                      tuple(builder.ops), tuple(outputs))
    return prune(program)
