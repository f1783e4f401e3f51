"""Weights bound with ``params=`` are packed once, at load (``weft.lower.contraction_prepack``):
the results are those of the unbound plan (Strict: the same bytes) at odd sizes, through
window views, several column blocks, per-head weights and shared functions."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.lower.contraction as contraction
from weft import nn
from weft.config import config_from_env
from weft.fuzz.reference64 import outputs64
from weft.lower.contraction import ContractionNest
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal

CONTRACTS = ["strict", "inference"]


def _arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]


@pytest.fixture()
def config(tmp_path):
    def make(contract, **extra):
        return config_from_env(contract=contract, threads=2, cache_dir=tmp_path / "cache", **extra)

    return make


def _nests(compiled):
    return [n for f in compiled.lowered.functions for n in f.nests if isinstance(n, ContractionNest)]


def _check_bound(fn, shapes, bound_positions, contract, config, fusion="off"):
    """Compile with the inputs at ``bound_positions`` bound; compare with the unbound compile
    and the reference; returns the bound compile."""
    specs = [weft.spec(s, param=i in bound_positions) for i, s in enumerate(shapes)]
    plan = weft.trace(fn, *specs, name="case")
    arrays = _arrays(shapes)
    params = {plan.inputs[i]: arrays[i] for i in bound_positions}
    bound = weft.compile(plan, config=config(contract, fusion=fusion), params=params)
    plain = weft.compile(weft.trace(fn, *[weft.spec(s) for s in shapes], name="case"),
                         config=config(contract, fusion=fusion))
    free = [a for i, a in enumerate(arrays) if i not in bound_positions]
    got, unbound = bound(*free), plain(*arrays)
    assert any(n.packed_y is not None for n in _nests(bound)), bound.describe()
    assert not any(n.packed_y is not None for n in _nests(plain))
    assert "y packed at bind" in bound.describe()
    if contract == "strict":
        assert_strict_equal((got,), (run(plan, *arrays),))
        assert got.tobytes() == unbound.tobytes()
    else:
        assert_inference_close((got,), outputs64(plan, *arrays))
    return bound, plan, arrays


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("fusion", ["off", "greedy"])
def test_bound_linear_with_bias_and_activation(config, contract, fusion):
    """Remainders in every axis: 3 x 37 rows, 130 columns (two full panels and a partial
    one), a fold of 300 (several kc blocks with x packed: 5 column panels)."""
    def fn(x, w, b):
        return nn.gelu(nn.linear(x, w) + b)

    compiled, _, _ = _check_bound(fn, [(3, 37, 300), (330, 300), (330,)], {1, 2}, contract, config, fusion)
    if fusion == "greedy":
        assert any(n.epilogue is not None for n in _nests(compiled))


@pytest.mark.parametrize("contract", CONTRACTS)
def test_bound_weight_through_window_view(config, contract):
    def fn(x, w):
        return nn.linear(nn.window_partition(x, 4), w)

    _check_bound(fn, [(1, 7, 9, 19), (23, 19)], {1}, contract, config)


@pytest.mark.parametrize("contract", CONTRACTS)
def test_several_column_blocks(config, contract, monkeypatch):
    """A small L3 splits the columns into several packed blocks (nc < N): the packed view
    is addressed at each block's offset."""
    monkeypatch.setattr(contraction, "_cache_sizes", lambda: (48 * 1024, 1024 * 1024, 256 * 1024))
    compiled, _, _ = _check_bound(lambda x, w: nn.linear(x, w), [(29, 200), (333, 200)], {1}, contract, config)
    (nest,) = _nests(compiled)
    assert nest.blocking.nc < nest.columns


@pytest.mark.parametrize("contract", CONTRACTS)
def test_per_head_weights_batch_axis(config, contract):
    """A weight per head (y depends on the batch axis): one packed panel set per head."""
    compiled, _, _ = _check_bound(nn.matmul, [(9, 13, 40), (9, 40, 70)], {1}, contract, config)
    (nest,) = _nests(compiled)
    assert nest.batch_points == 9


@pytest.mark.parametrize("contract", CONTRACTS)
def test_caller_writes_after_compile_are_not_seen(config, contract):
    """Bound weights are snapshots (docs/user-guide.md): packing them at load is safe; a
    write to the caller's array after compile changes nothing, in either contract."""
    plan = weft.trace(lambda x, w: nn.linear(x, w), weft.spec((17, 64)), weft.spec((100, 64), param=True))
    x, w = _arrays([(17, 64), (100, 64)])
    original = w.copy()
    compiled = weft.compile(plan, config=config(contract), params={plan.inputs[1]: w})
    before = compiled(x).copy()
    w *= -3.0  # in place, on the caller's array
    after = compiled(x)
    assert after.tobytes() == before.tobytes()
    if contract == "strict":
        assert_strict_equal((after,), (run(plan, x, original),))
    with pytest.raises(ValueError):
        compiled.params[plan.inputs[1]][0, 0] = 1.0  # the bound copy itself is read-only


def test_shared_function_each_occurrence_its_own_panels(config):
    """Two identical linears (one C function, weft.lower.reuse), one weight bound and one
    passed per call: each occurrence reads its own weight (packed, or packed per call)."""
    def fn(x, w1, w2):
        return nn.linear(nn.linear(x, w1), w2)

    shapes = [(21, 48), (48, 48), (48, 48)]
    plan = weft.trace(fn, weft.spec(shapes[0]), weft.spec(shapes[1], param=True), weft.spec(shapes[2]))
    x, w1, w2 = _arrays(shapes)
    compiled = weft.compile(plan, config=config("strict"), params={plan.inputs[1]: w1})
    assert_strict_equal((compiled(x, w2),), (run(plan, x, w1, w2),))
    packed = [n.packed_y is not None for n in _nests(compiled)]
    assert packed == [True, False]
    both = weft.trace(fn, weft.spec(shapes[0]), weft.spec(shapes[1], param=True), weft.spec(shapes[2], param=True))
    compiled = weft.compile(both, config=config("strict"), params={both.inputs[1]: w1, both.inputs[2]: w2})
    assert len({f.name for f in compiled.lowered.functions}) == 1  # still one C function, two packed buffers
    assert_strict_equal((compiled(x),), (run(both, x, w1, w2),))


def test_warm_compile_keeps_bound_and_unbound_apart(config):
    """The compile record is keyed by the bound names: a warm compile with params= reuses the
    prepacked lowering (and repacks at load), a compile without params= never gets it."""
    plan = weft.trace(lambda x, w: nn.linear(x, w), weft.spec((17, 64)), weft.spec((100, 64), param=True))
    x, w = _arrays([(17, 64), (100, 64)])
    first = weft.compile(plan, config=config("strict", fusion="off"), params={plan.inputs[1]: w})
    warm = weft.compile(plan, config=config("strict", fusion="off"), params={plan.inputs[1]: w * 2})
    assert warm.from_record and any(n.packed_y is not None for n in _nests(warm))
    assert_strict_equal((warm(x),), (run(plan, x, w * 2),))
    assert_strict_equal((first(x),), (run(plan, x, w),))
    plain = weft.compile(plan, config=config("strict", fusion="off"))
    assert not any(n.packed_y is not None for n in _nests(plain))
    assert_strict_equal((plain(x, w),), (run(plan, x, w),))
