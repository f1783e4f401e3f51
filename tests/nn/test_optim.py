"""adam_step against a float64 transcription of the Adam paper's update."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from weft import nn


def _adam_reference(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay):
    g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1**step)
    v_hat = v / (1 - beta2**step)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


@settings(max_examples=20, deadline=None)
@given(step=st.integers(1, 1000), weight_decay=st.sampled_from([0.0, 0.01]),
       shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=5))
def test_adam_step_matches_reference(traced, close, step, weight_decay, shape):
    rng = np.random.default_rng(step)
    p, g, m = (np.asarray(rng.standard_normal(shape), dtype=np.float32) for _ in range(3))
    v = np.asarray(np.abs(rng.standard_normal(shape)) * 0.1 + 1e-3, dtype=np.float32)
    kwargs = dict(step=step, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=weight_decay)
    plan, (new_p, new_m, new_v) = traced(lambda p, g, m, v: nn.adam_step(p, g, m, v, **kwargs), p, g, m, v)
    assert [k.output for k in plan.kernels] == ["adam_m", "adam_v", "adam_param"]
    assert all(k.fold is None for k in plan.kernels)
    ref_p, ref_m, ref_v = _adam_reference(*(a.astype(np.float64) for a in (p, g, m, v)), **kwargs)
    close(new_m, ref_m, rtol=1e-6)
    close(new_v, ref_v, rtol=1e-5)
    close(new_p, ref_p, rtol=1e-6, atol=1e-6)


def test_adam_step_shape_mismatch_names_shapes():
    import weft
    from weft.errors import ShapeError

    with pytest.raises(ShapeError, match=r"adam_step.*\(3,\).*\(4,\)"):
        weft.trace(lambda p, g, m, v: nn.adam_step(p, g, m, v, step=1),
                   weft.spec(3), weft.spec(4), weft.spec(3), weft.spec(3))
