"""The pipelined one pass of cross-entropy from logits (``weft.codegen.online_rows``) folds its sum
in register chains, not through the row's accumulator in memory: the C, and that the result is
within tolerance of float64, the same bytes at 1 and 2 threads and wherever the logits start
(the order of the fold depends on the plan alone), at vocabularies that end mid-span, mid-vector
and mid-block, with the row max late (a rescale of every chain)."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from weft import nn
from weft.codegen.online_rows import CHAINS
from weft.config import config_from_env
from weft.oracle import run as oracle_run
from weft.testing import assert_inference_close, at_line_offset


@pytest.fixture(scope="module")
def make_config(tmp_path_factory):
    cache = tmp_path_factory.mktemp("weft-cache")
    return lambda contract, threads, **extra: config_from_env(contract=contract, threads=threads, cache_dir=cache, **extra)


def _plan(tokens: int, vocab: int):
    def loss(logits, targets):
        return nn.cross_entropy(logits, targets, reduction="none")

    return weft.trace(loss, weft.spec((tokens, vocab)), weft.spec((tokens,), dtype="int64"), name="ce")


def _reference(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    top = x.max(axis=1, keepdims=True)
    return np.log(np.exp(x - top).sum(axis=1)) + top[:, 0] - x[np.arange(len(targets)), targets]


def test_the_pipelined_sum_folds_in_register_chains(make_config):
    compiled = weft.compile(_plan(4, 4096), config=make_config("inference", threads=1, fusion="greedy"))
    source = compiled.source_path.read_text()
    assert "pipelined blocks of" in source
    loop = source[source.index("this block's max, the last one's terms"):source.index("the span's rest")]
    for k in range(CHAINS):
        assert f"_c{k} = " in loop  # each vector of the step into its own chain
    assert "wfc_store_f(" not in loop and "_v[" not in loop  # nothing through memory in the loop


@pytest.mark.parametrize("tokens,vocab", [(3, 2048), (5, 3001), (2, 4096 + 17), (4, 2 * 1024 + 48), (3, 5 * 1024 + 63)])
def test_chains_give_the_same_bytes_everywhere_and_stay_close(tokens, vocab, make_config):
    rng = np.random.default_rng(vocab)
    logits = (rng.standard_normal((tokens, vocab), dtype=np.float32) * 4).astype(np.float32)
    logits[0, -1] = 60.0  # the row max in the last block: every chain rescaled late
    logits[-1, 1024 + 33] = 45.0  # in the second block, inside a span
    targets = rng.integers(0, vocab, tokens).astype(np.int64)
    plan = _plan(tokens, vocab)
    results = []
    for threads in (1, 2):
        compiled = weft.compile(plan, config=make_config("inference", threads=threads, fusion="greedy"))
        assert "pipelined blocks of" in compiled.source_path.read_text()
        for offset in (0, 16, 36):
            results.append(np.asarray(compiled(at_line_offset(logits, offset), targets)).copy())
    for result in results[1:]:
        np.testing.assert_array_equal(result.view(np.uint32), results[0].view(np.uint32))
    assert_inference_close(results[0], _reference(logits, targets), f"ce {tokens}x{vocab}")



def test_a_nan_or_an_infinity_in_a_row_gives_the_oracles_nan(make_config):
    """The hot loop's max is the plain compare-select (``plain_reference``): a row with a NaN
    (which that max may drop) or with +inf (whose sum is NaN: inf - inf) ends NaN as the
    oracle's does, and its reference is folded again exactly (the C's slow path)."""
    tokens, vocab = 6, 3 * 1024 + 40
    rng = np.random.default_rng(5)
    x = rng.standard_normal((tokens, vocab), dtype=np.float32)
    x[0, 1500] = np.nan  # mid-row, inside a span of the hot loop
    x[1, vocab - 1] = np.nan  # in the scalar tail
    x[2, 2000] = np.inf
    x[3, 100], x[3, 2100] = np.inf, np.nan
    x[4, 10] = -np.inf
    targets = rng.integers(0, vocab, tokens).astype(np.int64)
    plan = _plan(tokens, vocab)
    compiled = weft.compile(plan, config=make_config("inference", threads=1, fusion="greedy"))
    source = compiled.source_path.read_text()
    assert "wfc_pmax_f(wo_vm" in source and "a NaN term: the reference exactly" in source
    loss = np.asarray(compiled(x, targets))
    expected = oracle_run(plan, x, targets)
    assert np.array_equal(np.isnan(loss), np.isnan(expected)) and np.isnan(loss[:4]).all()
    assert_inference_close(loss[4:], _reference(x[4:], targets[4:]), "finite rows")
