"""``weft.compile(..., in_place={output: input})``: outputs written over their inputs.

The reference is the oracle run on copies of the inputs: an in-place call must give the
same values (Strict: the same bytes) in the caller's input arrays, and every plan it
cannot prove safe must be refused with an ``InputError`` that names the member."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.errors import InputError
from weft.oracle import run
from weft.testing import assert_inference_close
from weft.workloads.base import trace_named

SIZES = (4099, 70_001)  # odd sizes: vector tails; the larger one streams past L2


def adam_plan(sizes):
    specs, names = [], []
    for n, size in enumerate(sizes):
        names += [f"p{n}", f"g{n}", f"m{n}", f"v{n}"]
        specs += [weft.spec((size,))] * 4

    def step(*state):
        outputs = []
        for n in range(len(sizes)):
            with nn.name_scope(f"t{n}"):
                outputs += nn.adam_step(*state[4 * n:4 * n + 4], step=3, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
        return tuple(outputs)

    return trace_named(step, names, specs, "adam")


def adam_state(sizes, seed=0):
    rng = np.random.default_rng(seed)
    state = []
    for size in sizes:
        state += [rng.standard_normal(size).astype(np.float32), rng.standard_normal(size).astype(np.float32) * 1e-3,
                  rng.standard_normal(size).astype(np.float32) * 1e-4,
                  np.square(rng.standard_normal(size).astype(np.float32) * 1e-3) + np.float32(1e-9)]
    return state


def adam_pairs(plan, sizes):
    """Each tensor's new param, m and v over its old ones (outputs in nn.adam_step's order)."""
    pairs = {}
    for n in range(len(sizes)):
        new_p, new_m, new_v = plan.outputs[3 * n:3 * n + 3]
        pairs.update({new_p: f"p{n}", new_m: f"m{n}", new_v: f"v{n}"})
    return pairs


@pytest.mark.parametrize("contract", ["strict", "inference"])
@pytest.mark.parametrize("fusion", ["off", "greedy", "priced", "matchers"])
def test_adam_written_over_its_state_matches_the_oracle_on_copies(make_config, contract, fusion):
    plan = adam_plan(SIZES)
    pairs = adam_pairs(plan, SIZES)
    compiled = weft.compile(plan, config=make_config(contract, fusion=fusion), in_place=pairs)
    state = adam_state(SIZES)
    before = [array.copy() for array in state]
    expected = run(plan, *before)
    got = compiled(*state)
    for name, value, want in zip(plan.outputs, got, expected, strict=True):
        source = state[plan.inputs.index(pairs[name])]
        assert value is source  # the caller's own array, updated
        if contract == "strict":
            assert value.tobytes() == want.tobytes(), name
        else:
            assert_inference_close((value,), (want,))
    untouched = [plan.inputs.index(f"g{n}") for n in range(len(SIZES))]
    assert all(state[k].tobytes() == before[k].tobytes() for k in untouched)  # gradients are only read
    # a second step reads the updated state: the oracle from the first step's values
    second = run(plan, *[array.copy() for array in state])
    compiled(*state)
    if contract == "strict":
        assert all(state[plan.inputs.index(pairs[name])].tobytes() == want.tobytes()
                   for name, want in zip(plan.outputs, second, strict=True))
    aliased = [function for function in compiled.lowered.functions if function.aliased]
    assert aliased and all(" *restrict" not in line for line in _signatures(compiled, aliased))


def _signatures(compiled, functions):
    """The C parameter text of each aliased parameter of ``functions``."""
    source = compiled.source_path.read_text()
    texts = []
    for function in functions:
        line = next(line for line in source.splitlines() if f"int {function.name}(" in line)
        params = line.split(f"int {function.name}(", 1)[1].split(")")[0].split(", ")
        texts += [params[position] for position in function.aliased]
    return texts


def test_the_fused_adam_body_over_its_state_stores_through_the_cache(make_config):
    """Non-temporal stores would evict the lines just read: the in-place body uses plain ones."""
    plan = adam_plan((1 << 22,))  # 16 MiB a stream: the body streams when it writes fresh outputs
    fresh = weft.compile(plan, config=make_config("inference", fusion="matchers"))
    over = weft.compile(plan, config=make_config("inference", fusion="matchers"), in_place=adam_pairs(plan, (1 << 22,)))
    assert "_mm512_stream_ps" in fresh.source_path.read_text() or "__AVX512F__" not in fresh.source_path.read_text()
    body = over.source_path.read_text().split(f"int {over.lowered.functions[0].name}(")[-1]
    assert "_mm512_stream_ps" not in body
    assert over.kernel_set() != fresh.kernel_set()


def test_a_warm_compile_keeps_in_place_apart_from_fresh_outputs(make_config):
    plan = adam_plan((4099,))
    pairs = adam_pairs(plan, (4099,))
    config = make_config("strict")
    fresh = weft.compile(plan, config=config)
    over = weft.compile(plan, config=config, in_place=pairs)
    again = weft.compile(plan, config=config, in_place=pairs)
    assert again.from_record and again.in_place == pairs
    assert not any(function.aliased for function in fresh.lowered.functions)
    assert again.kernel_set() == over.kernel_set() != fresh.kernel_set()
    assert f"written in place: {plan.outputs[0]} over p0" in again.describe()
    state = adam_state((4099,))
    fresh_values = fresh(*state)
    assert all(a is not b for a, b in zip(fresh_values, state, strict=False))  # fresh outputs leave the state


def test_output_digest_and_profile_leave_the_callers_state_alone(make_config):
    plan = adam_plan((4099,))
    compiled = weft.compile(plan, config=make_config("strict"), in_place=adam_pairs(plan, (4099,)))
    state = adam_state((4099,))
    before = [array.tobytes() for array in state]
    assert compiled.output_digest(*state) == compiled.output_digest(*state)
    compiled.profile(*state, repeats=3)
    assert [array.tobytes() for array in state] == before


def elementwise(reader_after: bool = False, shifted: bool = False, reduction: bool = False):
    """y = 2x (+ a second output z = x + 1 read after y when ``reader_after``)."""
    def body(x):
        if shifted:
            return nn.concat([x[1:], x[:1]], axis=0) * 2.0
        if reduction:
            return nn.sum(x, axis=1, keepdims=True) * x
        y = x * 2.0
        return (y, x + 1.0) if reader_after else y

    shape = (64, 33)
    return weft.trace(body, weft.spec(shape if not shifted else (64,)))


def test_refused_pairs_name_the_member_and_the_fix(make_config):
    config = make_config("strict")
    plan = elementwise(reader_after=True)
    y, z = plan.outputs
    with pytest.raises(InputError, match=rf"{z} reads x after {y} overwrites it"):
        weft.compile(plan, config=config, in_place={y: "x"})
    weft.compile(plan, config=config, in_place={z: "x"})  # z is the last reader: legal
    shifted = elementwise(shifted=True)
    with pytest.raises(InputError, match="reads x at elements other than the one it writes"):
        weft.compile(shifted, config=config, in_place={shifted.outputs[0]: "x"})
    # out = sum(x, row) * x: legal member by member (the sum's function runs first) ...
    reduced = elementwise(reduction=True)
    x = np.random.default_rng(1).standard_normal((64, 33)).astype(np.float32)
    expected = run(reduced, x.copy())
    over = weft.compile(reduced, config=config, in_place={reduced.outputs[0]: "x"})
    assert over(x).tobytes() == expected.tobytes()
    # ... not once the sum is fused beside it (conservative: a member in the writer's function
    # may read a tile the writer already wrote)
    with pytest.raises(InputError, match="in the same fused function as"):
        weft.compile(reduced, config=make_config("strict", fusion="greedy"), in_place={reduced.outputs[0]: "x"})
    product = weft.trace(lambda x, w: nn.matmul(x, w), weft.spec((64, 33)), weft.spec((33, 33)))
    with pytest.raises(InputError, match="is a reduction"):
        weft.compile(product, config=config, in_place={product.outputs[0]: "x"})
    with pytest.raises(InputError, match=r"shape and dtype must match"):
        weft.compile(product, config=config, in_place={product.outputs[0]: "w"})
    with pytest.raises(InputError, match="'nope', which is not an output"):
        weft.compile(plan, config=config, in_place={"nope": "x"})
    with pytest.raises(InputError, match="which is not an input"):
        weft.compile(plan, config=config, in_place={y: y})
    with pytest.raises(InputError, match="params= binds"):
        weft.compile(plan, config=config, in_place={z: "x"}, params={"x": np.zeros((64, 33), np.float32)})
    with pytest.raises(InputError, match="in_place= takes a dict"):
        weft.compile(plan, config=config, in_place=[(z, "x")])


def test_an_in_place_input_must_be_the_callers_writeable_contiguous_array(make_config):
    plan = elementwise()
    (y,) = plan.outputs
    compiled = weft.compile(plan, config=make_config("strict"), in_place={y: "x"})
    x = np.arange(64 * 33, dtype=np.float32).reshape(64, 33)
    assert compiled(x) is x and np.array_equal(x, np.arange(64 * 33, dtype=np.float32).reshape(64, 33) * 2)
    with pytest.raises(InputError, match="updated in place"):
        compiled(np.asfortranarray(x))
    frozen = x.copy()
    frozen.flags.writeable = False
    with pytest.raises(InputError, match="updated in place"):
        compiled(frozen)
    with pytest.raises(InputError, match="must be input x's own array"):
        compiled(x, out=np.empty_like(x))
    assert compiled(x, out=x) is x
