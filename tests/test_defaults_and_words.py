"""One default fusion policy everywhere, and the documented word "members"."""

from __future__ import annotations

import inspect

import numpy as np

import weft
from weft.cli import build_parser
from weft.config import DEFAULT_FUSION, Config


def test_compile_config_and_explain_share_one_default_fusion_policy():
    assert inspect.signature(weft.compile).parameters["fusion"].default == DEFAULT_FUSION
    assert Config().fusion == DEFAULT_FUSION
    explain = build_parser().parse_args(["explain", "softmax"])
    assert explain.fusion == DEFAULT_FUSION
    plan = weft.trace(lambda x: weft.nn.softmax(x, axis=-1), weft.spec((2, 8)))
    assert weft.compile(plan).config.fusion == DEFAULT_FUSION


def test_plan_members_is_the_documented_name_for_kernels():
    plan = weft.trace(lambda x: weft.nn.gelu(x) + 1.0, weft.spec((3, 4)))
    assert plan.members is plan.kernels and len(plan.members) == 2
    compiled = weft.compile(plan)
    x = np.ones((3, 4), np.float32)
    assert compiled(x).tobytes() == weft.oracle.run(plan, x).tobytes()
