"""The generator covers the whole weft.nn surface, and every program it makes is legal."""

from __future__ import annotations

import collections
import inspect

import pytest

from weft import nn
from weft.fuzz.generate import Options
from weft.fuzz.makers import COVERAGE, EXCLUDED, generate
from weft.fuzz.program import from_json, input_arrays, to_json, trace_program


def public_nn_names() -> set[str]:
    """Every public name of weft.nn: __all__ and any public function defined in weft.nn."""
    names = set(nn.__all__)
    for name, value in vars(nn).items():
        if not name.startswith("_") and inspect.isfunction(value) and value.__module__.startswith("weft.nn"):
            names.add(name)
    return names


def test_every_public_nn_function_is_generated_or_excluded_with_a_reason():
    missing = public_nn_names() - set(COVERAGE) - set(EXCLUDED)
    assert not missing, f"weft.nn functions the fuzzer neither generates nor excludes: {sorted(missing)}"
    assert all(reason.strip() for reason in EXCLUDED.values())
    assert not set(COVERAGE) & set(EXCLUDED)


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_generated_programs_call_every_covered_function_and_all_trace(contract):
    seen = collections.Counter()
    for index in range(500):
        program = generate(3, index, Options(contract=contract))
        trace_program(program)  # a program the generator makes must be legal
        input_arrays(program)
        assert from_json(to_json(program)) == program
        seen.update(program.functions())
    never = sorted(set(COVERAGE) - set(seen))
    assert not never, f"{contract}: 500 programs never called {never}"


def test_generation_is_deterministic_and_differs_by_index():
    options = Options(contract="strict")
    assert generate(7, 11, options) == generate(7, 11, options)
    assert generate(7, 11, options) != generate(7, 12, options)


def test_inference_programs_compare_and_cast_to_int_only_exact_values():
    """Under Inference a comparison of two rounded values may flip under a correct
    reassociation: the generator feeds comparisons only exact values."""
    rounding = {"exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "silu", "gelu", "add", "sub", "mul",
                "div", "sum", "mean", "softmax", "log_softmax", "layer_norm", "rms_norm", "matmul", "linear",
                "bmm", "attention", "conv2d", "cross_entropy", "rope", "rope_2d", "adam_step", "fmod"}
    comparisons = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}
    for index in range(300):
        program = generate(5, index, Options(contract="inference"))
        made_by = {out: op for op in program.ops for out in op.outs}
        for op in program.ops:
            if op.fn not in comparisons:
                continue
            for arg in op.args:
                source = made_by.get(getattr(arg, "name", None))
                if source is not None and source.dtypes[0] == "float32":
                    assert source.fn not in rounding, (index, op, source)
