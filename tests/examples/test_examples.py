"""The examples under examples/: each traced, compiled (Strict bit-identical to the
oracle, Inference close to it) and checked against its PyTorch twin, at small sizes;
and the CLI on them (`weft explain examples/cnn.py:build`, `weft diagnose examples/bert.py:build`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import weft
from weft.cli import main
from weft.workloads import get_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = {
    "bert": {"batch": 2, "tokens": 16, "hidden": 96, "heads": 12, "intermediate": 192},
    "minilm6": {"layers": 2, "batch": 2, "tokens": 8, "hidden": 48, "heads": 4, "intermediate": 96},
    "cnn": {"batch": 2, "size": 12, "channels": 4},
}


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_example_matches_the_oracle_and_pytorch(name):
    workload = get_workload(f"{EXAMPLES / name}.py:build")
    params = SMALL[name]
    plan = workload.plan(**params)
    arrays = workload.inputs(**params)
    oracle = weft.oracle.run(plan, *arrays)
    strict = weft.compile(plan, contract="strict", threads=1)
    assert strict(*arrays).tobytes() == oracle.tobytes()
    torch = pytest.importorskip("torch")
    with torch.inference_mode():
        twin = workload.torch_fn(**params)(*(torch.from_numpy(a) for a in arrays)).double().numpy()
    assert relative_error(oracle, twin) < 1e-5
    inference = weft.compile(plan, contract="inference", threads=1)
    assert relative_error(inference(*arrays), twin) < 1e-4


def test_bert_names_its_inputs_and_masks_padding():
    workload = get_workload(f"{EXAMPLES}/bert.py:build")
    params = SMALL["bert"]
    plan = workload.plan(**params)
    assert plan.inputs[:3] == ("x", "keep", "weights_ff1_b") and "weights_q_w" in plan.inputs
    x, keep, *weights = workload.inputs(**params)
    assert keep.dtype == bool and not keep[1].all() and keep[0].all()
    # a padded key changes nothing: perturbing it leaves sequence 1 as it was
    perturbed = x.copy()
    perturbed[1, -1] += 10.0
    before = weft.oracle.run(plan, x, keep, *weights)
    after = weft.oracle.run(plan, perturbed, keep, *weights)
    np.testing.assert_array_equal(before[1, :-1], after[1, :-1])
    assert not np.array_equal(before[1, -1], after[1, -1])


def test_minilm_stack_names_weights_by_layer():
    plan = get_workload(f"{EXAMPLES}/minilm6.py:build").plan(**SMALL["minilm6"])
    assert "weights_layer1_ln2_w" in plan.inputs and len(plan.inputs) == 2 + 2 * 16


def _cli_output(capsys, command: str, example: str, *options: str) -> str:
    """``weft COMMAND examples/EXAMPLE.py:build OPTIONS`` at the example's small sizes: its output."""
    argv = [command, f"{EXAMPLES}/{example}.py:build", *options]
    for key, value in SMALL[example].items():
        argv += ["--set", f"{key}={value}"]
    assert main(argv) == 0
    return capsys.readouterr().out


def test_weft_explain_examples_cnn(capsys):
    out = _cli_output(capsys, "explain", "cnn", "--fusion", "greedy")
    assert "policy greedy" in out and "conv2d" in out and "max_pool2d" in out


def test_weft_diagnose_examples_bert(capsys):
    out = _cli_output(capsys, "diagnose", "bert", "--repeats", "1")
    assert "1. Whole step" in out and "tokens 16 -> 32" in out and "attn_attn_scores" in out


def test_bert_linears_are_one_gemm_over_every_batch_and_token_row():
    """A linear over a (B, T, H) activation is one contraction of B*T rows (issue 13: not B
    GEMMs of T rows), whichever function (shared between identical members) computes it."""
    from weft.lower.contraction import ContractionNest

    params = SMALL["bert"]
    plan = get_workload(f"{EXAMPLES}/bert.py:build").plan(**params)
    compiled = weft.compile(plan, contract="inference", threads=1, fusion="off")  # each linear its own function
    linears = {}  # member -> the contraction nest that computes it (a shared function: every call)
    for function in compiled.lowered.functions:
        for nest in function.nests:
            if isinstance(nest, ContractionNest):
                linears.update({member: nest for member in function.members if "linear" in member})
    assert len(linears) == 6, sorted(linears)  # q, k, v, o, ff1, ff2
    rows = params["batch"] * params["tokens"]
    for name, nest in linears.items():
        assert not nest.batch_axes and nest.rows == rows, (name, nest.describe())
