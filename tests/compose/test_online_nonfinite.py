"""The one pass (online softmax) on non-finite inputs follows the oracle's non-finite values.

Found by the 5000-program fuzz runs (``python -m weft.fuzz --programs 5000 --contract
inference --fusion greedy --seed 2026``, programs 73, 740, 1114, 3808, 4204, 4422, 4676;
``weft/fuzz/FINDINGS.md`` section 8), rebuilt here at sizes spanning several key blocks of
the pass (``PASS_BLOCK`` keys each):

- a masked key whose V row holds NaN or inf has probability 0 and contributes ``0 * NaN``,
  NaN, in the oracle (and in float64); the pass restarted its accumulators when a fully
  masked prefix of blocks ended, so those keys contributed nothing;
- a NaN score at a masked position (``NaN + -inf`` is NaN) makes the row max NaN, so the
  oracle's row is NaN, not a fully masked row's 0; the register tile folded the max's lanes
  by compare-select, which drops a NaN.

Every case is checked by the fuzzer's own comparison (``weft.fuzz.check_outputs``: float64
within the Inference rule, non-finite values exactly), through the compiled C (one pass,
unfused Inference, Strict) and through the Python reference schedule.
"""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.compose import choose_regions
from weft.compose.execute import ExecutionReport, run_partition_outputs
from weft.fuzz import check_outputs, make_input
from weft.lower.online import PASS_BLOCK


def _case(shapes, fills, seed, **options):
    """(plan, arrays) of one attention with ``options`` (mask given as the fourth input)."""
    specs = [weft.spec(shape, "bool" if fill.startswith("keymask") else "float32") for shape, fill in zip(shapes, fills, strict=True)]
    if len(shapes) == 4:
        plan = weft.trace(lambda q, k, v, m: nn.attention(q, k, v, mask=m, **options), *specs)
    else:
        plan = weft.trace(lambda q, k, v: nn.attention(q, k, v, **options), *specs)
    arrays = [make_input(fill, shape, spec.dtype.value, seed=(seed, n))
              for n, (shape, fill, spec) in enumerate(zip(shapes, fills, specs, strict=True))]
    return plan, arrays


KEYS = 3 * PASS_BLOCK + 9  # three full key blocks and a partial one

CASES = {
    # program 73: q, k ones, V special, every other block of keys hidden (65 keys)
    "program_73": (((1, 3), (65, 3), (65, 3), (1, 65)), ("ones", "ones", "special", "keymask:alternate"), 2026006151, {}),
    # program 3808: 129 keys, alternate blocks hidden, V special (five columns)
    "program_3808": (((129, 3), (129, 3), (129, 5), (129, 129)),
                     ("uniform:0.05:3", "normal", "special", "keymask:alternate"), 2026009886, {}),
    # program 4204: grouped-query heads, left padding, V special
    "program_4204": (((2, 4, 41, 7), (2, 1, 200, 7), (2, 1, 200, 7), (200,)),
                     ("normal:0.01", "uniform:0.05:3", "special", "keymask:lead"), 2026010282, {}),
    # the register tile (a value head dim of whole vectors): V special under left padding,
    # alternating blocks and an additive mask hiding the trailing blocks
    "tile_lead": (((20, 8), (KEYS, 8), (KEYS, 32), (20, KEYS)), ("normal", "normal", "special", "keymask:lead"), 11, {}),
    "tile_alternate": (((20, 8), (KEYS, 8), (KEYS, 16), (20, KEYS)),
                       ("normal", "normal", "special", "keymask:alternate"), 12, {}),
    "tile_additive_lead": (((2, 13, 8), (2, KEYS, 8), (2, KEYS, 32), (KEYS,)),
                           ("normal", "normal", "special", "addmask:lead"), 13, {}),
    # program 740: causal with an additive mask, K special: a NaN score at a masked position
    "program_740": (((2, 6, 2, 2), (2, 3, 16, 2), (2, 3, 16, 1), (16,)),
                    ("ones", "special", "ones", "addmask:lead"), 2026006818, {"causal": True}),
    "nan_score_masked_tile": (((70, 8), (KEYS, 8), (KEYS, 16), (KEYS,)),
                              ("normal", "special", "normal", "addmask:lead"), 14, {"causal": True}),
    # program 4676: q special, an additive mask hiding the trailing keys, value head dim 1
    "program_4676": (((6, 2, 64), (3, 16, 64), (3, 16, 1), (1, 2, 16)),
                     ("special", "normal", "small", "addmask:trail"), 2026010754, {"scale": 0.125}),
    # program 1114: causal and alternate additive blocks, q special, 275 keys
    "program_1114": (((2, 17, 32), (2, 275, 32), (2, 275, 32), (1, 17, 275)),
                     ("special", "normal:0.01", "normal", "addmask:alternate"), 2026007192, {"causal": True}),
    # program 4422: causal, trailing additive blocks, K special, 261 keys, value head dim 48
    "program_4422": (((2, 3, 48, 63), (2, 3, 261, 63), (2, 3, 261, 48), (261,)),
                     ("normal", "special", "small", "addmask:trail"), 2026010500, {"causal": True}),
}


def _one_pass_used(compiled) -> bool:
    return any(type(n).__name__ == "OnlinePass" for f in compiled.lowered.functions for n in f.nests)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_one_pass_follows_the_oracle_on_non_finite_inputs(fused_config, name):
    shapes, fills, seed, options = CASES[name]
    plan, arrays = _case(shapes, fills, seed, **options)
    compiled = weft.compile(plan, config=fused_config("inference", threads=1))
    assert _one_pass_used(compiled)
    check_outputs(plan, arrays, compiled(*arrays), contract="inference")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_schedule_follows_the_oracle_on_non_finite_inputs(name):
    shapes, fills, seed, options = CASES[name]
    plan, arrays = _case(shapes, fills, seed, **options)
    report = ExecutionReport(4)
    got = run_partition_outputs(plan, choose_regions(plan, "greedy", "inference"), *arrays,
                                tile=4, block=PASS_BLOCK, report=report)
    assert report.online_regions
    check_outputs(plan, arrays, got, contract="inference")


@pytest.mark.parametrize("name", ["program_73", "program_740", "tile_lead", "nan_score_masked_tile"])
@pytest.mark.parametrize("contract, fusion", [("inference", "off"), ("strict", "greedy"), ("strict", "off")])
def test_exact_and_unfused_paths_follow_the_oracle_on_non_finite_inputs(fused_config, name, contract, fusion):
    shapes, fills, seed, options = CASES[name]
    plan, arrays = _case(shapes, fills, seed, **options)
    compiled = weft.compile(plan, config=fused_config(contract, fusion=fusion, threads=1))
    check_outputs(plan, arrays, compiled(*arrays), contract=contract)


def test_the_cases_hold_non_finite_values_where_the_pass_restarts():
    # the inputs really put NaN/inf into masked leading blocks (else the tests above prove nothing)
    plan, arrays = _case(*CASES["tile_lead"][:3])
    v, keep = arrays[2], arrays[3]
    hidden_lead = ~keep[:, :PASS_BLOCK].any(axis=0)
    assert not np.isfinite(v[:PASS_BLOCK][hidden_lead]).all()
    assert keep.any(axis=1).sum() < keep.shape[0]  # and some rows see nothing at all
