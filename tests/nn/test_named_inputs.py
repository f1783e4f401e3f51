"""Named, structured inputs (pytrees of specs), keyword calls and params= bound at compile."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.errors import InputError
from weft.nn import TraceError

RNG = np.random.default_rng(7)
X = RNG.standard_normal((4, 8), dtype=np.float32)
W = RNG.standard_normal((16, 8), dtype=np.float32)
B = RNG.standard_normal((16,), dtype=np.float32)


def block(x, weights):
    return nn.gelu(nn.linear(x, weights["w"], weights["b"]))


def expected():
    """float64 NumPy: gelu(x @ w.T + b), erf form."""
    from scipy.special import erf

    h = X.astype(np.float64) @ W.astype(np.float64).T + B
    return 0.5 * h * (1 + erf(h / np.sqrt(2)))


WEIGHT_SPECS = {"w": weft.spec((16, 8)), "b": weft.spec((16,))}


def test_a_dict_of_specs_names_inputs_by_path():
    plan = weft.trace(block, weft.spec((4, 8)), WEIGHT_SPECS)
    assert plan.inputs == ("x", "weights_b", "weights_w")  # dicts flatten in sorted key order
    np.testing.assert_allclose(weft.oracle.run(plan, X, B, W), expected(), rtol=1e-5, atol=1e-6)


def test_keyword_specs_nested_lists_and_odd_keys():
    def layers(x, stack):
        for layer in stack:
            x = nn.relu(nn.linear(x, layer["weight.q"]))
        return x

    stack = [{"weight.q": weft.spec((8, 8))}, {"weight.q": weft.spec((8, 8))}]
    plan = weft.trace(layers, stack=stack, x=weft.spec((4, 8)))
    assert plan.inputs == ("x", "stack_0_weight_q", "stack_1_weight_q")  # fn's parameter order
    w0, w1 = (RNG.standard_normal((8, 8), dtype=np.float32) for _ in range(2))
    h = np.maximum(X.astype(np.float64) @ w0.T.astype(np.float64), 0)
    want = np.maximum(h @ w1.T.astype(np.float64), 0)
    np.testing.assert_allclose(weft.oracle.run(plan, X, w0, w1), want, rtol=1e-5, atol=1e-5)


def test_trace_errors_for_clashing_names_unknown_keywords_and_arrays():
    with pytest.raises(TraceError, match="both be named 'w_a_'"):
        weft.trace(lambda w: w["a"] + w["a_"], {"a": weft.spec(3), "a_": weft.spec(3), "a.": weft.spec(3)})
    with pytest.raises(TraceError, match="has no parameter 'y'"):
        weft.trace(lambda x: x, x=weft.spec(3), y=weft.spec(3))
    big = np.zeros((300, 300), np.float32)
    with pytest.raises(TraceError) as error:
        weft.trace(lambda x: x + 1, big)
    message = str(error.value)
    assert "numpy array of shape (300, 300) and dtype float32" in message
    assert "weft.spec((300, 300), 'float32')" in message and len(message) < 200


def test_a_compiled_plan_takes_positional_pytree_and_keyword_inputs():
    plan = weft.trace(block, weft.spec((4, 8)), WEIGHT_SPECS)
    compiled = weft.compile(plan)
    want = weft.oracle.run(plan, X, B, W)
    assert compiled(X, B, W).tobytes() == want.tobytes()
    assert compiled(X, {"w": W, "b": B}).tobytes() == want.tobytes()
    assert compiled(x=X, weights={"b": B, "w": W}).tobytes() == want.tobytes()
    assert compiled(X, weights_w=W, weights_b=B).tobytes() == want.tobytes()
    with pytest.raises(InputError, match="unknown input 'weights_c'"):
        compiled(X, weights={"b": B, "c": W})
    with pytest.raises(InputError, match=r"missing input\(s\) weights_w"):
        compiled(X, weights_b=B)
    with pytest.raises(InputError, match="given twice"):
        compiled(X, B, W, x=X)


def test_params_bound_at_compile_are_not_passed_per_call():
    plan = weft.trace(block, weft.spec((4, 8)), WEIGHT_SPECS)
    weights = {"w": W.copy(), "b": B.copy()}
    compiled = weft.compile(plan, params={"weights": weights})
    weights["w"][:] = 0  # the bound copy is the caller's array at compile time
    assert compiled.input_names == ("x",)
    want = weft.oracle.run(plan, X, B, W)
    assert compiled(X).tobytes() == want.tobytes()
    assert compiled(x=X).tobytes() == want.tobytes()
    assert compiled.prepare(X)() is None
    with pytest.raises(InputError, match="bound at compile time"):
        compiled(X, weights_w=W)
    with pytest.raises(InputError, match="takes 1 inputs"):
        compiled(X, W)


@pytest.mark.parametrize("params, message", [
    ({"weights_z": W}, "names 'weights_z', which is not an input"),
    ({"weights_w": W.T.copy()}, r"param weights_w has shape \(8, 16\), expected \(16, 8\)"),
    ({"weights_b": B.astype(np.int32)}, "param weights_b has dtype int32, expected float32"),
    ({"weights_b": [1.0] * 16}, "param weights_b must be a numpy.ndarray, got list"),
])
def test_a_wrong_param_is_an_input_error(params, message):
    plan = weft.trace(block, weft.spec((4, 8)), WEIGHT_SPECS)
    with pytest.raises(InputError, match=message):
        weft.compile(plan, params=params)


def test_every_traced_param_must_be_bound_once_any_are():
    def model(x, w, b):
        return nn.linear(x, w, b)

    plan = weft.trace(model, weft.spec((4, 8)), weft.spec((16, 8), param=True), weft.spec((16,), param=True))
    with pytest.raises(InputError, match="leaves out b, traced as params"):
        weft.compile(plan, params={"w": W})
    compiled = weft.compile(plan, params={"w": W, "b": B})
    assert compiled(X).tobytes() == weft.oracle.run(plan, X, W, B).tobytes()


def test_compile_of_a_function_says_trace_first():
    with pytest.raises(weft.WeftError, match=r"trace it first with plan = weft.trace\(block, \*specs\)"):
        weft.compile(block)
    with pytest.raises(weft.WeftError, match="takes a plan from weft.trace"):
        weft.compile(np.zeros((1000, 1000), np.float32))


def test_the_oracle_takes_the_same_named_and_structured_inputs():
    plan = weft.trace(block, weft.spec((4, 8)), WEIGHT_SPECS)
    want = weft.oracle.run(plan, X, B, W)
    assert weft.oracle.run(plan, x=X, weights={"w": W, "b": B}).tobytes() == want.tobytes()
    assert weft.oracle.run(plan, X, {"b": B, "w": W}).tobytes() == want.tobytes()
    np.testing.assert_allclose(want, expected(), rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match=r"missing input\(s\) weights_b"):
        weft.oracle.run(plan, X, weights_w=W)
