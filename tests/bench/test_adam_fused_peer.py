"""The torch-adam-fused peer arm: torch.optim.Adam(fused=True) on the adam workload's state."""

import pytest

from weft.bench.arms import ArmUnavailable, build_peer_runner, parse_arm
from weft.oracle import run
from weft.testing import assert_inference_close
from weft.workloads import get_workload

torch = pytest.importorskip("torch")


def test_first_step_computes_the_plans_outputs():
    workload = get_workload("adam")
    params = workload.resolve(**workload.small)
    plan, arrays = workload.plan(**params), workload.inputs(**params)
    runner = build_peer_runner(parse_arm("torch-adam-fused"), workload, params, arrays)
    reference = run(plan, *arrays)
    assert len(runner.outputs) == len(reference) == 3 * params["tensors"]
    for got, want in zip(runner.outputs, reference, strict=True):
        assert_inference_close(got, want, "torch fused Adam, first step")
    runner.call()  # a timed call: one more step in place, no error


def test_other_workloads_have_no_fused_adam():
    workload = get_workload("softmax")
    params = workload.resolve(**workload.small)
    with pytest.raises(ArmUnavailable, match="Adam"):
        build_peer_runner(parse_arm("torch-adam-fused"), workload, params, workload.inputs(**params))


def test_weft_arms_step_their_own_state_in_place_when_the_workload_asks():
    """``--set in_place=1``: a Weft arm writes Adam's new state over its own copy of the inputs
    (as torch fused Adam steps); the first step is the oracle's, the workload's arrays stay put."""
    from weft.bench.arms import build_runner

    workload = get_workload("adam")
    params = workload.resolve(**{**workload.small, "in_place": True})
    plan, arrays = workload.plan(**params), workload.inputs(**params)
    before = [array.copy() for array in arrays]
    runner = build_runner(parse_arm("priced+strict"), workload, params, plan, arrays)
    assert runner.compiled.in_place == workload.in_place(**params) and len(runner.compiled.in_place) == 9
    reference = run(plan, *before)
    assert [got.tobytes() for got in runner.outputs] == [want.tobytes() for want in reference]
    runner.call()  # a timed call: one more step on the arm's own state
    assert all(array.tobytes() == kept.tobytes() for array, kept in zip(arrays, before, strict=True))
    assert workload.in_place(**workload.small) == {}  # off unless asked
