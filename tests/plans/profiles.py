"""A fixed machine profile (round numbers) for tests whose outcome must not depend on the
profile calibrated on the machine at hand: the cycle model's hand-computable cases, and
reports that compare work against the ridge point."""

from __future__ import annotations

from weft.cost.machine import LEVELS, MachineProfile

GB = 1e9

# read / write bytes/s per level (one thread; two threads twice that), chosen round
READ = {"l1": 256 * GB, "l2": 128 * GB, "l3": 64 * GB, "memory": 32 * GB}
WRITE = {"l1": 128 * GB, "l2": 64 * GB, "l3": 32 * GB, "memory": 16 * GB}


def fixed_profile() -> MachineProfile:
    streams = []
    for threads in (1, 2):
        for level in LEVELS:
            streams += [(level, "read", threads, READ[level] * threads), (level, "write", threads, WRITE[level] * threads),
                        (level, "copy", threads, READ[level] * threads)]
    return MachineProfile(
        profile_id="fixed", cpu_model="test", cpu_flags=("avx512f",), logical_cpus=2, vector_bits=512,
        l1d_bytes=48 * 1024, l2_bytes=1024 * 1024, l3_bytes=32 * 1024 * 1024,
        copy_bandwidth_bytes_per_s=((1, 32 * GB),), numpy_copy_bandwidth_bytes_per_s=32 * GB,
        gemm_flops_per_s=((1, 100 * GB), (2, 200 * GB)), gemm_size=1024, bandwidth_source="c-loop",
        blas_threads_controlled=True, openblas_env=(), measured_at="now",
        line_bytes=64, clock_hz=4e9, stream_bytes_per_s=tuple(streams), fma_flops_per_core=256 * GB,
        unary_vectors_per_s=(("exp", 4e9 / 15), ("log", 4e9 / 20), ("divide", 4e9 / 2.5)),
        parallel_region_s=1e-6, runner_call_s=1e-6, first_touch_s_per_page=1e-6,
    )


def seed_profile(cache_dir) -> str:
    """Save the fixed profile under this machine's profile id in ``cache_dir``: a compile
    there prices with round numbers and never calibrates."""
    import dataclasses
    from pathlib import Path

    from weft.cost.machine import hardware_facts, profile_id, profile_path, save_profile

    identifier = profile_id(hardware_facts())
    save_profile(dataclasses.replace(fixed_profile(), profile_id=identifier), profile_path(Path(cache_dir), identifier))
    return identifier
