"""``Ops`` evaluated with NumPy on float32 / uint32 arrays (the oracle's side).

NumPy's float32 ufuncs are correctly rounded IEEE operations and never fuse, so
each call here computes exactly what the matching C statement computes. Masks are
bool arrays; selects go through ``np.where``, which copies bits.
"""

from __future__ import annotations

import numpy as np

from weft.mathf.ops import F, M, U


def _check_f32(value: float) -> np.float32:
    result = np.float32(value)
    if float(result) != value and not np.isnan(value):
        raise ValueError(f"constant {value!r} is not exactly representable in float32")
    return result


class NumpyOps:
    """Evaluates a definition on float32 arrays (any shape; scalars broadcast)."""

    def const(self, value: float) -> F:
        return _check_f32(value)

    def uconst(self, value: int) -> U:
        return np.uint32(value)

    def add(self, a: F, b: F) -> F:
        return np.add(a, b, dtype=np.float32)

    def sub(self, a: F, b: F) -> F:
        return np.subtract(a, b, dtype=np.float32)

    def mul(self, a: F, b: F) -> F:
        return np.multiply(a, b, dtype=np.float32)

    def div(self, a: F, b: F) -> F:
        return np.divide(a, b, dtype=np.float32)

    def neg(self, a: F) -> F:
        return self.from_bits(np.bitwise_xor(self.bits(a), np.uint32(0x80000000)))

    def lt(self, a: F, b: F) -> M:
        return np.less(a, b)

    def gt(self, a: F, b: F) -> M:
        return np.greater(a, b)

    def eq(self, a: F, b: F) -> M:
        return np.equal(a, b)

    def ne(self, a: F, b: F) -> M:
        return np.not_equal(a, b)

    def mask_or(self, a: M, b: M) -> M:
        return np.logical_or(a, b)

    def select(self, mask: M, a: F, b: F) -> F:
        return self.from_bits(np.where(mask, self.bits(a), self.bits(b)))

    def select_u(self, mask: M, a: U, b: U) -> U:
        return np.where(mask, a, b).astype(np.uint32)

    def bits(self, a: F) -> U:
        return np.asarray(a, dtype=np.float32).view(np.uint32)

    def from_bits(self, a: U) -> F:
        return np.asarray(a, dtype=np.uint32).view(np.float32)

    def iadd(self, a: U, b: U) -> U:
        return np.add(a, b, dtype=np.uint32)

    def isub(self, a: U, b: U) -> U:
        return np.subtract(a, b, dtype=np.uint32)

    def iand(self, a: U, b: U) -> U:
        return np.bitwise_and(a, b, dtype=np.uint32)

    def ior(self, a: U, b: U) -> U:
        return np.bitwise_or(a, b, dtype=np.uint32)

    def ixor(self, a: U, b: U) -> U:
        return np.bitwise_xor(a, b, dtype=np.uint32)

    def shl(self, a: U, count: int) -> U:
        return np.left_shift(a, np.uint32(count), dtype=np.uint32)

    def shr(self, a: U, count: int) -> U:
        return np.right_shift(a, np.uint32(count), dtype=np.uint32)

    def sar(self, a: U, count: int) -> U:
        signed = np.asarray(a, dtype=np.uint32).view(np.int32)
        return np.right_shift(signed, np.int32(count)).view(np.uint32)

    def to_float(self, a: U) -> F:
        return np.asarray(a, dtype=np.uint32).view(np.int32).astype(np.float32)
