"""weft.compile end to end on hand-built plans: Strict is byte-identical to the oracle."""

from __future__ import annotations

import numpy as np
import pytest
from plans import ax, buffer
from plans import matmul_softmax as matmul_softmax_plan
from plans import scaled_sum as scaled_sum_plan

import weft
from weft.codegen.units import UNIT_BREAK
from weft.errors import InputError
from weft.ir import (
    Axis,
    Binary,
    BinaryOp,
    Cast,
    Combiner,
    Const,
    DType,
    Fold,
    IndexOf,
    IndexValue,
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    UnaryOp,
    Where,
)
from weft.oracle import run
from weft.testing import assert_strict_equal

assert_same_bytes = assert_strict_equal  # the Strict rule (weft.testing)


def test_matmul_softmax_strict_bit_identical(make_config):
    plan = matmul_softmax_plan()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 19)).astype(np.float32)
    b = rng.standard_normal((19, 45)).astype(np.float32)
    compiled = weft.compile(plan, config=make_config())
    assert_same_bytes(compiled(a, b), run(plan, a, b))
    # independent float64 reference
    c = a.astype(np.float64) @ b.astype(np.float64)
    e = np.exp(c - c.max(axis=1, keepdims=True))
    np.testing.assert_allclose(compiled(a, b), e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_rank0_output_and_tuple_results(make_config):
    plan = scaled_sum_plan((5, 33))
    x = np.random.default_rng(1).standard_normal((5, 33)).astype(np.float32)
    compiled = weft.compile(plan, config=make_config())
    y, t = compiled(x)
    assert t.shape == ()
    assert_same_bytes((y, t), run(plan, x))
    np.testing.assert_allclose(t, (x.astype(np.float64) * 2 + 1).sum(), rtol=1e-5)


def _special_values(shape, seed=2):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32) * 50
    flat = x.reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = np.inf
    flat[5::13] = -np.inf
    flat[6::17] = 0.0
    flat[8::19] = -0.0
    flat[9::23] = 1e-40  # denormal: no flush-to-zero
    return x


def test_nan_inf_propagate_like_oracle(make_config):
    shape = (7, 35)
    i, j = Axis("i", 7), Axis("j", 35)
    x = Load("x", (ax("i"), ax("j")))
    kernels = (
        Kernel("u", (i, j), Binary(BinaryOp.ADD, Unary(UnaryOp.EXP, x), Unary(UnaryOp.LOG, Unary(UnaryOp.ABS, x)))),
        Kernel("v", (i, j), Binary(BinaryOp.MAX, Unary(UnaryOp.TANH, x), Binary(BinaryOp.MUL, x, Const(1e-30)))),
        Kernel("w", (i, j), Where(Binary(BinaryOp.GT, x, Const(0.0)), Unary(UnaryOp.SQRT, x),
                                  Unary(UnaryOp.SIGMOID, x))),
        Kernel("mx", (i,), Load("u", (ax("i"), ax("j"))), Fold((j,), Combiner.MAX)),
        Kernel("mn", (j,), Load("v", (ax("i"), ax("j"))), Fold((i,), Combiner.MIN)),
        Kernel("sm", (i,), Load("w", (ax("i"), ax("j"))), Fold((j,), Combiner.SUM)),
        Kernel("r", (i, j), Binary(BinaryOp.DIV, Unary(UnaryOp.RSQRT, x), Unary(UnaryOp.ERF, x))),
    )
    buffers = (buffer("x", shape, Role.INPUT), buffer("u", shape), buffer("v", shape), buffer("w", shape),
               buffer("mx", (7,), Role.OUTPUT), buffer("mn", (35,), Role.OUTPUT), buffer("sm", (7,), Role.OUTPUT),
               buffer("r", shape, Role.OUTPUT))
    plan = Plan(buffers, kernels, ("x",), ("mx", "mn", "sm", "r"), name="specials")
    data = _special_values(shape)
    compiled = weft.compile(plan, config=make_config())
    got, want = compiled(data), run(plan, data)
    assert_same_bytes(got, want)
    assert np.isnan(got[0]).any() and np.isnan(got[3]).any()
    # denormal survives a compiled copy (no flush-to-zero)
    assert_same_bytes(weft.compile(scaled_sum_plan((1, 3)), config=make_config())(
        np.array([[1e-40, -1e-45, 3.0]], np.float32))[0], np.array([[1.0, 1.0, 7.0]], np.float32))


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_int_bool_ops_gather_and_padding(make_config, contract):
    """Integer and bool members are exact under both contracts (integer folds reassociate exactly)."""
    rows, dim, count = 11, 19, 23
    t, d = Axis("t", count), Axis("d", dim)
    tokens = Load("tok", (ax("t"),))
    kernels = (
        # embedding gather: e[t, d] = table[tok[t], d]
        Kernel("e", (t, d), Load("table", (IndexOf(tokens), ax("d")))),
        # shifted with padding: s[t, d] = e[t - 1, d] (0 at t = 0)
        Kernel("s", (t, d), Load("e", (ax("t") - 1, ax("d")), padding=0.0)),
        # integer arithmetic and a causal-style mask from index values
        Kernel("q", (t, d), Cast(Binary(BinaryOp.DIV, Binary(BinaryOp.SUB, Cast(tokens, DType.INT64),
                                                                 IndexValue(ax("d"))), Const(3, DType.INT64)),
                                 DType.FLOAT32)),
        Kernel("m", (t, d), Where(Binary(BinaryOp.AND, Binary(BinaryOp.GE, IndexValue(ax("t")), IndexValue(ax("d"))),
                                         Unary(UnaryOp.NOT, Binary(BinaryOp.EQ, tokens, Const(0, DType.INT32)))),
                                  Load("s", (ax("t"), ax("d"))), Const(float("-inf")))),
        Kernel("cnt", (d,), Cast(Binary(BinaryOp.LT, Load("m", (ax("t"), ax("d"))), Const(0.0)), DType.INT32),
               Fold((t,), Combiner.SUM)),
        Kernel("big", (t,), Cast(tokens, DType.INT64), Fold((d,), Combiner.MAX)),
        Kernel("flag", (t, d), Binary(BinaryOp.GT, Load("q", (ax("t"), ax("d"))), Const(0.0))),
    )
    buffers = (
        buffer("table", (rows, dim), Role.PARAM), buffer("tok", (count,), Role.INPUT, DType.INT32),
        buffer("e", (count, dim)), buffer("s", (count, dim)), buffer("q", (count, dim), Role.OUTPUT),
        buffer("m", (count, dim), Role.OUTPUT), buffer("cnt", (dim,), Role.OUTPUT, DType.INT32),
        buffer("big", (count,), Role.OUTPUT, DType.INT64), buffer("flag", (count, dim), Role.OUTPUT, DType.BOOL),
    )
    plan = Plan(buffers, kernels, ("table", "tok"), ("q", "m", "cnt", "big", "flag"), name="ints")
    rng = np.random.default_rng(3)
    table = rng.standard_normal((rows, dim)).astype(np.float32)
    tok = rng.integers(0, rows, count).astype(np.int32)
    compiled = weft.compile(plan, config=make_config(contract))
    assert_same_bytes(compiled(table, tok), run(plan, table, tok))
    bad = tok.copy()
    bad[4] = rows
    with pytest.raises(InputError, match="gather index"):
        compiled(table, bad)


def test_input_validation_and_out(make_config):
    plan = scaled_sum_plan((4, 17))
    compiled = weft.compile(plan, config=make_config())
    x = np.ones((4, 17), np.float32)
    with pytest.raises(InputError, match="shape"):
        compiled(np.ones((4, 16), np.float32))
    with pytest.raises(InputError, match="dtype"):
        compiled(np.ones((4, 17), np.float64))
    with pytest.raises(InputError, match="takes 1 inputs"):
        compiled(x, x)
    y, t = np.empty((4, 17), np.float32), np.empty((), np.float32)
    result = compiled(x, out=(y, t))
    assert result[0] is y and float(t) == 4 * 17 * 3
    with pytest.raises(InputError, match="out array"):
        compiled(x, out=(np.empty((4, 17), np.float64), t))
    # non-contiguous input is accepted and left untouched
    wide = np.arange(4 * 34, dtype=np.float32).reshape(4, 34)
    before = wide.copy()
    assert_same_bytes(compiled(wide[:, ::2]), run(plan, np.ascontiguousarray(wide[:, ::2])))
    assert np.array_equal(wide, before)


def test_prepare_profile_and_memory(make_config):
    plan = matmul_softmax_plan(64, 32, 48)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 48)).astype(np.float32)
    compiled = weft.compile(plan, config=make_config())
    prepared = compiled.prepare(a, b)
    assert prepared() is None
    assert_same_bytes(prepared.result(), run(plan, a, b))
    assert compiled.raw_outputs is None
    assert compiled.run_raw(a, b) is None
    first = compiled.raw_outputs
    compiled.run_raw(a, b)
    assert compiled.raw_outputs is first  # the same buffers, reused
    assert_same_bytes(compiled.raw_outputs, run(plan, a, b))
    rows = compiled.profile(a, b, repeats=3)
    assert [r[1] for r in rows] == [("c",), ("mx",), ("e",), ("s",), ("p",)]
    assert all(seconds >= 0 for _, _, seconds in rows)
    # c and e are (64, 48) floats; mx and s rows; sharing keeps the arena below the sum
    assert compiled.arena_bytes < (2 * 64 * 48 + 2 * 64) * 4
    assert compiled.memory_bytes() >= compiled.arena_bytes + 64 * 48 * 4
    assert compiled.source_path.exists() and compiled.so_path.exists()
    assert compiled.provenance["lanes"] in (4, 8, 16) and "-ffp-contract=off" in compiled.provenance["flags"]
    text = compiled.describe()
    assert "c: contraction microkernel" in text and "mx: lanes along i" in text


def test_threads_do_not_change_bytes(make_config):
    """Parallel nests (work above the OpenMP threshold) give the same bytes at 1 and 2 threads."""
    plan = matmul_softmax_plan(300, 70, 290)
    assert plan.kernels[0].shape == (300, 290)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((300, 70)).astype(np.float32)
    b = rng.standard_normal((70, 290)).astype(np.float32)
    one = weft.compile(plan, config=make_config(threads=1))
    two = weft.compile(plan, config=make_config(threads=2))
    assert one.so_path == two.so_path  # threads are a call-time setting, not a compile-time one
    nests = [f.nests[0] for f in two.lowered.functions]
    assert any(n.parallel for n in nests)
    assert_same_bytes(two(a, b), one(a, b))
    assert_same_bytes(two(a, b), run(plan, a, b))


_FORKED = {}  # set before forking: children inherit it (closures cannot be pickled)


def _run_in_fork(_):
    compiled, a, b = _FORKED["state"]
    return compiled(a, b).tobytes()


def test_forked_children_do_not_hang(make_config):
    """libgomp's pool does not survive fork: a forked child runs single-threaded and warns."""
    import multiprocessing
    import sys

    if sys.platform != "linux":
        pytest.skip("fork start method is Linux-only here")
    plan = matmul_softmax_plan(300, 70, 290)
    compiled = weft.compile(plan, config=make_config(threads=2))
    rng = np.random.default_rng(6)
    a = rng.standard_normal((300, 70)).astype(np.float32)
    b = rng.standard_normal((70, 290)).astype(np.float32)
    want = compiled(a, b)  # OpenMP threads now started in this process
    _FORKED["state"] = (compiled, a, b)
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        results = pool.map_async(_run_in_fork, [0]).get(timeout=120)
    assert results == [want.tobytes()]


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_reshaped_and_rotated_reads_across_lanes(make_config, contract):
    """x[f // 37, f % 37] and a rotation by 12 of period 24: some vectors stay inside one
    quotient (one contiguous load), others cross it (lane by lane)."""
    from weft.ir import IndexMod

    rows, cols = 9, 37
    f = Axis("f", rows * cols)
    i, j = Axis("i", rows), Axis("j", 48)
    kernels = (
        Kernel("flat", (f,), Load("x", (ax("f") // cols, ax("f") % cols))),
        Kernel("rot", (i, j), Load("y", (ax("i"), (ax("j") // 24) * 24 + IndexMod(ax("j") + 12, 24)))),
    )
    buffers = (buffer("x", (rows, cols), Role.INPUT), buffer("y", (rows, 48), Role.INPUT),
               buffer("flat", (rows * cols,), Role.OUTPUT), buffer("rot", (rows, 48), Role.OUTPUT))
    plan = Plan(buffers, kernels, ("x", "y"), ("flat", "rot"), name="reshapes")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = rng.standard_normal((rows, 48)).astype(np.float32)
    compiled = weft.compile(plan, config=make_config(contract))
    flat, rot = compiled(x, y)
    assert_same_bytes((flat, rot), run(plan, x, y))
    assert np.array_equal(flat, x.reshape(-1))
    assert np.array_equal(rot, np.concatenate([np.roll(y[:, :24], -12, 1), np.roll(y[:, 24:], -12, 1)], 1))


def test_out_arrays_that_overlap_each_other_are_rejected(make_config):
    """out=(A, A) used to return a wrong first output silently: both outputs wrote A."""
    plan = weft.trace(lambda x: (x * 2.0, x + 1.0), weft.spec((4, 17)))
    compiled = weft.compile(plan, config=make_config())
    x = np.arange(68, dtype=np.float32).reshape(4, 17)
    same = np.empty((4, 17), np.float32)
    with pytest.raises(InputError, match="overlap"):
        compiled(x, out=(same, same))
    backing = np.empty(68 + 34, np.float32)  # two contiguous views sharing half their elements
    with pytest.raises(InputError, match="overlap"):
        compiled(x, out=(backing[:68].reshape(4, 17), backing[34:].reshape(4, 17)))
    with pytest.raises(InputError, match="overlap"):
        compiled.prepare(x, out=(same, same))
    first, second = np.empty((4, 17), np.float32), np.empty((4, 17), np.float32)
    result = compiled(x, out=(first, second))
    assert result[0] is first and result[1] is second
    assert_strict_equal(result, run(plan, x))


def test_prepare_binds_contiguous_inputs_live_and_rejects_others(make_config):
    """One documented behaviour: prepare() reads the caller's arrays at every call (an
    in-place update is seen); a non-contiguous input cannot be read in place and is refused
    (it used to be copied once, silently freezing its values while a contiguous one was live)."""
    plan = weft.trace(lambda x: x * 3.0, weft.spec((4, 17)))
    compiled = weft.compile(plan, config=make_config())
    x = np.arange(68, dtype=np.float32).reshape(4, 17)
    prepared = compiled.prepare(x)
    prepared()
    assert_strict_equal(prepared.result(), run(plan, x))
    x[...] = -np.arange(68, dtype=np.float32).reshape(4, 17) / 7  # update in place: the next call sees it
    prepared()
    assert_strict_equal(prepared.result(), run(plan, x))
    wide = np.arange(4 * 34, dtype=np.float32).reshape(4, 34)
    with pytest.raises(InputError, match="C-contiguous.*ascontiguousarray"):
        compiled.prepare(wide[:, ::2])
    assert_strict_equal(compiled(wide[:, ::2]), run(plan, np.ascontiguousarray(wide[:, ::2])))  # a call copies


def test_a_grouped_head_read_is_one_vector_load_per_lanes(make_config):
    # y[h, e] = x[(h // 2) * 64 + e] (qwen's grouped V entry): the head group is constant
    # along the lanes, so the C loads 16 contiguous floats, never lane by lane
    from weft.ir import AxisIndex, IndexAdd, IndexFloorDiv, IndexMul

    index = (IndexAdd(IndexMul(IndexFloorDiv(AxisIndex("h"), 2), 64), AxisIndex("e")),)
    plan = Plan((buffer("x", (128,), Role.INPUT), buffer("y", (4, 64), Role.OUTPUT)),
                (Kernel("y", (Axis("h", 4), Axis("e", 64)), Load("x", index)),), ("x",), ("y",), "grouped")
    x = np.random.default_rng(3).standard_normal(128).astype(np.float32)
    compiled = weft.compile(plan, config=make_config())
    assert_same_bytes(compiled(x), run(plan, x))
    body = compiled.source_path.read_text()
    body = body[body.index(") {", body.index(UNIT_BREAK)):]  # the function definitions, past the prototypes
    # (wfc_load_lines_f: the same vector, read from whole 64-byte lines on AVX-512)
    vector_load = "wfc_load_lines_f(&b_x["
    assert vector_load in body and "b_x[" not in body.replace(vector_load, "")


def test_a_flat_gather_moving_with_the_lanes_checks_every_lane(make_config):
    # y[t, d] = x[tok[t] * 3 + d]: the data-dependent row is constant along d, but the lanes
    # run past the table for tok = 2 (6 + 15 >= 20), so each lane is checked, not lane 0 only
    from weft.ir import AxisIndex, IndexAdd, IndexMul

    index = (IndexAdd(IndexMul(IndexOf(Load("tok", (AxisIndex("t"),))), 3), AxisIndex("d")),)
    plan = Plan((buffer("x", (20,), Role.INPUT), buffer("tok", (1,), Role.INPUT, DType.INT32),
                 buffer("y", (1, 16), Role.OUTPUT)),
                (Kernel("y", (Axis("t", 1), Axis("d", 16)), Load("x", index)),), ("x", "tok"), ("y",), "flat_gather")
    x = np.arange(20, dtype=np.float32)
    compiled = weft.compile(plan, config=make_config())
    good = np.array([1], dtype=np.int32)
    assert_same_bytes(compiled(x, good), run(plan, x, good))
    with pytest.raises(InputError, match="gather index"):
        compiled(x, np.array([2], dtype=np.int32))
