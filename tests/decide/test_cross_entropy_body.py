"""The chunked cross-entropy body (vocabulary projection fused; the logits never exist)."""

import io

import numpy as np
import pytest

import weft
from weft import nn
from weft.decide.library import admissions, proposed_regions
from weft.decide.library.cross_entropy import match_cross_entropy, propose_cross_entropy
from weft.errors import InputError
from weft.lower.library import LibraryCall
from weft.nn import spec
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal
from weft.workloads import get_workload


def _plan(tokens, hidden, vocab):
    return get_workload("lm-head-loss").plan(tokens=tokens, hidden=hidden, vocab=vocab)


def _inputs(tokens, hidden, vocab, seed=0, ignored_every=0):
    h, w, t = get_workload("lm-head-loss").inputs(seed, tokens=tokens, hidden=hidden, vocab=vocab)
    if ignored_every:
        t[::ignored_every] = -100
    return h, w, t


def _float64_loss(h, w, t):
    logits = h.astype(np.float64) @ w.astype(np.float64).T
    top = logits.max(1)
    lse = np.log(np.exp(logits - top[:, None]).sum(1)) + top
    kept = t != -100
    picked = logits[np.arange(len(t)), np.where(kept, t, 0)]
    return np.float64(np.where(kept, lse - picked, 0.0).sum() / kept.sum())


def _calls(compiled):
    return [n for f in compiled.lowered.functions for n in f.nests if isinstance(n, LibraryCall)]


def test_matcher_admits_the_projection_and_loss_and_proposes_the_region():
    plan = _plan(6, 16, 50)
    region = propose_cross_entropy(plan, "ce_loss", frozenset(k.output for k in plan.kernels))
    assert region is not None and region.members == ("matmul", "ce_max", "ce_sumexp", "ce_loss")
    assert region.private == ("matmul", "ce_max", "ce_sumexp") and region.outputs == ("ce_loss",)
    match = match_cross_entropy(plan, region.members)
    assert match.role("weight") == "lm_head" and match.constant("ignore") == -100
    assert [body.name for body, _ in admissions(plan, region.members, "inference")] == ["chunked cross-entropy"]
    assert admissions(plan, region.members, "strict") == ()  # online max and sum reorder the folds
    assert proposed_regions(plan, "ce_loss", frozenset(k.output for k in plan.kernels), "strict") == ()


def test_matcher_refuses_when_the_logits_are_read_elsewhere_or_the_loss_differs():
    def logits_too(h, w, t):
        logits = h @ nn.transpose(w, 0, 1)
        return nn.cross_entropy(logits, t), logits  # the logits are an output: they must exist

    plan = weft.trace(logits_too, spec((6, 16)), spec((50, 16)), spec(6, "int64"))
    assert propose_cross_entropy(plan, "ce_loss", frozenset(k.output for k in plan.kernels)) is None

    def smoothed(h, w, t):  # label smoothing adds a fold over the log-probabilities: another loss
        return nn.cross_entropy(h @ nn.transpose(w, 0, 1), t, label_smoothing=0.1)

    plan = weft.trace(smoothed, spec((6, 16)), spec((50, 16)), spec(6, "int64"))
    assert all(propose_cross_entropy(plan, k.output, frozenset(x.output for x in plan.kernels)) is None
               for k in plan.kernels)
    plan = _plan(6, 16, 50)
    assert propose_cross_entropy(plan, "ce_loss", frozenset({"ce_max", "ce_sumexp", "ce_loss"})) is None


@pytest.mark.parametrize("fusion", ["matchers", "priced"])
@pytest.mark.parametrize("shape", [(6, 16, 50), (300, 96, 5000)])  # dot products; the microkernel (odd chunks)
def test_body_matches_float64_and_never_builds_the_logits(fusion, shape, cache):
    tokens, hidden, vocab = shape
    plan, inputs = _plan(*shape), _inputs(*shape, ignored_every=7)
    compiled = weft.compile(plan, "inference", threads=2, fusion=fusion)
    (call,) = _calls(compiled)
    assert call.body == "chunked cross-entropy"
    if tokens >= 128:
        assert all(nest is not None for _, _, nest in call.chunk_nests)
    assert_inference_close(compiled(*inputs), _float64_loss(*inputs), f"lm-head loss {shape}")
    logits_bytes = tokens * vocab * 4
    unfused = weft.compile(plan, "inference", threads=2, fusion="off")
    assert unfused.arena_bytes >= logits_bytes  # the members unfused hold the logits
    if tokens >= 128:
        assert compiled.arena_bytes < 0.05 * logits_bytes


@pytest.mark.parametrize("threads", [1, 2])
def test_extra_memory_is_under_five_percent_of_the_logits_at_the_workloads_size(threads, cache):
    """The arena and every thread's scratch (chunk of logits, row statistics, packing panels)."""
    params = get_workload("lm-head-loss").defaults
    plan = get_workload("lm-head-loss").plan(**params)
    compiled = weft.compile(plan, "inference", threads=threads, fusion="matchers")
    (call,) = _calls(compiled)
    logits_bytes = params["tokens"] * params["vocab"] * 4
    assert compiled.arena_bytes + threads * call.scratch_bytes < 0.05 * logits_bytes
    output = 4  # the mean loss
    assert compiled.memory_bytes() == compiled.arena_bytes + threads * call.scratch_bytes + output


def test_priced_explains_the_body_with_its_price(cache):
    plan = _plan(300, 96, 5000)
    compiled = weft.compile(plan, "inference", threads=1, fusion="priced")
    text = io.StringIO()
    compiled.explain(file=text)
    assert "bodies admitted: chunked cross-entropy" in text.getvalue()
    assert "library body chunked cross-entropy" in text.getvalue()


def test_strict_keeps_the_members_and_the_oracle_bytes(cache):
    plan, inputs = _plan(6, 16, 50), _inputs(6, 16, 50)
    compiled = weft.compile(plan, "strict", threads=1, fusion="priced")
    assert _calls(compiled) == []
    assert_strict_equal(compiled(*inputs), run(plan, *inputs), "strict lm-head loss")


def test_a_target_out_of_range_is_an_input_error(cache):
    plan, (h, w, t) = _plan(6, 16, 50), _inputs(6, 16, 50)
    compiled = weft.compile(plan, "inference", threads=1, fusion="matchers")
    t[2] = 50
    with pytest.raises(InputError, match="outside"):
        compiled(h, w, t)
