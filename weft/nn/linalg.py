"""Contractions and index-heavy members: matmul, linear, attention (conv2d: ``weft.nn.conv``),
embedding lookup and rotary embeddings.

A contraction is one member whose fold sums a product of two loads; transposes
and broadcasts of its operands live in the Load index maps. Attention is six
members (docs/design.md, section 5)::

    scores[b,h,i,j] = sum_d q[b,h,i,d] * k[b,h//g,j,d] * scale   (causal / bool mask: where(.., -inf))
    max[b,h,i]      = max_j scores                               (float mask added here and in exp)
    exp[b,h,i,j]    = exp(scores - max)
    sum[b,h,i]      = sum_j exp
    probs[b,h,i,j]  = exp / sum
    out[b,h,i,e]    = sum_j probs * v[b,h//g,j,e]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from weft.errors import DTypeError, ShapeError
from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Combiner,
    Const,
    DType,
    Expr,
    Fold,
    IndexConst,
    IndexExpr,
    IndexOf,
    IndexValue,
    Unary,
    UnaryOp,
    Where,
)
from weft.nn.elementwise import add, broadcast_read, broadcast_shapes
from weft.nn.tensor import Tensor, current_tracer
from weft.nn.views import reshape, transpose


def _need_float(op: str, *tensors: Tensor | None) -> None:
    for tensor in tensors:
        if tensor is None:
            continue
        if not isinstance(tensor, Tensor):
            raise DTypeError(f"{op}: needs Tensors, got {type(tensor).__name__}")
        if not tensor.dtype.is_float:
            raise DTypeError(f"{op}: needs float32 operands, got {tensor.dtype.value} of shape {tensor.shape}")


def _mul(a: Expr, b: Expr) -> Expr:
    return Binary(BinaryOp.MUL, a, b)


def _batch_read(tensor: Tensor, batch: tuple[int, ...], batch_index: tuple[IndexExpr, ...],
                rest: tuple[IndexExpr, ...]) -> Expr:
    """Read ``tensor[*batch, *rest]`` with its leading dims broadcast to ``batch``."""
    lead = tensor.shape[:tensor.ndim - len(rest)]
    offset = len(batch) - len(lead)
    own = tuple(
        IndexConst(0) if n == 1 and batch[offset + d] != 1 else batch_index[offset + d]
        for d, n in enumerate(lead)
    )
    return tensor.read(own + rest)


def matmul(a: Tensor, b: Tensor, label: str = "matmul") -> Tensor:
    """NumPy ``matmul``: 1-D operands, broadcast batch dims; one contraction member."""
    _need_float("matmul", a, b)
    current_tracer(a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: operands must have at least 1 dimension, got shapes {a.shape} and {b.shape}")
    inner_a = a.shape[-1]
    inner_b = b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if inner_a != inner_b:
        raise ShapeError(
            f"matmul: shapes {a.shape} and {b.shape} do not fit: the last dim of the first ({inner_a})"
            f" must equal the {'second-to-last' if b.ndim >= 2 else 'only'} dim of the second ({inner_b})"
        )
    batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    batch_axes = tuple(Axis(f"b{n}", extent) for n, extent in enumerate(batch))
    batch_index = tuple(AxisIndex(axis.name) for axis in batch_axes)
    i, j, k = AxisIndex("i"), AxisIndex("j"), AxisIndex("k")
    out_axes = batch_axes
    if a.ndim >= 2:
        out_axes += (Axis("i", a.shape[-2]),)
    if b.ndim >= 2:
        out_axes += (Axis("j", b.shape[-1]),)
    left = _batch_read(a, batch, batch_index, (i, k) if a.ndim >= 2 else (k,))
    right = _batch_read(b, batch, batch_index, (k, j) if b.ndim >= 2 else (k,))
    fold = Fold((Axis("k", inner_a),), Combiner.SUM)
    return a.tracer.emit(label, out_axes, _mul(left, right), DType.FLOAT32, fold)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matmul of (B, M, K) by (B, K, N)."""
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: needs (B, M, K) and (B, K, N) with equal B, got shapes {a.shape} and {b.shape}")
    return matmul(a, b, "bmm")


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias`` with PyTorch's (out, in) weight: a contraction, plus an add for bias."""
    _need_float("linear", x, weight, bias)
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ShapeError(
            f"linear: input {x.shape} and weight {weight.shape} do not fit: weight must be"
            f" (out_features, {x.shape[-1] if x.ndim else '?'})"
        )
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ShapeError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
    out = matmul(x, transpose(weight), "linear")
    return out if bias is None else add(out, bias)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scale: float | None = None,
    mask: Tensor | None = None,
    causal: bool = False,
) -> Tensor:
    """Scaled dot-product attention as six members (module docstring).

    Shapes (*batch, H, T, D) with K/V heads dividing query heads (grouped-query:
    query head h reads K/V head h // (Hq/Hkv)); or (T, D) with no heads. ``mask``
    broadcasts to (*batch, Hq, Tq, Tk): bool keeps True positions, float is added
    to the scores; a query row with every key masked gives 0 (PyTorch's CPU kernel),
    one more member after the six. ``causal`` keeps key j <= query i (PyTorch's
    top-left alignment). Batch dims broadcast (a 3-D q against 4-D k/v, as in SDPA).
    """
    _need_float("attention", q, k, v)
    current_tracer(q, k, v, mask)
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise ShapeError(f"attention: q, k, v must have rank >= 2, got {q.shape}, {k.shape}, {v.shape}")
    rank = max(q.ndim, k.ndim, v.ndim)
    if rank >= 3:  # batch dims broadcast as in torch's SDPA: a 3-D q against 4-D k/v reads as (1, ...)
        q, k, v = (reshape(t, (1,) * (rank - t.ndim) + t.shape) if t.ndim < rank else t for t in (q, k, v))
    heads = rank >= 3
    lead = broadcast_shapes("attention batch dims", q.shape[:-3], k.shape[:-3], v.shape[:-3]) if heads else ()
    if k.shape[-1] != q.shape[-1] or k.shape[-2] != v.shape[-2] or (heads and k.shape[-3] != v.shape[-3]):
        raise ShapeError(
            f"attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit: k needs q's head dim and"
            " v needs k's sequence length and heads"
        )
    q_heads = q.shape[-3] if heads else 1
    kv_heads = k.shape[-3] if heads else 1
    if q_heads % kv_heads:
        raise ShapeError(f"attention: {q_heads} query heads are not a multiple of {kv_heads} key/value heads"
                         f" (q {q.shape}, k {k.shape})")
    group = q_heads // kv_heads
    tq, tk, depth, value_depth = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    scale = 1.0 / math.sqrt(depth) if scale is None else float(scale)

    lead_axes = tuple(Axis(f"b{n}", extent) for n, extent in enumerate(lead))
    head_axes = (Axis("h", q_heads),) if heads else ()
    row_axes = lead_axes + head_axes + (Axis("i", tq),)
    score_axes = row_axes + (Axis("j", tk),)
    b = tuple(AxisIndex(a.name) for a in lead_axes)

    def lead_of(tensor: Tensor) -> tuple[IndexExpr, ...]:
        return tuple(IndexConst(0) if tensor.shape[n] == 1 and lead[n] != 1 else b[n] for n in range(len(lead)))

    bq, bk, bv = lead_of(q), lead_of(k), lead_of(v)
    h = (AxisIndex("h"),) if heads else ()
    kv_h = ((AxisIndex("h") // group),) if heads else ()
    i, j, d = AxisIndex("i"), AxisIndex("j"), AxisIndex("d")
    rows = b + h + (i,)
    q_rows = bq + h + (i,)
    scores_at = rows + (j,)

    bool_mask = mask is not None and mask.dtype is DType.BOOL
    if mask is not None:
        if mask.dtype not in (DType.BOOL, DType.FLOAT32):
            raise DTypeError(f"attention: mask must be bool or float32, got {mask.dtype.value}")
        broadcast_shapes("attention mask", mask.shape, tuple(a.extent for a in score_axes))
    term = _mul(_mul(q.read(q_rows + (d,)), k.read(bk + kv_h + (j, d))), Const(scale))
    keep: Expr | None = None
    if causal:
        keep = Binary(BinaryOp.LE, IndexValue(j), IndexValue(i))
    if bool_mask:
        mask_value = broadcast_read(mask, tuple(a.extent for a in score_axes), scores_at)
        keep = mask_value if keep is None else Binary(BinaryOp.AND, keep, mask_value)
    if keep is not None:
        term = Where(keep, term, Const(-math.inf))
    tracer = q.tracer
    fold_d = Fold((Axis("d", depth),), Combiner.SUM)
    scores = tracer.emit("attn_scores", score_axes, term, DType.FLOAT32, fold_d)

    def masked(index: tuple[IndexExpr, ...]) -> Expr:
        value = scores.read(index)
        if mask is not None and not bool_mask:
            extents = tuple(a.extent for a in score_axes)
            value = Binary(BinaryOp.ADD, value, broadcast_read(mask, extents, index))
        return value

    fold_j = Fold((Axis("j", tk),), Combiner.SUM)
    row_max = tracer.emit("attn_max", row_axes, masked(scores_at), DType.FLOAT32, Fold((Axis("j", tk),), Combiner.MAX))
    exps = tracer.emit("attn_exp", score_axes, Unary(UnaryOp.EXP, Binary(BinaryOp.SUB, masked(scores_at),
                                                                          row_max.read(rows))), DType.FLOAT32)
    total = tracer.emit("attn_sum", row_axes, exps.read(scores_at), DType.FLOAT32, fold_j)
    probs = tracer.emit("attn_probs", score_axes, Binary(BinaryOp.DIV, exps.read(scores_at), total.read(rows)),
                        DType.FLOAT32)
    out_axes = row_axes + (Axis("e", value_depth),)
    body = _mul(probs.read(scores_at), v.read(bv + kv_h + (j, AxisIndex("e"))))
    out = tracer.emit("attn_out", out_axes, body, DType.FLOAT32, fold_j)
    if mask is None:
        return out
    # A row whose every key is masked has max -inf and 0/0 probabilities; PyTorch's CPU
    # kernel (math and flash) returns 0 for it, so a seventh member selects 0 there.
    out_at = rows + (AxisIndex("e"),)
    fully_masked = Binary(BinaryOp.EQ, row_max.read(rows), Const(-math.inf))
    return tracer.emit("attn_masked_rows", out_axes, Where(fully_masked, Const(0.0), out.read(out_at)),
                       DType.FLOAT32)


def embedding(ids: Tensor, table: Tensor) -> Tensor:
    """Rows of ``table`` (V, D) picked by integer ``ids`` (...): one gather member."""
    if not isinstance(ids, Tensor) or not ids.dtype.is_int:
        raise DTypeError(f"embedding: ids must be an int32/int64 Tensor, got {getattr(ids, 'dtype', ids)}")
    _need_float("embedding", table)
    if table.ndim != 2:
        raise ShapeError(f"embedding: table must be (vocab, dim), got shape {table.shape}; ids {ids.shape}")
    current_tracer(ids, table)
    axes = tuple(Axis(f"i{n}", extent) for n, extent in enumerate(ids.shape)) + (Axis("e", table.shape[1]),)
    token = ids.read(tuple(AxisIndex(a.name) for a in axes[:-1]))
    return ids.tracer.emit("embedding", axes, table.read((IndexOf(token), AxisIndex("e"))), DType.FLOAT32)


def _rope_check(op: str, x: Tensor, tables: Sequence[Tensor], shapes: Sequence[tuple[int, ...]]) -> None:
    _need_float(op, x, *tables)
    current_tracer(x, *tables)
    for table, shape in zip(tables, shapes, strict=True):
        if table.shape != shape:
            raise ShapeError(f"{op}: table shape {table.shape} does not fit input {x.shape}: expected {shape}")


def rope(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """Rotary embedding over (..., T, D) with (T, D/2) cos/sin tables; one member.

    Default pairs dim d with d + D/2 (rotate-half: Llama, Qwen); ``interleaved``
    pairs 2p with 2p+1 (GPT-J, SAM)."""
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ShapeError(f"rope: input must be (..., T, D) with even D, got shape {x.shape}")
    tokens, depth = x.shape[-2:]
    half = depth // 2
    _rope_check("rope", x, (cos, sin), ((tokens, half), (tokens, half)))
    axes = tuple(Axis(f"i{n}", extent) for n, extent in enumerate(x.shape))
    index = tuple(AxisIndex(a.name) for a in axes)
    t, d = index[-2], index[-1]
    if interleaved:
        pair, partner = d // 2, (d // 2) * 2 + (d + 1) % 2
        first = Binary(BinaryOp.EQ, IndexValue(d % 2), Const(0, DType.INT64))
    else:
        pair, partner = d % half, (d + half) % depth
        first = Binary(BinaryOp.LT, IndexValue(d), Const(half, DType.INT64))
    other = x.read(index[:-1] + (partner,))
    rotated = Where(first, Unary(UnaryOp.NEG, other), other)
    body = Binary(BinaryOp.ADD, _mul(x.read(index), cos.read((t, pair))), _mul(rotated, sin.read((t, pair))))
    return x.tracer.emit("rope", axes, body, DType.FLOAT32)


def rope_2d(x: Tensor, cos_col: Tensor, sin_col: Tensor, cos_row: Tensor, sin_row: Tensor) -> Tensor:
    """Axial 2-D rotary embedding (SAM 2/3 image encoder) over (..., H*W, D); one member.

    Interleaved pairs; pair p < D/4 rotates by the token's column (tables (W, D/4)),
    pair p >= D/4 by its row (tables (H, D/4)); token t sits at row t // W, column t % W."""
    if x.ndim < 2 or x.shape[-1] % 4:
        raise ShapeError(f"rope_2d: input must be (..., H*W, D) with D divisible by 4, got shape {x.shape}")
    quarter = x.shape[-1] // 4
    height, width = cos_row.shape[0], cos_col.shape[0]
    if height * width != x.shape[-2]:
        raise ShapeError(f"rope_2d: tables for a {height}x{width} grid do not fit {x.shape[-2]} tokens ({x.shape})")
    shapes = ((width, quarter),) * 2 + ((height, quarter),) * 2
    _rope_check("rope_2d", x, (cos_col, sin_col, cos_row, sin_row), shapes)
    axes = tuple(Axis(f"i{n}", extent) for n, extent in enumerate(x.shape))
    index = tuple(AxisIndex(a.name) for a in axes)
    t, d = index[-2], index[-1]
    pair = d // 2
    is_col = Binary(BinaryOp.LT, IndexValue(pair), Const(quarter, DType.INT64))
    col_at, row_at = (t % width, pair % quarter), (t // width, pair % quarter)
    cos = Where(is_col, cos_col.read(col_at), cos_row.read(row_at))
    sin = Where(is_col, sin_col.read(col_at), sin_row.read(row_at))
    other = x.read(index[:-1] + ((d // 2) * 2 + (d + 1) % 2,))
    first = Binary(BinaryOp.EQ, IndexValue(d % 2), Const(0, DType.INT64))
    rotated = Where(first, Unary(UnaryOp.NEG, other), other)
    body = Binary(BinaryOp.ADD, _mul(x.read(index), cos), _mul(rotated, sin))
    return x.tracer.emit("rope2d", axes, body, DType.FLOAT32)
