"""Costs (docs/design.md section 6): the calibrated machine profile, the cycle model and the search.

- ``machine``: the profile (caches, lanes, clock, bandwidth per level at 1 and N threads, FMA
  peak, exp/log/divide rates, parallel-region, runner-call and first-touch costs), measured
  once by compiled probes (``probes``) and cached under ``WEFT_CACHE_DIR``;
- ``facts``: what the model reads from lowered nests (the adapter to ``weft.lower.nest``);
- ``distance``: the cache level each buffer's first touch is served from, from the plan;
- ``model``: the price of a lowered function in cycles (layer-condition traffic, ECM);
- ``search``: branch and bound over a region's forms and tilings, memoised, under a budget;
- ``bridge``: a plan's regions priced with the lowering's functions passed in.
"""

from weft.cost.machine import MachineProfile, calibrate, hardware_facts, machine_profile, profile_id

__all__ = ["MachineProfile", "calibrate", "hardware_facts", "machine_profile", "profile_id"]
