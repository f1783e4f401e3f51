"""The C walk over float32 bit patterns (strided here; step 1 is the full walk in docs/math.md)."""

from toolchain import need_c_compiler

from weft.codegen.exhaustive import REFERENCE_C, walk
from weft.mathf.accuracy import STATED_MAX_ULP


def test_strided_walk_over_all_bit_patterns_within_bounds():
    need_c_compiler()  # a skip with its reason; a failure in CI
    rows = walk(step=4099, lanes=16)
    assert [row[0] for row in rows] == list(REFERENCE_C)
    for name, count, worst, worst_input in rows:
        assert count >= 2**32 // 4099
        assert worst <= STATED_MAX_ULP[name], (name, worst, worst_input)


def test_command_lines_print_markdown_tables():
    import subprocess
    import sys

    accuracy = subprocess.run(
        [sys.executable, "-m", "weft.mathf.accuracy", "--samples", "20000"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert accuracy[0].startswith("| function | samples | max ulp")
    assert [line.split("|")[1].strip() for line in accuracy[2:]] == ["exp", "log", "tanh", "erf", "sigmoid", "sin", "cos"]
    if need_c_compiler():  # the walk needs C: a skip with its reason, a failure in CI
        walked = subprocess.run(
            [sys.executable, "-m", "weft.codegen.exhaustive", "--step", "65537", "--only", "log"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert walked[2].startswith("| log | ")
