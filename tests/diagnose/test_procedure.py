"""The profiling procedure on hand-built plans: memory scaling, breakdown, report."""


import pytest
from plans.workloads import HandAttention, HandLayerNorm
from rich.console import Console

from weft.cost.machine import machine_profile
from weft.diagnose.procedure import diagnose
from weft.diagnose.report import print_diagnosis


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    return machine_profile(tmp_path_factory.mktemp("cache"), quick=True)


def test_attention_memory_grows_quadratically_and_names_members(profile):
    result = diagnose(HandAttention(tokens=128), {}, profile, sizes=(128, 256), repeats=2)
    memory = result.memory
    assert memory.sizes == (128, 256) and memory.source == "compiled plan"
    # T x T buffers s, e, p dominate; q, k, v, o (T x 8) and m, l (T) are small
    assert 3.5 < memory.ratio <= 4.0
    assert memory.quadratic
    assert [g.producer for g in memory.responsible] == ["s", "e", "p"]
    # the breakdown covers every member, slowest first, and leaves time outside
    assert sorted(row.members[0] for row in result.functions) == ["e", "l", "m", "o", "p", "s"]
    seconds = [row.seconds for row in result.functions]
    assert seconds == sorted(seconds, reverse=True)
    assert result.whole_step_s > 0 and result.outside_s is not None
    assert result.python_s == pytest.approx(result.whole_step_s - result.c_call_s)
    assert result.runner_s == pytest.approx(result.c_call_s - result.members_s)
    assert result.chains[0].members == ("s", "m", "e", "l", "p", "o")
    text = Console(record=True, width=160)
    print_diagnosis(text, result)
    report = text.export_text()
    for phrase in ("Whole step", "Where the time goes", "ridge point", "Quadratic", "Members responsible",
                   "Time outside members", "s -> m -> e -> l -> p -> o"):
        assert phrase in report


def test_layernorm_memory_is_linear(profile):
    result = diagnose(HandLayerNorm(), {}, profile, sizes=(64, 128), repeats=2)
    assert result.memory.ratio == pytest.approx(2.0, rel=0.05)
    assert not result.memory.quadratic and result.memory.responsible == ()
    # intensity of an elementwise member is far below any CPU's ridge point
    xc = next(row for row in result.functions if row.members == ("xc",))
    assert xc.bound == "memory"


def test_fused_attention_memory_is_linear_and_blames_no_member(profile):
    # the same plan compiled with the one-pass rewrite: no T x T buffer is ever materialised
    result = diagnose(HandAttention(tokens=128), {}, profile, sizes=(128, 256), repeats=2, arm="greedy+inference")
    memory = result.memory
    assert memory.ratio < 2.3 and not memory.quadratic
    assert memory.responsible == ()
    assert [g.producer for g in memory.quadratic_in_ir] == ["s", "e", "p"]
    text = Console(record=True, width=160)
    print_diagnosis(text, result)
    report = text.export_text()
    assert "Members responsible" not in report and "never materialises them" in report
