"""Exhaustive accuracy of the C rendering over every float32 input.

``python -m weft.codegen.exhaustive [--step N] [--lanes L]`` compiles the
vectorised C functions with a driver that walks all 2^32 bit patterns (or every
N-th one) and scores each result against the C library's double-precision
function, with the same ulp measure as ``weft.mathf.accuracy`` (ulps of the
float32 binade of the exact result, denormal spacing below the normal range,
0 when equal to the double result rounded to float32, infinity for a NaN
mismatch). The C side is bit-identical to the NumPy side (tests/mathf), so
these numbers hold for the oracle too. One core; a full walk takes minutes.

It lives in ``weft.codegen`` (not ``weft.mathf``): it builds C, and ``weft.codegen``
already depends on ``weft.mathf``, never the other way. The walk is a shared object
built by Weft's one C driver (``weft.codegen.driver.build``,
Strict flags: no FMA contraction, no fast-math, as the Strict kernels are built), cached
with the other objects, and called through ctypes; it returns its results in arrays.
"""

from __future__ import annotations

import argparse
import ctypes

from weft.codegen.driver import build
from weft.config import config_from_env
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
  static void walk_##name(unsigned long step, unsigned long *counted,           \
                          double *worst_ulp, float *worst_input) {              \
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
    *counted = count; *worst_ulp = worst; *worst_input = worst_x;               \
  }
"""


def driver_source(lanes: int) -> str:
    walks = "".join(f"WALK({name}, {expression})\n" for name, expression in REFERENCE_C.items())
    calls = "".join(
        f"  if (only < 0 || only == {n}) walk_{name}(step, &counted[{n}], &worst_ulp[{n}], &worst_input[{n}]);\n"
        for n, name in enumerate(REFERENCE_C))
    entry = (
        "void wf_walk(unsigned long step, int only, unsigned long *counted, double *worst_ulp,"
        " float *worst_input) {\n"
        f"{calls}}}\n"
    )
    return c_math_source(lanes) + _DRIVER + walks + entry


def walk(step: int = 1, lanes: int = 16, only: str | None = None) -> list[tuple[str, int, float, float]]:
    """(function, inputs tested, max ulp, worst input) for every N-th float32 bit pattern."""
    config = config_from_env()
    artifact = build(driver_source(lanes), config.cc, config.cache_dir, "strict")
    library = ctypes.CDLL(str(artifact.so_path))
    functions = len(REFERENCE_C)
    counted = (ctypes.c_ulong * functions)()
    worst_ulp = (ctypes.c_double * functions)()
    worst_input = (ctypes.c_float * functions)()
    library.wf_walk.argtypes = (ctypes.c_ulong, ctypes.c_int, ctypes.POINTER(ctypes.c_ulong),
                                ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_float))
    library.wf_walk.restype = None
    names = list(REFERENCE_C)
    library.wf_walk(step, names.index(only) if only else -1, counted, worst_ulp, worst_input)
    return [(name, int(counted[n]), float(worst_ulp[n]), float(worst_input[n]))
            for n, name in enumerate(names) if only is None or name == only]


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
