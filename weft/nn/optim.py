"""The Adam step as three elementwise members (new m, new v, new param).

Follows ``torch.optim.Adam``'s (foreach, non-fused) formula so results compare
directly::

    m' = beta1 * m + (1 - beta1) * g
    v' = beta2 * v + (1 - beta2) * g * g
    p' = p - (lr / bc1) * m' / (sqrt(v') / sqrt(bc2) + eps),   bc_k = 1 - beta_k ** step

The bias corrections depend only on the Python ``step``, so they are constants.
"""

from __future__ import annotations

import math

from weft.errors import ShapeError
from weft.ir import Binary, BinaryOp, Const, Expr, Unary, UnaryOp
from weft.nn.elementwise import elementwise
from weft.nn.tensor import Tensor


def _c(value: float) -> Const:
    return Const(float(value))


def _add(a: Expr, b: Expr) -> Expr:
    return Binary(BinaryOp.ADD, a, b)


def _mul(a: Expr, b: Expr) -> Expr:
    return Binary(BinaryOp.MUL, a, b)


def adam_step(
    param: Tensor,
    grad: Tensor,
    m: Tensor,
    v: Tensor,
    step: int,
    lr: float = 1e-3,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """One Adam update; returns ``(new_param, new_m, new_v)``. ``step`` counts from 1.

    ``weight_decay`` is classic (L2) Adam: it adds ``weight_decay * param`` to the
    gradient inside the m and v members, as ``torch.optim.Adam`` does."""
    shapes = {t.shape for t in (param, grad, m, v)}
    if len(shapes) != 1:
        raise ShapeError(
            f"adam_step: param {param.shape}, grad {grad.shape}, m {m.shape}, v {v.shape} must share one shape"
        )
    if int(step) < 1:
        raise ShapeError(f"adam_step: step counts from 1, got {step}")
    bias1 = 1.0 - beta1 ** int(step)
    bias2 = 1.0 - beta2 ** int(step)

    def gradient(g: Expr, p: Expr) -> Expr:
        return _add(g, _mul(_c(weight_decay), p)) if weight_decay else g

    new_m = elementwise("adam_m", (m, grad, param),
                        lambda m_, g, p: _add(_mul(_c(beta1), m_), _mul(_c(1.0 - beta1), gradient(g, p))))

    def second(v_: Expr, g: Expr, p: Expr) -> Expr:
        g = gradient(g, p)
        return _add(_mul(_c(beta2), v_), _mul(_mul(_c(1.0 - beta2), g), g))

    new_v = elementwise("adam_v", (v, grad, param), second)

    def update(p: Expr, m_: Expr, v_: Expr) -> Expr:
        denominator = _add(Binary(BinaryOp.DIV, Unary(UnaryOp.SQRT, v_), _c(math.sqrt(bias2))), _c(eps))
        return Binary(BinaryOp.SUB, p, _mul(_c(lr / bias1), Binary(BinaryOp.DIV, m_, denominator)))

    new_param = elementwise("adam_param", (param, new_m, new_v), update)
    return new_param, new_m, new_v
