"""The shrinker reduces a failing program to a minimal one that fails the same way."""

from __future__ import annotations

import math

from weft.fuzz.generate import Options
from weft.fuzz.makers import generate
from weft.fuzz.program import InputDef, Op, Program, Ref
from weft.fuzz.shrink import shrink


def _program() -> Program:
    dims = (("a", 37), ("b", 20))
    inputs = (InputDef("in0", ("a", "b"), "float32", "special"), InputDef("in1", ("b",), "float32", "normal:8"))
    ops = (
        Op(("v0",), "add", (Ref("in0"), Ref("in1")), (), (("a", "b"),), ("float32",)),
        Op(("v1",), "exp", (Ref("v0"),), (), (("a", "b"),), ("float32",)),
        Op(("v2",), "softmax", (Ref("v1"),), (("axis", 0),), (("a", "b"),), ("float32",)),
        Op(("v3",), "sum", (Ref("v2"), 1), (), (("a",),), ("float32",)),
    )
    return Program(1, dims, inputs, ops, ("v3", "v1"))


def test_shrinks_a_synthetic_failure_to_one_op_on_two_elements():
    """'Fails' when the program calls exp on at least two elements: the minimum is a single
    exp of a two-element input of ones."""

    def fails(program: Program) -> bool:
        elements = sum(math.prod(shape) for shape in program.input_shapes())
        return "exp" in program.functions() and elements >= 2

    small, tried = shrink(_program(), fails)
    assert small.functions() == ("exp",)
    assert len(small.inputs) == 1
    assert math.prod(small.input_shapes()[0]) == 2
    assert small.inputs[0].fill == "ones"
    assert fails(small) and tried > 0


def test_shrinking_keeps_the_failure_and_never_grows():
    """On generated programs with a predicate on a function they call, the result still
    calls it and has no more ops or input elements than the original."""
    for index in range(12):
        program = generate(11, index, Options(contract="strict"))
        target = program.functions()[-1]

        def fails(candidate: Program, target=target) -> bool:
            return target in candidate.functions()

        small, _ = shrink(program, fails, seconds=20)
        assert target in small.functions()
        assert len(small.ops) <= len(program.ops)
        assert sum(map(math.prod, small.input_shapes())) <= sum(map(math.prod, program.input_shapes()))
