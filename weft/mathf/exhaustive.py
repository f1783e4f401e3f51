"""Exhaustive accuracy of the C rendering over every float32 input.

``python -m weft.mathf.exhaustive [--step N] [--lanes L]`` compiles the
vectorised C functions with a driver that walks all 2^32 bit patterns (or every
N-th one) and scores each result against the C library's double-precision
function, with the same ulp measure as ``weft.mathf.accuracy`` (ulps of the
float32 binade of the exact result, denormal spacing below the normal range,
0 when equal to the double result rounded to float32, infinity for a NaN
mismatch). The C side is bit-identical to the NumPy side (tests/mathf), so
these numbers hold for the oracle too. One core; a full walk takes minutes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from weft.config import config_from_env
from weft.errors import CompileError
from weft.mathf.c_source import c_math_source

REFERENCE_C = {
    "exp": "exp(x)",
    "log": "log(x)",
    "tanh": "tanh(x)",
    "erf": "erf(x)",
    "sigmoid": "1.0 / (1.0 + exp(-x))",
    # sin and cos are defined for |x| <= 2^22 (definitions.TRIG_INPUT_MAX) and NaN beyond:
    # the walk checks both (an out-of-range lane scores 0 only if it is NaN).
    "sin": "(fabs(x) <= 4194304.0 ? sin(x) : NAN)",
    "cos": "(fabs(x) <= 4194304.0 ? cos(x) : NAN)",
}

_DRIVER = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double ulp_error(float y, double r) {
  if (isnan(y) && isnan(r)) return 0.0;
  if (isnan(y) || isnan(r)) return INFINITY;
  if (y == (float)r) return 0.0;
  int e = isinf(r) ? 128 : ilogb(r);
  if (r == 0.0) e = -149 + 23;
  int scale = e - 23;
  if (scale < -149) scale = -149;
  if (scale > 104) scale = 104;
  double err = fabs((double)y - r) / ldexp(1.0, scale);
  return isnan(err) ? INFINITY : err;
}

#define WALK(name, reference)                                                   \
  static void walk_##name(unsigned long step) {                                 \
    double worst = 0.0; float worst_x = 0.0f; unsigned long count = 0;          \
    for (unsigned long base = 0; base < (1ul << 32); base += step * WF_LANES) { \
      uint32_t bits[WF_LANES]; wf_vf v, out;                                    \
      for (int i = 0; i < WF_LANES; i++) {                                      \
        unsigned long b = base + (unsigned long)i * step;                       \
        bits[i] = (uint32_t)(b < (1ul << 32) ? b : 0);                          \
      }                                                                         \
      __builtin_memcpy(&v, bits, sizeof v);                                     \
      out = wf_##name(v);                                                       \
      for (int i = 0; i < WF_LANES; i++) {                                      \
        double x = (double)v[i];                                                \
        double e = ulp_error(out[i], reference);                                \
        if (e > worst) { worst = e; worst_x = v[i]; }                           \
      }                                                                         \
      count += WF_LANES;                                                        \
    }                                                                           \
    printf("%s %lu %.6f %.9g\n", #name, count, worst, (double)worst_x);         \
  }
"""


def driver_source(lanes: int) -> str:
    walks = "".join(f"WALK({name}, {expression})\n" for name, expression in REFERENCE_C.items())
    calls = "".join(f'  if (!only || !strcmp(only, "{name}")) walk_{name}(step);\n' for name in REFERENCE_C)
    main = (
        "#include <string.h>\nint main(int argc, char **argv) {\n"
        "  unsigned long step = argc > 1 ? strtoul(argv[1], 0, 10) : 1;\n"
        "  const char *only = argc > 2 ? argv[2] : 0;\n"
        f"{calls}  return 0;\n}}\n"
    )
    return c_math_source(lanes) + _DRIVER + walks + main


def build(lanes: int, directory: Path) -> Path:
    compiler = config_from_env().cc
    if shutil.which(compiler) is None:
        raise CompileError(f"exhaustive: C compiler {compiler!r} not found; set WEFT_CC", (compiler,))
    source = directory / "exhaustive.c"
    source.write_text(driver_source(lanes))
    binary = directory / "exhaustive"
    command = (
        compiler,
        "-O2",
        "-march=native",
        "-ffp-contract=off",
        "-fno-fast-math",
        str(source),
        "-o",
        str(binary),
        "-lm",
    )
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        raise CompileError("exhaustive: the C driver did not compile", command, completed.stderr, str(source))
    return binary


def walk(step: int = 1, lanes: int = 16, only: str | None = None) -> list[tuple[str, int, float, float]]:
    """(function, inputs tested, max ulp, worst input) for every N-th float32 bit pattern."""
    with tempfile.TemporaryDirectory(prefix="weft_mathf_") as directory:
        binary = build(lanes, Path(directory))
        command = [str(binary), str(step)] + ([only] if only else [])
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in output.splitlines():
        name, count, worst, worst_x = line.split()
        rows.append((name, int(count), float(worst), float(worst_x)))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=1, help="test every N-th bit pattern (1 = all 2^32)")
    parser.add_argument("--lanes", type=int, default=16)
    parser.add_argument("--only", choices=sorted(REFERENCE_C), help="one function only")
    args = parser.parse_args(argv)
    print("| function | inputs tested | max ulp | worst input |")
    print("|---|---:|---:|---:|")
    for name, count, worst, worst_x in walk(args.step, args.lanes, args.only):
        print(f"| {name} | {count:,} | {worst:.3f} | {worst_x!r} |")


if __name__ == "__main__":
    main()
