"""Compiled probes that measure the machine facts the cycle model needs.

One C source (Weft's own prelude, so ``wf_exp``/``wf_log`` are the functions
generated code calls, plus the probe loops below) is built through the one compiler
path, ``weft.codegen.driver.build`` (cached like any kernel). Every probe times
itself inside C (``omp_get_wtime``) so a small working set is not swamped by the
Python call; every number is the best of several short runs, so a busy machine
(another process taking a core for a moment) lowers no rate.

Each probe returns seconds; the caller turns them into rates::

    read/write/copy (buffer of n floats per thread, reps passes) -> bytes/s
    fma (n steps of 12 independent vector FMAs per thread)        -> FLOP/s per core
    unary (exp, log or divide over an L1-resident array)          -> vectors/s
    parallel_region (reps empty parallel regions)                 -> seconds each
    first_touch (fresh anonymous pages, one write each)           -> seconds per page
    clock (dependent integer adds, one per cycle)                 -> cycles/s
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_PROBES = r"""
#include <sys/mman.h>
volatile float wp_sink_f;
volatile long wp_sink_l;

static double wp_now(void) {
#ifdef _OPENMP
    return omp_get_wtime();
#else
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
#endif
}

#define WP_L ((long)(sizeof(wf_vf) / sizeof(float)))

double wp_read(float *buf, long n, long reps, int threads, double *spans) {
    double start = 0, stop = 0;
    #pragma omp parallel num_threads(threads)
    {
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        const float *p = buf + (long)me * n;
        wf_vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
        #pragma omp barrier
        #pragma omp master
        start = wp_now();
        spans[2 * me] = wp_now();
        for (long r = 0; r < reps; r++) {
            for (long i = 0; i < n; i += 8 * WP_L) {
                a0 += wfc_load_f(p + i);            a1 += wfc_load_f(p + i + WP_L);
                a2 += wfc_load_f(p + i + 2 * WP_L); a3 += wfc_load_f(p + i + 3 * WP_L);
                a4 += wfc_load_f(p + i + 4 * WP_L); a5 += wfc_load_f(p + i + 5 * WP_L);
                a6 += wfc_load_f(p + i + 6 * WP_L); a7 += wfc_load_f(p + i + 7 * WP_L);
            }
            __asm__ volatile("" ::: "memory");
        }
        spans[2 * me + 1] = wp_now();
        #pragma omp barrier
        #pragma omp master
        stop = wp_now();
        wf_vf total = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
        wp_sink_f = total[0];
    }
    return stop - start;
}

double wp_write(float *buf, long n, long reps, int threads, double *spans) {
    double start = 0, stop = 0;
    #pragma omp parallel num_threads(threads)
    {
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        float *p = buf + (long)me * n;
        wf_vf v = wfc_splat_f(1.0f);
        #pragma omp barrier
        #pragma omp master
        start = wp_now();
        spans[2 * me] = wp_now();
        for (long r = 0; r < reps; r++) {
            for (long i = 0; i < n; i += WP_L) wfc_store_f(p + i, v);
            __asm__ volatile("" ::: "memory");
        }
        spans[2 * me + 1] = wp_now();
        #pragma omp barrier
        #pragma omp master
        stop = wp_now();
    }
    return stop - start;
}

double wp_copy(float *dst, float *src, long n, long reps, int threads, double *spans) {
    double start = 0, stop = 0;
    #pragma omp parallel num_threads(threads)
    {
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        float *d = dst + (long)me * n;
        const float *s = src + (long)me * n;
        #pragma omp barrier
        #pragma omp master
        start = wp_now();
        spans[2 * me] = wp_now();
        for (long r = 0; r < reps; r++) {
            for (long i = 0; i < n; i += WP_L) wfc_store_f(d + i, wfc_load_f(s + i));
            __asm__ volatile("" ::: "memory");
        }
        spans[2 * me + 1] = wp_now();
        #pragma omp barrier
        #pragma omp master
        stop = wp_now();
    }
    return stop - start;
}

double wp_fma(long steps, int threads, double *spans) {
    double start = 0, stop = 0;
    #pragma omp parallel num_threads(threads)
    {
        wf_vf acc[12];
        for (int k = 0; k < 12; k++) acc[k] = wfc_splat_f(0.001f * k);
        wf_vf a = wfc_splat_f(0.999f), b = wfc_splat_f(0.001f);
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        #pragma omp barrier
        #pragma omp master
        start = wp_now();
        spans[2 * me] = wp_now();
        for (long s = 0; s < steps; s++) {
            for (int k = 0; k < 12; k++) acc[k] = acc[k] * a + b;
        }
        spans[2 * me + 1] = wp_now();
        #pragma omp barrier
        #pragma omp master
        stop = wp_now();
        wf_vf total = acc[0];
        for (int k = 1; k < 12; k++) total += acc[k];
        wp_sink_f = total[0];
    }
    return stop - start;
}

/* kind 0: exp, 1: log, 2: divide; n floats (a multiple of the lanes), reps passes */
double wp_unary(float *in, float *out, long n, long reps, int kind) {
    double start = wp_now();
    wf_vf d = wfc_splat_f(1.0001f);
    for (long r = 0; r < reps; r++) {
        if (kind == 0) for (long i = 0; i < n; i += WP_L) wfc_store_f(out + i, wf_exp(wfc_load_f(in + i)));
        else if (kind == 1) for (long i = 0; i < n; i += WP_L) wfc_store_f(out + i, wf_log(wfc_load_f(in + i)));
        else for (long i = 0; i < n; i += WP_L) wfc_store_f(out + i, wfc_load_f(in + i) / d);
        __asm__ volatile("" ::: "memory");
    }
    return wp_now() - start;
}

double wp_parallel_region(long reps, int threads) {
    double start = wp_now();
    for (long r = 0; r < reps; r++) {
        #pragma omp parallel num_threads(threads)
        { __asm__ volatile("" ::: "memory"); }
    }
    return wp_now() - start;
}

double wp_first_touch(long bytes, long page) {
    char *p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1.0;
    double start = wp_now();
    for (long i = 0; i < bytes; i += page) p[i] = 1;
    double seconds = wp_now() - start;
    munmap(p, bytes);
    return seconds;
}

double wp_clock(long n) {
    /* register + register adds: a core that folds an add of an immediate at rename (Intel's
       Golden Cove and later) ran "add $1" chains faster than one a cycle (9 GHz read) */
    long x = 0;
    volatile long step_source = 1;
    long step = step_source;
    double start = wp_now();
    for (long i = 0; i < n; i++) {
#if defined(__x86_64__)
        __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
                         "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0" : "+r"(x) : "r"(step));
#elif defined(__aarch64__)
        __asm__ volatile("add %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\t"
                         "add %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1" : "+r"(x));
#else
        x += 8; __asm__ volatile("" : "+r"(x));
#endif
    }
    wp_sink_l = x;
    return wp_now() - start;
}

void wp_nop(void *a, void *b, void *c, int threads) { (void)a; (void)b; (void)c; (void)threads; }
"""


def probe_source(lanes: int) -> str:
    from weft.codegen.prelude import prelude

    return prelude(lanes) + _PROBES


def timed_source(lanes: int) -> str:
    """The C whose speed the probes measure: Weft's math at ``lanes`` and the probe loops."""
    from weft.codegen.prelude import math_source

    return math_source(lanes) + _PROBES


@dataclass
class Probes:
    """The loaded probe library; every method returns the best of ``tries`` runs."""

    library: ctypes.CDLL
    tries: int = 5

    @staticmethod
    def build(lanes: int, cc: str, cache_dir: Path) -> Probes:
        from weft.codegen.driver import build

        artifact = build(probe_source(lanes), cc, Path(cache_dir), "inference")
        library = ctypes.CDLL(str(artifact.so_path))
        double, long_, int_, pointer = ctypes.c_double, ctypes.c_long, ctypes.c_int, ctypes.c_void_p
        signatures = {
            "wp_read": [pointer, long_, long_, int_, pointer], "wp_write": [pointer, long_, long_, int_, pointer],
            "wp_copy": [pointer, pointer, long_, long_, int_, pointer], "wp_fma": [long_, int_, pointer],
            "wp_unary": [pointer, pointer, long_, long_, int_], "wp_parallel_region": [long_, int_],
            "wp_first_touch": [long_, long_], "wp_clock": [long_],
        }
        for name, argtypes in signatures.items():
            function = getattr(library, name)
            function.argtypes, function.restype = argtypes, double
        library.wp_nop.argtypes = [pointer, pointer, pointer, int_]
        library.wp_nop.restype = None
        return Probes(library)

    def best(self, run: Callable[[], float]) -> float:
        return min(run() for _ in range(self.tries))

    def stream(self, kind: str, floats_per_thread: int, threads: int, target_bytes: float = 24e6) -> tuple[float, bool]:
        """(bytes/s, concurrent) of ``kind`` (read, write, copy; a copy counts read + written
        bytes) over a per-thread buffer of ``floats_per_thread`` floats, repeated to move about
        ``target_bytes``.

        Each thread times its own loop. A run counts as concurrent when every thread's loop
        overlaps the others' for 80% of its time; on a loaded machine a thread may wait a
        whole scheduler slice for a core, so non-concurrent runs are retried, and if none is
        concurrent the rate is the sum of the threads' own rates (flagged ``False``)."""
        n = max(256, floats_per_thread // 256 * 256)
        per_thread = 4 * n * (2 if kind == "copy" else 1)
        reps = max(1, int(target_bytes // (per_thread * threads)))
        first = np.ones(n * threads, dtype=np.float32)
        second = np.ones(n * threads, dtype=np.float32)
        spans = np.zeros(2 * threads)
        lib = self.library
        if kind == "read":
            run = lambda: lib.wp_read(first.ctypes.data, n, reps, threads, spans.ctypes.data)  # noqa: E731
        elif kind == "write":
            run = lambda: lib.wp_write(first.ctypes.data, n, reps, threads, spans.ctypes.data)  # noqa: E731
        else:
            run = lambda: lib.wp_copy(first.ctypes.data, second.ctypes.data, n, reps, threads, spans.ctypes.data)  # noqa: E731
        run()  # warm: pages touched, lines in the cache level under test
        concurrent_rates, own_rates = [], []
        for _attempt in range(self.tries * (3 if threads > 1 else 1)):
            run()
            starts, stops = spans[0::2], spans[1::2]
            durations = stops - starts
            overlap = stops.min() - starts.max()
            own_rates.append(float(sum(per_thread * reps / max(d, 1e-9) for d in durations)))
            if overlap >= 0.8 * durations.max():
                concurrent_rates.append(per_thread * reps * threads / max(stops.max() - starts.min(), 1e-9))
            if len(concurrent_rates) >= self.tries:
                break
        if concurrent_rates:
            return max(concurrent_rates), True
        return max(own_rates), False

    def fma_flops(self, threads: int, lanes: int, steps: int = 100_000) -> float:
        """FLOP/s of one core while ``threads`` cores run the same FMA loop (each thread times
        itself; runs where the threads did not overlap, on a loaded machine, are retried and,
        failing that, the slowest thread's own rate is taken)."""
        spans = np.zeros(2 * threads)
        self.library.wp_fma(steps // 10, threads, spans.ctypes.data)
        together, alone = [], []
        for _ in range(self.tries * (3 if threads > 1 else 1)):
            self.library.wp_fma(steps, threads, spans.ctypes.data)
            starts, stops = spans[0::2], spans[1::2]
            slowest = float((stops - starts).max())
            alone.append(slowest)
            if stops.min() - starts.max() >= 0.8 * slowest:
                together.append(slowest)
            if len(together) >= self.tries:
                break
        return 2.0 * 12 * lanes * steps / min(together or alone)

    def unary_vectors(self, kind: int, lanes: int, floats: int = 4096, reps: int = 200) -> float:
        """Vectors/s of exp (0), log (1) or divide (2) over an L1-resident array."""
        source = np.linspace(0.5, 2.0, floats, dtype=np.float32)
        target = np.empty_like(source)
        run = lambda: self.library.wp_unary(source.ctypes.data, target.ctypes.data, floats, reps, kind)  # noqa: E731
        run()
        return floats / lanes * reps / self.best(run)

    def parallel_region_s(self, threads: int, reps: int = 2000) -> float:
        self.library.wp_parallel_region(10, threads)
        return self.best(lambda: self.library.wp_parallel_region(reps, threads)) / reps

    def first_touch_s(self, page: int, pages: int = 4096) -> float:
        seconds = self.best(lambda: self.library.wp_first_touch(page * pages, page))
        return max(seconds, 0.0) / pages

    def clock_hz(self, n: int = 200_000, tries: int = 25) -> float:
        """Cycles/s: short runs (under a millisecond) and many of them, so that on a loaded
        machine at least one runs without losing its core."""
        return 8.0 * n / min(self.library.wp_clock(n) for _ in range(tries))

    def call_s(self, calls: int = 20000) -> float:
        """Seconds of one ctypes call into C (the runner's per-step entry cost)."""
        nop = self.library.wp_nop

        def run() -> float:
            start = time.perf_counter()
            for _ in range(calls):
                nop(None, None, None, 1)
            return time.perf_counter() - start

        return self.best(run) / calls
