"""Canonical signatures of regions: identical regions are priced (and lowered) once.

Every head of every block emits the same members under different buffer and
axis names. The signature abstracts the names away (buffers numbered by first
appearance, axes by position in their member; ``weft.ir.canonical``) and keeps
everything that changes the generated code or its cost: member bodies and index
maps (layouts), extents, dtypes, which buffers are private, the tiling options
(each member's axis carrying each common anchor axis) and the numeric contract.

    s[i,j] = sum_d q[i,d]*k[j,d]  (head 0)  and  s7[a,b] = sum_c q7[a,c]*k7[b,c]  (head 7)
    -> the same signature
"""

from __future__ import annotations

import hashlib

from weft.compose.regions import Region
from weft.ir import Plan
from weft.ir.canonical import Canonical, canonical_tiled_group


def region_canonical(plan: Plan, region: Region, contract: str) -> Canonical:
    """The name-free key of ``region`` and its buffers in canonical order (see module doc)."""
    return canonical_tiled_group(
        plan, region.members, region.private, region.anchor, region.anchor_axes, region.tile_maps, (contract,),
        stable=True,
    )


def canonical_region(plan: Plan, region: Region, contract: str) -> tuple:
    """A name-free, hashable description of ``region`` (see module doc)."""
    return region_canonical(plan, region, contract).key


def region_signature(plan: Plan, region: Region, contract: str) -> str:
    """A stable hex digest of ``canonical_region`` (same region, same contract -> same string)."""
    text = repr(canonical_region(plan, region, contract))
    return hashlib.sha256(text.encode()).hexdigest()[:20]
