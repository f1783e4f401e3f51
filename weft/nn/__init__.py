"""Weft's front end: symbolic tensors and a functional library that emits members only.

    plan = weft.trace(lambda q, k, v: weft.nn.attention(q, k, v),
                      weft.spec((1, 16, 5184, 64)), weft.spec((1, 16, 5184, 64)), weft.spec((1, 16, 5184, 64)))

No function here is a fused primitive: attention is six members, layer norm four,
softmax four; views are index maps. The composition engine decides what to fuse.
"""

from weft.nn.elementwise import (
    abs,
    add,
    broadcast_shapes,
    cast,
    div,
    equal,
    erf,
    exp,
    gelu,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    mul,
    neg,
    not_equal,
    pow,
    relu,
    rsqrt,
    sigmoid,
    silu,
    sqrt,
    square,
    sub,
    tanh,
    where,
)
from weft.nn.linalg import attention, bmm, conv2d, embedding, linear, matmul, rope, rope_2d
from weft.nn.optim import adam_step
from weft.nn.reduce import cross_entropy, layer_norm, log_softmax, max, mean, min, rms_norm, softmax, sum
from weft.nn.tensor import Spec, Tensor, TraceError, name_scope, spec, trace
from weft.nn.views import (
    broadcast_to,
    concat,
    expand,
    flatten,
    getitem,
    permute,
    reshape,
    slice_axis,
    squeeze,
    transpose,
    unsqueeze,
    window_partition,
    window_unpartition,
)

from weft.nn.tensor import _install_methods  # noqa: E402  (Tensor operators delegate here)

_install_methods()

__all__ = [name for name in dir() if not name.startswith("_")]
