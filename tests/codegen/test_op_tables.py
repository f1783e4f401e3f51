"""Every IR op, for every dtype it accepts, rendered scalar (tails) and across lanes:
byte-identical to the oracle on values that include NaN, infinities, zeros of both
signs, denormals and negative integers."""

from __future__ import annotations

import numpy as np

import weft
from weft.codegen.body import C_MATH
from weft.config import config_from_env
from weft.ir import (
    TRANSCENDENTAL,
    Axis,
    AxisIndex,
    Binary,
    BinaryOp,
    Buffer,
    Cast,
    Const,
    DType,
    Kernel,
    Load,
    Plan,
    Role,
    Unary,
    UnaryOp,
    Where,
)
from weft.oracle import run
from weft.testing import strict_mismatch

SHAPE = (3, 37)  # 37 = two 16-lane vectors + a scalar tail (also 4 x 8 + 5, 9 x 4 + 1)
NUMERIC = (DType.FLOAT32, DType.INT32, DType.INT64)


def test_every_transcendental_has_a_c_name():
    assert set(C_MATH) == set(TRANSCENDENTAL)


def _plan():
    i, j = Axis("i", SHAPE[0]), Axis("j", SHAPE[1])
    index = (AxisIndex("i"), AxisIndex("j"))
    loads = {dtype: (Load(f"x_{dtype.short}", index), Load(f"y_{dtype.short}", index)) for dtype in NUMERIC}
    loads[DType.BOOL] = (Load("x_bool", index), Load("y_bool", index))
    bodies: dict[str, tuple] = {}
    for op in UnaryOp:
        for dtype in DType:
            if op is UnaryOp.NOT and dtype is not DType.BOOL:
                continue
            if op in (UnaryOp.NEG, UnaryOp.ABS) and dtype is DType.BOOL:
                continue
            if op not in (UnaryOp.NOT, UnaryOp.NEG, UnaryOp.ABS) and dtype is not DType.FLOAT32:
                continue
            bodies[f"u_{op.value}_{dtype.short}"] = (Unary(op, loads[dtype][0]), dtype)
    for op in BinaryOp:
        for dtype in DType:
            logical = op in (BinaryOp.AND, BinaryOp.OR)
            comparison = op in (BinaryOp.LT, BinaryOp.LE, BinaryOp.GT, BinaryOp.GE, BinaryOp.EQ, BinaryOp.NE)
            if logical != (dtype is DType.BOOL) and not (comparison and dtype is DType.BOOL):
                continue
            result = DType.BOOL if logical or comparison else dtype
            bodies[f"b_{op.value}_{dtype.short}"] = (Binary(op, *loads[dtype]), result)
    for source in DType:
        for target in DType:
            bodies[f"c_{source.short}_{target.short}"] = (Cast(loads[source][0], target), target)
    for dtype in DType:
        bodies[f"w_{dtype.short}"] = (Where(loads[DType.BOOL][0], *loads[dtype]), dtype)
    # scalar operands meeting lanes, constants of every kind
    bodies["k_f32"] = (Binary(BinaryOp.MAX, loads[DType.FLOAT32][0], Const(float("nan"))), DType.FLOAT32)
    bodies["k_i64"] = (Binary(BinaryOp.SUB, Const(-7, DType.INT64), loads[DType.INT64][0]), DType.INT64)
    buffers = [Buffer(load.buffer, SHAPE, dtype, Role.INPUT) for dtype, pair in loads.items() for load in pair]
    kernels = []
    for name, (body, dtype) in bodies.items():
        buffers.append(Buffer(name, SHAPE, dtype, Role.OUTPUT))
        kernels.append(Kernel(name, (i, j), body))
    inputs = tuple(load.buffer for pair in loads.values() for load in pair)
    return Plan(tuple(buffers), tuple(kernels), inputs, tuple(bodies), name="op_tables")


def _values(dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype is DType.FLOAT32:
        x = (rng.standard_normal(SHAPE) * 3).astype(np.float32)
        flat = x.reshape(-1)
        flat[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-42, -3e-39, 2.5]
        flat[40:43] = [3e9, -3e9, 1e20]  # casts to int out of range
        return x
    if dtype is DType.BOOL:
        return rng.random(SHAPE) < 0.5
    info = np.iinfo(np.int32 if dtype is DType.INT32 else np.int64)
    x = rng.integers(-50, 50, SHAPE).astype(info.dtype)
    x.reshape(-1)[:4] = [0, -1, info.max, info.min + 1]
    return x


def test_every_op_scalar_and_vector_byte_identical(tmp_path):
    plan = _plan()
    arrays = [_values(plan.buffer(name).dtype, seed) for seed, name in enumerate(plan.inputs)]
    compiled = weft.compile(plan, config=config_from_env(contract="strict", threads=1, cache_dir=tmp_path))
    got, want = compiled(*arrays), run(plan, *arrays)
    assert len(got) == len(want) == len(plan.outputs)
    bad = {name: strict_mismatch(g, w) for name, g, w in zip(plan.outputs, got, want, strict=True)}
    bad = {name: problem for name, problem in bad.items() if problem is not None}
    assert not bad, bad
    assert len(plan.outputs) > 60
