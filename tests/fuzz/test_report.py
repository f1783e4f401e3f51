"""The reporter prints Python that runs and traces the very program that failed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from weft.fuzz.generate import Options
from weft.fuzz.makers import generate
from weft.fuzz.program import input_arrays, trace_program
from weft.fuzz.report import render
from weft.ir.digest import kernel_set_digest

ROOT = Path(__file__).resolve().parents[2]


def _prefix(script: str) -> str:
    """The script up to the compile: the program, its trace and its inputs."""
    return script.split("\ncompiled = ")[0]


def test_printed_program_traces_to_the_same_plan_with_the_same_inputs():
    for contract in ("strict", "inference"):
        for index in range(60):
            program = generate(2, index, Options(contract=contract))
            namespace: dict = {}
            exec(compile(_prefix(render(program, contract)), f"<reproducer {index}>", "exec"), namespace)  # noqa: S102
            assert kernel_set_digest(namespace["plan"]) == kernel_set_digest(trace_program(program)), index
            for printed, made in zip(namespace["arrays"], input_arrays(program), strict=True):
                assert printed.dtype == made.dtype and printed.tobytes() == made.tobytes()


def test_printed_reproducer_runs_as_a_script_and_reports_a_broken_contract(tmp_path, fuzz_cache):
    program = generate(2, 4, Options(contract="strict"))
    script = tmp_path / "reproducer.py"
    script.write_text(render(program, "strict", "off"))
    env = {"PYTHONPATH": str(ROOT), "WEFT_CACHE_DIR": str(fuzz_cache), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "ok: the compiled plan keeps the contract" in done.stdout
    # the same script's check fails on a result that breaks the contract
    broken = render(program, "strict", "off").replace(
        "check_outputs(plan, arrays, compiled(*arrays)", "check_outputs(plan, arrays, broken(compiled(*arrays))")
    broken = broken.replace("compiled = weft.compile", BREAK + "compiled = weft.compile")
    script.write_text(broken)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0 and "strict contract broken" in done.stderr


BREAK = '''import numpy as np


def broken(result):
    results = result if isinstance(result, tuple) else (result,)
    first = np.array(results[0], copy=True)
    flat = first.reshape(-1)
    if first.dtype.kind == "b":
        flat[0] = not flat[0]
    elif first.dtype.kind == "f":
        flat[0] = 12345.5 if flat[0] != 12345.5 else -1.0
    else:
        flat[0] = flat[0] + 1
    return (first,) + tuple(results[1:]) if isinstance(result, tuple) else first


'''


def test_inputs_are_independent_of_each_other():
    program = generate(2, 9, Options(contract="strict"))
    arrays = input_arrays(program)
    again = input_arrays(program)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(arrays, again, strict=True))
