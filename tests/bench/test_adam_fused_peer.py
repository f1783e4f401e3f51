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
