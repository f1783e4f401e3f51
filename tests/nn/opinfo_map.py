"""Which ``weft.nn`` function answers each PyTorch OpInfo (``op_db``) entry, and how its
arguments translate: ``MAPPING[opinfo name] = adapter``.

An adapter is called like the OpInfo's op, ``adapter(input, *args, **kwargs)``, with every
torch tensor of the sample replaced by a traced ``weft.nn`` Tensor (Python numbers, shapes
and flags stay as they are), and returns what ``weft.nn`` computes. A sample feature the
mapping cannot express in ``weft.nn`` raises ``Unmapped(reason)``; the reason, like every
``WeftError`` message, must be listed in docs/unsupported.md.
"""

from __future__ import annotations

import weft.nn as nn


class Unmapped(Exception):  # noqa: N818 (a refusal, not an error in the test)
    """The sample uses a PyTorch feature weft.nn does not have (listed in docs/unsupported.md)."""


def _no(kwargs: dict, *names: str) -> None:
    for name in names:
        if kwargs.get(name) is not None:
            raise Unmapped(f"keyword {name}= is not supported")


def _keep(kwargs: dict, allowed: tuple[str, ...]) -> dict:
    extra = sorted(set(kwargs) - set(allowed))
    if extra:
        raise Unmapped(f"keyword {extra[0]}= is not supported")
    return kwargs


def _dim(kwargs: dict, args: tuple, position: int = 0):
    if args:
        return args[position] if len(args) > position else None
    return kwargs.get("dim")


def _add(a, b, *, alpha=None):
    return nn.add(a, b if alpha is None else nn.mul(b, alpha) if isinstance(b, nn.Tensor) else b * alpha)


def _sub(a, b, *, alpha=None):
    return nn.sub(a, b if alpha is None else nn.mul(b, alpha) if isinstance(b, nn.Tensor) else b * alpha)


def _reduction(function):
    def adapter(x, *args, **kwargs):
        _no(kwargs, "dtype")
        kwargs.pop("dtype", None)
        dim = args[0] if args else kwargs.pop("dim", None)
        keepdim = args[1] if len(args) > 1 else kwargs.pop("keepdim", False)
        _keep(kwargs, ())
        if isinstance(dim, list):
            dim = tuple(dim)
        return function(x, dim, keepdims=bool(keepdim))

    return adapter


def _softmax(function):
    def adapter(x, *args, **kwargs):
        _no(kwargs, "dtype")
        kwargs.pop("dtype", None)
        dim = args[0] if args else kwargs.pop("dim")
        _keep(kwargs, ())
        return function(x, dim)

    return adapter


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return nn.layer_norm(x, tuple(normalized_shape), weight, bias, eps)


def _rms_norm(x, normalized_shape, weight=None, eps=None):
    if weight is None and tuple(normalized_shape) != (x.shape[-1],):
        raise Unmapped("rms_norm over several trailing dims without a weight")
    if weight is None:
        return nn.rms_norm(x, None, eps=eps if eps is not None else 1.1920928955078125e-07)
    return nn.rms_norm(x, weight, eps=eps if eps is not None else 1.1920928955078125e-07)


def _cross_entropy(logits, target, weight=None, *, reduction="mean", ignore_index=-100, label_smoothing=0.0,
                   size_average=None, reduce=None):
    if weight is not None:
        raise Unmapped("cross_entropy with class weights")
    if size_average is not None or reduce is not None:
        raise Unmapped("keyword size_average= is not supported")
    if logits.ndim > 2:  # PyTorch puts classes at dim 1: (N, C, d1, ...) -> (N, d1, ..., C)
        order = (0, *range(2, logits.ndim), 1)
        logits = nn.permute(logits, order)
        if target.dtype.is_float:
            target = nn.permute(target, order)
    return nn.cross_entropy(logits, target, reduction=reduction, ignore_index=ignore_index,
                            label_smoothing=label_smoothing)


def _conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return nn.conv2d(x, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if dropout_p:
        raise Unmapped("attention dropout (dropout_p > 0)")
    if q.shape[-3:-2] != k.shape[-3:-2] and not enable_gqa and q.ndim >= 3 and k.ndim >= 3:
        raise Unmapped("attention heads that differ without enable_gqa")
    if is_causal and q.shape[-2] != k.shape[-2]:
        raise Unmapped("causal attention with a query length other than the key length")
    return nn.attention(q, k, v, scale=scale, mask=attn_mask, causal=is_causal)


def _embedding(weight, indices, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
               sparse=False):
    if max_norm is not None:
        raise Unmapped("keyword max_norm= is not supported")
    return nn.embedding(indices, weight)


def _where(x, condition, other):
    return nn.where(condition, x, other)


def _cat(tensors, dim=0):
    return nn.concat(list(tensors), dim)


def _gelu(x, approximate="none"):
    return nn.gelu(x, approximate)


def _squeeze(x, dim=None):
    return nn.squeeze(x, tuple(dim) if isinstance(dim, list) else dim)


def _reshape(x, *shape):
    dims = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
    return nn.reshape(x, tuple(dims))


def _flatten(x, start_dim=0, end_dim=-1):
    return nn.flatten(x, start_dim, end_dim)


def _narrow(x, dim, start, length):
    if not isinstance(start, int):
        raise Unmapped("narrow with a tensor start")
    start = start % x.shape[dim] if start < 0 else start
    return nn.slice_axis(x, dim, start, start + length)


def _max_reduce_all(x):
    return nn.max(x)


def _min_reduce_all(x):
    return nn.min(x)


def _t(x):
    return nn.permute(x, tuple(reversed(range(x.ndim))))


def _linear(x, weight, bias=None):
    return nn.linear(x, weight, bias)


def _pow(a, b):
    return nn.pow(a, b)


def _mean(x, *args, **kwargs):
    return _reduction(nn.mean)(x, *args, **kwargs)


MAPPING = {
    # elementwise
    "add": _add, "sub": _sub, "mul": nn.mul, "div.no_rounding_mode": nn.div, "true_divide": nn.div,
    "__radd__": lambda x, other: nn.add(other, x), "__rsub__": lambda x, other: nn.sub(other, x),
    "__rmul__": lambda x, other: nn.mul(other, x), "rsub": lambda x, other, alpha=None: _sub(other, x, alpha=alpha),
    "fmod": nn.fmod, "pow": _pow, "__rpow__": lambda x, other: nn.pow(other, x),
    "maximum": nn.maximum, "minimum": nn.minimum,
    "eq": nn.equal, "ne": nn.not_equal, "lt": nn.less, "le": nn.less_equal, "gt": nn.greater,
    "ge": nn.greater_equal,
    "logical_and": nn.logical_and, "logical_or": nn.logical_or, "logical_not": nn.logical_not,
    "where": _where,
    "abs": nn.abs, "neg": nn.neg, "exp": nn.exp, "log": nn.log, "sqrt": nn.sqrt, "rsqrt": nn.rsqrt,
    "tanh": nn.tanh, "erf": nn.erf, "sigmoid": nn.sigmoid, "square": nn.square, "sin": nn.sin, "cos": nn.cos,
    "nn.functional.relu": nn.relu, "nn.functional.silu": nn.silu, "nn.functional.gelu": _gelu,
    # reductions and normalisations
    "sum": _reduction(nn.sum), "amax": _reduction(nn.max), "amin": _reduction(nn.min), "mean": _mean,
    "max.reduction_no_dim": _max_reduce_all, "min.reduction_no_dim": _min_reduce_all,
    "softmax": _softmax(nn.softmax), "log_softmax": _softmax(nn.log_softmax),
    "nn.functional.layer_norm": _layer_norm, "nn.functional.rms_norm": _rms_norm,
    "nn.functional.cross_entropy": _cross_entropy,
    # contractions
    "nn.functional.linear": _linear, "matmul": nn.matmul, "mm": nn.matmul, "bmm": nn.bmm,
    "nn.functional.conv2d": _conv2d, "nn.functional.embedding": _embedding,
    "nn.functional.scaled_dot_product_attention": _sdpa,
    # views
    "reshape": _reshape, "view": _reshape, "permute": lambda x, *dims: nn.permute(
        x, tuple(dims[0]) if len(dims) == 1 and not isinstance(dims[0], int) else dims),
    "transpose": nn.transpose, "t": _t, "expand": lambda x, *shape: nn.expand(
        x, tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape),
    "broadcast_to": lambda x, shape: nn.broadcast_to(x, tuple(shape)),
    "flatten": _flatten, "squeeze": _squeeze, "squeeze.multiple": _squeeze, "unsqueeze": nn.unsqueeze,
    "cat": _cat, "narrow": _narrow,
}


def _max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        raise Unmapped("max_pool2d with return_indices")
    return nn.max_pool2d(x, kernel_size, stride or None, padding, dilation, ceil_mode)


def _avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    if divisor_override is not None:
        raise Unmapped("keyword divisor_override= is not supported")
    return nn.avg_pool2d(x, kernel_size, stride or None, padding, ceil_mode, count_include_pad)


def _batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    if training:
        raise Unmapped("batch_norm in training mode")
    if running_mean is None or running_var is None:
        raise Unmapped("batch_norm without running statistics")
    return nn.batch_norm(x, running_mean, running_var, weight, bias, eps)


if hasattr(nn, "max_pool2d"):  # the pools and batch norm (another branch adds them)
    MAPPING.update({"nn.functional.max_pool2d": _max_pool2d, "nn.functional.avg_pool2d": _avg_pool2d,
                    "nn.functional.batch_norm": _batch_norm})
