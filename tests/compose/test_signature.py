"""Signatures: names abstracted, extents and contract kept."""

from __future__ import annotations

import dataclasses

import plans

import weft.nn as nn
from weft.compose import choose_regions
from weft.compose.signature import region_signature
from weft.ir import Kernel, Plan
from weft.ir.substitute import rename_buffers


def rename_plan(plan: Plan, prefix: str) -> Plan:
    names = {buffer.name: prefix + buffer.name for buffer in plan.buffers}
    return Plan(
        tuple(dataclasses.replace(b, name=names[b.name]) for b in plan.buffers),
        tuple(Kernel(names[k.output], k.axes, rename_buffers(k.body, names), k.fold) for k in plan.kernels),
        tuple(names[n] for n in plan.inputs),
        tuple(names[n] for n in plan.outputs),
        plan.name,
    )


def signature(plan, contract="strict"):
    region = choose_regions(plan, "greedy", contract).fused[0]
    return region_signature(plan, region, contract)


def test_renaming_buffers_keeps_the_signature():
    plan = plans.attention()
    assert signature(plan) == signature(rename_plan(plan, "layer3_head7_"))


def test_renaming_axes_keeps_the_signature():
    assert signature(plans.softmax()) == signature(plans.softmax(name="other"))
    traced = nn.trace(lambda x: nn.softmax(x), nn.spec((8, 32)))
    assert signature(traced) == signature(rename_plan(traced, "blk2."))


def test_changing_an_extent_changes_the_signature():
    assert signature(plans.attention(t=16)) != signature(plans.attention(t=32))
    assert signature(plans.attention(d=8)) != signature(plans.attention(d=16))


def test_contract_is_part_of_the_signature():
    plan = plans.softmax()
    assert signature(plan, "strict") != signature(plan, "inference")


def test_every_head_shares_one_signature():
    def heads(x, y, z):
        return nn.softmax(x), nn.softmax(y), nn.softmax(nn.mul(z, 2.0))

    plan = nn.trace(heads, *[nn.spec((4, 16))] * 3)
    fused = choose_regions(plan, "greedy").fused
    assert len(fused) == 3
    signatures = [region_signature(plan, region, "strict") for region in fused]
    assert signatures[0] == signatures[1] != signatures[2]  # the third has an extra member
