"""Library bodies behind matchers (docs/design.md section 6). A matcher proves a hand-written body
legal for a region (the region is already a legal candidate of ``weft.compose.grow``; the
matcher recognises *which* body applies and under which contracts); the price decides.
"""

from weft.decide.library.adam import LibraryMatch
from weft.decide.library.matchers import (
    BODIES,
    Body,
    admissions,
    admitted_bodies,
    body_named,
    proposed_regions,
)

__all__ = ["BODIES", "Body", "LibraryMatch", "admissions", "admitted_bodies", "body_named", "proposed_regions"]
