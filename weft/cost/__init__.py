"""Costs: the calibrated machine profile (and, later, the cycle model)."""

from weft.cost.machine import MachineProfile, calibrate, hardware_facts, machine_profile, profile_id

__all__ = ["MachineProfile", "calibrate", "hardware_facts", "machine_profile", "profile_id"]
