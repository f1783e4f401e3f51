"""Cross-entropy with PyTorch's semantics (weft.nn.losses): class targets with ``ignore_index``
(PyTorch's default -100), probability targets, ``label_smoothing``, one unbatched row; each
against PyTorch, compiled Strict byte-identical to the oracle and Inference within the
contract of float64, fusion off and greedy."""

from __future__ import annotations

import numpy as np
import pytest

import weft
import weft.nn as nn
from weft.compose import choose_regions
from weft.compose.rescale import OnlineFold, derive_online_fold
from weft.errors import DTypeError, ShapeError
from weft.oracle import run
from weft.testing import assert_inference_close, assert_strict_equal

torch = pytest.importorskip("torch", reason="these tests compare weft.nn with PyTorch")
F = torch.nn.functional

RNG = np.random.default_rng(11)
LOGITS = (RNG.standard_normal((2, 5, 9)) * 3).astype(np.float32)
CLASSES = RNG.integers(0, 9, (2, 5)).astype(np.int64)
CLASSES[0, 1] = CLASSES[1, 3] = -100  # PyTorch's default ignore_index
CLASSES[1, 0] = 4
PROBS = RNG.random((2, 5, 9)).astype(np.float32)
PROBS /= PROBS.sum(-1, keepdims=True)


def _pytorch(logits, targets, **kwargs):
    """PyTorch's loss of our classes-last layout (PyTorch puts the classes at dim 1), in float64."""
    x = torch.from_numpy(logits.astype(np.float64))
    t = torch.from_numpy(targets.astype(np.float64) if targets.dtype.kind == "f" else targets)
    if x.ndim > 2:
        x, t = x.movedim(-1, 1), (t.movedim(-1, 1) if t.dtype.is_floating_point else t)
    return F.cross_entropy(x, t, **kwargs).numpy()


def _check_everywhere(fn, arrays, want):
    plan = weft.trace(fn, *(weft.spec(a.shape, a.dtype) for a in arrays))
    got = run(plan, *arrays)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-5, atol=2e-5)
    for fusion in ("off", "greedy"):
        assert_strict_equal(weft.compile(plan, "strict", threads=1, fusion=fusion)(*arrays), got)
        assert_inference_close(weft.compile(plan, "inference", threads=1, fusion=fusion)(*arrays), want)
    return plan


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_class_targets_skip_the_default_ignore_index(reduction, smoothing):
    want = _pytorch(LOGITS, CLASSES, reduction=reduction, label_smoothing=smoothing)
    plan = _check_everywhere(lambda x, t: nn.cross_entropy(x, t, reduction, label_smoothing=smoothing),
                             (LOGITS, CLASSES), want)
    if reduction == "none":
        assert np.all(run(plan, LOGITS, CLASSES)[CLASSES == -100] == 0)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_a_chosen_ignore_index_within_the_classes(reduction):
    targets = np.where(CLASSES < 0, 2, CLASSES).astype(np.int32)
    want = _pytorch(LOGITS, targets.astype(np.int64), reduction=reduction, ignore_index=2)
    _check_everywhere(lambda x, t: nn.cross_entropy(x, t, reduction, ignore_index=2), (LOGITS, targets), want)


def test_mean_of_only_ignored_targets_is_nan_as_in_pytorch():
    targets = np.full((3,), -100, np.int64)
    want = _pytorch(LOGITS[0, :3], targets)
    assert np.isnan(want)
    plan = weft.trace(nn.cross_entropy, weft.spec((3, 9)), weft.spec((3,), "int64"))
    assert np.isnan(run(plan, LOGITS[0, :3], targets))
    assert np.isnan(weft.compile(plan, "strict", threads=1)(LOGITS[0, :3], targets))


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_probability_targets(reduction, smoothing):
    want = _pytorch(LOGITS, PROBS, reduction=reduction, label_smoothing=smoothing)
    _check_everywhere(lambda x, p: nn.cross_entropy(x, p, reduction, label_smoothing=smoothing),
                      (LOGITS, PROBS), want)


@pytest.mark.parametrize("targets", [np.array(3, np.int64), PROBS[0, 0]])
def test_one_unbatched_row(targets):
    for reduction in ("none", "mean"):
        want = _pytorch(LOGITS[0, 0], targets, reduction=reduction)
        _check_everywhere(lambda x, t, r=reduction: nn.cross_entropy(x, t, r), (LOGITS[0, 0], targets), want)


def test_plain_class_targets_keep_the_one_pass_form():
    """The ignore mask sits in the per-row loss: max and sum of exp still fuse into one online pass."""
    plan = nn.trace(lambda x, t: nn.cross_entropy(x, t), nn.spec((4, 300)), nn.spec((4,), "int64"))
    partition = choose_regions(plan, "greedy", "inference")
    online = [derive_online_fold(plan, region, "inference") for region in partition.fused]
    online = [o for o in online if isinstance(o, OnlineFold)]
    assert len(online) == 1 and online[0].members == ("ce_max", "ce_sumexp")


def test_bad_targets_name_the_fix():
    with pytest.raises(DTypeError, match=r"probabilities and need the logits' shape \(4, 5\)"):
        weft.trace(nn.cross_entropy, weft.spec((4, 5)), weft.spec((4,)))
    with pytest.raises(DTypeError, match="class indices or a float32"):
        weft.trace(nn.cross_entropy, weft.spec((4, 5)), weft.spec((4,), "bool"))
    with pytest.raises(ShapeError, match="label_smoothing must be in"):
        weft.trace(lambda x, t: nn.cross_entropy(x, t, label_smoothing=1.5), weft.spec((4, 5)),
                   weft.spec((4,), "int64"))
