"""The small operation set that Weft's transcendentals are written against.

Each function in ``weft.mathf.definitions`` is written once, as a straight-line
sequence of calls on an ``Ops`` object. Two classes implement it:
``NumpyOps`` evaluates the calls on float32/uint32 arrays (the oracle's
transcendentals) and ``COps`` prints them as C statements (the code generator's
``wf_exp`` and friends). Both see the same calls in the same order, so as long as
every call is an IEEE-exact operation the two agree bit for bit.

That is why the set is small and why nothing in it rounds differently on
different machines: float ``+ - * /`` (correctly rounded, never fused), float
comparisons, bit-for-bit selects, reinterpretation between float and uint32 bits,
wrapping uint32 arithmetic and shifts, and the exact conversion of a small int32
to float. There is no FMA, no libm call and no float-to-int conversion.

Value kinds: ``F`` float32 lanes, ``U`` uint32 lanes (integer arithmetic wraps),
``M`` a lane mask (the result of a comparison).
"""

from __future__ import annotations

from typing import Any, Protocol

F = Any  # float32 lanes (an ndarray, or a C expression)
U = Any  # uint32 lanes
M = Any  # lane mask


class Ops(Protocol):
    """What a definition may call. Every method is exact or correctly rounded."""

    def const(self, value: float) -> F:
        """A float32 constant; ``value`` must be exactly representable in float32."""

    def uconst(self, value: int) -> U:
        """A uint32 constant (0 <= value < 2**32)."""

    def add(self, a: F, b: F) -> F: ...
    def sub(self, a: F, b: F) -> F: ...
    def mul(self, a: F, b: F) -> F: ...
    def div(self, a: F, b: F) -> F: ...
    def neg(self, a: F) -> F:
        """Flip the sign bit (exact, also for zeros and NaNs)."""

    def lt(self, a: F, b: F) -> M: ...
    def gt(self, a: F, b: F) -> M: ...
    def eq(self, a: F, b: F) -> M: ...
    def ne(self, a: F, b: F) -> M: ...
    def mask_or(self, a: M, b: M) -> M: ...

    def select(self, mask: M, a: F, b: F) -> F:
        """Per lane: the bits of ``a`` where ``mask`` holds, else the bits of ``b``."""

    def select_u(self, mask: M, a: U, b: U) -> U: ...

    def bits(self, a: F) -> U:
        """Reinterpret float32 bits as uint32."""

    def from_bits(self, a: U) -> F:
        """Reinterpret uint32 bits as float32."""

    def iadd(self, a: U, b: U) -> U: ...
    def isub(self, a: U, b: U) -> U: ...
    def iand(self, a: U, b: U) -> U: ...
    def ior(self, a: U, b: U) -> U: ...
    def ixor(self, a: U, b: U) -> U: ...
    def shl(self, a: U, count: int) -> U: ...
    def shr(self, a: U, count: int) -> U:
        """Logical right shift."""

    def sar(self, a: U, count: int) -> U:
        """Arithmetic right shift of the bits read as int32."""

    def to_float(self, a: U) -> F:
        """The bits read as int32, converted to float32 (exact for |a| < 2**24)."""
