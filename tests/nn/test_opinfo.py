"""PyTorch's own OpInfo samples through weft.nn: no wrong answer, every refusal documented.

For every ``op_db`` entry that ``weft.nn`` answers (``opinfo_map.MAPPING``), each of a
bounded, deterministic selection of ``sample_inputs(device="cpu", dtype=torch.float32)``
is traced with ``weft.nn``, run in the oracle and compared with PyTorch's own output
(float32 tolerance; NaN and infinities where PyTorch has them; integer and bool outputs
exactly, dtypes included). A sample Weft cannot take must be refused with a ``WeftError``
(or the mapping's ``Unmapped``) whose message matches a row of the table in
docs/unsupported.md; any other exception, or a wrong value, fails the test. A few
samples per op also run compiled (Strict, fusion off and greedy) and must be byte-identical
to the oracle.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the OpInfo test compares weft.nn with PyTorch")
pytest.importorskip("expecttest", reason="torch.testing._internal (op_db) imports expecttest")

from opinfo_map import MAPPING, Unmapped  # noqa: E402

import weft  # noqa: E402
from weft.errors import WeftError  # noqa: E402
from weft.testing import assert_strict_equal  # noqa: E402

SAMPLES_PER_OP = 24  # a deterministic stride over each op's samples keeps the run under a minute
# the first sample of these also runs compiled (Strict, fusion off and greedy): one per kind of member
COMPILED_OPS = frozenset({"add", "where", "sum", "softmax", "nn.functional.layer_norm", "matmul",
                          "nn.functional.scaled_dot_product_attention", "nn.functional.conv2d",
                          "nn.functional.cross_entropy"})
UNSUPPORTED_DOC = Path(__file__).resolve().parents[2] / "docs" / "unsupported.md"


def documented_refusals() -> list[re.Pattern]:
    """The message patterns of docs/unsupported.md: the first column of its table, in backticks
    (``\\|`` in the table is the expression's ``|``)."""
    patterns = []
    for line in UNSUPPORTED_DOC.read_text().splitlines():
        found = re.match(r"\|\s*`([^`]+)`\s*\|", line)
        if found:
            patterns.append(re.compile(found.group(1).replace("\\|", "|")))
    assert patterns, f"no refusal patterns found in {UNSUPPORTED_DOC}"
    return patterns


@pytest.fixture(scope="module")
def op_db():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db as database
    return {(o.name + ("." + o.variant_test_name if o.variant_test_name else "")): o for o in database}


def _flatten(value, leaves: list) -> object:
    """The sample's structure with each torch tensor replaced by its position in ``leaves``."""
    if isinstance(value, torch.Tensor):
        leaves.append(value)
        return _Leaf(len(leaves) - 1)
    if isinstance(value, list | tuple):
        return type(value)(_flatten(item, leaves) for item in value)
    if isinstance(value, dict):
        return {key: _flatten(item, leaves) for key, item in value.items()}
    return value


class _Leaf:
    __slots__ = ("position",)

    def __init__(self, position: int):
        self.position = position


def _rebuild(structure, tensors):
    if isinstance(structure, _Leaf):
        return tensors[structure.position]
    if isinstance(structure, list | tuple):
        return type(structure)(_rebuild(item, tensors) for item in structure)
    if isinstance(structure, dict):
        return {key: _rebuild(item, tensors) for key, item in structure.items()}
    return structure


def _selected(samples: list, count: int) -> list:
    if len(samples) <= count:
        return samples
    step = len(samples) / count
    return [samples[int(n * step)] for n in range(count)]


def _torch_outputs(result) -> tuple[np.ndarray, ...]:
    items = result if isinstance(result, tuple | list) else (result,)
    return tuple(item.detach().numpy() if isinstance(item, torch.Tensor) else np.asarray(item) for item in items)


def _check_close(name: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape, f"{name}: shape {got.shape}, PyTorch {want.shape}"
    if want.dtype.kind in "biu":
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, PyTorch {want.dtype}"
        assert np.array_equal(got, want), f"{name}: {got} != PyTorch {want}"
        return
    assert got.dtype == np.float32, f"{name}: dtype {got.dtype}, PyTorch {want.dtype}"
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(got64), np.isnan(want64)), f"{name}: NaN positions differ: {got} vs {want}"
    finite = np.isfinite(want64)
    assert np.array_equal(got64[~finite & ~np.isnan(want64)], want64[~finite & ~np.isnan(want64)]), (
        f"{name}: infinities differ: {got} vs {want}")
    scale = float(np.max(np.abs(want64[finite]))) if finite.any() else 1.0
    np.testing.assert_allclose(got64[finite], want64[finite], rtol=1e-4, atol=1e-5 * max(scale, 1.0),
                               err_msg=name)


class Outcome:
    def __init__(self):
        self.checked = 0
        self.compiled = 0
        self.refused: dict[str, int] = {}


def _run_sample(opinfo, name: str, sample, patterns, outcome: Outcome, compile_it: bool) -> None:
    leaves: list = []
    structure = _flatten((sample.input, sample.args, sample.kwargs), leaves)
    adapter = MAPPING[name]
    try:
        specs = [weft.spec(tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in leaves]

        def program(*tensors):
            inp, args, kwargs = _rebuild(structure, tensors)
            return adapter(inp, *args, **kwargs)

        plan = weft.trace(program, *specs, name=name.replace(".", "_"))
    except (WeftError, Unmapped) as refusal:
        message = f"{type(refusal).__name__}: {refusal}"
        assert any(p.search(str(refusal)) for p in patterns), (
            f"{name}: refusal not listed in docs/unsupported.md: {message}")
        outcome.refused[str(refusal)[:60]] = outcome.refused.get(str(refusal)[:60], 0) + 1
        return
    arrays = [t.detach().numpy().copy() for t in leaves]
    got = weft.oracle.run(plan, *arrays)
    got = got if isinstance(got, tuple) else (got,)
    want = _torch_outputs(opinfo.op(sample.input, *sample.args, **sample.kwargs))
    assert len(got) == len(want), f"{name}: {len(got)} outputs, PyTorch {len(want)}"
    for got_item, want_item in zip(got, want, strict=True):
        _check_close(f"{name} {sample}", np.asarray(got_item), want_item)
    outcome.checked += 1
    if compile_it:
        for fusion in ("off", "greedy"):
            compiled = weft.compile(plan, "strict", threads=1, fusion=fusion)
            assert_strict_equal(compiled(*arrays), got if len(got) > 1 else got[0])
        outcome.compiled += 1


@pytest.mark.parametrize("name", sorted(MAPPING))
def test_opinfo_samples_match_pytorch(op_db, name):
    opinfo = op_db.get(name)
    if opinfo is None:
        pytest.skip(f"{name} is not in this torch's op_db")
    patterns = documented_refusals()
    torch.manual_seed(0)
    samples = _selected(list(opinfo.sample_inputs("cpu", torch.float32)), SAMPLES_PER_OP)
    outcome = Outcome()
    for number, sample in enumerate(samples):
        _run_sample(opinfo, name, sample, patterns, outcome, compile_it=number == 0 and name in COMPILED_OPS)
    assert outcome.checked or outcome.refused, f"{name}: no sample"


def test_mapping_names_exist_in_op_db(op_db):
    """The mapping table names real OpInfo entries (a typo would silently test nothing)."""
    missing = sorted(set(MAPPING) - set(op_db))
    assert not missing, missing


def test_every_documented_refusal_pattern_compiles():
    assert all(isinstance(p, re.Pattern) for p in documented_refusals())
