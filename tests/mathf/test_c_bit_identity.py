"""The C rendering (vector and scalar) is bit-identical to the NumPy evaluation."""

import numpy as np
import pytest

from weft import mathf
from weft.errors import ConfigError
from weft.mathf import C_BINARY_NAMES, C_UNARY_NAMES, c_math_source
from weft.mathf.accuracy import CORE_DOMAINS, SPECIALS
from weft.oracle.interpreter import weft_max, weft_min

LANES = (16, 8, 4, 2, 1)
NUMPY_REFERENCE = {
    "exp": mathf.exp,
    "log": mathf.log,
    "tanh": mathf.tanh,
    "erf": mathf.erf,
    "sigmoid": mathf.sigmoid,
    "sin": mathf.sin,
    "cos": mathf.cos,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: np.float32(1.0) / np.sqrt(x),
}


def sweep_inputs(name, count=100_003, seed=3):
    """Specials, every class of bit pattern (NaN payloads, denormals) and the core range.

    The length is odd so vector runs end in a scalar tail.
    """
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 2**32, count // 2, dtype=np.uint64).astype(np.uint32).view(np.float32)
    low, high = CORE_DOMAINS.get(name, (-10.0, 10.0))
    core = rng.uniform(low, high, count - count // 2 - SPECIALS.size).astype(np.float32)
    return np.concatenate([SPECIALS, -SPECIALS, patterns, core])


def same_bits(left, right):
    return np.array_equal(np.asarray(left).view(np.uint32), np.asarray(right).view(np.uint32))


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("name", sorted(C_UNARY_NAMES))
def test_unary_bit_identical_to_numpy(compile_math, lanes, name):
    library = compile_math(lanes)
    x = sweep_inputs(name)
    with np.errstate(all="ignore"):
        expected = NUMPY_REFERENCE[name](x)
    vector = library.unary(name, x)
    mismatches = np.flatnonzero(vector.view(np.uint32) != expected.view(np.uint32))
    assert mismatches.size == 0, [(x[i], vector[i], expected[i]) for i in mismatches[:5]]
    if lanes == 16:  # the scalar path is the same for every lane count
        assert same_bits(library.unary(name, x, scalar=True), expected)


@pytest.mark.parametrize(
    "flags", [("-O3",), ("-O3", "-fno-math-errno", "-fwrapv"), ("-O1", "-mno-avx512f", "-Wno-psabi")]
)
def test_other_optimisation_levels_stay_bit_identical(compile_math, flags):
    """-ffp-contract=off is what matters: more optimisation or another ISA changes nothing."""
    library = compile_math(16, *flags)
    for name in sorted(C_UNARY_NAMES):
        x = sweep_inputs(name, count=20_011)
        with np.errstate(all="ignore"):
            expected = NUMPY_REFERENCE[name](x)
        assert same_bits(library.unary(name, x), expected), (flags, name)


@pytest.mark.parametrize("lanes", (16, 1))
@pytest.mark.parametrize("name", sorted(C_BINARY_NAMES))
def test_max_min_match_oracle_semantics(compile_math, lanes, name):
    library = compile_math(lanes)
    specials = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, 2.0**-149], dtype=np.float32)
    payload_nans = np.array([0x7FC00001, 0xFFC12345, 0x7F800001], dtype=np.uint32).view(np.float32)
    values = np.concatenate([specials, payload_nans])
    left, right = (grid.ravel() for grid in np.meshgrid(values, values))
    rng = np.random.default_rng(5)
    left = np.concatenate([left, rng.standard_normal(1001).astype(np.float32)])
    right = np.concatenate([right, rng.standard_normal(1001).astype(np.float32)])
    oracle = {"max": weft_max, "min": weft_min}[name](left, right)
    assert same_bits(library.binary(name, left, right), oracle)
    assert same_bits(library.binary(name, left, right, scalar=True), oracle)
    assert same_bits({"max": mathf.maximum, "min": mathf.minimum}[name](left, right), oracle)


def test_source_defines_every_function_for_every_lane_count():
    for lanes in (1, 2, 4, 8, 16):
        source = c_math_source(lanes)
        assert f"vector_size({4 * lanes})" in source
        for name in (*C_UNARY_NAMES.values(), *C_BINARY_NAMES.values()):
            assert f" {name}(" in source and f" {name}_s(" in source, (lanes, name)
        assert "wf_select(wf_vi mask, wf_vf a, wf_vf b)" in source
        assert " ? " not in source  # no ternaries on vectors


def test_unsupported_lane_count_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"c_math_source: lanes=3 .*16 for AVX-512"):
        c_math_source(3)


def test_every_op_has_a_numpy_and_a_c_implementation():
    from weft.mathf.c_source import COps
    from weft.mathf.numpy_ops import NumpyOps
    from weft.mathf.ops import Ops

    declared = {name for name in vars(Ops) if not name.startswith("_")}
    assert declared and declared <= set(dir(NumpyOps)) and declared <= set(dir(COps))
