"""The one pass's register-tile C pieces (``weft.codegen.online_tile``) checked as C, bit by bit.

- ``wfc_pmax_f`` (the block max on the tile when nothing else reads the max) is one max
  instruction where there is one; it must answer exactly the ordered compare-select
  ``a > b ? a : b`` it replaces, NaN on either side, equal values and signed zeros included,
  at 16, 8 and 4 lanes.
- ``exp_nonpositive`` (the pass's ``exp(t - max)``): for every non-positive float and -inf it
  answers ``wf_exp``'s bits (the AVX-512 form: one max clamp and ``vscalefps``, the walk of
  ``tests/mathf/test_exp_avx512.py``), denormal results included; NaN stays NaN.
"""

from __future__ import annotations

import ctypes
import struct
import subprocess

import numpy as np
import pytest
from toolchain import need_c_compiler

from weft.codegen.driver import CONTRACT_FLAGS
from weft.codegen.online_tile import exp_nonpositive
from weft.codegen.prelude import prelude


def _build(tmp_path, lanes: int, body: str, contract: str = "inference"):
    compiler = need_c_compiler()
    source = tmp_path / f"tile{lanes}.c"
    source.write_text(prelude(lanes) + body)
    library = tmp_path / f"tile{lanes}.so"
    flags = ("-O2", "-march=native", "-fno-math-errno", "-shared", "-fPIC", *CONTRACT_FLAGS[contract])
    done = subprocess.run([compiler, *flags, str(source), "-o", str(library)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return ctypes.CDLL(str(library))


_PMAX = r"""
void wf_pmax(const float *a, const float *b, float *fast, float *select, long n) {
  for (long i = 0; i + WF_LANES <= n; i += WF_LANES) {
    wf_vf x, y; __builtin_memcpy(&x, a + i, sizeof x); __builtin_memcpy(&y, b + i, sizeof y);
    wf_vf f = wfc_pmax_f(x, y), s = wfc_sel_f(x > y, x, y);
    __builtin_memcpy(fast + i, &f, sizeof f); __builtin_memcpy(select + i, &s, sizeof s);
  }
}
"""


def _special_pairs() -> tuple[np.ndarray, np.ndarray]:
    nan_bits = [0x7FC00000, 0xFFC00000, 0x7FA00001, 0xFF800001]  # quiet and signalling, both signs
    values = [0.0, -0.0, 1.0, -1.0, 3.5, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38]
    specials = [np.float32(v) for v in values] + [np.frombuffer(struct.pack("<I", b), np.float32)[0] for b in nan_bits]
    pairs = [(x, y) for x in specials for y in specials]
    a = np.array([x for x, _ in pairs], np.float32)
    b = np.array([y for _, y in pairs], np.float32)
    pad = -len(a) % 16
    return np.concatenate([a, a[:pad]]), np.concatenate([b, b[:pad]])


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_pmax_answers_the_ordered_compare_select_bit_for_bit(tmp_path, lanes):
    library = _build(tmp_path, lanes, _PMAX.replace("WF_LANES", str(lanes)))
    a, b = _special_pairs()
    fast, select = np.zeros_like(a), np.zeros_like(a)
    pointer = ctypes.POINTER(ctypes.c_float)
    library.wf_pmax(*(x.ctypes.data_as(pointer) for x in (a, b, fast, select)), ctypes.c_long(len(a)))
    assert np.array_equal(fast.view(np.uint32), select.view(np.uint32))
    # and it is the compare-select: b wherever a > b is false (NaN on either side, a == b)
    assert np.array_equal(select.view(np.uint32), np.where(a > b, a, b).view(np.uint32))


def _exp_walk(lanes: int) -> str:
    lines: list[str] = []
    exp_nonpositive(lines, 1, "v", "wa_e0", lanes)
    body = "\n".join(lines)
    return rf"""
static wf_vf tile_exp(wf_vf v) {{
{body}
    return wa_e0;
}}
unsigned long wf_walk(uint32_t first, uint32_t last, uint32_t step, uint32_t *example) {{
  unsigned long differ = 0;
  for (uint64_t base = first; base <= last; base += (uint64_t)step * {lanes}) {{
    uint32_t bits[{lanes}]; wf_vf v, ours, reference;
    for (int i = 0; i < {lanes}; i++) {{ uint64_t b = base + (uint64_t)i * step; bits[i] = (uint32_t)(b <= last ? b : first); }}
    __builtin_memcpy(&v, bits, sizeof v);
    ours = tile_exp(v); reference = wf_exp(v);
    uint32_t a[{lanes}], r[{lanes}];
    __builtin_memcpy(a, &ours, sizeof a); __builtin_memcpy(r, &reference, sizeof r);
    for (int i = 0; i < {lanes}; i++) {{
      int nan_in = (bits[i] & 0x7fffffffu) > 0x7f800000u, nan_out = (a[i] & 0x7fffffffu) > 0x7f800000u;
      int ok = nan_in ? nan_out : a[i] == r[i];
      if (!ok) {{ if (!differ) *example = bits[i]; differ++; }}
    }}
  }}
  return differ;
}}
int wf_is_avx512(void) {{
#if defined(__AVX512F__)
  return 1;
#else
  return 0;
#endif
}}
"""


@pytest.fixture(scope="module")
def exp_walker(tmp_path_factory):
    library = _build(tmp_path_factory.mktemp("tile_exp"), 16, _exp_walk(16))
    library.wf_walk.argtypes = (ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32))
    library.wf_walk.restype = ctypes.c_ulong
    return library


def _walk(library, first: int, last: int, step: int) -> tuple[int, str]:
    example = ctypes.c_uint32(0)
    count = library.wf_walk(first, last, step, ctypes.byref(example))
    return count, hex(example.value)


def test_tile_exp_is_wf_exp_on_every_nonpositive_float_walked(exp_walker):
    if not exp_walker.wf_is_avx512():
        pytest.skip("no AVX-512 here: the tile's exp flushes below exp(-86) to 0 where wf_exp gives denormals")
    # +0, then every 7th pattern with the sign set (-0 .. -inf, then the negative NaNs)
    assert _walk(exp_walker, 0, 0, 1) == (0, "0x0")
    assert _walk(exp_walker, 0x80000000, 0xFFFFFFFF, 7) == (0, "0x0")


def test_tile_exp_is_wf_exp_where_results_turn_denormal_and_vanish(exp_walker):
    if not exp_walker.wf_is_avx512():
        pytest.skip("no AVX-512 here")
    # x from -86 down past -104: results from the smallest normals through the denormals to 0
    assert _walk(exp_walker, 0xC2AC0000, 0xC2D40000, 1) == (0, "0x0")
    assert _walk(exp_walker, 0xFF800000, 0xFF800000, 1) == (0, "0x0")  # -inf


@pytest.mark.parametrize("lanes", [4, 8])
def test_tile_exp_without_avx512_widths_stays_within_wf_exp_where_it_is_normal(tmp_path, lanes):
    # at 8 and 4 lanes the compare-select form: wf_exp's bits down to exp(-86), 0 below
    library = _build(tmp_path, lanes, _exp_walk(lanes).replace("a[i] == r[i]",
                     "(bits[i] > 0xC2AC0000u && bits[i] <= 0xFF800000u) ? a[i] == 0u : a[i] == r[i]"))
    library.wf_walk.argtypes = (ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32))
    library.wf_walk.restype = ctypes.c_ulong
    assert _walk(library, 0x80000000, 0xC2ABFFFF, 97) == (0, "0x0")
    assert _walk(library, 0xC2AC0001, 0xFF800000, 97) == (0, "0x0")
