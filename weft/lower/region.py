"""What the lowering reads of a region and of the one-pass rewrite: shapes of data,
not imports. ``weft.compose`` builds the values (``Region``, ``OnePass``); the
fuse stage (``weft.fuse``) hands them to ``weft.lower``, which imports nothing from
``weft.compose`` (docs/design.md section 7). These protocols name the fields it reads.
"""

from __future__ import annotations

from typing import Protocol

from weft.ir import Combiner, Expr


class FusedRegion(Protocol):
    """A region of members lowered as one function (``weft.compose.Region``)."""

    anchor: str
    members: tuple[str, ...]
    private: tuple[str, ...]
    outputs: tuple[str, ...]  # members read outside the region (the anchor and plan outputs)
    tile_axes: tuple[tuple[str, str], ...]  # (member, its axis carrying the tile axis)
    tile_maps: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]  # anchor axis -> (member, axis)
    anchor_axes: tuple[str, ...]

    @property
    def tile_axis(self) -> str | None: ...

    @property
    def is_fused(self) -> bool: ...

    @property
    def size(self) -> int: ...


class Partition(Protocol):
    """Regions covering every member, in execution order (``weft.compose.Partition``)."""

    regions: tuple[FusedRegion, ...]


class FoldDependent(Protocol):
    """A fold merged into the one pass (``weft.compose.rescale.OnlineDependent``)."""

    member: str
    combiner: Combiner
    fold_axis: str
    term: Expr
    exponent: Expr | None
    scale_by: tuple[Expr, ...]
    divide_by: tuple[Expr, ...]
    offsets: tuple[tuple[int, Expr], ...]


class OnlineFold(Protocol):
    """The rescaling rewrite of a region (``weft.compose.rescale.OnlineFold``)."""

    anchor: str
    reference: str
    reference_combiner: Combiner
    reference_axis: str
    reference_term: Expr
    extent: int
    dependents: tuple[FoldDependent, ...]
    dissolved: tuple[str, ...]

    @property
    def members(self) -> tuple[str, ...]: ...


class OnePass(Protocol):
    """The rewrite plus what the pass needs (``weft.compose.rescale.OnePass``)."""

    online: OnlineFold
    streamed: tuple[tuple[str, int], ...]
    schedule: tuple[tuple[str, ...], tuple[str, ...]] | None
