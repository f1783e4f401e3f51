"""Runtime: memory planning (the arena) and the ctypes binding of the generated runner."""

from weft.runtime.binding import NativeRunner, pointer_array, scipy_sgemm_pointer
from weft.runtime.memory import ArenaPlan, Placement, plan_arena

__all__ = ["ArenaPlan", "NativeRunner", "Placement", "plan_arena", "pointer_array", "scipy_sgemm_pointer"]
