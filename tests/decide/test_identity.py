"""Plan identity: kernel_set() is what runs, output_digest() what it computes."""

import numpy as np
import pytest

import weft
from weft import nn
from weft.compile import output_digest
from weft.config import config_from_env
from weft.oracle import run
from weft.testing import assert_inference_close, at_line_offset
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


# decode-shaped: the matrix-vector folds (hidden 256, intermediate 320) are long enough to be
# fold-laned and to step to a 64-byte line, and the rows of every weight share one alignment
_DECODE = {"layers": 1, "hidden": 256, "heads": 4, "kv_heads": 2, "intermediate": 320, "cache_len": 7,
           "rope_theta": 1_000_000.0}


def test_inference_outputs_do_not_follow_the_inputs_addresses(cache):
    """Under Inference the order of every fold is a function of the plan (and contract, threads,
    profile), never of where the inputs sit: the same plan on equal arrays copied to buffers
    at different 4-byte offsets from a 64-byte line gives the same bytes and the same digest
    (the cold and warm compiles of a benchmark run in two processes, whose arrays land at
    different addresses)."""
    workload = get_workload("qwen-decode-step")
    plan, inputs = workload.plan(**_DECODE), workload.inputs(**_DECODE)
    for fusion in ("off", "priced"):
        compiled = weft.compile(plan, "inference", threads=1, fusion=fusion)
        digests = {}
        for offset in (0, 4, 16, 36, 60):
            placed = [at_line_offset(array, offset) for array in inputs]
            digests[offset] = compiled.output_digest(*placed)
        assert len(set(digests.values())) == 1, (fusion, digests)


@pytest.mark.parametrize("depth", [300, 333])
def test_a_matrix_vector_fold_splits_by_index_at_every_offset(depth, cache):
    """The fold-laned matrix-vector member at each of the sixteen 4-byte offsets of a line
    (weight and vector apart): one set of bytes, within the tolerance of the oracle.
    300: whole vectors and single steps after the last span; 333: the weight's rows start
    at every alignment in turn."""
    plan = weft.trace(lambda x, w: nn.linear(x, w), weft.spec((1, depth)), weft.spec((37, depth)), name="matvec")
    compiled = weft.compile(plan, "inference", threads=1, fusion="off")
    rng = np.random.default_rng(depth)
    x = rng.standard_normal((1, depth), dtype=np.float32)
    w = rng.standard_normal((37, depth), dtype=np.float32)
    outputs = {compiled(at_line_offset(x, offset_x), at_line_offset(w, offset_w)).tobytes()
               for offset_x in (0, 20) for offset_w in range(0, 64, 4)}
    assert len(outputs) == 1
    assert_inference_close(compiled(x, w), run(plan, x, w))


def test_bound_weights_start_on_a_line(cache):
    """params= copies each weight to a 64-byte line, whatever the caller's alignment."""
    plan = weft.trace(lambda x, w: nn.linear(x, w), weft.spec((1, 300)), weft.spec((37, 300)), name="bound")
    w = at_line_offset(np.random.default_rng(0).standard_normal((37, 300), dtype=np.float32), 4)
    compiled = weft.compile(plan, "inference", threads=1, fusion="off", params={plan.inputs[1]: w})
    bound = compiled.params[plan.inputs[1]]
    assert bound.ctypes.data % 64 == 0 and not bound.flags.writeable and np.array_equal(bound, w)
