"""``weft machine``: print this machine's calibrated profile (``--calibrate`` measures again).

    weft machine
    weft machine --calibrate --json
"""

from __future__ import annotations

import argparse
import json

from weft.cost.machine import LEVELS, STREAM_KINDS, MachineProfile, machine_profile


def format_profile(profile: MachineProfile) -> str:
    giga = 1e9
    lines = [
        f"machine profile {profile.profile_id} (schema {profile.schema}, measured {profile.measured_at})",
        f"  cpu: {profile.cpu_model}; {profile.cores} cores; {profile.vector_bits}-bit vectors ({profile.lanes} float32 lanes)",
        f"  caches: L1d {profile.l1d_bytes // 1024} KiB, L2 {profile.l2_bytes // 1024} KiB (per core),"
        f" L3 {profile.l3_bytes // 1024**2} MiB; line {profile.line_bytes} B; page {profile.page_bytes} B",
        f"  clock: {profile.clock_hz / giga:.2f} GHz (dependent adds)",
    ]
    threads = sorted({t for _, _, t, _ in profile.stream_bytes_per_s})
    if threads:
        lines.append("  bandwidth GB/s (read / write / copy, copy counts both directions):")
        for count in threads:
            for level in LEVELS:
                rates = [profile.level_bandwidth(level, kind, count) / giga for kind in STREAM_KINDS]
                lines.append(f"    {level:6s} {count} thread{'s' if count > 1 else ' '}: "
                             + " / ".join(f"{rate:7.1f}" for rate in rates))
        if not profile.stream_concurrent:
            lines.append("    (some multi-thread streams never ran on every core at once: the machine was loaded)")
    lines.append(f"  FMA peak: {profile.fma_flops_per_core / giga:.1f} GFLOP/s per core with every core busy")
    for kind, rate in profile.unary_vectors_per_s:
        cycles = profile.clock_hz / rate if rate and profile.clock_hz else float("nan")
        lines.append(f"  {kind}: {rate / 1e6:.0f} M vectors/s ({cycles:.1f} cycles per vector)")
    lines.append(f"  parallel region: {profile.parallel_region_s * 1e6:.2f} us; runner call: {profile.runner_call_s * 1e6:.2f} us;"
                 f" first touch: {profile.first_touch_s_per_page * 1e6:.2f} us per page")
    lines.append("  GEMM (NumPy BLAS) GFLOP/s: " + ", ".join(f"{t} thr {r / giga:.0f}" for t, r in profile.gemm_flops_per_s))
    return "\n".join(lines)


def run_machine(args: argparse.Namespace) -> int:
    profile = machine_profile(recalibrate=args.calibrate)
    if args.calibrate:  # the other one-time cost per machine: the headers every unit starts from
        from weft.codegen.driver import prepare_headers
        from weft.config import config_from_env

        config = config_from_env()
        prepare_headers(config.cc, config.cache_dir)
    print(json.dumps(profile.to_json(), indent=1) if args.json else format_profile(profile))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("machine", help="print the calibrated machine profile the cost model prices with")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure again (a few seconds) and store the result; also build the precompiled headers")
    parser.add_argument("--json", action="store_true", help="print the stored JSON")
    parser.set_defaults(handler=run_machine)
