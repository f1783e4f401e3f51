"""Integer division, remainder and float-to-int casts are defined for every input,
identically in the oracle and in C (the Strict contract, docs/design.md section 3):

- ``a / b`` truncates toward zero; ``a / 0 = 0``; ``INT_MIN / -1 = INT_MIN`` (wraps);
- ``fmod(a, b) = a - (a / b) * b`` (the sign of ``a``); ``a % 0 = a``; ``INT_MIN % -1 = 0``;
- float to int truncates toward zero and saturates: NaN -> 0, +inf and values at or
  beyond the type's maximum -> its maximum, -inf and values below its minimum -> its minimum.

The expected values come from Python integers (written here, independent of the oracle);
the compiled code runs scalar tails and vector bodies (37 = two 16-lane vectors + 5).
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import weft
from weft import nn
from weft.config import config_from_env
from weft.oracle import run
from weft.testing import assert_strict_equal

INT_DTYPES = (np.int32, np.int64)


def _wrap(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _trunc_div(a: int, b: int, bits: int) -> int:
    if b == 0:
        return 0
    quotient = abs(a) // abs(b)
    return _wrap(-quotient if (a < 0) != (b < 0) else quotient, bits)


def _trunc_rem(a: int, b: int, bits: int) -> int:
    return _wrap(a - _trunc_div(a, b, bits) * b, bits)


def _saturating_cast(x: float, bits: int) -> int:
    if math.isnan(x):
        return 0
    if x >= 2.0 ** (bits - 1):
        return (1 << (bits - 1)) - 1
    if x < -(2.0 ** (bits - 1)):
        return -(1 << (bits - 1))
    return int(x)  # truncates toward zero


def _pairs(dtype):
    info = np.iinfo(dtype)
    special = [info.min, info.min + 1, -7, -3, -2, -1, 0, 1, 2, 3, 7, info.max - 1, info.max]
    a, b = np.meshgrid(np.array(special, dtype), np.array(special, dtype), indexing="ij")
    rng = np.random.default_rng(0)
    extra = rng.integers(info.min, info.max, size=(2, 11), dtype=dtype)  # 169 + 11: odd tail
    return np.concatenate([a.ravel(), extra[0]]), np.concatenate([b.ravel(), extra[1]])


def _config(tmp_path, contract="strict"):
    return config_from_env(contract=contract, threads=1, cache_dir=tmp_path)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_oracle_integer_division_and_remainder_match_python_integers(dtype):
    a, b = _pairs(dtype)
    bits = np.dtype(dtype).itemsize * 8
    spec = weft.spec(a.shape, np.dtype(dtype).name)
    quotient = run(weft.trace(lambda x, y: nn.div(x, y), spec, spec), a, b)
    remainder = run(weft.trace(lambda x, y: nn.fmod(x, y), spec, spec), a, b)
    want_q = [_trunc_div(int(x), int(y), bits) for x, y in zip(a, b, strict=True)]
    want_r = [_trunc_rem(int(x), int(y), bits) for x, y in zip(a, b, strict=True)]
    assert quotient.tolist() == want_q
    assert remainder.tolist() == want_r
    info = np.iinfo(dtype)
    minimum = np.array([info.min], dtype)
    assert _trunc_div(info.min, -1, bits) == info.min and _trunc_rem(info.min, -1, bits) == 0
    assert run(weft.trace(lambda x: nn.div(x, -1), weft.spec((1,), np.dtype(dtype).name)), minimum)[0] == info.min


@pytest.mark.parametrize("contract", ["strict", "inference"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_compiled_integer_division_and_remainder_never_trap(tmp_path, dtype, contract):
    """INT_MIN / -1 used to kill the process with SIGFPE; now every pair is defined."""
    a, b = _pairs(dtype)
    spec = weft.spec(a.shape, np.dtype(dtype).name)

    def program(x, y):
        return nn.div(x, y), nn.fmod(x, y), nn.div(x, -1), nn.fmod(x, -1), nn.div(x, 0), nn.fmod(x, 0)

    plan = weft.trace(program, spec, spec)
    compiled = weft.compile(plan, config=_config(tmp_path, contract))
    assert_strict_equal(compiled(a, b), run(plan, a, b))
    # the same ops with the operands in a 2-D layout (vector bodies and tails along rows)
    grid = weft.spec((5, 36), np.dtype(dtype).name)
    plan2 = weft.trace(lambda x, y: (nn.div(x, y), nn.fmod(x, y)), grid, grid)
    a2, b2 = a[:180].reshape(5, 36), b[:180].reshape(5, 36)
    assert_strict_equal(weft.compile(plan2, config=_config(tmp_path, contract))(a2, b2), run(plan2, a2, b2))


def test_int_min_divided_by_minus_one_does_not_kill_the_process(tmp_path):
    """On x86 ``idiv`` traps (SIGFPE) for INT_MIN / -1; run it in a child so a trap is a failure."""
    script = (
        "import numpy as np, weft\n"
        "from weft import nn\n"
        "from weft.config import config_from_env\n"
        "for name in ('int32', 'int64'):\n"
        "    spec = weft.spec((40,), name)\n"
        "    plan = weft.trace(lambda a, b: (nn.div(a, b), nn.div(a, -1)), spec, spec)\n"
        f"    compiled = weft.compile(plan, config=config_from_env(threads=1, cache_dir={str(tmp_path)!r}))\n"
        "    a = np.full(40, np.iinfo(name).min, name); b = np.full(40, -1, name)\n"
        "    print(name, [int(v[0]) for v in compiled(a, b)])\n"
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-2000:]}"
    assert child.stdout.split("\n")[:2] == [f"int32 {[-(2**31)] * 2}", f"int64 {[-(2**63)] * 2}"]


def _float_specials():
    values = [np.nan, -np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0, 0.5, -0.5, 1.7, -1.7,
              2.0**31, -(2.0**31), 2147483520.0, -2147483904.0, 3e9, -3e9,
              2.0**63, -(2.0**63), 9223371487098961920.0, -9223373136366403584.0, 1e19, -1e19, 123456.78]
    rng = np.random.default_rng(1)
    extra = (rng.standard_normal(12) * 1e10).astype(np.float32)  # 25 + 12 = 37
    return np.concatenate([np.array(values, np.float32), extra])


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_oracle_float_to_int_casts_saturate_and_send_nan_to_zero(dtype):
    x = _float_specials()
    bits = np.dtype(dtype).itemsize * 8
    got = run(weft.trace(lambda v: nn.cast(v, np.dtype(dtype).name), weft.spec(x.shape)), x)
    assert got.dtype == dtype
    assert got.tolist() == [_saturating_cast(float(v), bits) for v in x]


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_compiled_float_to_int_casts_match_the_oracle(tmp_path, contract):
    x = _float_specials()
    rows = np.stack([x, x[::-1], np.roll(x, 5)])  # every special in a vector body and in a tail

    def program(v):
        return nn.cast(v, "int32"), nn.cast(v, "int64"), nn.cast(v * 2.0, "int32"), nn.cast(v * 2.0, "int64")

    plan = weft.trace(program, weft.spec(rows.shape))
    compiled = weft.compile(plan, config=_config(tmp_path, contract))
    assert_strict_equal(compiled(rows), run(plan, rows))
    for row in range(rows.shape[0]):  # and the oracle is the defined rule, not C's accident
        for dtype, out in ((np.int32, 0), (np.int64, 1)):
            bits = np.dtype(dtype).itemsize * 8
            assert run(plan, rows)[out][row].tolist() == [_saturating_cast(float(v), bits) for v in rows[row]]
