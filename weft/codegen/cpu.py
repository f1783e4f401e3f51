"""What the CPU offers: vector features and the float32 lane width they give."""

from __future__ import annotations

import functools
import platform

# Features that change the code GCC emits for -march=native; they key the cache.
_INTERESTING = ("avx512f", "avx512dq", "avx512bw", "avx512vl", "avx2", "fma", "avx", "sse4_2", "neon", "asimd")


@functools.lru_cache(maxsize=1)
def cpu_info() -> tuple[str, frozenset[str]]:
    """(model name, every feature flag) from /proc/cpuinfo (Linux); ("", {}) where it says nothing."""
    model, flags = "", None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key in ("flags", "Features") and flags is None:
                    flags = frozenset(value.split())
    except OSError:
        pass
    return model, flags or frozenset()


@functools.lru_cache(maxsize=1)
def cpu_features() -> tuple[str, ...]:
    """Vector features from /proc/cpuinfo (Linux), else a guess from the architecture."""
    flags = cpu_info()[1]
    if flags:
        return tuple(name for name in _INTERESTING if name in flags)
    machine = platform.machine().lower()
    return ("neon",) if machine in ("arm64", "aarch64") else ()


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    return cpu_info()[0] or platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def cpu_signature() -> str:
    """The model and every CPU flag: -march=native code is only reused on a CPU that
    offers exactly the same instructions (a shared cache may span machines)."""
    return f"{cpu_model()}|{platform.machine()}|{' '.join(sorted(cpu_info()[1]))}"


def lanes_for(features: tuple[str, ...]) -> int:
    """float32 lanes: 16 with AVX-512, 8 with AVX2, else 4 (SSE, NEON)."""
    if "avx512f" in features:
        return 16
    if "avx2" in features:
        return 8
    return 4
