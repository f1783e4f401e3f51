"""Cross-entropy with PyTorch's semantics: class or probability targets, ``ignore_index``,
``label_smoothing``, reductions ``none``/``sum``/``mean``.

Members, for rows r (every dim but the last, the classes c)::

    ce_max[r]    = max_c x[r, c]
    ce_sumexp[r] = sum_c exp(x[r, c] - ce_max[r])          lse[r] = log(ce_sumexp[r]) + ce_max[r]
    class targets:   ce_loss[r] = where(t[r] == ignore, 0, lse[r] - x[r, t'[r]])
                     (t' is t with the ignored value replaced by class 0, so the gather stays in range)
      smoothing e:   ce_smooth[r] = sum_c (lse[r] - x[r, c]);
                     ce_loss[r] = where(ignored, 0, (1-e)(lse - x[t']) + (e/C) ce_smooth)
      mean:          ce_count = sum_r (t[r] != ignore);  ce_mean = sum_r ce_loss[r] / ce_count
    probability targets p (the logits' shape; ``ignore_index`` does not apply, as in PyTorch):
                     ce_loss[r] = sum_c p'[r, c] * (lse[r] - x[r, c]),  p' = (1-e) p + e/C
      mean:          ce_mean = sum_r ce_loss[r] * (1/R)

``ce_max`` and ``ce_sumexp`` are the pair the one-pass (online) rewrite fuses; every form
keeps them. Classes are the last dim (PyTorch puts them at dim 1 of an (N, C, d1, ...)
input: ``permute`` first). A mean over only ignored targets, or over no rows, is 0/0 = NaN, as
in PyTorch.
"""

from __future__ import annotations

import math

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
    IndexOf,
    Unary,
    UnaryOp,
    Where,
)
from weft.nn.elementwise import mul
from weft.nn.tensor import Tensor, axis_index, current_tracer
from weft.nn.views import reshape

REDUCTIONS = ("mean", "sum", "none")


def _sub(a: Expr, b: Expr) -> Expr:
    return Binary(BinaryOp.SUB, a, b)


def _mul(a: Expr, b: Expr) -> Expr:
    return Binary(BinaryOp.MUL, a, b)


def _check(logits: Tensor, targets: Tensor, reduction: str, label_smoothing: float) -> bool:
    """The arguments' checks; returns whether the targets are probabilities."""
    if not isinstance(logits, Tensor) or not logits.dtype.is_float:
        got = getattr(logits, "dtype", None)
        raise DTypeError(f"cross_entropy: needs float32 logits, got {got.value if got else type(logits).__name__};"
                         " cast first")
    if not isinstance(targets, Tensor) or targets.dtype is DType.BOOL:
        got = getattr(targets, "dtype", None)
        raise DTypeError(
            f"cross_entropy: targets must be an int32/int64 Tensor of class indices or a float32 Tensor of"
            f" probabilities, got {got.value if got else type(targets).__name__}"
        )
    if reduction not in REDUCTIONS:
        raise ShapeError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ShapeError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    probabilities = targets.dtype.is_float
    if logits.ndim < 1:
        raise ShapeError(f"cross_entropy: logits must have a class dimension, got shape {logits.shape}")
    if probabilities and targets.shape != logits.shape:
        raise DTypeError(
            f"cross_entropy: float targets are probabilities and need the logits' shape {logits.shape}, got"
            f" {targets.shape}; class indices of shape {logits.shape[:-1]} must be int32/int64"
        )
    if not probabilities and targets.shape != logits.shape[:-1]:
        raise ShapeError(
            f"cross_entropy: logits {logits.shape} and targets {targets.shape} do not fit;"
            " targets must have the logits' shape without the class dimension"
        )
    return probabilities


def cross_entropy(
    logits: Tensor,
    targets: Tensor,
    reduction: str = "mean",
    ignore_index: int | None = -100,
    label_smoothing: float = 0.0,
) -> Tensor:
    """PyTorch's ``F.cross_entropy`` with the classes last: logits (..., C) against integer
    class targets (...) or float probability targets (..., C). Targets equal to
    ``ignore_index`` (default -100, as PyTorch; None: none) add 0 and are left out of the
    mean. One unbatched row (C,) gives a 0-d loss."""
    probabilities = _check(logits, targets, reduction, label_smoothing)
    current_tracer(logits, targets)
    if logits.ndim == 1:  # one unbatched row: a batch of one
        classes = logits.shape[0]
        batched_targets = reshape(targets, (1, classes) if probabilities else (1,))
        loss = cross_entropy(reshape(logits, (1, classes)), batched_targets, reduction, ignore_index, label_smoothing)
        return reshape(loss, ()) if reduction == "none" else loss
    return _Loss(logits, targets, float(label_smoothing)).reduced(reduction, None if probabilities else ignore_index)


class _Loss:
    """The members of one cross-entropy (see the module docstring)."""

    def __init__(self, logits: Tensor, targets: Tensor, smoothing: float):
        self.logits, self.targets, self.smoothing = logits, targets, smoothing
        self.tracer = logits.tracer
        self.classes = logits.shape[-1]
        self.row_axes = tuple(Axis(f"i{d}", n) for d, n in enumerate(logits.shape[:-1]))
        self.rows = axis_index(self.row_axes)
        self.fold = Fold((Axis("c", self.classes),), Combiner.SUM)
        at_class = self.rows + (AxisIndex("c"),)
        self.row_max = self.tracer.emit("ce_max", self.row_axes, logits.read(at_class), DType.FLOAT32,
                                        Fold((Axis("c", self.classes),), Combiner.MAX))
        shifted = _sub(logits.read(at_class), self.row_max.read(self.rows))
        total = self.tracer.emit("ce_sumexp", self.row_axes, Unary(UnaryOp.EXP, shifted), DType.FLOAT32, self.fold)
        self.lse = Binary(BinaryOp.ADD, Unary(UnaryOp.LOG, total.read(self.rows)), self.row_max.read(self.rows))
        self.minus_log_prob = _sub(self.lse, logits.read(at_class))  # -log p[r, c], inside a fold over c

    def reduced(self, reduction: str, ignore_index: int | None) -> Tensor:
        if self.targets.dtype.is_float:
            loss, ignored = self._probability_loss(), None
        else:
            loss, ignored = self._class_loss(ignore_index)
        if reduction == "none" or not self.row_axes:
            return loss
        fold = Fold(self.row_axes, Combiner.SUM)
        value = loss.read(self.rows)
        if reduction == "sum":
            return self.tracer.emit("ce_sum", (), value, DType.FLOAT32, fold)
        if loss.size == 0:  # the mean of no losses is 0/0 = NaN, as in PyTorch (a fold's term never runs)
            return mul(self.tracer.emit("ce_sum", (), value, DType.FLOAT32, fold), math.nan)
        if ignored is None:
            return self.tracer.emit("ce_mean", (), _mul(value, Const(1.0 / loss.size)), DType.FLOAT32, fold)
        kept = Where(ignored, Const(0.0), Const(1.0))
        count = self.tracer.emit("ce_count", (), kept, DType.FLOAT32, fold)
        return self.tracer.emit("ce_mean", (), Binary(BinaryOp.DIV, value, count.read(())), DType.FLOAT32, fold)

    def _class_loss(self, ignore_index: int | None) -> tuple[Tensor, Expr | None]:
        target = self.targets.read(self.rows)
        ignored = None
        if ignore_index is not None:
            ignored = Binary(BinaryOp.EQ, target, Const(int(ignore_index), self.targets.dtype))
            target = Where(ignored, Const(0, self.targets.dtype), target)
        picked = _sub(self.lse, self.logits.read(self.rows + (IndexOf(target),)))
        if self.smoothing:
            smooth = self.tracer.emit("ce_smooth", self.row_axes, self.minus_log_prob, DType.FLOAT32, self.fold)
            e = self.smoothing
            picked = Binary(BinaryOp.ADD, _mul(picked, Const(1.0 - e)),
                            _mul(smooth.read(self.rows), Const(e / self.classes)))
        body = picked if ignored is None else Where(ignored, Const(0.0), picked)
        return self.tracer.emit("ce_loss", self.row_axes, body, DType.FLOAT32), ignored

    def _probability_loss(self) -> Tensor:
        weight = self.targets.read(self.rows + (AxisIndex("c"),))
        if self.smoothing:
            e = self.smoothing
            weight = Binary(BinaryOp.ADD, _mul(weight, Const(1.0 - e)), Const(e / self.classes))
        return self.tracer.emit("ce_loss", self.row_axes, _mul(weight, self.minus_log_prob), DType.FLOAT32,
                                self.fold)
