"""Built-in workloads: plans verify, inputs fit, parameters validate, torch twins agree."""

from __future__ import annotations

import numpy as np
import pytest

from weft.errors import WorkloadError
from weft.ir import DType, verify
from weft.oracle import NUMPY_DTYPE, run
from weft.workloads import WORKLOADS, Workload, get_workload

NAMES = sorted(WORKLOADS)
EXPECTED = {"attention", "lm-head-loss", "layernorm", "softmax", "adam", "cross-entropy", "vit-block", "sam3-encoder", "qwen-decode-step"}


def test_registry_has_every_workload():
    assert set(WORKLOADS) == EXPECTED
    for name, workload in WORKLOADS.items():
        assert isinstance(workload, Workload) and workload.name == name
        assert set(workload.small) <= set(workload.defaults)
        assert workload.sequence_param is None or workload.sequence_param in workload.defaults


@pytest.mark.parametrize("name", NAMES)
def test_small_plan_and_inputs_fit(name):
    workload = get_workload(name)
    plan = verify(workload.plan(**workload.small))
    arrays = workload.inputs(seed=0, **workload.small)
    assert len(arrays) == len(plan.inputs)
    for array, input_name in zip(arrays, plan.inputs, strict=True):
        buffer = plan.buffer(input_name)
        assert array.shape == buffer.shape, input_name
        assert array.dtype == NUMPY_DTYPE[buffer.dtype], input_name
        if buffer.dtype is DType.FLOAT32:
            assert np.all(np.isfinite(array)) and np.any(array != 0), input_name
    outputs = run(plan, *arrays)
    for output in outputs if isinstance(outputs, tuple) else (outputs,):
        assert np.all(np.isfinite(output))
    again = workload.inputs(seed=0, **workload.small)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, again, strict=True))  # seeded


@pytest.mark.parametrize("name", NAMES)
def test_default_plans_trace_without_allocating(name):
    plan = get_workload(name).plan()
    assert plan.kernels and plan.outputs


def test_default_sizes_are_the_issue_sizes():
    attention = get_workload("attention").plan()
    assert attention.buffer("q").shape == (1, 16, 5184, 64) and len(attention.kernels) == 6
    assert get_workload("attention").plan(head_dim=32).buffer("k").shape[-1] == 32
    assert get_workload("layernorm").plan().buffer("x").shape == (8192, 1024)
    adam = get_workload("adam").plan()
    sizes = [adam.buffer(n).size for n in adam.inputs if n.startswith("param")]
    assert len(sizes) == 10 and sum(sizes) == 50_000_000 and len(adam.outputs) == 30
    ce = get_workload("cross-entropy")
    assert ce.plan().buffer("logits").shape == (4096, 128_000)
    assert ce.plan(projection=True).buffer("hidden_states").shape == (4096, 1024)
    vit = get_workload("vit-block").plan()
    assert vit.buffer("x").shape == (1, 72, 72, 1024) and vit.buffer("attn_scores").shape == (9, 16, 576, 576)
    assert get_workload("vit-block").plan(window=0).buffer("attn_scores").shape == (1, 16, 5184, 5184)
    qwen = get_workload("qwen-decode-step").plan(layers=2, cache_len=100)
    assert qwen.buffer("l0_k_cache").shape == (2, 100, 64) and qwen.buffer("l1_attn_scores").shape == (14, 1, 101)


def test_sam3_encoder_has_the_issue_shape():
    workload = get_workload("sam3-encoder")
    plan = workload.plan()
    assert plan.buffer("image").shape == (1, 3, 1008, 1008) and plan.buffer(plan.outputs[0]).shape == (1, 72, 72, 1024)
    assert plan.buffer("pos_embed").shape == (1, 72, 72, 1024)
    # 24x24 windows: 9 windows of 576 tokens; global blocks 7, 15, 23, 31 attend over all 5184
    global_blocks = [b for b in range(32) if plan.buffer(f"b{b}_attn_scores").shape == (1, 16, 5184, 5184)]
    assert global_blocks == [7, 15, 23, 31]
    assert all(plan.buffer(f"b{b}_attn_scores").shape == (9, 16, 576, 576) for b in range(32) if b not in global_blocks)
    assert len(workload.plan(blocks=4).inputs) == 12 + 4 * 12
    with pytest.raises(WorkloadError, match="image_size 1000 must be a multiple of patch 14"):
        workload.plan(image_size=1000)


def test_names_and_parameter_errors():
    assert get_workload("cross_entropy").name == "cross-entropy"
    with pytest.raises(WorkloadError, match="unknown workload 'nope'.*attention.*qwen-decode-step"):
        get_workload("nope")
    with pytest.raises(WorkloadError, match="unknown parameter.*toknes.*valid: batch=1, heads=16, tokens=5184"):
        get_workload("attention").plan(toknes=10)
    with pytest.raises(WorkloadError, match="tokens='many' is not a valid int"):
        get_workload("attention").plan(tokens="many")
    with pytest.raises(WorkloadError, match="projection.*bool"):
        get_workload("cross-entropy").plan(projection="maybe")
    with pytest.raises(WorkloadError, match="heads 3 must be a multiple of kv_heads 2"):
        get_workload("qwen-decode-step").plan(heads=3, hidden=48)
    with pytest.raises(WorkloadError, match="tokens must be >= 1"):
        get_workload("attention").plan(tokens=0)
    assert get_workload("cross-entropy").resolve(projection="true")["projection"] is True


@pytest.mark.parametrize("name", NAMES)
def test_torch_twin_matches_oracle(name):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed; the torch twins are optional")
    workload = get_workload(name)
    plan = workload.plan(**workload.small)
    arrays = workload.inputs(seed=1, **workload.small)
    expected = run(plan, *arrays)
    expected = expected if isinstance(expected, tuple) else (expected,)
    fn = workload.torch_fn(**workload.small)
    assert fn is not None
    with torch.no_grad():
        actual = fn(*(torch.from_numpy(a.copy()) for a in arrays))
    actual = actual if isinstance(actual, tuple) else (actual,)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        got = got.detach().numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_bool_parameter_takes_0_and_1_as_set_on_the_command_line():
    adam = get_workload("adam")
    assert adam.resolve(in_place=1)["in_place"] is True
    assert adam.resolve(in_place="0")["in_place"] is False
    with pytest.raises(WorkloadError, match="must be a bool"):
        adam.resolve(in_place=2)
    assert len(adam.in_place(**{**adam.small, "in_place": 1})) == 3 * adam.small["tensors"]
