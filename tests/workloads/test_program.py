"""Your own program as a workload: ``weft plan|explain|bench|diagnose FILE.py:FUNCTION``."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import weft
from weft.cli import main
from weft.errors import WorkloadError
from weft.workloads import get_workload, program_workload

PROGRAM = '''
import numpy as np
from weft import nn


def build(tokens=6, hidden=8, scale=0.5):
    """A linear, a gelu and a scaled residual."""
    rng = np.random.default_rng(tokens)
    x = rng.standard_normal((tokens, hidden), dtype=np.float32)
    weights = {"w": rng.standard_normal((hidden, hidden), dtype=np.float32), "b": np.ones(hidden, np.float32)}

    def block(x, weights):
        return x + nn.gelu(nn.linear(x, weights["w"], weights["b"])) * scale

    def twin(x, weights):
        import torch

        return x + torch.nn.functional.gelu(torch.nn.functional.linear(x, weights["w"], weights["b"])) * scale

    return block, {"x": x, "weights": weights}, twin


build.sequence_param = "tokens"


def pair(rows=3):
    a = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    return (lambda a, b: nn.exp(a) - b[0]), (a, [a.copy()])


def not_a_pair():
    return "fn", "inputs"


def wrong_inputs():
    return (lambda x: x), {"x": [1.0, 2.0]}


def doubles():
    return (lambda x: x), {"x": np.zeros((2, 3))}


def needs_size(tokens):
    return None


def seeded(seed=0):
    return None
'''


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(PROGRAM))
    return path


def reference(x, w, b, scale=0.5):
    """float64 NumPy: x + gelu(x @ w.T + b) * scale (erf gelu)."""
    from scipy.special import erf

    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    h = x64 @ w64.T + b64
    return x64 + 0.5 * h * (1 + erf(h / np.sqrt(2))) * scale


def test_a_program_file_is_a_workload_with_named_inputs(program):
    workload = get_workload(f"{program}:build")
    assert workload.defaults == {"tokens": 6, "hidden": 8, "scale": 0.5}
    assert workload.description == "A linear, a gelu and a scaled residual."
    plan = workload.plan(tokens="4")
    assert plan.inputs == ("x", "weights_b", "weights_w")
    x, b, w = workload.inputs(tokens=4)
    assert x.shape == (4, 8) and b.shape == (8,) and w.shape == (8, 8)
    got = weft.oracle.run(plan, x, b, w)
    np.testing.assert_allclose(got, reference(x, w, b), rtol=1e-5, atol=1e-5)
    assert workload.source == f"{program.resolve()}:build"


def test_the_torch_twin_takes_the_same_structure(program):
    torch = pytest.importorskip("torch")
    workload = get_workload(f"{program}:build")
    arrays = workload.inputs()
    twin = workload.torch_fn()
    got = twin(*(torch.from_numpy(a) for a in arrays)).numpy()
    x, b, w = arrays
    np.testing.assert_allclose(got, reference(x, w, b), rtol=1e-5, atol=1e-5)


def test_a_tuple_program_and_the_default_function_name(program):
    workload = get_workload(f"{program}:pair")
    plan = workload.plan(rows=2)
    assert plan.inputs == ("a", "b_0")
    a, b = workload.inputs(rows=2)
    np.testing.assert_allclose(weft.oracle.run(plan, a, b), np.exp(a.astype(np.float64)) - b, rtol=1e-6)
    assert get_workload(str(program)).name == "model.py:build"  # FUNCTION defaults to build


@pytest.mark.parametrize("reference_text, message", [
    ("{dir}/missing.py:build", "no such file"),
    ("{path}:nonesuch", "nonesuch is not defined there; functions defined: build, doubles, needs_size, not_a_pair, pair, seeded"),
    ("{path}:needs_size", "parameter 'tokens' has no default"),
    ("{path}:seeded", "parameter 'seed' is reserved"),
])
def test_a_missing_file_or_function_is_a_clear_error(program, reference_text, message):
    with pytest.raises(WorkloadError, match=message.replace("(", r"\(")):
        get_workload(reference_text.format(dir=program.parent, path=program))


def test_a_function_returning_the_wrong_thing_is_a_clear_error(program):
    with pytest.raises(WorkloadError, match=r"must be the function to trace, got str"):
        get_workload(f"{program}:not_a_pair").plan()
    with pytest.raises(WorkloadError, match=r"input x_0 must be a numpy.ndarray, got float"):
        get_workload(f"{program}:wrong_inputs").plan()
    with pytest.raises(WorkloadError, match=r"input x is a numpy array of shape \(2, 3\) and dtype float64: .*float32"):
        get_workload(f"{program}:doubles").plan()
    with pytest.raises(WorkloadError, match=r"unknown parameter\(s\) colour; valid: tokens=6"):
        get_workload(f"{program}:build").plan(colour=1)


def test_the_cli_plans_and_explains_a_program(program, capsys):
    assert main(["plan", f"{program}:build", "--set", "tokens=3"]) == 0
    out = capsys.readouterr().out
    assert "inputs:  x[3, 8] f32, weights_b[8] f32, weights_w[8, 8] f32" in out
    assert main(["explain", f"{program}:build"]) == 0
    assert "policy priced" in capsys.readouterr().out  # weft explain compiles under the default policy
    assert main(["plan", f"{program}:nonesuch"]) == 2
    assert "nonesuch is not defined" in capsys.readouterr().err


def test_bench_a_program_with_parity_and_the_torch_arm(program, tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "result.json"
    argv = ["bench", f"{program}:build", "--arms", "unfused,inference,torch-eager", "--rounds", "2",
            "--round-ms", "1", "--no-progress", "--out", str(out), "--processes", "2"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "parity against the oracle: unfused exact ok" in text and "torch-eager tolerance ok" in text
    data = json.loads(out.read_text())
    assert data["workload"] == "model.py:build" and data["params"] == {"tokens": 6, "hidden": 8, "scale": 0.5}
    assert set(data["in_process"]["candidates"]) == {"inference", "torch-eager"}
    assert data["processes"]["rounds"] == 2


def test_diagnose_a_program_doubles_its_sequence_param(program, capsys):
    assert main(["diagnose", f"{program}:build", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "Whole step" in out and "tokens 6 -> 12" in out


def test_bench_run_from_python_over_a_function_and_arrays():
    import weft.bench

    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 7), dtype=np.float32)
    result = weft.bench.run(lambda x: weft.nn.softmax(x, axis=-1), (x,), arms="unfused,greedy", rounds=2,
                            round_ms=1)
    section = result["in_process"]
    assert section["candidates"] == ["greedy"]
    assert [check["ok"] for check in section["parity"]["checks"]] == [True, True, True]
    assert {v["candidate"] for v in section["verdicts"]} == {"unfused:control", "greedy"}


def test_an_in_memory_program_cannot_go_to_fresh_processes():
    from weft.bench.arms import BenchError
    from weft.bench.run import process_reference

    workload = program_workload(built=(lambda x: x * 2, (np.ones(3, np.float32),)), name="double")
    with pytest.raises(BenchError, match="--processes cannot load it"):
        process_reference(workload)
