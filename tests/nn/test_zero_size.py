"""Zero-size tensors (an extent of 0), as PyTorch has them: the oracle against float64
NumPy (or PyTorch), compiled code (Strict unfused, Inference greedy) against the oracle."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.errors import ShapeError
from weft.testing import assert_strict_equal

RNG = np.random.default_rng(11)


def arrays_for(shapes, dtype=np.float32):
    return [RNG.standard_normal(shape).astype(dtype) for shape in shapes]


def run_all_ways(fn, shapes):
    plan = weft.trace(fn, *(weft.spec(shape) for shape in shapes))
    arrays = arrays_for(shapes)
    oracle = weft.oracle.run(plan, *arrays)
    strict = weft.compile(plan, contract="strict", threads=1)(*arrays)
    assert_strict_equal(strict, oracle)
    fused = weft.compile(plan, contract="inference", fusion="greedy", threads=2)(*arrays)
    np.testing.assert_allclose(fused, oracle, rtol=1e-5, atol=1e-6)
    return arrays, oracle


CASES = {  # name: (weft function, NumPy float64 function, input shapes)
    "add": (lambda x: x * 2.0 + 1.0, lambda x: x * 2 + 1, [(0, 4)]),
    "broadcast": (lambda x, b: x + b, lambda x, b: x + b, [(0, 4), (4,)]),
    "sum over the empty axis": (lambda x: nn.sum(x, 0), lambda x: x.sum(0), [(0, 4)]),
    "sum over the other axis": (lambda x: nn.sum(x, 1), lambda x: x.sum(1), [(0, 4)]),
    "mean over the empty axis": (lambda x: nn.mean(x, 0), lambda x: np.full(x.shape[1:], np.nan), [(0, 3)]),
    "matmul with k = 0": (lambda a, b: a @ b, lambda a, b: a @ b, [(3, 0), (0, 5)]),
    "matmul with m = 0": (lambda a, b: a @ b, lambda a, b: a @ b, [(0, 6), (6, 5)]),
    "linear": (lambda x, w: nn.linear(x, w), lambda x, w: x @ w.T, [(2, 0, 8), (4, 8)]),
    "softmax": (lambda x: nn.softmax(x, -1), lambda x: x, [(2, 0)]),
    "layer_norm": (lambda x: nn.layer_norm(x), lambda x: x, [(0, 8)]),
    "concat with an empty part": (lambda a, b: nn.concat([a, b], 0), lambda a, b: np.concatenate([a, b]),
                                  [(0, 3), (2, 3)]),
    "reshape and transpose": (lambda x: nn.reshape(x, (4, 0, 2)).transpose(0, 2), lambda x: x.reshape(4, 0, 2)
                              .swapaxes(0, 2), [(0, 8)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_zero_size_ops(name):
    fn, reference, shapes = CASES[name]
    arrays, oracle = run_all_ways(fn, shapes)
    want = reference(*(a.astype(np.float64) for a in arrays))
    assert oracle.shape == want.shape
    np.testing.assert_allclose(oracle, want, rtol=1e-6, atol=1e-6)


def test_attention_with_no_keys_is_zero_as_in_pytorch():
    torch = pytest.importorskip("torch")
    shapes = [(1, 2, 3, 4), (1, 2, 0, 4), (1, 2, 0, 4)]
    arrays, oracle = run_all_ways(lambda q, k, v: nn.attention(q, k, v), shapes)
    want = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in arrays)).numpy()
    np.testing.assert_array_equal(oracle, want)


def test_an_empty_batch_through_a_cnn_and_a_named_program():
    arrays, oracle = run_all_ways(lambda x, w: nn.relu(nn.conv2d(x, w, padding=1)), [(0, 3, 5, 5), (4, 3, 3, 3)])
    assert oracle.shape == (0, 4, 5, 5)
    plan = weft.trace(lambda x, weights: nn.linear(x, weights["w"]), weft.spec((0, 8)), {"w": weft.spec((2, 8))})
    compiled = weft.compile(plan, params={"weights": {"w": np.ones((2, 8), np.float32)}})
    assert compiled(np.zeros((0, 8), np.float32)).shape == (0, 2)


def test_what_has_no_value_is_refused():
    with pytest.raises(ShapeError, match="max of no elements has no value"):
        weft.trace(lambda x: nn.max(x, 0), weft.spec((0, 4)))
    with pytest.raises(ShapeError, match=r"min: reduces an axis of extent 0 \(input \(3, 0\), axis None\)"):
        weft.trace(lambda x: nn.min(x), weft.spec((3, 0)))
    with pytest.raises(ShapeError, match="the -1 could be any size"):
        weft.trace(lambda x: nn.reshape(x, (-1, 0)), weft.spec((0, 4)))
    with pytest.raises(ShapeError, match="negative extent"):
        weft.spec((2, -1))
    assert weft.trace(lambda x: nn.max(x, 1), weft.spec((0, 4))).outputs  # max over a non-empty axis: fine


def test_cross_entropy_and_embedding_over_no_tokens():
    torch = pytest.importorskip("torch")
    plan = weft.trace(lambda logits, targets: nn.cross_entropy(logits, targets), weft.spec((0, 5)),
                      weft.spec((0,), "int64"))
    logits, targets = np.zeros((0, 5), np.float32), np.zeros((0,), np.int64)
    got = weft.compile(plan)(logits, targets)
    want = torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.from_numpy(targets)).numpy()
    assert np.isnan(got) and np.isnan(want)
    assert_strict_equal(got, weft.oracle.run(plan, logits, targets))
    plan = weft.trace(nn.embedding, weft.spec((2, 0), "int64"), weft.spec((7, 3)))
    assert weft.compile(plan)(np.zeros((2, 0), np.int64), np.ones((7, 3), np.float32)).shape == (2, 0, 3)
