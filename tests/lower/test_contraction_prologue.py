"""A fused region's elementwise producers of the contraction's operand run while packing
it (``weft.lower.contraction_prologue``): Strict bytes equal the oracle's, Inference is
within tolerance, at odd sizes (remainders along rows, columns and the fold)."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.config import config_from_env
from weft.cost.facts import function_facts
from weft.fuzz.reference64 import outputs64
from weft.ir import expr_loads
from weft.lower.contraction import ContractionNest
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal

CONTRACTS = ["strict", "inference"]


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    cache = tmp_path_factory.mktemp("weft-cache")

    def make(contract):
        return config_from_env(contract=contract, threads=2, cache_dir=cache, fusion="greedy")

    return make


def _check(fn, shapes, contract, config, positive=()):
    plan = weft.trace(fn, *[weft.spec(s) for s in shapes], name="prologue_case")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    for index in positive:
        arrays[index] = np.abs(arrays[index]) + 0.5
    compiled = weft.compile(plan, config=config(contract))
    nests = [n for f in compiled.lowered.functions for n in f.nests if isinstance(n, ContractionNest)]
    assert len(nests) == 1 and nests[0].prologue, compiled.describe()
    assert len(compiled.lowered.functions) == 1, compiled.describe()  # no intermediate left in memory
    private = set(nests[0].prologue)
    assert not {load.buffer for load in expr_loads(nests[0].kernel.body)} & private  # reads what it packs
    for function in compiled.lowered.functions:  # the cost model reads the nest (it once raised KeyError)
        assert function_facts(function, contract).nests
    got = compiled(*arrays)
    if contract == "strict":
        assert_strict_equal((got,), (run(plan, *arrays),))
    else:
        assert_inference_close((got,), outputs64(plan, *arrays))
    return nests[0]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_norm_scale_and_shift_while_packing(config, contract):
    """(x - mean) * rstd * gamma + beta, then a linear: 3 x 37 rows, 130 columns, a fold of 300
    (several kc blocks, x packed)."""
    def fn(x, mean, rstd, gamma, beta, w):
        return nn.linear((x - mean) * rstd * gamma + beta, w)

    nest = _check(fn, [(3, 37, 300), (3, 37, 1), (3, 37, 1), (300,), (300,), (130, 300)], contract, config,
                  positive=(2,))
    assert nest.pack_x and "prologue" in nest.describe()
    assert len(nest.prologue) >= 3


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_activation_then_linear_with_bias_epilogue(config, contract, activation):
    """An activation applied while packing, a bias on the register tile: prologue and epilogue."""
    act = getattr(nn, activation)

    def fn(x, w, b):
        return nn.linear(act(x), w) + b

    nest = _check(fn, [(2, 19, 77), (70, 77), (70,)], contract, config)
    assert nest.epilogue is not None


@pytest.mark.parametrize("contract", CONTRACTS)
def test_scaled_operand_many_column_panels(config, contract):
    """A scale on the operand, 300 columns (five panels: x packed once per row block and
    fold block, the prologue evaluated there, not once per column panel)."""
    def fn(x, w):
        return nn.linear(x * 0.5, w)

    _check(fn, [(4, 11, 45), (300, 45)], contract, config)


@pytest.mark.parametrize("contract", CONTRACTS)
def test_prologue_on_the_weight_side(config, contract):
    """The elementwise producer may feed the column factor (a scaled weight) as well."""
    def fn(x, w):
        return nn.linear(x, w * 2.0 + 1.0)

    _check(fn, [(29, 33), (90, 33)], contract, config)


def test_a_plain_fused_form_that_would_lose_the_microkernel_is_not_emitted():
    """vit-block (dim 256), greedy Inference, 1 thread: layer norm 2 fused with fc1 as a plain
    tiled nest took 14 ms, fc1 alone on the microkernel 2.4 ms. The lowering no longer offers
    that form; the norm's scale and shift alone still ride as fc1's prologue."""
    from weft.compose.regions import grow
    from weft.lower import Target
    from weft.lower.fused import region_fit
    from weft.workloads import get_workload

    plan = get_workload("vit-block").plan(tokens_side=24, dim=256, heads=4, window=8, mlp_dim=1024)
    every = frozenset(kernel.output for kernel in plan.kernels)
    candidates = {region.members: region for region in grow(plan, "mlp_linear", every).candidates}
    target = Target(16, "inference")
    whole = candidates[("norm2_ln_mean", "norm2_ln_centered", "norm2_ln_var", "norm2_layer_norm", "mlp_linear")]
    assert "mlp_linear would run as a generic tiled nest" in region_fit(plan, whole, target)
    assert region_fit(plan, candidates[("norm2_layer_norm", "mlp_linear")], target) is None
    compiled = weft.compile(plan, contract="inference", threads=1, fusion="greedy")
    (holder,) = [f for f in compiled.lowered.functions if "mlp_linear" in f.members]
    assert "norm2_ln_mean" not in holder.members
