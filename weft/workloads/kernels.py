"""Single-operation workloads: attention, layer norm, softmax, Adam, cross-entropy.

Each is the one computation a fused library kernel exists for, written as plain
``weft.nn`` members, at the sizes that matter (SAM 3 global attention, an LLM
vocabulary cross-entropy, a 50 M-parameter optimizer step).
"""

from __future__ import annotations

import math

import numpy as np

from weft import nn
from weft.ir import Plan
from weft.nn import spec, trace
from weft.workloads.base import Workload, lazy_torch, normal, positive, require, trace_named, weight

# --------------------------------------------------------------------------- attention


def _attention_plan(batch: int, heads: int, tokens: int, head_dim: int) -> Plan:
    shape = (batch, heads, tokens, head_dim)

    def attention(q, k, v):
        return nn.attention(q, k, v)

    return trace(attention, spec(shape), spec(shape), spec(shape))


def _attention_inputs(rng, batch, heads, tokens, head_dim):
    shape = (batch, heads, tokens, head_dim)
    return tuple(normal(rng, shape) for _ in range(3))


def _attention_torch(batch, heads, tokens, head_dim):
    torch = lazy_torch()
    return lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v)


ATTENTION = Workload(
    name="attention",
    description="SAM 3 global attention: softmax(q k^T / sqrt(d)) v over 5184 tokens (72x72), six members",
    defaults={"batch": 1, "heads": 16, "tokens": 5184, "head_dim": 64},
    small={"batch": 1, "heads": 2, "tokens": 24, "head_dim": 32},
    sequence_param="tokens",
    build=_attention_plan,
    make_inputs=_attention_inputs,
    make_torch=_attention_torch,
    check=lambda p: positive("attention", p, "batch", "heads", "tokens", "head_dim"),
)

# --------------------------------------------------------------------------- layer norm


def _layernorm_plan(rows: int, dim: int) -> Plan:
    def layernorm(x, weight, bias):
        return nn.layer_norm(x, dim, weight, bias, eps=1e-5)

    return trace(layernorm, spec((rows, dim)), spec(dim, param=True), spec(dim, param=True))


def _layernorm_inputs(rng, rows, dim):
    return normal(rng, (rows, dim), 1.0, 0.5), normal(rng, (dim,), 0.1, 1.0), normal(rng, (dim,), 0.1)


def _layernorm_torch(rows, dim):
    torch = lazy_torch()
    return lambda x, w, b: torch.nn.functional.layer_norm(x, (dim,), w, b, eps=1e-5)


LAYERNORM = Workload(
    name="layernorm",
    description="Layer norm over the last dim of a (rows, dim) activation, with weight and bias",
    defaults={"rows": 8192, "dim": 1024},
    small={"rows": 8, "dim": 32},
    sequence_param="rows",
    build=_layernorm_plan,
    make_inputs=_layernorm_inputs,
    make_torch=_layernorm_torch,
    check=lambda p: positive("layernorm", p, "rows", "dim"),
)

# --------------------------------------------------------------------------- softmax


def _softmax_plan(rows: int, cols: int) -> Plan:
    def softmax(x):
        return nn.softmax(x, -1)

    return trace(softmax, spec((rows, cols)))


def _softmax_inputs(rng, rows, cols):
    return (normal(rng, (rows, cols), 3.0),)


def _softmax_torch(rows, cols):
    torch = lazy_torch()
    return lambda x: torch.softmax(x, -1)


SOFTMAX = Workload(
    name="softmax",
    description="Row softmax of a (rows, cols) matrix: max, exp, sum, divide members",
    defaults={"rows": 8192, "cols": 1024},
    small={"rows": 8, "cols": 40},
    sequence_param="rows",
    build=_softmax_plan,
    make_inputs=_softmax_inputs,
    make_torch=_softmax_torch,
    check=lambda p: positive("softmax", p, "rows", "cols"),
)

# --------------------------------------------------------------------------- adam

_ADAM = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}


def _adam_sizes(params: int, tensors: int) -> list[int]:
    base, extra = divmod(params, tensors)
    return [base + (1 if n < extra else 0) for n in range(tensors)]


def _adam_plan(params: int, tensors: int, step: int, in_place: bool = False) -> Plan:
    names, specs = [], []
    for n, size in enumerate(_adam_sizes(params, tensors)):
        names += [f"param{n}", f"grad{n}", f"m{n}", f"v{n}"]
        specs += [spec(size, param=True), spec(size), spec(size), spec(size)]

    def adam(*state):
        outputs = []
        for n in range(tensors):
            with nn.name_scope(f"t{n}"):
                outputs += nn.adam_step(*state[4 * n: 4 * n + 4], step=step, **_ADAM)
        return tuple(outputs)

    return trace_named(adam, names, specs, "adam")


def _adam_inputs(rng, params, tensors, step, in_place=False):
    arrays = []
    for size in _adam_sizes(params, tensors):
        arrays += [normal(rng, (size,), 0.02), normal(rng, (size,), 1e-3), normal(rng, (size,), 1e-4)]
        second = normal(rng, (size,), 1e-3)
        np.square(second, out=second)
        second += np.float32(1e-9)  # v is a running mean of g^2: positive, never zero
        arrays.append(second)
    return tuple(arrays)


def _adam_torch(params, tensors, step, in_place=False):
    """torch.optim.Adam's foreach formula, out of place (the plan also writes new buffers)."""
    torch = lazy_torch()
    lr, beta1, beta2, eps = _ADAM["lr"], _ADAM["beta1"], _ADAM["beta2"], _ADAM["eps"]
    bias1, bias2 = 1 - beta1**step, 1 - beta2**step

    def adam(*state):
        p, g, m, v = (list(state[k::4]) for k in range(4))
        new_m = torch._foreach_lerp(m, g, 1 - beta1)
        new_v = torch._foreach_mul(v, beta2)
        torch._foreach_addcmul_(new_v, g, g, 1 - beta2)
        denominator = torch._foreach_sqrt(new_v)
        torch._foreach_div_(denominator, math.sqrt(bias2))
        torch._foreach_add_(denominator, eps)
        new_p = torch._foreach_addcdiv(p, new_m, denominator, -lr / bias1)
        return tuple(x for triple in zip(new_p, new_m, new_v, strict=True) for x in triple)

    return adam


def _adam_in_place(params, tensors, step, in_place=False) -> dict[str, str]:
    """``in_place=1``: each step's new param, m and v written over the old ones (as
    ``torch.optim.Adam`` steps); every Weft arm then steps its own copy of the state."""
    if not in_place:
        return {}
    pairs = {}
    for n in range(tensors):
        pairs.update({f"t{n}_adam_param": f"param{n}", f"t{n}_adam_m": f"m{n}", f"t{n}_adam_v": f"v{n}"})
    return pairs


def _adam_check(p):
    positive("adam", p, "params", "tensors", "step")
    require("adam", p["params"] >= p["tensors"], f"params ({p['params']}) must be >= tensors ({p['tensors']})")


ADAM = Workload(
    name="adam",
    description="One Adam step over 50 M parameters in 10 tensors: new param, m, v as members",
    defaults={"params": 50_000_000, "tensors": 10, "step": 10, "in_place": False},
    small={"params": 300, "tensors": 3, "step": 3, "in_place": False},
    sequence_param=None,
    build=_adam_plan,
    make_inputs=_adam_inputs,
    make_torch=_adam_torch,
    check=_adam_check,
    make_in_place=_adam_in_place,
)

# --------------------------------------------------------------------------- cross-entropy


def _ce_plan(tokens: int, vocab: int, hidden: int, projection: bool) -> Plan:
    if projection:
        def cross_entropy(hidden_states, lm_head, targets):
            return nn.cross_entropy(nn.linear(hidden_states, lm_head), targets)

        specs = (spec((tokens, hidden)), spec((vocab, hidden), param=True), spec(tokens, "int64"))
    else:
        def cross_entropy(logits, targets):
            return nn.cross_entropy(logits, targets)

        specs = (spec((tokens, vocab)), spec(tokens, "int64"))
    return trace(cross_entropy, *specs)


def _ce_inputs(rng, tokens, vocab, hidden, projection):
    targets = rng.integers(0, vocab, tokens, dtype=np.int64)
    if projection:
        return normal(rng, (tokens, hidden)), weight(rng, vocab, hidden), targets
    return normal(rng, (tokens, vocab), 2.0), targets


def _ce_torch(tokens, vocab, hidden, projection):
    torch = lazy_torch()
    functional = torch.nn.functional
    if projection:
        return lambda h, w, t: functional.cross_entropy(functional.linear(h, w), t)
    return lambda logits, t: functional.cross_entropy(logits, t)


CROSS_ENTROPY = Workload(
    name="cross-entropy",
    description="Mean cross-entropy of 4096 tokens over a 128 000 vocabulary, optionally from a"
                " 1024-wide hidden state through the projection (projection=true)",
    defaults={"tokens": 4096, "vocab": 128_000, "hidden": 1024, "projection": False},
    small={"tokens": 6, "vocab": 50, "hidden": 16, "projection": True},
    sequence_param="tokens",
    build=_ce_plan,
    make_inputs=_ce_inputs,
    make_torch=_ce_torch,
    check=lambda p: positive("cross-entropy", p, "tokens", "vocab", "hidden"),
)

# --------------------------------------------------------------------------- lm-head loss


def _lm_head_plan(tokens: int, hidden: int, vocab: int) -> Plan:
    def lm_head_loss(hidden_states, lm_head, targets):
        return nn.cross_entropy(hidden_states @ nn.transpose(lm_head, 0, 1), targets)

    return trace(lm_head_loss, spec((tokens, hidden)), spec((vocab, hidden), param=True), spec(tokens, "int64"))


def _lm_head_inputs(rng, tokens, hidden, vocab):
    return normal(rng, (tokens, hidden)), weight(rng, vocab, hidden), rng.integers(0, vocab, tokens, dtype=np.int64)


def _lm_head_torch(tokens, hidden, vocab):
    torch = lazy_torch()
    return lambda h, w, t: torch.nn.functional.cross_entropy(h @ w.T, t)


LM_HEAD_LOSS = Workload(
    name="lm-head-loss",
    description="A language model's training loss: cross_entropy(h @ W^T, targets) for 512 tokens of a"
                " 896-wide hidden state over a 32 000 vocabulary (the chunked body never builds the logits)",
    defaults={"tokens": 512, "hidden": 896, "vocab": 32_000},
    small={"tokens": 6, "hidden": 16, "vocab": 50},
    sequence_param="tokens",
    build=_lm_head_plan,
    make_inputs=_lm_head_inputs,
    make_torch=_lm_head_torch,
    check=lambda p: positive("lm-head-loss", p, "tokens", "hidden", "vocab"),
)
