"""A float64 attention written for tests, independent of Weft (no oracle, no PyTorch)."""

from __future__ import annotations

import numpy as np


def attention64(q, k, v, keep=None, additive=None, scale=None):
    """Float64 attention over the last two axes; ``keep`` (bool) or ``additive`` (float) masks."""
    q64, k64, v64 = (np.asarray(a, np.float64) for a in (q, k, v))
    if q64.ndim == 3 and k64.shape[0] != q64.shape[0]:  # grouped-query: K/V head h // group
        group = q64.shape[0] // k64.shape[0]
        k64, v64 = np.repeat(k64, group, axis=0), np.repeat(v64, group, axis=0)
    scale = 1.0 / np.sqrt(q64.shape[-1]) if scale is None else scale
    s = np.einsum("...id,...jd->...ij", q64, k64) * scale
    if additive is not None:
        s = s + additive
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("...ij,...je->...ie", p, v64)
