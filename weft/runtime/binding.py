"""The ctypes binding of a compiled plan's runner.

One ``NativeRunner`` per loaded shared object: it owns the arena (64-byte
aligned), hands SciPy's BLAS sgemm to the library once, and calls ``wf_run`` or
``wf_run_profile`` with arrays of data pointers. ctypes drops the GIL for the
call; a lock keeps two Python threads from sharing the arena at once.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from weft.errors import CompileError
from weft.runtime.memory import PAGE, SKEW_MIN_BYTES

_POINTERS = ctypes.POINTER(ctypes.c_void_p)
# The process whose compiled plans first ran OpenMP threads (process state, like libgomp's own).
_THREADS_STARTED_IN: int | None = None


@functools.lru_cache(maxsize=1)
def scipy_sgemm_pointer() -> int | None:
    """Address of SciPy's BLAS ``sgemm`` (scipy.linalg.cython_blas), or None without SciPy."""
    try:
        from scipy.linalg import cython_blas
    except ImportError:
        return None
    capsule = cython_blas.__pyx_capi__["sgemm"]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


def pointer_array(arrays: Sequence[np.ndarray]):
    return (ctypes.c_void_p * max(len(arrays), 1))(*[array.ctypes.data for array in arrays])


class NativeRunner:
    """Calls into one compiled plan; holds its arena."""

    def __init__(self, so_path: Path, arena_bytes: int, functions: int, entry_prefix: str = "wf_") -> None:
        """``entry_prefix``: the runner's symbols are ``{entry_prefix}run`` and
        ``{entry_prefix}run_profile`` (a batched source holds several runners)."""
        try:
            self.library = ctypes.CDLL(str(so_path))
        except OSError as error:
            raise CompileError(
                f"compiled plan {so_path} cannot be loaded ({error}); if it names libgomp or libomp, install"
                " the OpenMP runtime (Debian/Ubuntu: apt-get install libgomp1)",
                command=(), stderr=str(error), source_path=str(so_path.with_suffix(".c")),
            ) from None
        self.functions = functions
        self.entry_prefix = entry_prefix
        self.run_fn = getattr(self.library, f"{entry_prefix}run")
        self.run_fn.restype = ctypes.c_int
        self.run_fn.argtypes = [_POINTERS, _POINTERS, ctypes.c_void_p, ctypes.c_int]
        self.profile_fn = getattr(self.library, f"{entry_prefix}run_profile")
        self.profile_fn.restype = ctypes.c_int
        self.profile_fn.argtypes = [_POINTERS, _POINTERS, ctypes.c_void_p, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_double)]
        sgemm = scipy_sgemm_pointer()
        set_sgemm = self.library.wf_set_sgemm
        set_sgemm.argtypes = [ctypes.c_void_p]
        set_sgemm(sgemm)
        # a large arena starts on a page: its intermediates then sit at the page offsets the
        # plan laid out (weft.runtime.memory), not 48 bytes above NumPy's +16 for every input
        align = PAGE if arena_bytes >= SKEW_MIN_BYTES else 64
        storage = np.empty(arena_bytes + align, dtype=np.uint8)
        offset = (-storage.ctypes.data) % align
        self._arena_storage = storage
        self.arena = storage[offset:offset + arena_bytes]
        self.arena_address = storage.ctypes.data + offset
        self.lock = threading.Lock()
        self.warned_fork = False

    def threads_here(self, threads: int) -> int:
        """``threads``, or 1 in a process forked after OpenMP threads started in its
        parent: libgomp's thread pool does not survive fork (a parallel region would hang)."""
        global _THREADS_STARTED_IN
        if threads <= 1:
            return threads
        if _THREADS_STARTED_IN is None:
            _THREADS_STARTED_IN = os.getpid()
        if os.getpid() == _THREADS_STARTED_IN:
            return threads
        if not self.warned_fork:
            self.warned_fork = True
            warnings.warn(
                "weft: this process was forked after OpenMP started; compiled plans run single-threaded"
                " here (start workers with multiprocessing 'spawn' or 'forkserver' for threads)",
                RuntimeWarning, stacklevel=3,
            )
        return 1

    def run(self, inputs, outputs, threads: int) -> int:
        """``inputs``/``outputs``: ctypes pointer arrays (see ``pointer_array``)."""
        threads = self.threads_here(threads)
        with self.lock:
            return self.run_fn(inputs, outputs, self.arena_address, threads)

    def prepack(self, inputs, threads: int) -> None:
        """Fill the arena's packed weights (``wf_prepack``) from the bound inputs, once."""
        prepack = getattr(self.library, f"{self.entry_prefix}prepack")
        prepack.restype, prepack.argtypes = ctypes.c_int, [_POINTERS, ctypes.c_void_p, ctypes.c_int]
        with self.lock:
            prepack(inputs, self.arena_address, self.threads_here(threads))

    def run_profile(self, inputs, outputs, threads: int, repeats: int) -> tuple[int, list[float]]:
        threads = self.threads_here(threads)
        seconds = (ctypes.c_double * max(self.functions, 1))()
        with self.lock:
            for _ in range(repeats):
                status = self.profile_fn(inputs, outputs, self.arena_address, threads, seconds)
                if status:
                    return status, []
        return 0, [seconds[i] / repeats for i in range(self.functions)]
