"""weft.trace: input names, outputs, roles, member names and scopes, dead members."""

from __future__ import annotations

import numpy as np

import weft
from weft import nn
from weft.ir import Role, format_plan
from weft.oracle import run


def test_inputs_named_from_parameters_and_roles():
    def block(tokens, weight, bias):
        return nn.relu(nn.linear(tokens, weight, bias))

    plan = weft.trace(block, weft.spec((4, 3)), weft.spec((5, 3), param=True), weft.spec(5, param=True))
    assert plan.name == "block"
    assert plan.inputs == ("tokens", "weight", "bias")
    roles = {b.name: b.role for b in plan.buffers}
    assert roles["tokens"] is Role.INPUT and roles["weight"] is Role.PARAM
    assert roles[plan.outputs[0]] is Role.OUTPUT
    assert roles["linear"] is Role.INTERMEDIATE


def test_view_and_input_outputs_get_a_copy_member():
    plan = weft.trace(lambda x: (x, x.T, nn.exp(x), nn.exp(x)), weft.spec((2, 3)), name="several")
    assert len(plan.outputs) == 4 and len(set(plan.outputs)) == 4
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    same, transposed, e1, e2 = run(plan, x)
    np.testing.assert_array_equal(same, x)
    np.testing.assert_array_equal(transposed, x.T)
    np.testing.assert_array_equal(e1, e2)


def test_returning_same_tensor_twice_copies_once():
    plan = weft.trace(lambda x: (nn.exp(x), ) * 2, weft.spec(3))
    assert len(plan.kernels) == 2 and plan.outputs[0] != plan.outputs[1]


def test_unused_members_are_dropped():
    def fn(x):
        nn.softmax(x)  # traced but unused
        return nn.exp(x)

    plan = weft.trace(fn, weft.spec((2, 3)))
    assert [k.output for k in plan.kernels] == ["exp"]


def test_name_scopes_and_unique_suffixes():
    def fn(x):
        with nn.name_scope("layer3"):
            y = nn.softmax(x)
            with nn.name_scope("mlp"):
                y = nn.gelu(y)
        return nn.exp(nn.exp(y))

    plan = weft.trace(fn, weft.spec((2, 3)))
    names = [k.output for k in plan.kernels]
    assert names == ["layer3_softmax_max", "layer3_softmax_exp", "layer3_softmax_sum", "layer3_softmax",
                     "layer3_mlp_gelu", "exp", "exp_2"]


def test_plan_text_of_attention_has_six_members():
    specs = [weft.spec((1, 2, 8, 4))] * 3
    text = format_plan(weft.trace(nn.attention, *specs))
    assert "6 members" in text
    assert "attn_scores[b0:1, h:2, i:8, j:8] f32 = sum_{d:4}" in text


def test_grouped_query_heads_in_index_map():
    plan = weft.trace(nn.attention, weft.spec((6, 5, 4)), weft.spec((2, 5, 4)), weft.spec((2, 5, 4)))
    assert "k[h // 3, j, d]" in format_plan(plan)
