"""Weights packed at bind time: a contraction whose column factor reads only bound parameters.

``weft.compile(plan, params={name: array})`` copies each bound array once (a snapshot:
the caller's later writes to it are not seen). A contraction microkernel whose
packed factor ``y`` (the one along the output's columns: a linear's weight) reads
nothing but bound parameters would pack the same panels on every call; this pass
gives such a nest a **packed view** instead, a buffer of the arena that a separate
entry point (``wf_prepack``, run once when the plan is loaded) fills, and every call
then only reads. Before/after (vit-block's fc1 with ``params={"fc1_weight": w}``)::

    k_mlp_linear(x, fc1_weight, out)            packs fc1_weight (16 MiB) per call, a barrier
    k_mlp_linear_pp(x, fc1_weight, out, packed) reads packed; wf_prepack fills it once

The packed layout is the one the nest packs per call (every batch point, every
column panel, ``nr``-wide micro-panels over the whole fold), so the microkernel's
arithmetic is unchanged: Strict bytes are identical. A function shared by several
occurrences (``weft.lower.reuse``) is prepacked per occurrence (each its own packed
buffer); occurrences that differ in which weights are bound get distinct functions.
"""

from __future__ import annotations

import dataclasses
import math

from weft.ir import DType, expr_axes, expr_loads
from weft.lower.contraction import ContractionNest
from weft.lower.nest import BufferView, LoweredFunction, LoweredPlan

PACKED_PREFIX = "wf.packed/"
PACKED_FUNCTION_SUFFIX = "_pp"


def packed_elements(nest: ContractionNest) -> int:
    """Floats of ``nest``'s packed y for every batch point and column panel."""
    b = nest.blocking
    panels = -(-nest.columns // b.nr)
    return nest.batch_points * panels * b.nr * nest.fold_points


def _prepackable(nest: ContractionNest, bound_positions: set[int], params: tuple[BufferView, ...]) -> bool:
    """y reads only bound parameters, and a panel per batch point is not a copy of the same
    weight (a y that ignores the batch axes would be packed once per batch point)."""
    if nest.packed_y is not None:
        return False
    loads = expr_loads(nest.y_factor)
    if not loads:
        return False
    positions = {view.buffer: index for index, view in enumerate(params)}
    if not all(load.buffer in positions and positions[load.buffer] in bound_positions for load in loads):
        return False
    return not nest.batch_axes or bool(set(nest.batch_axes) & expr_axes(nest.y_factor))


def _packed_view(name: str, pointer: str, elements: int) -> BufferView:
    return BufferView(buffer=name, pointer=pointer, dtype=DType.FLOAT32, shape=(elements,), strides=(1,),
                      offsets=(0,))


def prepack_bound(lowered: LoweredPlan, bound: frozenset[str]) -> LoweredPlan:
    """``lowered`` with every contraction whose y reads only ``bound`` buffers reading a packed
    view (module docstring); unchanged when nothing qualifies."""
    if not bound:
        return lowered
    first_params: dict[str, tuple[BufferView, ...]] = {}
    for function in lowered.functions:  # the distinct function's own params (reuse: the first occurrence)
        first_params.setdefault(function.name, function.params)
    functions = []
    variants: dict[tuple[str, tuple[int, ...]], LoweredFunction] = {}
    for position, function in enumerate(lowered.functions):
        own = first_params[function.name]
        bound_positions = {index for index, view in enumerate(function.params) if view.buffer in bound}
        chosen = tuple(index for index, nest in enumerate(function.nests)
                       if isinstance(nest, ContractionNest) and _prepackable(nest, bound_positions, own))
        if not chosen:  # as lowered; its signature's pointer names are the lowered occurrence's, since
            # this occurrence may now be the first of its name (the earlier ones became variants)
            functions.append(dataclasses.replace(function, params=tuple(
                dataclasses.replace(view, buffer=mine.buffer) for view, mine in zip(own, function.params, strict=True))))
            continue
        key = (function.name, chosen)
        if key not in variants:
            nests = list(function.nests)
            added = []
            for count, index in enumerate(chosen):
                view = _packed_view(f"{PACKED_PREFIX}{function.name}/{index}", f"wf_packed{count}",
                                    packed_elements(nests[index]))
                nests[index] = dataclasses.replace(nests[index], packed_y=view)
                added.append(view)
            suffix = PACKED_FUNCTION_SUFFIX + "".join(str(i) for i in chosen)
            variants[key] = dataclasses.replace(function, name=function.name + suffix, nests=tuple(nests),
                                                params=(*own, *added))
        variant = variants[key]
        # the rendered signature's pointer names are the lowered occurrence's (whichever
        # occurrence comes first); each call passes its own buffers in the same positions
        buffers = (*(view.buffer for view in function.params),
                   *(f"{PACKED_PREFIX}{position}/{index}" for index in chosen))
        params = tuple(dataclasses.replace(view, buffer=buffer)
                       for view, buffer in zip(variant.params, buffers, strict=True))
        functions.append(dataclasses.replace(variant, members=function.members, private=function.private,
                                             params=params))
    return dataclasses.replace(lowered, functions=tuple(functions))


def packed_buffers(lowered: LoweredPlan) -> dict[str, int]:
    """Every packed buffer a call reads -> its bytes (they live in the arena for good)."""
    found: dict[str, int] = {}
    for function in lowered.functions:
        for view in function.params:
            if view.buffer.startswith(PACKED_PREFIX):
                found[view.buffer] = math.prod(view.shape) * 4
    return found


def has_packed(function: LoweredFunction) -> bool:
    return any(isinstance(n, ContractionNest) and n.packed_y is not None for n in function.nests)


__all__ = ["PACKED_PREFIX", "has_packed", "packed_buffers", "packed_elements", "prepack_bound"]
