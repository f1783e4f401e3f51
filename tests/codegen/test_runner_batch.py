"""A race's contenders in one translation unit (``render_batch``): every runner symbol of a
contender is renamed under its prefix, so the unit compiles and each contender runs."""

import numpy as np

from weft import nn
from weft.codegen.driver import build
from weft.codegen.runner import batch_prefix, render_batch
from weft.compile import CompiledPlan, compile


def _plan():
    return nn.trace(lambda x, w: nn.relu(nn.matmul(x, w)), nn.spec((4, 8)), nn.spec((8, 3)), name="batch_unit")


def test_two_contenders_in_one_unit_compile_and_run_under_their_prefixes(tmp_path):
    plan = _plan()
    compiled = compile(plan, fusion="off")
    source = render_batch([(plan, compiled.lowered, compiled.arena)] * 2)
    config = compiled.config
    artifact = build(source, config.cc, tmp_path, config.contract)  # a symbol defined twice fails here
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32)
    want = compiled(x, w)
    for number in range(2):
        contender = CompiledPlan(plan, config, compiled.lowered, compiled.arena, artifact,
                                 entry_prefix=batch_prefix(number))
        np.testing.assert_array_equal(contender(x, w), want)
