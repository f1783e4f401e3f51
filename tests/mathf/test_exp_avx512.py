"""The AVX-512 ``wf_exp`` (min/max clamps, one ``vscalefps``) answers the rendered sequence's
bits (``wf_exp_generic``) for every input walked, under both contracts' compiler flags.

Strict kernels are built without FMA contraction and Inference kernels with it, so the
rendered sequence itself differs between the two builds; the AVX-512 form must match each.
The walk visits every 61st float32 bit pattern (70 M inputs: every binade, NaN payloads,
denormals, both overflow edges) plus every pattern around the clamps and the denormal
range of the result; ``python -m weft.codegen.exhaustive`` is the full accuracy walk."""

import ctypes
import subprocess

import pytest
from toolchain import need_c_compiler

from weft.codegen.driver import CONTRACT_FLAGS
from weft.mathf import c_math_source

_WALK = r"""
static unsigned long compare(uint32_t first, uint32_t last, uint32_t step, uint32_t *example) {
  unsigned long differ = 0;
  for (uint64_t base = first; base <= last; base += (uint64_t)step * WF_LANES) {
    uint32_t bits[WF_LANES]; wf_vf v, fast, generic;
    for (int i = 0; i < WF_LANES; i++) {
      uint64_t b = base + (uint64_t)i * step;
      bits[i] = (uint32_t)(b <= last ? b : first);
    }
    __builtin_memcpy(&v, bits, sizeof v);
    fast = wf_exp(v); generic = wf_exp_generic(v);
    uint32_t a[WF_LANES], g[WF_LANES];
    __builtin_memcpy(a, &fast, sizeof a); __builtin_memcpy(g, &generic, sizeof g);
    for (int i = 0; i < WF_LANES; i++) if (a[i] != g[i]) { if (!differ) *example = bits[i]; differ++; }
  }
  return differ;
}
unsigned long wf_compare(uint32_t first, uint32_t last, uint32_t step, uint32_t *example) {
  return compare(first, last, step, example);
}
int wf_is_avx512(void) {
#if defined(__AVX512F__)
  return 1;
#else
  return 0;
#endif
}
"""

# (first, last) bit patterns walked one by one: x around -104 .. -87 (results in the
# denormal range and the lower clamp) and 88 .. 89.5 (overflow and the upper clamp)
_DENSE = [(0xC2AE0000, 0xC2D20000), (0x42B00000, 0x42B30000)]


@pytest.fixture(scope="module", params=sorted(CONTRACT_FLAGS))
def walker(request, tmp_path_factory):
    compiler = need_c_compiler()
    directory = tmp_path_factory.mktemp(f"exp512_{request.param}")
    source = directory / "walk.c"
    source.write_text(c_math_source(16) + _WALK)
    library = directory / "walk.so"
    flags = ("-O2", "-march=native", "-fno-math-errno", "-shared", "-fPIC", "-Wall", "-Werror",
             *CONTRACT_FLAGS[request.param])
    completed = subprocess.run([compiler, *flags, str(source), "-o", str(library)], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    loaded = ctypes.CDLL(str(library))
    if not loaded.wf_is_avx512():
        pytest.skip("no AVX-512 on this machine: wf_exp is the rendered sequence itself")
    loaded.wf_compare.argtypes = (ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32))
    loaded.wf_compare.restype = ctypes.c_ulong
    return loaded


def _differences(walker, first, last, step):
    example = ctypes.c_uint32(0)
    count = walker.wf_compare(first, last, step, ctypes.byref(example))
    return count, hex(example.value)


def test_strided_walk_bit_identical(walker):
    assert _differences(walker, 0, 0xFFFFFFFF, 61) == (0, "0x0")


@pytest.mark.parametrize(("first", "last"), _DENSE)
def test_clamp_and_denormal_ranges_bit_identical(walker, first, last):
    assert _differences(walker, first, last, 1) == (0, "0x0")
