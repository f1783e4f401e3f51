"""``threads=`` governs every pool a compiled call drives: OpenMP and BLAS.

A behavioural check, not a speed assertion: over a GEMM run at ``threads=1`` (through
SciPy's BLAS, and through the default contraction microkernel's OpenMP loop) one thread
of the process does the work and its CPU time stays close to the wall time (one core
busy). Without the BLAS limit SciPy's OpenBLAS runs its own pool on every core; at
``threads=2`` the same measurement sees two busy threads, so it can tell.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import weft
from weft import nn

pytest.importorskip("threadpoolctl")
pytest.importorskip("scipy")


def thread_cpu_seconds() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as stream:
                fields = stream.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended
        seconds[int(task)] = (int(fields[11]) + int(fields[12])) / ticks
    return seconds


def gemm_plan(n: int):
    return weft.trace(lambda a, b: nn.matmul(a, b), weft.spec((n, n)), weft.spec((n, n)))


def busy_threads_and_cores(compiled, *arrays) -> tuple[list[int], float, dict]:
    """Run ``compiled`` for about a second: (this process's threads that each used over 20% of
    the busiest one's CPU time, process CPU time over wall time, CPU seconds per thread)."""
    compiled(*arrays)  # warm: pages, pools
    threads_before = thread_cpu_seconds()
    wall, cpu = time.perf_counter(), time.process_time()
    calls = 0
    while time.perf_counter() - wall < 1.0 or calls < 5:
        compiled(*arrays)
        calls += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    threads_after = thread_cpu_seconds()
    # per thread: on a loaded machine a second pool thread shares the cores with everyone
    # else, so the process total can stay near one core; the threads that ran show it
    spent = {tid: threads_after[tid] - threads_before.get(tid, 0.0) for tid in threads_after}
    busiest = max(spent.values())
    return [tid for tid, seconds in spent.items() if seconds > 0.2 * busiest], cpu / wall, spent


needs_two_cores = pytest.mark.skipif(
    (os.cpu_count() or 1) < 2 or not os.path.isdir("/proc/self/task"),
    reason="needs two cores and Linux's /proc to tell one busy core from several")


@needs_two_cores
@pytest.mark.parametrize("blas", [True, False], ids=["blas", "microkernel-openmp"])
def test_threads_1_keeps_one_core_busy(blas):
    """SciPy's OpenBLAS pool (blas=True) and the generated code's OpenMP pool (the default
    contraction microkernel, a parallel loop) each run on one thread at ``threads=1``."""
    n = 768
    compiled = weft.compile(gemm_plan(n), contract="inference", threads=1, blas=blas)
    assert compiled.provenance["blas"] is blas
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    busy, cores, spent = busy_threads_and_cores(compiled, a, b)
    assert len(busy) == 1, f"threads=1: {len(busy)} threads each used over 20% of the busiest's CPU time: {spent}"
    # one busy core gives cpu/wall <= 1 (less when other work preempts us); a pool on two
    # cores gives close to 2. The margin is generous for a shared, noisy machine.
    assert cores < 1.4, f"threads=1 used {cores:.2f} cores"


@needs_two_cores
def test_the_busy_thread_count_sees_a_second_thread():
    """The measurement above can fail: at ``threads=2`` it sees two busy threads."""
    n = 768
    compiled = weft.compile(gemm_plan(n), contract="inference", threads=2)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    busy, _, spent = busy_threads_and_cores(compiled, a, b)
    assert len(busy) == 2, f"threads=2: {len(busy)} busy threads: {spent}"


def test_the_blas_pool_is_limited_only_during_the_call_and_recorded():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    compiled = weft.compile(gemm_plan(64), contract="inference", threads=1, blas=True)
    before = blas_threads()
    a = np.ones((64, 64), np.float32)
    np.testing.assert_allclose(compiled(a, a), np.full((64, 64), 64.0))
    assert blas_threads() == before  # restored after the call
    pools = compiled.provenance["thread_pools"]
    assert pools["openmp_threads"] == 1 and pools["blas_threads"] == 1
    assert any(library["internal_api"] == "openblas" for library in pools["blas_libraries"])


def test_a_plan_without_blas_records_no_blas_limit():
    compiled = weft.compile(gemm_plan(16), contract="strict", threads=2)
    pools = compiled.provenance["thread_pools"]
    assert pools["openmp_threads"] == 2 and pools["blas_threads"] is None
