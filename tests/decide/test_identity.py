"""Plan identity: kernel_set() is what runs, output_digest() what it computes."""

import numpy as np

import weft
from weft.compile import output_digest
from weft.config import config_from_env
from weft.oracle import run
from weft.workloads import get_workload


def _plan(name):
    workload = get_workload(name)
    return workload.plan(**workload.small), workload.inputs(**workload.small)


def test_two_compiles_of_one_plan_agree(cache):
    plan, inputs = _plan("softmax")
    first = weft.compile(plan, "strict", threads=1, fusion="priced")
    second = weft.compile(plan, "strict", threads=1, fusion="priced")
    assert first.kernel_set() == second.kernel_set()
    assert first.output_digest(*inputs) == second.output_digest(*inputs)


def test_another_fusion_choice_is_another_kernel_set_but_strict_outputs_match(cache):
    plan, inputs = _plan("layernorm")
    fused = weft.compile(plan, config=config_from_env(contract="strict", threads=1, fusion="priced", budget_s=30))
    unfused = weft.compile(plan, "strict", threads=1, fusion="off")
    assert len(fused.partition.fused) == 1  # the priced plan fused the norm
    assert fused.kernel_set() != unfused.kernel_set()
    # Strict: bit-identical to the oracle either way, so the digests agree with the oracle's
    want = output_digest(run(plan, *inputs))
    assert fused.output_digest(*inputs) == unfused.output_digest(*inputs) == want


def test_the_output_digest_sees_one_changed_bit():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = a.copy()
    b.view(np.uint32)[1, 2] ^= 1
    assert output_digest(a) != output_digest(b)
    assert output_digest((a, a)) != output_digest(a)
    assert output_digest(a) != output_digest(a.reshape(4, 3))


def test_the_kernel_set_holds_no_times_or_notes(cache):
    plan, inputs = _plan("softmax")
    compiled = weft.compile(plan, "strict", threads=1, fusion="priced")
    before = compiled.kernel_set()
    compiled.profile(*inputs)
    compiled(*inputs)
    assert compiled.kernel_set() == before
