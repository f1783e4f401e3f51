"""Every thread pool a compiled call drives follows ``threads=``, for that call only.

- OpenMP: the generated runner sets its own thread count on every call
  (``omp_set_num_threads`` in ``weft/codegen/runner.py``).
- BLAS: SciPy's OpenBLAS (the Inference library body for plain GEMM) keeps its own
  pthreads pool, sized to every core. ``BlasThreads`` sets each BLAS library
  ``threadpoolctl`` finds to ``threads`` on entry and restores its count on exit, so
  a ``threads=1`` plan keeps one core busy and a peer in the same process (PyTorch)
  is not oversubscribed, and nothing outside the call changes.
"""

from __future__ import annotations

import functools


@functools.cache
def _blas_libraries() -> tuple:
    """threadpoolctl's controllers of the BLAS libraries loaded now (found once: Weft
    calls BLAS only after importing SciPy's, so later loads are not ours to drive)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return ()
    return tuple(library for library in ThreadpoolController().lib_controllers if library.user_api == "blas")


def blas_libraries_info() -> list[dict]:
    """What provenance records of each BLAS library: API, prefix, version, threading layer."""
    keys = ("internal_api", "prefix", "version", "threading_layer")
    return [{key: library.info().get(key) for key in keys} for library in _blas_libraries()]


class BlasThreads:
    """``with BlasThreads(n):`` every BLAS pool runs at most ``n`` threads inside, as before after."""

    __slots__ = ("threads", "saved")

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.saved: list[tuple[object, int]] = []

    def __enter__(self) -> BlasThreads:
        for library in _blas_libraries():
            current = library.get_num_threads()
            if current != self.threads:
                library.set_num_threads(self.threads)
                self.saved.append((library, current))
        return self

    def __exit__(self, *exc: object) -> None:
        for library, count in self.saved:
            library.set_num_threads(count)
        self.saved = []


def thread_pools_record(threads: int, uses_blas: bool) -> dict:
    """Provenance: the thread count each pool a call drives runs at."""
    return {
        "openmp_threads": threads,
        "blas_threads": threads if uses_blas else None,
        "blas_libraries": blas_libraries_info() if uses_blas else [],
        "limited_by": "threadpoolctl, for the duration of each call" if uses_blas else None,
    }


__all__ = ["BlasThreads", "blas_libraries_info", "thread_pools_record"]
