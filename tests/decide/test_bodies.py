"""Built library bodies (weft.decide.library): matcher, price, lowering, C, and the choice.

Each body is checked against the oracle (Strict byte-identical, Inference against a
float64 reference written here), its matcher admits and refuses, ``fusion="matchers"``
takes it on sight and ``fusion="priced"`` can choose it (from the model, the race, the record).
"""

import io

import numpy as np
import pytest

import weft
from weft import nn
from weft.config import config_from_env
from weft.decide.library import admissions, admitted_bodies
from weft.decide.library.adam import match_adam, price_adam
from weft.decide.record import DecisionRecord
from weft.ir import Binary, BinaryOp, Const, Unary, UnaryOp
from weft.lower.library import LibraryCall
from weft.nn import spec
from weft.nn.elementwise import elementwise
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal
from weft.workloads import get_workload

ADAM = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}


def _adam_plan(size=50_000, step=3, weight_decay=0.0):
    def step_fn(p, g, m, v):
        return nn.adam_step(p, g, m, v, step=step, weight_decay=weight_decay, **ADAM)

    return weft.trace(step_fn, *(spec(size) for _ in range(4)))


def _adam_inputs(size=50_000, seed=0):
    rng = np.random.default_rng(seed)
    p, g, m = (rng.standard_normal(size).astype(np.float32) * s for s in (0.02, 1e-3, 1e-4))
    v = np.square(rng.standard_normal(size).astype(np.float32) * 1e-3) + np.float32(1e-9)
    return p, g, m, v


def _adam_float64(p, g, m, v, step=3):
    p, g, m, v = (x.astype(np.float64) for x in (p, g, m, v))
    b1, b2 = ADAM["beta1"], ADAM["beta2"]
    new_m = b1 * m + (1 - b1) * g
    new_v = b2 * v + (1 - b2) * g * g
    denominator = np.sqrt(new_v) / np.sqrt(1 - b2**step) + ADAM["eps"]
    return p - ADAM["lr"] / (1 - b1**step) * new_m / denominator, new_m, new_v


def _library_calls(compiled):
    return [nest for function in compiled.lowered.functions for nest in function.nests if isinstance(nest, LibraryCall)]


def _ordered(plan, outputs):
    """The plan's outputs as (new param, new m, new v)."""
    names = dict(zip(plan.outputs, outputs if isinstance(outputs, tuple) else (outputs,), strict=True))
    return tuple(names[next(name for name in plan.outputs if name.endswith(suffix))]
                 for suffix in ("adam_param", "adam_m", "adam_v"))


# ------------------------------------------------------------------ matcher


def test_adam_matcher_admits_the_step_and_recovers_its_constants():
    plan = _adam_plan(step=3)
    members = tuple(kernel.output for kernel in plan.kernels)
    match = match_adam(plan, members)
    assert match is not None and match.body == "fused adam"
    assert match.role("grad") == plan.inputs[1] and match.role("new_param").endswith("adam_param")
    assert np.isclose(match.constant("b1"), 0.9) and np.isclose(match.constant("c2"), 1 - 0.999)
    assert np.isclose(match.constant("step"), 1e-3 / (1 - 0.9**3))
    assert np.isclose(match.constant("root"), np.sqrt(1 - 0.999**3))
    assert [body.name for body in admitted_bodies(plan, members, "strict")] == ["fused adam"]


def test_adam_matcher_refuses_other_regions():
    plan = _adam_plan()
    members = tuple(kernel.output for kernel in plan.kernels)
    assert match_adam(plan, members[1:]) is None  # two members of three: not the whole step
    decayed = _adam_plan(weight_decay=0.01)  # L2 decay adds p to g inside m and v: another formula
    assert match_adam(decayed, tuple(kernel.output for kernel in decayed.kernels)) is None

    def c(value):
        return Const(float(value))

    def not_adam(p, g, m, v):  # Adam's three formulas, but the update reads the old m, not m'
        new_m = elementwise("adam_m", (m, g), lambda a, b: Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, c(0.9), a),
                                                                  Binary(BinaryOp.MUL, c(0.1), b)))
        new_v = elementwise("adam_v", (v, g), lambda a, b: Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, c(0.999), a),
                                                                  Binary(BinaryOp.MUL, Binary(BinaryOp.MUL, c(1e-3), b), b)))

        def update(p_, m_, v_):
            root = Binary(BinaryOp.DIV, Unary(UnaryOp.SQRT, v_), c(0.5))
            ratio = Binary(BinaryOp.DIV, m_, Binary(BinaryOp.ADD, root, c(1e-8)))
            return Binary(BinaryOp.SUB, p_, Binary(BinaryOp.MUL, c(1e-3), ratio))

        return elementwise("adam_param", (p, m, new_v), update), new_m, new_v

    other = weft.trace(not_adam, *(spec(64) for _ in range(4)))
    members = tuple(kernel.output for kernel in other.kernels)
    assert len(members) == 3 and admissions(other, members, "strict") == ()


def test_adam_price_grows_with_size_and_is_memory_bound_out_of_cache(cache):
    from weft.cost.machine import machine_profile
    from weft.cost.model import machine_numbers

    numbers = machine_numbers(machine_profile(cache), 1)
    small, large = (match_adam(p, tuple(k.output for k in p.kernels)) for p in (_adam_plan(1000), _adam_plan(10**6)))
    small_cycles, large_cycles = price_adam(small, numbers), price_adam(large, numbers)
    assert 0 < small_cycles < large_cycles
    # 28 bytes per element from memory: at least the bytes over the memory read+write rate
    memory_floor = 16e6 / numbers.read_bytes_per_cycle[3] + 12e6 / numbers.write_bytes_per_cycle[3]
    assert large_cycles >= memory_floor * 0.999


# ------------------------------------------------------------------ against the oracle


@pytest.mark.parametrize("fusion", ["matchers", "priced"])
def test_adam_body_is_byte_identical_to_the_oracle_under_strict(fusion, cache):
    plan, inputs = _adam_plan(), _adam_inputs()
    compiled = weft.compile(plan, "strict", threads=2, fusion=fusion)
    calls = _library_calls(compiled)
    assert [call.body for call in calls] == ["fused adam"] and calls[0].parallel
    assert_strict_equal(compiled(*inputs), run(plan, *inputs), "fused adam body, strict")


@pytest.mark.parametrize("fusion", ["matchers", "priced"])
def test_adam_body_is_close_to_float64_under_inference(fusion, cache):
    plan, inputs = _adam_plan(size=4099), _adam_inputs(4099, seed=1)  # not a multiple of the lanes
    compiled = weft.compile(plan, "inference", threads=1, fusion=fusion)
    assert [call.body for call in _library_calls(compiled)] == ["fused adam"]
    got = _ordered(plan, compiled(*inputs))
    for actual, reference in zip(got, _adam_float64(*inputs), strict=True):
        assert_inference_close(actual, reference, "fused adam body, inference")


@pytest.mark.parametrize("contract", ["strict", "inference"])
def test_an_adam_step_whose_moments_are_dropped_still_gets_storage_for_them(contract, cache):
    """Found by ``python -m weft.fuzz --seed 2028 --start 68 --contract inference --fusion priced``:
    a step whose new m and v are no plan output made them private to the region, but the fused
    body writes them, so the runner had no arena offset for them (an internal KeyError)."""
    def update_only(p, g, m, v):
        return nn.adam_step(p, g, m, v, step=4, **ADAM)[0]

    plan = weft.trace(update_only, *(spec((1, 32, 32)) for _ in range(4)))
    inputs = _adam_inputs(32 * 32, seed=2)
    inputs = [a.reshape(1, 32, 32) for a in inputs]
    compiled = weft.compile(plan, contract, threads=1, fusion="matchers")
    assert [call.body for call in _library_calls(compiled)] == ["fused adam"]
    if contract == "strict":
        assert_strict_equal(compiled(*inputs), run(plan, *inputs), "fused adam body, moments dropped")
    else:
        (want, *_) = _adam_float64(*(a.ravel() for a in inputs), step=4)
        assert_inference_close(compiled(*inputs), want.reshape(1, 32, 32), "fused adam body, moments dropped")


def test_adam_workload_shares_one_body_function_across_equal_tensors(cache):
    workload = get_workload("adam")
    params = {"params": 90_000, "tensors": 3, "step": 2}
    plan, inputs = workload.plan(**params), workload.inputs(**params)
    compiled = weft.compile(plan, "strict", threads=2, fusion="priced")
    assert len(_library_calls(compiled)) == 3 and len({f.name for f in compiled.lowered.functions}) == 1
    assert_strict_equal(compiled(*inputs), run(plan, *inputs), "adam workload")


# ------------------------------------------------------------------ the choice


def test_priced_records_the_body_and_explain_lists_its_price(cache):
    plan = _adam_plan()
    compiled = weft.compile(plan, "strict", threads=1, fusion="priced")
    rows = [row for row in DecisionRecord.in_cache(cache).all() if row.bodies]
    assert len(rows) == 1 and set(rows[0].bodies) == {"fused adam"}
    assert rows[0].choice == "library:fused adam" and rows[0].bodies["fused adam"] < rows[0].unfused_cycles
    text = io.StringIO()
    compiled.explain(file=text)
    assert "bodies admitted: fused adam" in text.getvalue() and "(chosen)" in text.getvalue()
    assert "library body fused adam" in text.getvalue()
    warm = weft.compile(plan, "strict", threads=1, fusion="priced")  # from the record: no price, same body
    assert warm.decide_report.priced == 0 and warm.decide_report.recorded >= 1
    assert warm.kernel_set() == compiled.kernel_set()
    assert [call.body for call in _library_calls(warm)] == ["fused adam"]


def test_a_thin_margin_races_the_body_against_its_runner_up(cache):
    plan, inputs = _adam_plan(size=20_000), _adam_inputs(20_000)
    config = config_from_env(contract="strict", threads=1, fusion="priced", race_margin=10.0, race_share=1.0,
                             budget_s=20.0)
    compiled = weft.compile(plan, config=config)
    raced = [row for row in DecisionRecord.in_cache(cache).all() if row.bodies and row.source == "race"]
    assert len(raced) == 1
    medians = raced[0].race["medians"]
    assert "library:fused adam" in medians and len(medians) == 2
    assert raced[0].choice in medians or raced[0].race["kept_model"]
    assert_strict_equal(compiled(*inputs), run(plan, *inputs), "raced adam")


def test_adam_streaming_stores_keep_the_oracle_bytes_at_any_alignment(cache):
    size = 1_100_003  # outputs over STREAMING_MIN_BYTES: the non-temporal store path
    plan, inputs = _adam_plan(size), _adam_inputs(size, seed=2)
    compiled = weft.compile(plan, "strict", threads=2, fusion="matchers")
    assert [call.streaming for call in _library_calls(compiled)] == [True]
    want = run(plan, *inputs)
    assert_strict_equal(compiled(*inputs), want, "streaming, fresh outputs")
    for shifts in ((1, 1, 1), (0, 1, 2)):  # one shared misalignment (a scalar head), then mixed (no streaming)
        outs = tuple(np.empty(size + 3, np.float32)[shift:shift + size] for shift in shifts)
        assert_strict_equal(compiled(*inputs, out=outs), want, f"streaming, outputs shifted by {shifts}")


def test_a_race_compiles_its_contenders_in_one_translation_unit(cache, monkeypatch):
    import sys

    compile_module = sys.modules["weft.compile"]  # the module (weft.compile is also the function)
    sources = []
    real_build = compile_module.build

    def counting_build(source, *args, **kwargs):
        sources.append(source)
        return real_build(source, *args, **kwargs)

    monkeypatch.setattr(compile_module, "build", counting_build)
    plan, inputs = _adam_plan(size=20_000), _adam_inputs(20_000, seed=3)
    config = config_from_env(contract="strict", threads=1, fusion="priced", race_margin=10.0, race_share=1.0,
                             budget_s=20.0)
    compiled = weft.compile(plan, config=config)
    raced = [row for row in DecisionRecord.in_cache(cache).all() if row.source == "race"]
    assert raced and len(sources) == len(raced) + 1  # one C compile per race, one for the plan
    batches = [source for source in sources if "Weft batch of 2 plans" in source]
    assert len(batches) == len(raced) and all("wf_c0_run(" in s and "wf_c1_run(" in s for s in batches)
    assert_strict_equal(compiled(*inputs), run(plan, *inputs), "after batched races")
