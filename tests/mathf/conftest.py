"""Compiles the C math (``c_math_source``) into small ctypes-loadable harnesses."""

import ctypes
import subprocess

import numpy as np
import pytest
from toolchain import need_c_compiler

from weft.mathf import C_BINARY_NAMES, C_UNARY_NAMES, c_math_source

FLAGS = ("-march=native", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC", "-Wall", "-Werror")

_RUNNERS = """
#define RUN_UNARY(name) \\
void run_##name(const float *in, float *out, long n) { \\
  long i = 0; \\
  for (; i + WF_LANES <= n; i += WF_LANES) { \\
    wf_vf v; __builtin_memcpy(&v, in + i, sizeof v); \\
    v = wf_##name(v); __builtin_memcpy(out + i, &v, sizeof v); } \\
  for (; i < n; i++) out[i] = wf_##name##_s(in[i]); } \\
void run_##name##_s(const float *in, float *out, long n) { \\
  for (long i = 0; i < n; i++) out[i] = wf_##name##_s(in[i]); }
#define RUN_BINARY(name) \\
void run_##name(const float *a, const float *b, float *out, long n) { \\
  long i = 0; \\
  for (; i + WF_LANES <= n; i += WF_LANES) { \\
    wf_vf u, v; __builtin_memcpy(&u, a + i, sizeof u); __builtin_memcpy(&v, b + i, sizeof v); \\
    u = wf_##name(u, v); __builtin_memcpy(out + i, &u, sizeof u); } \\
  for (; i < n; i++) out[i] = wf_##name##_s(a[i], b[i]); } \\
void run_##name##_s(const float *a, const float *b, float *out, long n) { \\
  for (long i = 0; i < n; i++) out[i] = wf_##name##_s(a[i], b[i]); }
"""

_FLOATS = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")


class MathLibrary:
    """ctypes view of one compiled harness: ``unary(name, x)``, ``binary(name, a, b)``."""

    def __init__(self, path, lanes):
        self.lanes = lanes
        self._library = ctypes.CDLL(str(path))
        for name in C_UNARY_NAMES:
            for suffix in ("", "_s"):
                function = getattr(self._library, f"run_{name}{suffix}")
                function.argtypes = [_FLOATS, _FLOATS, ctypes.c_long]
                function.restype = None
        for name in C_BINARY_NAMES:
            for suffix in ("", "_s"):
                function = getattr(self._library, f"run_{name}{suffix}")
                function.argtypes = [_FLOATS, _FLOATS, _FLOATS, ctypes.c_long]
                function.restype = None

    def unary(self, name, x, scalar=False):
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty_like(x)
        getattr(self._library, f"run_{name}{'_s' if scalar else ''}")(x, out, x.size)
        return out

    def binary(self, name, a, b, scalar=False):
        a = np.ascontiguousarray(a, dtype=np.float32)
        b = np.ascontiguousarray(b, dtype=np.float32)
        out = np.empty_like(a)
        getattr(self._library, f"run_{name}{'_s' if scalar else ''}")(a, b, out, a.size)
        return out


@pytest.fixture(scope="session")
def compile_math(tmp_path_factory):
    """Returns ``build(lanes, *extra_flags) -> MathLibrary`` (default -O2); skips without a C compiler."""
    compiler = need_c_compiler()  # a skip with its reason; a failure in CI
    built = {}

    def build(lanes, *extra_flags):
        key = (lanes, *extra_flags)
        if key not in built:
            directory = tmp_path_factory.mktemp(f"mathf_l{lanes}")
            source = directory / "math.c"
            runners = "".join(f"RUN_UNARY({name})\n" for name in C_UNARY_NAMES)
            runners += "".join(f"RUN_BINARY({name})\n" for name in C_BINARY_NAMES)
            source.write_text(c_math_source(lanes) + _RUNNERS + runners)
            library = directory / "math.so"
            command = [compiler, *FLAGS, *(extra_flags or ("-O2",)), str(source), "-o", str(library)]
            completed = subprocess.run(command, capture_output=True, text=True)
            assert completed.returncode == 0, f"{' '.join(command)}\n{completed.stderr}"
            built[key] = MathLibrary(library, lanes)
        return built[key]

    return build
