"""Identical work lowered, rendered and compiled once per canonical form (weft.lower.reuse).

Counts lowered functions against calls, checks the C file defines each once, and runs
multi-layer plans whose layers share functions against the oracle, byte for byte (Strict).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.compose import choose_regions, region_signature
from weft.fuse import online_lowering_for
from weft.lower import Target
from weft.lower import fused as fused_lowering
from weft.lower.reuse import distinct_functions
from weft.oracle import run
from weft.workloads import get_workload

QWEN = get_workload("qwen-decode-step")
SAM3 = get_workload("sam3-encoder")


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


def _compile(plan, contract, fusion):
    return weft.compile(plan, contract=contract, fusion=fusion, threads=2, lanes=4)


def _defined(source: str, name: str) -> int:
    return len(re.findall(rf"^\S.*\b{re.escape(name)}\(.*\)\s*\{{", source, re.MULTILINE))


@pytest.mark.parametrize("fusion", ["greedy", "off"])
def test_identical_layers_share_one_function_per_signature(fusion):
    # the last layer differs (the final norm may join it): layers 2, 3 and 5 compared
    two, three, five = (_compile(QWEN.plan(**dict(QWEN.small, layers=n)), "strict", fusion) for n in (2, 3, 5))
    calls = [len(compiled.lowered.functions) for compiled in (two, three, five)]
    distinct = [len(distinct_functions(compiled.lowered.functions)) for compiled in (two, three, five)]
    per_layer = calls[1] - calls[0]
    assert per_layer > 0 and calls[2] == calls[1] + 2 * per_layer  # every occurrence is still called
    assert distinct[0] == distinct[1] == distinct[2] < calls[0]  # but lowered once per distinct form
    four = five
    distinct_four = distinct_functions(five.lowered.functions)
    source = four.source_path.read_text()
    for function in distinct_four:
        assert _defined(source, function.name) == 1, function.name
    # the runner's step table calls, in order, the function of every occurrence
    callers = dict(re.findall(r"static int (wf_call_\d+)\(.*return (\w+)\(", source))
    table = re.search(r"wf_callers\[\d+\] = \{([^}]*)\}", source).group(1).replace(" ", "").split(",")
    steps = re.search(r"wf_step_caller\[\d+\] = \{([^}]*)\}", source).group(1).replace("\n", "").split(",")
    called = [callers[table[int(step)]] for step in steps]
    assert called == [function.name for function in four.lowered.functions]


def test_functions_match_the_distinct_region_signatures():
    """As many lowered functions as distinct region signatures; occurrences of a signature
    all call one function, different signatures never share one."""
    plan = QWEN.plan(**dict(QWEN.small, layers=3))
    compiled = _compile(plan, "inference", "greedy")
    target = Target(lanes=4, contract="inference")
    partition = choose_regions(plan, "greedy", "inference",
                               fits=fused_lowering.region_fits(plan, target, online_lowering_for("inference")))
    signatures = [region_signature(plan, region, "inference") for region in partition.regions]
    names = [function.name for function in compiled.lowered.functions]
    assert [function.members for function in compiled.lowered.functions] == [r.members for r in partition.regions]
    by_signature: dict[str, set[str]] = {}
    for signature, name in zip(signatures, names, strict=True):
        by_signature.setdefault(signature, set()).add(name)
    assert all(len(shared) == 1 for shared in by_signature.values())
    assert len(set(names)) == len(by_signature) == len(distinct_functions(compiled.lowered.functions))


@pytest.mark.parametrize("fusion", ["greedy", "off"])
def test_shared_functions_give_the_oracle_bytes(fusion):
    params = dict(QWEN.small, layers=3)
    plan = QWEN.plan(**params)
    arrays = QWEN.inputs(seed=11, **params)
    compiled = _compile(plan, "strict", fusion)
    assert len(distinct_functions(compiled.lowered.functions)) < len(compiled.lowered.functions)
    for got, want in zip(_outputs(compiled(*arrays)), _outputs(run(plan, *arrays)), strict=True):
        assert got.tobytes() == want.tobytes()


def test_sam3_windowed_and_global_blocks_share_within_their_kind_only():
    params = dict(SAM3.small, blocks=4)  # blocks 1 and 3 attend globally (global_every=2)
    plan = SAM3.plan(**params)
    arrays = SAM3.inputs(seed=12, **params)
    compiled = _compile(plan, "strict", "greedy")
    function_of = {member: function.name for function in compiled.lowered.functions for member in function.members}
    attention = [function_of[f"b{block}_attn_out"] for block in range(4)]
    assert attention[0] == attention[2] != attention[1] == attention[3]
    assert compiled(*arrays).tobytes() == run(plan, *arrays).tobytes()


def test_a_buffer_read_twice_is_not_confused_with_two_buffers():
    """``a * a`` and ``a * b`` differ only in which buffers alias: never one function."""
    def products(a, b):
        return nn.exp(a * a), nn.exp(a * b), nn.exp(b * b)

    plan = nn.trace(products, nn.spec((8, 16)), nn.spec((8, 16)))
    arrays = [np.random.default_rng(3).standard_normal((8, 16), dtype=np.float32) for _ in range(2)]
    compiled = _compile(plan, "strict", "off")
    names = [function.name for function in compiled.lowered.functions if function.members[0].startswith("exp")]
    pairs = {function.members: function.name for function in compiled.lowered.functions}
    assert len(set(pairs.values())) < len(pairs)  # the two squares share
    assert len(names) == 3
    for got, want in zip(_outputs(compiled(*arrays)), _outputs(run(plan, *arrays)), strict=True):
        assert got.tobytes() == want.tobytes()


def test_each_distinct_candidate_is_fitted_once(monkeypatch):
    """A layer repeated N times asks the lowering about each distinct candidate once (was N times)."""
    calls = []
    original = fused_lowering.region_fit
    monkeypatch.setattr(fused_lowering, "region_fit", lambda *a, **k: calls.append(1) or original(*a, **k))
    counts = []
    for layers in (2, 6):  # the last layer differs (the final norm may join it)
        plan = QWEN.plan(**dict(QWEN.small, layers=layers))
        target = Target(lanes=4, contract="inference")
        calls.clear()
        choose_regions(plan, "greedy", "inference",
                       fits=fused_lowering.region_fits(plan, target, online_lowering_for("inference")))
        counts.append(len(calls))
    assert counts[0] == counts[1] > 0


def _row_wise_stack(layers: int, tokens: int = 128, hidden: int = 384, ffn: int = 1536):
    """Layers with no attention between them: every member tiles along the rows, so growth
    from the last member could run back through the whole plan (issue 13). The weights (2.3 MB)
    are out of cache: no fused region may cut their reuse, so none spans a whole layer."""
    def stack(x, *weights):
        for layer in range(layers):
            wi, bi, wf, bf, g, b = weights[6 * layer: 6 * layer + 6]
            x = nn.layer_norm(x + nn.linear(nn.gelu(nn.linear(x, wi, bi)), wf, bf), hidden, g, b)
        return x

    shapes = [(ffn, hidden), (ffn,), (hidden, ffn), (hidden,), (hidden,), (hidden,)]
    return nn.trace(stack, nn.spec((tokens, hidden)), *[nn.spec(s) for _ in range(layers) for s in shapes])


def test_growth_through_a_row_wise_stack_is_bounded(monkeypatch):
    from weft.compose.regions import MAX_REGION_MEMBERS

    calls = []
    original = fused_lowering.region_fit
    monkeypatch.setattr(fused_lowering, "region_fit", lambda *a, **k: calls.append(1) or original(*a, **k))
    counts, sizes = [], []
    for layers in (6, 12):
        plan = _row_wise_stack(layers)
        calls.clear()
        partition = choose_regions(plan, "greedy", "inference", fits=fused_lowering.region_fits(
            plan, Target(lanes=16, contract="inference"), online_lowering_for("inference")))
        counts.append(len(calls))
        sizes.append([region.size for region in partition.regions])
        assert max(len(growth.candidates) for growth in partition.growths) <= MAX_REGION_MEMBERS
    assert counts[0] == counts[1]  # each distinct candidate asked once, however deep the stack
    assert sizes[1][-len(sizes[0]) // 2:] == sizes[0][-len(sizes[0]) // 2:]  # the same regions per layer


def test_a_row_wise_stack_gives_the_oracle_bytes():
    """Small weights: regions span layers, up to the growth limit, and compute the oracle's bytes."""
    from weft.compose.regions import MAX_REGION_MEMBERS

    plan = _row_wise_stack(5, tokens=16, hidden=32, ffn=64)  # 50 members
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(plan.buffer(n).shape, dtype=np.float32) * 0.3 for n in plan.inputs]
    compiled = _compile(plan, "strict", "greedy")
    assert max(len(function.members) for function in compiled.lowered.functions) == MAX_REGION_MEMBERS
    assert compiled(*arrays).tobytes() == run(plan, *arrays).tobytes()
