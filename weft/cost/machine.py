"""The calibrated machine profile: the facts a price or a roofline needs, measured once.

Hardware facts (CPU model, flags, cache sizes, CPU count) are read from the system;
their hash is the **profile id**. Rates are measured:

- copy bandwidth, bytes/s, counted as bytes read + bytes written: a large NumPy copy
  (one thread) and a tiny compiled C loop at 1 and N threads (OpenMP), best of
  several repeats each;
- GEMM rate, FLOP/s (2·n³ per n×n×n product): NumPy float32 matmul, 1024³ and 2048³
  (best of both) at 1 and N BLAS threads, the proxy for the machine's peak.

- (schema 2, ``weft.cost.probes``, compiled through ``weft.codegen.driver.build``) the
  clock, read/write/copy bandwidth from L1, L2, L3 and memory at 1 and N threads, the
  FMA peak per core with every core busy, exp/log/divide vectors per second, the cost
  of a parallel region, of a runner call and of a first touch of a fresh page.

Calibration takes a few seconds; each number is the best of several short runs so a
loaded machine lowers no rate (multi-thread runs whose threads never overlapped are
flagged in ``stream_concurrent``).

The profile is stored as JSON under ``<cache_dir>/machine/profile-<id>.json`` and
reused; ``recalibrate=True`` measures again. A file that does not parse, does not
match its id, or was measured with other probe code (``probes_digest``: the math the
probes time, e.g. ``wf_exp``, changed) is reported with a warning and rebuilt. Units are in the field names.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from weft.codegen.cpu import cpu_info, cpu_model
from weft.codegen.driver import build
from weft.cpu_caches import cache_sizes
from weft.errors import WeftError
from weft.files import write_atomic

SCHEMA = 2

LEVELS = ("l1", "l2", "l3", "memory")
STREAM_KINDS = ("read", "write", "copy")
UNARY_KINDS = ("exp", "log", "divide")


@dataclass(frozen=True, slots=True)
class MachineProfile:
    """Measured facts about this machine. Rates are per thread count measured."""

    profile_id: str
    cpu_model: str
    cpu_flags: tuple[str, ...]
    logical_cpus: int
    vector_bits: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    copy_bandwidth_bytes_per_s: tuple[tuple[int, float], ...]  # (threads, bytes/s)
    numpy_copy_bandwidth_bytes_per_s: float
    gemm_flops_per_s: tuple[tuple[int, float], ...]  # (threads, FLOP/s)
    gemm_size: int  # the largest n of the n×n×n products measured
    bandwidth_source: str  # "c-loop" or "numpy"
    blas_threads_controlled: bool
    openblas_env: tuple[tuple[str, str], ...]
    measured_at: str
    schema: int = SCHEMA
    # --- schema 2: what the cycle model needs (weft.cost.probes) ---
    line_bytes: int = 64
    page_bytes: int = 4096
    clock_hz: float = 0.0  # cycles per second (dependent integer adds, one per cycle)
    stream_bytes_per_s: tuple[tuple[str, str, int, float], ...] = ()  # (level, kind, threads, bytes/s)
    stream_concurrent: bool = True  # False: some multi-thread stream never ran concurrently (loaded machine)
    fma_flops_per_core: float = 0.0  # float32 FMA FLOP/s of one core with every core busy
    unary_vectors_per_s: tuple[tuple[str, float], ...] = ()  # (exp | log | divide, vectors/s, one core)
    parallel_region_s: float = 0.0  # one OpenMP parallel region over every core
    runner_call_s: float = 0.0  # one call from Python into a compiled plan (ctypes)
    first_touch_s_per_page: float = 0.0  # first write to a fresh page (the fault)
    probes_digest: str = ""  # of the probe C (Weft's math included): a profile measured with
    # other code (a faster wf_exp) is measured again, so prices follow the code they price

    def bandwidth(self, threads: int = 1) -> float:
        """Copy bandwidth (bytes/s): the best measured with at most ``threads`` threads."""
        return _at_threads(self.copy_bandwidth_bytes_per_s, threads)

    def peak_flops(self, threads: int = 1) -> float:
        """GEMM rate (FLOP/s): the best measured with at most ``threads`` threads."""
        return _at_threads(self.gemm_flops_per_s, threads)

    def ridge_point(self, threads: int = 1) -> float:
        """FLOPs per byte where a member turns from memory- to compute-bound."""
        return self.peak_flops(threads) / self.bandwidth(threads)

    @property
    def lanes(self) -> int:
        return max(1, self.vector_bits // 32)

    @property
    def cores(self) -> int:
        return self.logical_cpus

    def cache_bytes(self, level: str) -> int:
        """Capacity of ``level`` (l1, l2: per core; l3: shared)."""
        return {"l1": self.l1d_bytes, "l2": self.l2_bytes, "l3": self.l3_bytes}[level]

    def level_bandwidth(self, level: str, kind: str = "read", threads: int = 1) -> float:
        """Bytes/s of ``kind`` from ``level`` with ``threads`` threads (all of them together).

        Falls back to the copy bandwidth for a profile without per-level numbers, and
        to the nearest measured thread count below (or scaled linearly for private levels)."""
        table = [(t, rate) for lvl, k, t, rate in self.stream_bytes_per_s if lvl == level and k == kind]
        if not table:
            return self.bandwidth(threads)
        usable = [(t, rate) for t, rate in table if t <= max(1, threads)]
        if not usable:
            return min(table)[1]
        count, rate = max(usable, key=lambda pair: pair[1])
        return rate

    def unary_rate(self, kind: str) -> float:
        """Vectors/s of ``kind`` (exp, log, divide) on one core; 0 when not measured."""
        return dict(self.unary_vectors_per_s).get(kind, 0.0)

    def fma_peak(self, threads: int = 1) -> float:
        """FMA FLOP/s with ``threads`` cores busy (per-core rate measured with all busy)."""
        per_core = self.fma_flops_per_core or self.peak_flops(1)
        return per_core * max(1, min(threads, self.logical_cpus))

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(data: dict) -> MachineProfile:
        names = {f.name for f in fields(MachineProfile)}
        if set(data) != names:
            raise ValueError(f"profile fields differ: missing {sorted(names - set(data))}, extra {sorted(set(data) - names)}")
        values = dict(data)
        values["cpu_flags"] = tuple(values["cpu_flags"])
        for key in ("copy_bandwidth_bytes_per_s", "gemm_flops_per_s", "openblas_env", "stream_bytes_per_s",
                    "unary_vectors_per_s"):
            values[key] = tuple(tuple(pair) for pair in values[key])
        return MachineProfile(**values)


def _at_threads(table: tuple[tuple[int, float], ...], threads: int) -> float:
    """The best rate measured with at most ``threads`` threads (more threads never
    have to be slower: a program may leave some idle)."""
    usable = [rate for count, rate in table if count <= max(1, threads)]
    return max(usable) if usable else min(table)[1]


# --------------------------------------------------------------------------- hardware facts


def _cpuinfo() -> tuple[str, tuple[str, ...]]:
    return cpu_model(), tuple(sorted(cpu_info()[1]))


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def hardware_facts() -> dict:
    model, flags = _cpuinfo()
    vector_bits = 512 if "avx512f" in flags else 256 if "avx2" in flags else 128
    facts = {"cpu_model": model, "cpu_flags": list(flags), "logical_cpus": _cpu_count(), "vector_bits": vector_bits}
    facts.update({f"{key}_bytes": value for key, value in cache_sizes().items()})
    return facts


def profile_id(facts: dict) -> str:
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- measurements

_COPY_SOURCE = r"""
#include <stddef.h>
void weft_copy(float *restrict dst, const float *restrict src, long n, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (long i = 0; i < n; ++i) dst[i] = src[i];
}
"""


def _best_time(action, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def measure_numpy_copy(nbytes: int, repeats: int) -> float:
    source = np.random.default_rng(0).random(nbytes // 4, dtype=np.float32)
    target = np.empty_like(source)
    np.copyto(target, source)  # first touch
    return 2 * source.nbytes / _best_time(lambda: np.copyto(target, source), repeats)


def measure_c_copy(nbytes: int, repeats: int, thread_counts: list[int], cc: str, workdir: Path) -> dict[int, float]:
    """Bandwidth of a compiled copy loop per thread count; {} if it cannot be built.

    Built by Weft's own compiler driver (``weft.codegen.driver.build``, cached under
    ``workdir``), so the loop gets the flags every generated kernel gets."""
    try:
        artifact = build(_COPY_SOURCE, cc, workdir, "strict")
        library = ctypes.CDLL(str(artifact.so_path))
    except (OSError, WeftError) as error:
        warnings.warn(f"machine profile: C copy loop not built ({error}); using the NumPy copy bandwidth", stacklevel=2)
        return {}
    copy = library.weft_copy
    copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
    source = np.random.default_rng(0).random(nbytes // 4, dtype=np.float32)
    target = np.empty_like(source)
    rates = {}
    for threads in thread_counts:
        copy(target.ctypes.data, source.ctypes.data, source.size, threads)
        seconds = _best_time(lambda t=threads: copy(target.ctypes.data, source.ctypes.data, source.size, t), repeats)
        rates[threads] = 2 * source.nbytes / seconds
    return rates


def _openblas_setter():
    import numpy as _np

    folder = Path(_np.__file__).parent.parent / "numpy.libs"
    for path in sorted(glob.glob(str(folder / "*openblas*.so*"))):
        library = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(library, name):
                return getattr(library, name)
    return None


def set_blas_threads(threads: int) -> bool:
    """Set NumPy's OpenBLAS thread count in this process; False if it cannot be set."""
    setter = _openblas_setter()
    if setter is None:
        return False
    setter(int(threads))
    return True


def measure_gemm(size: int, thread_counts: list[int], repeats: int) -> tuple[dict[int, float], bool]:
    """float32 matmul FLOP/s per BLAS thread count, and whether threads could be set."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    out = np.empty((size, size), dtype=np.float32)
    setter = _openblas_setter()
    rates = {}
    for threads in thread_counts:
        if setter is not None:
            setter(threads)
        np.matmul(a, b, out=out)
        rates[threads] = 2.0 * size**3 / _best_time(lambda: np.matmul(a, b, out=out), repeats)
    if setter is not None:
        setter(_cpu_count())
    return rates, setter is not None


def line_bytes() -> int:
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size").read_text())
    except (OSError, ValueError):
        return 64


def level_working_sets(facts: dict, threads: int) -> dict[str, int]:
    """Bytes per thread that sit in each level: half a private cache, half of an even share
    of the L3, and (memory) four times the L3 split between the threads (at least 64 MiB)."""
    l1 = facts["l1d_bytes"] or 32 * 1024
    l2 = facts["l2_bytes"] or 512 * 1024
    l3 = facts["l3_bytes"] or 8 * 1024**2
    return {
        "l1": l1 // 2,
        "l2": max(l2 // 2, 2 * l1),
        "l3": max(l3 // (2 * threads), 2 * l2),
        "memory": max(4 * l3, 64 * 1024**2) // threads,
    }


def measure_probes(facts: dict, cc: str, cache_dir: Path, thread_counts: list[int], quick: bool) -> dict:
    """The schema-2 fields: per-level streams, FMA, exp/log/divide, overheads, clock."""
    from weft.cost.probes import Probes

    lanes = max(1, facts["vector_bits"] // 32)
    try:
        probes = Probes.build(lanes, cc, cache_dir)
    except Exception as error:  # a machine without a working compiler keeps the schema-1 numbers
        warnings.warn(f"machine profile: probes not built ({error}); the cycle model uses copy bandwidth only",
                      stacklevel=2)
        return {}
    probes.tries = 3 if quick else 5
    target = 6e6 if quick else 16e6
    streams, concurrent = [], True
    for threads in thread_counts:
        sizes = level_working_sets(facts, threads)
        for level in LEVELS:
            for kind in STREAM_KINDS:
                floats = sizes[level] // 4 // (2 if kind == "copy" else 1)
                rate, together = probes.stream(kind, floats, threads, target * (2 if level == "memory" else 1))
                concurrent &= together
                streams.append((level, kind, threads, float(rate)))
    cores = max(thread_counts)
    return {
        "line_bytes": line_bytes(),
        "page_bytes": os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096,
        "clock_hz": probes.clock_hz(),
        "stream_bytes_per_s": tuple(streams),
        "stream_concurrent": concurrent,
        "fma_flops_per_core": probes.fma_flops(cores, lanes),
        "unary_vectors_per_s": tuple((kind, probes.unary_vectors(code, lanes)) for code, kind in enumerate(UNARY_KINDS)),
        "parallel_region_s": probes.parallel_region_s(cores),
        "runner_call_s": probes.call_s(),
        "first_touch_s_per_page": probes.first_touch_s(os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096),
        "probes_digest": probes_digest(lanes),
    }


def probes_digest(lanes: int) -> str:
    """A digest of what the probes time at ``lanes``: Weft's math (``wf_exp``, ``wf_log``) and
    the probe loops (not the rest of the prelude, whose helpers they do not time)."""
    from weft.cost.probes import timed_source

    return hashlib.sha256(timed_source(lanes).encode()).hexdigest()[:16]


def calibrate(cc: str = "cc", workdir: Path | None = None, quick: bool = False) -> MachineProfile:
    """Measure this machine (a few seconds; ``quick`` uses smaller sizes for tests)."""
    facts = hardware_facts()
    cpus = facts["logical_cpus"]
    thread_counts = sorted({1, cpus})
    copy_bytes = (16 if quick else 64) * 1024**2
    repeats = 3
    numpy_rate = measure_numpy_copy(copy_bytes, repeats)
    c_rates = measure_c_copy(copy_bytes, repeats, thread_counts, cc, workdir or Path(tempfile.gettempdir()))
    gemm_sizes = (512,) if quick else (1024,)
    gemm_rates: dict[int, float] = {}
    for size in gemm_sizes:  # the best of the sizes: larger ones amortise packing, smaller stay in cache
        rates, controlled = measure_gemm(size, thread_counts, 3 if size > 1024 else repeats)
        gemm_rates = {t: max(r, gemm_rates.get(t, 0.0)) for t, r in rates.items()}
    gemm_size = max(gemm_sizes)
    if c_rates:
        bandwidth = tuple(sorted((t, max(r, numpy_rate) if t == 1 else r) for t, r in c_rates.items()))
    else:
        bandwidth = ((1, numpy_rate),)
    return MachineProfile(
        profile_id=profile_id(facts),
        cpu_model=facts["cpu_model"],
        cpu_flags=tuple(facts["cpu_flags"]),
        logical_cpus=cpus,
        vector_bits=facts["vector_bits"],
        l1d_bytes=facts["l1d_bytes"],
        l2_bytes=facts["l2_bytes"],
        l3_bytes=facts["l3_bytes"],
        copy_bandwidth_bytes_per_s=bandwidth,
        numpy_copy_bandwidth_bytes_per_s=numpy_rate,
        gemm_flops_per_s=tuple(sorted(gemm_rates.items())),
        gemm_size=gemm_size,
        bandwidth_source="c-loop" if c_rates else "numpy",
        blas_threads_controlled=controlled,
        openblas_env=tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("OPENBLAS"))),
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **measure_probes(facts, cc, Path(workdir).parent if workdir else Path(tempfile.gettempdir()) / "weft-probes",
                         thread_counts, quick),
    )


def profile_path(cache_dir: Path, identifier: str) -> Path:
    return Path(cache_dir) / "machine" / f"profile-{identifier}.json"


def load_profile(path: Path, identifier: str) -> MachineProfile:
    """Parse a stored profile; ValueError if it is corrupted or not this machine's."""
    try:
        profile = MachineProfile.from_json(json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError, KeyError, UnicodeDecodeError) as error:
        raise ValueError(f"does not parse ({error})") from None
    if profile.profile_id != identifier or profile.schema != SCHEMA:
        raise ValueError(f"holds profile {profile.profile_id} schema {profile.schema}, expected {identifier} schema {SCHEMA}")
    if min(rate for _, rate in profile.copy_bandwidth_bytes_per_s + profile.gemm_flops_per_s) <= 0:
        raise ValueError("holds a non-positive rate")
    if profile.probes_digest and profile.probes_digest != probes_digest(profile.lanes):
        raise ValueError("was measured with other probe code (Weft's math or the probes changed)")
    return profile


def save_profile(profile: MachineProfile, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(profile.to_json(), indent=1))


def machine_profile(cache_dir: Path | None = None, recalibrate: bool = False, cc: str = "cc", quick: bool = False) -> MachineProfile:
    """This machine's profile: loaded from the cache, or measured and stored."""
    if cache_dir is None:
        from weft.config import config_from_env

        config = config_from_env()
        cache_dir, cc = config.cache_dir, config.cc
    identifier = profile_id(hardware_facts())
    path = profile_path(Path(cache_dir), identifier)
    if path.exists() and not recalibrate:
        try:
            return load_profile(path, identifier)
        except (ValueError, OSError) as error:
            warnings.warn(f"machine profile {path} is corrupted or stale ({error}); measuring again", stacklevel=2)
    if not recalibrate:  # the first priced compile on a machine waits for this: say why
        print(f"weft: measuring this machine once for the cost model (about 10 s; kept in {path})",
              file=sys.stderr, flush=True)
    profile = calibrate(cc=cc, workdir=path.parent, quick=quick)
    save_profile(profile, path)
    return profile
