"""Zero-size tensors (PyTorch's empty tensors) through trace, oracle and compiled C: members
with no element do nothing, reductions over an empty axis give the identity (sum 0, mean
NaN as PyTorch), max/min of an empty axis are refused as PyTorch refuses them; each against
PyTorch, compiled Strict byte-identical to the oracle and Inference within the contract,
fusion off and greedy (a plan with an empty tensor compiles unfused, weft/compile.py)."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.errors import ShapeError
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal

torch = pytest.importorskip("torch", reason="these tests compare weft.nn with PyTorch")

EMPTY = np.zeros((3, 0), np.float32)
FULL = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)

CASES = {  # the torch expression, the weft.nn one, the inputs
    "sum over the empty axis": (lambda a: a.sum(1), lambda a: nn.sum(a, 1), (EMPTY,)),
    "sum of everything": (lambda a: a.sum(), nn.sum, (EMPTY,)),
    "mean over the empty axis is NaN": (lambda a: a.mean(1), lambda a: nn.mean(a, 1), (EMPTY,)),
    "sum over the other axis is empty": (lambda a: a.sum(0), lambda a: nn.sum(a, 0), (EMPTY,)),
    "elementwise": (lambda a: a.exp() + 1, lambda a: nn.exp(a) + 1, (EMPTY,)),
    "softmax": (lambda a: a.softmax(-1), nn.softmax, (EMPTY,)),
    "concat with an empty piece": (lambda a, b: torch.cat([a, b], 1) * 2, lambda a, b: nn.concat([a, b], 1) * 2,
                                   (EMPTY, FULL)),
    "matmul over an empty inner dim": (lambda a, b: a @ a.T + b[:, :3],
                                       lambda a, b: nn.matmul(a, nn.transpose(a, 0, 1)) + b[:, :3], (EMPTY, FULL)),
    "broadcast and reshape": (lambda a, b: (a.reshape(1, 0) + b[:, :1]).reshape(0, 3),
                              lambda a, b: nn.reshape(nn.reshape(a, (1, 0)) + b[:, :1], (0, 3)), (EMPTY[:1], FULL)),
    "an empty slice": (lambda a: a[:, 2:2] + 1, lambda a: a[:, 2:2] + 1, (FULL,)),
    "one empty output among full ones": (lambda a, b: (a.sum(1) + b.sum(1), a * 3),
                                         lambda a, b: (nn.sum(a, 1) + nn.sum(b, 1), a * 3), (EMPTY, FULL)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_empty_tensors_match_pytorch(case):
    fn, weft_fn, arrays = CASES[case]
    want = fn(*(torch.from_numpy(a.astype(np.float64)) for a in arrays))
    want = tuple(w.numpy() for w in want) if isinstance(want, tuple) else (want.numpy(),)
    plan = weft.trace(weft_fn, *(weft.spec(a.shape) for a in arrays))
    got = run(plan, *arrays)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for fusion in ("off", "greedy"):
        strict = weft.compile(plan, "strict", threads=1, fusion=fusion)(*arrays)
        assert_strict_equal(strict, got if len(got) > 1 else got[0])
        inference = weft.compile(plan, "inference", threads=1, fusion=fusion)(*arrays)
        for g, w in zip(inference if isinstance(inference, tuple) else (inference,), want, strict=True):
            assert_inference_close(g, w)


@pytest.mark.parametrize("reduce", [nn.max, nn.min])
def test_max_of_an_empty_axis_is_refused_as_in_pytorch(reduce):
    with pytest.raises(IndexError):
        torch.amax(torch.zeros(3, 0), 1)
    with pytest.raises(ShapeError, match="reduces an axis of extent 0"):
        weft.trace(lambda a: reduce(a, 1), weft.spec((3, 0)))


def test_negative_extents_are_refused():
    with pytest.raises(ShapeError, match="negative extent"):
        weft.spec((2, -1))
