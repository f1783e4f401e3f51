"""The contraction microkernel priced from its own blocking, and the fused form priced as the
lowering emits it (the microkernel with the region's tail as epilogue or prologue).

The fixed profile: 4 GHz, an FMA peak of 256 GFLOP/s per core (two 16-lane FMAs per cycle),
48 KiB L1, 1 MiB L2, 32 MiB L3 (usable shares 36 KiB, 768 KiB, ...)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from model_cases import fixed_profile, matmul_plan  # noqa: E402

from weft.compose.regions import grow  # noqa: E402
from weft.config import config_from_env  # noqa: E402
from weft.cost.facts import ContractionFacts, OpCounts, OperandFacts, function_facts  # noqa: E402
from weft.cost.model import (  # noqa: E402
    GATHER_CYCLES,
    MICRO_TILE_CYCLES,
    machine_numbers,
    price_contraction,
    price_function,
)
from weft.fuse import region_pricing  # noqa: E402
from weft.lower import Target, lower_plan  # noqa: E402
from weft.lower.contraction import ContractionNest  # noqa: E402
from weft.workloads import get_workload  # noqa: E402

KIB = 1024


def facts(**changes) -> ContractionFacts:
    """A 96 x 64 x 64 product: tile 6 x 64 (four vectors), one fold block, x read in place."""
    base = dict(
        rows=96, columns=64, fold=64, batches=1, mr=6, nr=64, kc=64, mc=12, nc=64, column_groups=1,
        parallel_batches=False, pack_x=False, packed_y=False, stream_output=False, fma=True,
        x=(OperandFacts("a", 96 * 64 * 4),), y=(OperandFacts("b", 64 * 64 * 4),),
        x_ops=OpCounts(), y_ops=OpCounts(), y_packing="vector", output="c", epilogue_ops=OpCounts(), epilogue_loads=(),
    )
    base.update(changes)
    return ContractionFacts(**base)


HOMES = {"a": 2, "b": 2, "c": 2}


def test_microkernel_compute_is_its_register_tile_at_the_fma_peak():
    numbers = machine_numbers(fixed_profile(), 1)
    compute, _, _, _, _ = price_contraction(facts(), numbers, HOMES, 1)
    # 16 row tiles x 4 vectors x 64 steps = 4096 x 6 FMAs at 2 per cycle; 16 tiles entered, each
    # storing its 24 accumulators once; y packed: 4096 elements, one store per 16
    assert compute == pytest.approx(16 * 6 * 4 * 64 / 2 + 16 * (MICRO_TILE_CYCLES + 24) + 64 * 64 / 16)


def test_strict_pays_a_multiply_and_an_add_per_term():
    numbers = machine_numbers(fixed_profile(), 1)
    fma, _, _, _, _ = price_contraction(facts(), numbers, HOMES, 1)
    strict, _, _, _, _ = price_contraction(facts(fma=False), numbers, HOMES, 1)
    assert strict - fma == pytest.approx(16 * 6 * 4 * 64 / 2)


def test_microkernel_bytes_per_level():
    numbers = machine_numbers(fixed_profile(), 1)
    _, _, _, read, write = price_contraction(facts(), numbers, HOMES, 1)
    # L3 (the homes): a once (read in place by its one column tile), b once, c written once;
    # the packed 16 KiB panel of b is written to L1 and streamed by each of the 16 row tiles
    # from L1 (it fits): the first read per row block (8 of them) and the rest
    assert read == pytest.approx([16 * 16 * KIB, 0.0, 24 * KIB + 16 * KIB, 0.0])
    assert write == pytest.approx([16 * KIB, 0.0, 24 * KIB, 0.0])


def test_prologue_operations_count_per_packed_element_not_per_multiply():
    numbers = machine_numbers(fixed_profile(), 1)
    in_place, _, _, _, _ = price_contraction(facts(), numbers, HOMES, 1)
    plain, _, _, _, _ = price_contraction(facts(pack_x=True), numbers, HOMES, 1)
    scaled, _, _, _, _ = price_contraction(facts(pack_x=True, x_ops=OpCounts(arithmetic=2.0)), numbers, HOMES, 1)
    # x is packed element by element (96 x 64, one column panel): a load and a store each
    assert plain - in_place == pytest.approx(96 * 64 * GATHER_CYCLES)
    # and a prologue's two operations once per element, scalar (one cycle at two per cycle)
    assert scaled - plain == pytest.approx(96 * 64 * 2 / 2)
    # y by vectors along its columns, or element by element
    scalar_y, _, _, _, _ = price_contraction(facts(y_packing="scalar"), numbers, HOMES, 1)
    assert scalar_y - in_place == pytest.approx(64 * 64 * (GATHER_CYCLES - 1 / 16))


def test_fold_blocks_reload_the_partial_sums():
    numbers = machine_numbers(fixed_profile(), 1)
    one, _, _, read_one, write_one = price_contraction(facts(fold=256, kc=256), numbers, HOMES, 1)
    four, _, _, read_four, write_four = price_contraction(facts(fold=256, kc=64), numbers, HOMES, 1)
    out = 96 * 64 * 4  # an output block of 12 x 64 floats fits L1: partial sums wait there
    assert write_four[0] - write_one[0] == pytest.approx(3 * out)
    # the same bytes streamed, plus the partial sums (the 64 KiB micro-panel of kc = 256 is
    # over the L1 share, the 16 KiB one of kc = 64 is not: the stream moves level)
    assert sum(read_four) - sum(read_one) == pytest.approx(3 * out)
    assert read_four[1] < read_one[1]
    # three more tile entries per tile, and 24 accumulators reloaded in each
    assert four - one == pytest.approx(16 * 3 * (MICRO_TILE_CYCLES + 24) + 16 * 3 * 24)


def test_nest_facts_read_the_lowered_microkernel():
    plan = matmul_plan(96, 64, 64)
    function = lower_plan(plan, None, Target(16, "inference")).functions[0]
    nest = function.nests[0]
    assert isinstance(nest, ContractionNest)
    found = function_facts(function, "inference").nests[0].contraction
    b = nest.blocking
    assert (found.rows, found.columns, found.fold, found.mr, found.nr, found.kc) == (96, 64, 64, b.mr, b.nr, b.kc)
    assert found.fma and found.output == "c" and found.pack_x == nest.pack_x
    assert found.y_packing == "vector"  # b[p, j] is contiguous along the columns j
    assert [o.buffer for o in found.x] == ["a"] and [o.buffer for o in found.y] == ["b"]
    assert found.x[0].bytes == 96 * 64 * 4 and found.y[0].bytes == 64 * 64 * 4


VIT = {"tokens_side": 24, "dim": 256, "heads": 4, "window": 8, "mlp_dim": 1024}


def _vit_verdict(members: tuple[str, ...]):
    plan = get_workload("vit-block").plan(**VIT)
    config = config_from_env(contract="inference", threads=1, fusion="priced", budget_s=60)
    pricing = region_pricing(plan, config, Target(16, "inference"), profile=fixed_profile())
    region = next(r for r in grow(plan, members[-1], frozenset(k.output for k in plan.kernels)).candidates
                  if r.members == members)
    return pricing.verdict(region)


def test_a_generic_fused_nest_around_the_microkernel_does_not_pay():
    """vit-block's second layer norm into fc1: fused, fc1 loses the microkernel (a tiled
    generic nest, measured 5.7 ms against 1.5 ms for fc1 alone at 1 thread); the model priced
    fc1 unfused at 10 ms (reuse per output row, no register tile) and took the fusion."""
    verdict = _vit_verdict(("norm2_ln_mean", "norm2_ln_centered", "norm2_ln_var", "norm2_layer_norm", "mlp_linear"))
    assert not verdict.pays()


def test_a_contraction_with_its_tail_is_priced_as_the_microkernel_epilogue():
    """The lowering emits qkv_linear + its bias as the microkernel with an epilogue: that is
    the form priced (not a tiled generic nest it never runs), with no scratch."""
    verdict = _vit_verdict(("qkv_linear", "qkv_add"))
    assert verdict.status == "priced" and verdict.form == "microkernel"
    assert verdict.fused.memory_bytes == 0
    # the epilogue saves the intermediate's round trip, never the FMAs: a thin margin
    assert 0.0 < verdict.margin < 0.25


def _attention_one_pass(plan, members: tuple[str, ...]):
    """The one-pass form of ``plan``'s candidate region of ``members`` (Inference, 1 thread)."""
    config = config_from_env(contract="inference", threads=1, fusion="priced", budget_s=60)
    pricing = region_pricing(plan, config, Target(16, "inference"), profile=fixed_profile())
    every = tuple(kernel.output for kernel in plan.kernels)
    region = next(r for r in grow(plan, members[-1], frozenset(every)).candidates if r.members == members)
    return next(form for form in pricing.region_lowering(region).forms() if form.name == "one pass")


def test_the_one_pass_scores_are_priced_on_the_register_tile_at_the_fma_peak_not_the_blas_rate():
    """attention 5184 x 32 at 1 thread: the one pass's streamed q k^T runs on the microkernel's
    6 x 64 register tile, but was priced at NumPy's GEMM rate (116 of 249 GFLOP/s here), so the
    whole attention (measured 23.3 ms) looked 36% dearer than leaving the scores unfused
    (measured 26.4 ms) and the priced plan lost 1.13x to fuse-on-sight."""
    import dataclasses

    from weft.cost.model import SCALAR_PACK_CYCLES, TRANSPOSED_PACK_CYCLES, price_nest

    plan = get_workload("attention").plan(heads=1, tokens=384, head_dim=32)
    one_pass = _attention_one_pass(plan, tuple(kernel.output for kernel in plan.kernels))
    scores = next(nest for nest in one_pass.facts.nests if nest.member == "attn_scores")
    assert scores.register_tile == (6, 64)
    rows, keys, depth = 64, 384, 32  # one tile of 64 query rows against every key
    extents = dict(scores.extents) | {"i": rows}
    slow_blas = dataclasses.replace(fixed_profile(), gemm_flops_per_s=((1, 1e9), (2, 2e9)))
    prices = [price_nest(scores, extents.__getitem__, machine_numbers(profile, 1), {}, 1, (6, frozenset("i"), 0.0))[0]
              for profile in (fixed_profile(), slow_blas)]
    assert prices[0] == prices[1]  # the BLAS rate plays no part
    tiles = 6 * rows * keys / (6 * 64)  # six tiles of the pass, each 64 x 384 scores in 6 x 64 register tiles
    packing = (scores.packed_elements * SCALAR_PACK_CYCLES  # K and Q packed for the tile (the next test)
               + scores.transposed_elements * TRANSPOSED_PACK_CYCLES)
    assert prices[0] == pytest.approx(tiles * (6 * 4 * depth / 2 + MICRO_TILE_CYCLES + 24) + packing)


def test_the_one_pass_pays_for_packing_k_once_per_call_and_q_once_per_tile():
    """vit-block's window attention (8 x 8 windows: 64 keys): the one pass packs K, whole key
    blocks, once per call and Q once per tile, a scalar copy per element, as many elements as
    1/64 of the multiply-adds (which run 32 to a cycle). Unpriced, the pass over the six
    members looked 1.45x cheaper than the members unfused at 24 x 24 tokens, dim 256, 4 heads,
    and measured 1.3-1.4x dearer (0.45 against 0.32 ms, 1 thread), so the priced plan lost
    to unfused (1.033, a fail) where it should have left the scores to the microkernel."""
    import dataclasses

    from weft.cost.model import SCALAR_PACK_CYCLES, TRANSPOSED_PACK_CYCLES, price_nest

    plan = get_workload("vit-block").plan(tokens_side=16, dim=128, heads=2, window=8, mlp_dim=256)
    members = ("attn_scores", "attn_max", "attn_exp", "attn_sum", "attn_probs", "attn_out")
    scores = next(nest for nest in _attention_one_pass(plan, members).facts.nests if nest.member == "attn_scores")
    windows, heads, keys, depth = 4, 2, 64, 64
    # K's rows run along d: its whole key blocks are packed by transposed tiles; Q element by element
    assert scores.transposed_elements == windows * heads * keys * depth
    assert scores.packed_elements == windows * heads * keys * depth  # Q (64 query rows a window)
    extents = dict(scores.extents)
    numbers = machine_numbers(fixed_profile(), 1)
    unpacked = dataclasses.replace(scores, packed_elements=0.0, transposed_elements=0.0)
    with_packing, without = (price_nest(facts, extents.__getitem__, numbers, {}, 1, (windows, frozenset("b0"), 0.0))[0]
                             for facts in (scores, unpacked))
    assert with_packing - without == pytest.approx(scores.packed_elements * SCALAR_PACK_CYCLES
                                                   + scores.transposed_elements * TRANSPOSED_PACK_CYCLES)
    # at 1024 keys the same packing is a small part of the pass
    long = get_workload("attention").plan(heads=4, tokens=1024, head_dim=64)
    long_scores = next(nest for nest in _attention_one_pass(long, tuple(k.output for k in long.kernels)).facts.nests
                       if nest.member == "attn_scores")
    assert long_scores.packed_elements + long_scores.transposed_elements == 4 * 1024 * 64 * 2


def test_the_one_pass_value_products_are_priced_on_the_register_tile_of_its_scores():
    """attention 4 x 1024 x 64, Inference: the one pass over all six members runs p x V, like
    q k^T, on the scores' register tile for every full key block (``TileFold``), but its value
    nest was priced as a generic nest streaming V from L2; with the transfers from beyond L1
    not overlapping the in-core work, the whole pass (measured 5.6-5.9 ms here) was priced
    dearer than its members unfused (measured 6.8-7.1 ms)."""
    plan = get_workload("attention").plan(heads=4, tokens=1024, head_dim=64)
    members = tuple(kernel.output for kernel in plan.kernels)
    values = next(nest for nest in _attention_one_pass(plan, members).facts.nests if nest.member == "attn_out")
    assert values.library and values.register_tile[0] == 6 and values.register_tile[1] % 16 == 0
    # over the materialised scores (no streamed contraction, no register tile) it stays generic
    generic = _attention_one_pass(plan, members[1:])
    assert not next(nest for nest in generic.facts.nests if nest.member == "attn_out").library


def test_the_pipelined_row_pass_is_priced_reading_its_rows_from_memory_once():
    """cross-entropy from logits (Inference): the one pass with nothing streamed runs its rows
    pipelined (``OnlinePass.pipelined``: block b's max beside block b-1's exps), so the logits
    are read from memory once; it was priced reading them twice (the dependents' loads as a
    second sweep over rows that do not fit the cache), so the plain fused form (two reads,
    measured 2.16x slower than the one pass) was priced cheaper and chosen."""
    tokens, vocab = 64, 8192
    plan = get_workload("cross-entropy").plan(tokens=tokens, vocab=vocab)
    config = config_from_env(contract="inference", threads=1, fusion="priced", budget_s=60)
    pricing = region_pricing(plan, config, Target(16, "inference"), profile=fixed_profile())
    members = ("ce_max", "ce_sumexp", "ce_loss")
    region = next(r for r in grow(plan, "ce_loss", frozenset(k.output for k in plan.kernels)).candidates
                  if r.members == members)
    forms = {form.name: form for form in pricing.region_lowering(region).forms()}
    one_pass = forms["one pass"]
    price = price_function(one_pass.facts, machine_numbers(fixed_profile(), 1), {}, dict(one_pass.tilings[0]))
    logits = tokens * vocab * 4
    assert sum(price.served) == pytest.approx(logits, rel=0.01)  # once, plus the row results
    plain = price_function(forms["fused"].facts, machine_numbers(fixed_profile(), 1), {}, dict(forms["fused"].tilings[0]))
    assert price.cycles < plain.cycles
