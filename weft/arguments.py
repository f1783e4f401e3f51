"""How a traced plan's inputs are named and passed: pytrees, keywords, bound params.

A *pytree* is a dict, list or tuple whose leaves are specs (at trace time) or
arrays (at call time). Each leaf becomes one plan input, named by its path::

    weft.trace(fn, weft.spec((8, 384)), {"wq": weft.spec((384, 384)), "bq": weft.spec((384,))})
    # fn(x, weights): inputs  x, weights_bq, weights_wq

Dicts are walked in sorted key order (so a dict built in any order flattens the
same way at trace time and at call time), lists and tuples in order. A name is the
parameter name and the keys / positions joined by ``_``, with characters outside
``[A-Za-z0-9_]`` replaced by ``_``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from weft.errors import InputError

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")


def is_node(value: object) -> bool:
    """True for the containers a pytree is made of (dict, list, tuple)."""
    return isinstance(value, Mapping | list | tuple)


def join_name(prefix: str, key: object) -> str:
    """``join_name("weights", "layer.0")`` -> ``weights_layer_0``."""
    part = _NOT_NAME.sub("_", str(key))
    return f"{prefix}_{part}" if prefix else part


def _items(node: object) -> list[tuple[object, object]]:
    if isinstance(node, Mapping):
        for key in node:
            if not isinstance(key, str | int):
                raise InputError(f"a dict of inputs needs str (or int) keys, got {key!r} ({type(key).__name__})")
        return sorted(node.items(), key=lambda item: str(item[0]))
    return list(enumerate(node))


def flatten(tree: object, prefix: str = "") -> list[tuple[str, object]]:
    """``(name, leaf)`` for every leaf of ``tree``, in the one defined order."""
    if not is_node(tree):
        return [(prefix, tree)]
    leaves: list[tuple[str, object]] = []
    for key, value in _items(tree):
        leaves += flatten(value, join_name(prefix, key))
    return leaves


def flatten_to(tree: object, prefix: str, names: Sequence[str] | set[str]) -> list[tuple[str, object]]:
    """As ``flatten``, but a node whose path is one of ``names`` is a leaf (so a list
    passed where an array belongs is reported as a list, not as its elements)."""
    if prefix in names or not is_node(tree):
        return [(prefix, tree)]
    found: list[tuple[str, object]] = []
    for key, value in _items(tree):
        found += flatten_to(value, join_name(prefix, key), names)
    return found


def leaves(tree: object) -> list[object]:
    """The leaves of ``tree`` in flatten order, without names."""
    return [leaf for _, leaf in flatten(tree)]


def map_leaves(tree: object, function: Callable[[str, object], object], prefix: str = "") -> object:
    """The same structure with every leaf replaced by ``function(name, leaf)``."""
    if isinstance(tree, Mapping):  # leaves visited in flatten order; the dict keeps its own order
        mapped = {key: map_leaves(value, function, join_name(prefix, key)) for key, value in _items(tree)}
        return {key: mapped[key] for key in tree}
    if isinstance(tree, list | tuple):
        mapped = [map_leaves(value, function, join_name(prefix, n)) for n, value in enumerate(tree)]
        return type(tree)(mapped) if type(tree) in (list, tuple) else tuple(mapped)
    return function(prefix, tree)


def unflatten(tree: object, values: Sequence[object]) -> object:
    """``tree``'s structure with its leaves replaced, in flatten order, by ``values``."""
    names = [name for name, _ in flatten(tree)]
    if len(names) != len(values):
        raise InputError(f"the structure has {len(names)} leaves but {len(values)} values were given")
    by_name = dict(zip(names, values, strict=True))
    return map_leaves(tree, lambda name, _: by_name[name])


def describe_value(value: object) -> str:
    """A short description of a call argument: an array is its shape and dtype, never its data."""
    if isinstance(value, np.ndarray):
        return f"a numpy array of shape {value.shape} and dtype {value.dtype}"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"a {type(value).__name__} of shape {tuple(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def arrange_inputs(plan_name: str, names: Sequence[str], args: Sequence[object], kwargs: Mapping[str, object],
                   bound: Mapping[str, object] | None = None) -> list[object]:
    """The values of ``names`` (a plan's inputs, in order) from a call ``(*args, **kwargs)``.

    Bound inputs (``bound``) are not passed. Positional arguments (each a leaf or a
    pytree) fill the remaining inputs in order; keywords fill them by name (a
    keyword that is a pytree names its leaves by path, as at trace time). Anything
    missing, unknown or given twice is an ``InputError`` naming it.
    """
    if not kwargs and not bound and len(args) == len(names) and all(type(arg) is np.ndarray for arg in args):
        return list(args)  # the common call, one array per input in order: nothing to arrange
    bound = bound or {}
    free = [name for name in names if name not in bound]
    given: dict[str, object] = {}
    positional = [leaf for arg in args for leaf in leaves(arg)]
    if len(positional) > len(free):
        raise InputError(f"plan {plan_name} takes {len(free)} inputs ({', '.join(free) or 'none'}"
                         f"{'; bound at compile: ' + ', '.join(bound) if bound else ''}) but got "
                         f"{len(positional)} positional arrays")
    given.update(zip(free, positional, strict=False))
    known = set(names)
    for key, value in kwargs.items():
        for name, leaf in flatten_to(value, key, known) if is_node(value) else ((key, value),):
            if name in bound:
                raise InputError(f"plan {plan_name}: input {name} was bound at compile time (params=); "
                                 "do not pass it again")
            if name not in free:
                hint = f"; inputs: {', '.join(free)}" if free else ""
                raise InputError(f"plan {plan_name}: unknown input {name!r}{hint}")
            if name in given:
                raise InputError(f"plan {plan_name}: input {name} was given twice (positionally and by name)")
            given[name] = leaf
    missing = [name for name in free if name not in given]
    if missing:
        raise InputError(f"plan {plan_name}: missing input(s) {', '.join(missing)} "
                         f"(takes {', '.join(free)}, positionally or by name)")
    return [bound[name] if name in bound else given[name] for name in names]


def bind_params(plan, params: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Validate ``params`` (buffer name -> array, or a nested dict named by path) against
    ``plan``'s inputs: each must be an input, with its shape and dtype. Returns
    C-contiguous read-only copies, so a later change to the caller's array cannot
    change the bound weight, each starting on a 64-byte line (a matrix-vector fold then
    streams it without the rotation of ``weft.codegen.fold_lanes``)."""
    from weft.runtime.memory import aligned_empty

    if not isinstance(params, Mapping):
        raise InputError(f"params= takes a dict of input name -> array, got {describe_value(params)}")
    inputs = plan.buffer_map()
    bound: dict[str, np.ndarray] = {}
    for name, value in flatten_to(dict(params), "", set(plan.inputs)):
        if name not in plan.inputs:
            raise InputError(f"plan {plan.name}: params= names {name!r}, which is not an input; "
                             f"inputs: {', '.join(plan.inputs)}")
        buffer = inputs[name]
        expected = np.dtype(buffer.dtype.value)  # float32, int32, int64, bool: numpy's names
        if not isinstance(value, np.ndarray):
            raise InputError(f"plan {plan.name}: param {name} must be a numpy.ndarray, got {describe_value(value)}")
        if value.shape != buffer.shape:
            raise InputError(f"plan {plan.name}: param {name} has shape {value.shape}, expected {buffer.shape}")
        if value.dtype != expected:
            raise InputError(f"plan {plan.name}: param {name} has dtype {value.dtype}, expected {expected}; "
                             f"pass array.astype(numpy.{expected})")
        copy = aligned_empty(value.shape, value.dtype)
        copy[...] = value
        copy.flags.writeable = False
        bound[name] = copy
    return bound


__all__ = ["arrange_inputs", "bind_params", "describe_value", "flatten", "is_node", "join_name", "leaves",
           "map_leaves", "unflatten"]
