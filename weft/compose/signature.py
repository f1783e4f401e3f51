"""Canonical signatures of regions: identical regions are priced once.

Every head of every block emits the same members under different buffer and
axis names. The signature abstracts the names away (buffers numbered by first
appearance, axes by position in their member) and keeps everything that changes
the generated code or its cost: member bodies and index maps (layouts), extents,
dtypes, which buffers are private, the tile axis and the numeric contract.

    s[i,j] = sum_d q[i,d]*k[j,d]  (head 0)  and  s7[a,b] = sum_c q7[a,c]*k7[b,c]  (head 7)
    -> the same signature
"""

from __future__ import annotations

import hashlib

from weft.compose.regions import Region
from weft.ir import AxisIndex, Plan, expr_loads
from weft.ir.substitute import rename_buffers, substitute_axes


def canonical_region(plan: Plan, region: Region, contract: str) -> tuple:
    """A name-free, hashable description of ``region`` (see module doc)."""
    buffers = plan.buffer_map()
    kernels = {kernel.output: kernel for kernel in plan.kernels}
    names: dict[str, str] = {}

    def name_of(buffer: str) -> str:
        if buffer not in names:
            names[buffer] = f"b{len(names)}"
        return names[buffer]

    members = []
    for member in region.members:
        kernel = kernels[member]
        for load in expr_loads(kernel.body):
            name_of(load.buffer)
        name_of(member)
        axis_names = {axis.name: AxisIndex(f"a{n}") for n, axis in enumerate(kernel.axes)}
        axis_names.update({axis.name: AxisIndex(f"f{n}") for n, axis in enumerate(kernel.fold_axes)})
        body = rename_buffers(substitute_axes(kernel.body, axis_names), names)
        tile = region.tile_axis_of(member)
        tile_position = next((n for n, axis in enumerate(kernel.axes) if axis.name == tile), None)
        members.append((
            names[member],
            tuple(axis.extent for axis in kernel.axes),
            (kernel.fold.combiner.value, tuple(axis.extent for axis in kernel.fold.axes)) if kernel.fold else None,
            repr(body),
            tile_position,
        ))
    described = tuple(
        (canonical, buffers[name].shape, buffers[name].dtype.value, name in region.private)
        for name, canonical in names.items()
    )
    return (contract, tuple(members), described)


def region_signature(plan: Plan, region: Region, contract: str) -> str:
    """A stable hex digest of ``canonical_region`` (same region, same contract -> same string)."""
    text = repr(canonical_region(plan, region, contract))
    return hashlib.sha256(text.encode()).hexdigest()[:20]
