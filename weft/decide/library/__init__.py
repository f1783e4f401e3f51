"""Library bodies behind matchers (docs/design.md section 6). A matcher proves a hand-written body
legal for a region (the region is already a legal candidate of ``weft.compose.grow``; the
matcher recognises *which* body applies and under which contracts); the price decides.
"""

from weft.decide.library.matchers import BODIES, Body, admitted_bodies

__all__ = ["BODIES", "Body", "admitted_bodies"]
