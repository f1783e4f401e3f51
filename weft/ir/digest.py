"""Structural identity of a plan: the kernel-set digest.

Hashes structure only (buffers, member bodies, inputs, outputs), never times,
notes or anything a search produced, so two compiles of the same plan compare
equal however long they took.
"""

from __future__ import annotations

import hashlib

import numpy as np

from weft.ir.nodes import Plan


def kernel_set_digest(plan: Plan) -> str:
    text = repr((plan.buffers, plan.kernels, plan.inputs, plan.outputs))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def output_digest(outputs) -> str:
    """Digest of each output's dtype, shape and bytes, in order (a single array or a tuple of
    arrays; a 0-d output keeps its shape ())."""
    arrays = outputs if isinstance(outputs, tuple | list) else (outputs,)
    digest = hashlib.sha256()
    for array in arrays:
        array = np.asarray(array)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes(order="C"))
    return digest.hexdigest()[:16]
