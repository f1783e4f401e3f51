"""Diagnosis: the profiling procedure (whole step, top functions, intensity against
the ridge point, fusion opportunities, memory scaling, time outside members)."""

from weft.cost.chains import Chain, find_chains
from weft.diagnose.procedure import Diagnosis, diagnose

__all__ = ["Chain", "Diagnosis", "diagnose", "find_chains"]
