"""The contraction microkernel in every view of its operands, with and without epilogues.

Strict: byte-identical to the oracle. Inference: close to a float64 evaluation written
apart from the oracle (weft/fuzz/reference64.py). Each case also asserts the member ran
on the microkernel, so a silent fallback to the plain nest fails the test.
"""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.config import config_from_env
from weft.fuzz.reference64 import outputs64
from weft.ir import (
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    Cast,
    Combiner,
    Const,
    DType,
    Fold,
    IndexOf,
    Kernel,
    Load,
    Plan,
    Role,
)
from weft.lower.contraction import ContractionNest, choose_blocking, split_contraction
from weft.lower.schedule import default_views
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal


def _arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]


def _tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _contraction_nests(compiled):
    return [n for f in compiled.lowered.functions for n in f.nests if isinstance(n, ContractionNest)]


def _check(fn, shapes, contract, make_config, fusion="off", expect_nests=1, expect_epilogue=False, seed=0,
           nan_at=None, lanes=None):
    plan = weft.trace(fn, *[weft.spec(s) for s in shapes], name="case")
    arrays = _arrays(shapes, seed)
    if nan_at is not None:
        arrays[0][nan_at] = np.nan
    compiled = weft.compile(plan, config=make_config(contract, fusion=fusion), lanes=lanes)
    nests = _contraction_nests(compiled)
    assert len(nests) == expect_nests, compiled.describe()
    if expect_epilogue:
        assert any(n.epilogue is not None for n in nests), compiled.describe()
    got = _tuple(compiled(*arrays))
    if contract == "strict":
        assert_strict_equal(got, _tuple(run(plan, *arrays)))
    else:
        assert_inference_close(got, outputs64(plan, *arrays))
    return nests


CONTRACTS = ["strict", "inference"]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_window_partition_view_with_padding(make_config, contract):
    """A linear over 4x4 windows of a 7x9 grid (zero-padded): the packing reads the
    window view (floor-div/mod, padding), and all windows' rows form one GEMM."""
    def fn(x, w):
        return nn.linear(nn.window_partition(x, 4), w)

    (nest,) = _check(fn, [(1, 7, 9, 19), (23, 19)], contract, make_config)
    assert nest.rows == 6 * 4 * 4 and nest.batch_axes == ()
    assert nest.pack_x  # a padded read cannot be addressed in place


@pytest.mark.parametrize("contract", CONTRACTS)
def test_leading_axes_are_one_gemm_with_transposed_weight(make_config, contract):
    """(B, T, C) @ W^T with W (out, in): rows B*T in one contraction; k over 300 > kc
    in two fold blocks (partial sums reloaded), M and N not multiples of the tile."""
    (nest,) = _check(lambda x, w: nn.linear(x, w), [(3, 11, 300), (70, 300)], contract, make_config,
                     nan_at=(1, 4, 250))  # one row of the output is NaN
    assert nest.rows == 33 and nest.columns == 70 and nest.batch_axes == ()
    assert not nest.pack_x and nest.blocking.kc == 300  # x in place: the whole fold in registers


@pytest.mark.parametrize("contract", CONTRACTS)
def test_fold_blocks_reload_partial_sums(make_config, contract):
    """K = 700 runs in several kc blocks (x packed: 300 columns are 5 micro-panels): Strict
    still adds each term in ascending order."""
    (nest,) = _check(nn.matmul, [(13, 700), (700, 300)], contract, make_config)
    assert nest.pack_x and nest.fold_points > nest.blocking.kc


@pytest.mark.parametrize("contract", CONTRACTS)
def test_batched_heads_and_permuted_operand(make_config, contract):
    """q @ k^T per head, k read through a permute: threads take whole heads, y packs the view."""
    def fn(q, k):
        return nn.matmul(q, nn.permute(k, 0, 2, 3, 1))

    (nest,) = _check(fn, [(2, 5, 17, 8), (2, 21, 5, 8)], contract, make_config)
    assert nest.batch_points == 10 and nest.blocking.parallel_batches


@pytest.mark.parametrize("contract", CONTRACTS)
def test_grouped_query_attention_products(make_config, contract):
    """Attention with 4 query heads over 2 K/V heads: both products (scores with their
    scale, probabilities by V) run on the microkernel through the h // 2 broadcast."""
    def fn(q, k, v):
        return nn.attention(q, k, v)

    nests = _check(fn, [(1, 4, 19, 16), (1, 2, 23, 16), (1, 2, 23, 16)], contract, make_config, expect_nests=2)
    scores = next(n for n in nests if n.kernel.fold.axes[0].extent == 16)
    assert not any(n.pack_x for n in nests)  # one column panel each: x read in place
    if contract == "inference":
        assert scores.fma and scores.scale == pytest.approx(0.25)


@pytest.mark.parametrize("contract", CONTRACTS)
def test_transposed_left_operand(make_config, contract):
    """a^T @ b: x is read down its columns, packing absorbs it."""
    (nest,) = _check(lambda a, b: nn.matmul(nn.transpose(a, 0, 1), b), [(31, 29), (31, 66)], contract, make_config)
    assert nest.pack_x


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("columns", [70, 300])
def test_x_in_place_and_packed_over_many_panels(make_config, contract, columns):
    """Plain row-major x: read in place for few column panels, packed for many."""
    (nest,) = _check(nn.matmul, [(20, 333), (333, columns)], contract, make_config)
    assert nest.pack_x is (columns > 4 * nest.blocking.nr)


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_epilogue_bias_activation_residual(make_config, contract, activation):
    """linear -> bias -> GELU/SiLU -> residual add, fused: one microkernel whose epilogue
    runs on the register tile (row tails of 5, column tail of 6 past a 64-wide tile)."""
    act = getattr(nn, activation)

    def fn(x, w, b, r):
        return r + act(nn.linear(x, w, b))

    (nest,) = _check(fn, [(5, 7, 33), (70, 33), (70,), (5, 7, 70)], contract, make_config, fusion="greedy",
                     expect_epilogue=True)
    assert len(nest.members) == 4 and nest.output == nest.members[-1]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_a_transcendental_epilogue_is_written_once_and_runs_after_the_last_fold_block(make_config, contract):
    """GELU after a linear whose sum spans several kc blocks, with row and column tails: the
    epilogue runs in one loop over the stored tile (its erf written once as a vector and once
    as a scalar, not once per accumulator), only after the last fold block."""
    from pathlib import Path

    def fn(x, w, b):
        return nn.gelu(nn.linear(x, w, b))

    shapes = [(13, 600), (300, 600), (300,)]
    plan = weft.trace(fn, *[weft.spec(s) for s in shapes], name="case")
    compiled = weft.compile(plan, config=make_config(contract, fusion="greedy"))
    (nest,) = _contraction_nests(compiled)
    assert nest.epilogue is not None and nest.fold_points > nest.blocking.kc
    source = Path(compiled.source_path).read_text()
    body = source[source.index("contraction microkernel"):]
    assert body.count("wf_erf(") == 1 and body.count("wf_erf_s(") == 1, body
    arrays = _arrays(shapes)
    if contract == "strict":
        assert_strict_equal(compiled(*arrays), run(plan, *arrays))
    else:
        assert_inference_close(compiled(*arrays), outputs64(plan, *arrays))


@pytest.mark.parametrize("contract", CONTRACTS)
def test_epilogue_scale_with_many_fold_blocks(make_config, contract):
    """A scaled product whose sum spans several kc blocks: the epilogue runs only once, after
    the last block (never on a partial sum)."""
    def fn(a, b):
        return nn.matmul(a, b) * 0.5 + 1.0

    (nest,) = _check(fn, [(9, 600), (600, 300)], contract, make_config, fusion="greedy", expect_epilogue=True)
    assert nest.fold_points > nest.blocking.kc


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("lanes", [8, 4])
def test_narrower_vectors(make_config, contract, lanes):
    """AVX2 / SSE-NEON widths: a 6 x 2-vector tile, same packing, same bytes."""
    def fn(x, w, b):
        return nn.gelu(nn.linear(x, w, b))

    (nest,) = _check(fn, [(4, 9, 37), (29, 37), (29,)], contract, make_config, fusion="greedy",
                     expect_epilogue=True, lanes=lanes)
    assert nest.blocking.nr == 2 * lanes


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("columns", [64, 70])
def test_streaming_stores_of_a_large_single_pass_output(make_config, contract, columns, monkeypatch):
    """An output written once and larger than the threshold is stored non-temporally where
    its rows are 64-byte aligned (64 columns) and with plain stores where they are not (70):
    the values are the same either way (scores per head, a scale, a short fold)."""
    import weft.lower.contraction as contraction

    monkeypatch.setattr(contraction, "STREAM_OUTPUT_L3_MULTIPLE", 0)  # every single-pass output streams

    def fn(q, k):
        return nn.matmul(q, nn.transpose(k, -2, -1)) * 0.125

    cache = make_config(contract).cache_dir / "stream"  # the lowering changed: not a record of another test's
    (nest,) = _check(fn, [(3, 2, 23, 64), (3, 2, columns, 64)], contract,
                     lambda c, **kw: config_from_env(contract=c, threads=2, cache_dir=cache, **kw), fusion="greedy",
                     expect_epilogue=True)
    assert nest.stream_output and "streaming stores" in nest.describe()


def test_large_linear_outputs_are_not_streamed():
    """fc1's output is reloaded between fold blocks (kc < K): plain stores keep it in cache."""
    plan = weft.trace(lambda x, w: nn.linear(x, w), weft.spec((5184, 1024)), weft.spec((4096, 1024)))
    from weft.lower.contraction import lower_contraction

    nest = lower_contraction(plan.kernels[0], default_views(plan), 16, "inference", 1)
    assert nest.blocking.kc < 1024 and not nest.stream_output


def test_split_finds_factors_and_axes():
    plan = weft.trace(lambda x, w: nn.linear(x, w), weft.spec((2, 5, 8)), weft.spec((16, 8)))
    kernel = plan.kernels[0]
    x, y, term, rows, column, batch = split_contraction(kernel, default_views(plan))
    assert rows == ("b0", "i") and column == "j" and batch == ()
    assert {load.buffer for load in (x, y)} == {plan.inputs[0], plan.inputs[1]}


def test_blocking_from_caches():
    caches = {"l1d": 48 * 1024, "l2": 1024 * 1024, "l3": 32 * 1024 * 1024}
    b = choose_blocking(rows=5184, columns=4096, fold=1024, lanes=16, **caches)
    assert (b.mr, b.nr) == (6, 64)
    assert b.kc == 256 and b.mc % 6 == 0 and b.nc == 4096  # the whole width: x's row block packed once
    assert b.mc * b.kc * 4 <= 1024 * 1024 // 4 and 1024 * b.nc * 4 <= 32 * 1024 * 1024 // 2
    assert (b.mc, -(-5184 // b.mc)) == (240, 22)  # an even count of row blocks: two threads end together
    narrow_l3 = choose_blocking(rows=5184, columns=4096, fold=1024, lanes=16, l1d=48 * 1024, l2=1024 * 1024,
                                l3=4 * 1024 * 1024)
    assert narrow_l3.nc == 512 and not narrow_l3.parallel_batches
    heads = choose_blocking(rows=576, columns=64, fold=576, lanes=16, batches=144, **caches)
    assert heads.parallel_batches and heads.nc == 64 and heads.column_groups == 1
    small = choose_blocking(rows=40, columns=4096, fold=64, lanes=16, **caches)
    assert small.kc == 64 and small.column_groups > 1  # few row blocks: columns are split among items


@pytest.mark.parametrize("contract", CONTRACTS)
def test_a_sum_used_as_a_gather_index_is_no_epilogue(make_config, contract):
    """Found by the realistic random plans: a member that gathers at an index computed
    from the contraction's sum cannot run on the register tile (it holds values, not
    addresses); it once failed to render (KeyError 'wf.acc'). The region must still compile
    and agree with the oracle."""

    f32 = DType.FLOAT32
    axes = (Axis("a0", 1), Axis("a1", 17), Axis("a2", 37))
    at = tuple(AxisIndex(a.name) for a in axes)
    product = Binary(BinaryOp.MUL, Load("x", (AxisIndex("a0"), AxisIndex("a1"), AxisIndex("k"))),
                     Load("w", (AxisIndex("a2"), AxisIndex("k"))))
    index = IndexOf(Cast(Binary(BinaryOp.MUL, Load("s", at), Const(3.0, f32)), DType.INT32))
    plan = Plan(
        buffers=(Buffer("x", (1, 17, 33), f32, Role.INPUT), Buffer("w", (37, 33), f32, Role.INPUT),
                 Buffer("s", (1, 17, 37), f32, Role.INTERMEDIATE), Buffer("y", (1, 17, 37), f32, Role.OUTPUT)),
        kernels=(Kernel("s", axes, product, Fold((Axis("k", 33),), Combiner.SUM)),
                 Kernel("y", axes, Load("x", (index, AxisIndex("a1"), AxisIndex("a2")), padding=-2.5))),
        inputs=("x", "w"), outputs=("y",), name="gather_at_sum",
    )
    arrays = _arrays([(1, 17, 33), (37, 33)])
    compiled = weft.compile(plan, config=make_config(contract, fusion="greedy"))
    assert all(n.epilogue is None for n in _contraction_nests(compiled)), compiled.describe()
    got = compiled(*arrays)
    if contract == "strict":
        assert_strict_equal(got, run(plan, *arrays))
    else:
        assert_inference_close(got, outputs64(plan, *arrays))


@pytest.mark.parametrize("contract", CONTRACTS)
def test_an_integer_division_of_the_sum_runs_on_the_register_tile(make_config, contract):
    """Found by the realistic random plans: an epilogue that divides two integer casts of the
    contraction's sum needs the accumulator's dtype to pick the integer division; it once
    failed to render (``reads unknown buffer 'wf.acc'``)."""
    f32 = DType.FLOAT32
    axes = (Axis("a0", 3), Axis("a1", 17))
    at = tuple(AxisIndex(a.name) for a in axes)
    product = Binary(BinaryOp.MUL, Load("x", (AxisIndex("a0"), AxisIndex("k"))),
                     Load("w", (AxisIndex("a1"), AxisIndex("k"))))

    def scaled(factor):
        return Cast(Binary(BinaryOp.MUL, Load("s", at), Const(factor, f32)), DType.INT32)

    plan = Plan(
        buffers=(Buffer("x", (3, 17), f32, Role.INPUT), Buffer("w", (17, 17), f32, Role.INPUT),
                 Buffer("s", (3, 17), f32, Role.INTERMEDIATE), Buffer("y", (3, 17), f32, Role.OUTPUT)),
        kernels=(Kernel("s", axes, product, Fold((Axis("k", 17),), Combiner.SUM)),
                 Kernel("y", axes, Cast(Binary(BinaryOp.DIV, scaled(1000.0), scaled(2.0)), f32))),
        inputs=("x", "w"), outputs=("y",), name="int_div_of_sum",
    )
    arrays = _arrays([(3, 17), (17, 17)])
    compiled = weft.compile(plan, config=make_config(contract, fusion="greedy"))
    got = compiled(*arrays)
    if contract == "strict":
        assert_strict_equal(got, run(plan, *arrays))
    else:  # integer casts of a reassociated sum may flip by one near a boundary: compare loosely
        want = run(plan, *arrays)
        assert np.mean(np.abs(_tuple(got)[0] - _tuple(want)[0]) <= 1.0) > 0.9
