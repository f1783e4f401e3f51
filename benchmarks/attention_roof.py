"""The attention roof of issue 10 beside a ``weft bench attention`` result.

The roof of one attention call (B x H heads, T queries and keys, head dim D) on this
machine, from its calibrated profile (``weft machine``)::

    roof = 4 * B * H * T^2 * D / FMA peak(threads)          (q kᵀ and p v, one FMA = 2 FLOP)
         + B * H * T^2 / lanes / exp rate(threads)          (one exp per score, in vectors)

The FMA peak is ``MachineProfile.fma_peak`` (per core with every core busy, times the
threads); the exp rate is the measured vectors/s of one core, times the threads. The bench's
own "floor" column divides every member's FLOPs by the NumPy GEMM rate instead, so it is a
different number; this script reports both, and each arm's ratio to ``torch-sdpa``.

    weft bench attention --arms greedy+inference,priced+inference,torch-sdpa \\
        --set heads=16 --set tokens=5184 --set head_dim=64 --threads 2 --out result.json
    python benchmarks/attention_roof.py result.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from weft.config import config_from_env
from weft.cost.machine import machine_profile


def attention_roof(batch: int, heads: int, tokens: int, head_dim: int, threads: int, profile) -> dict:
    """Seconds of the roof and its two parts (module doc)."""
    scores = batch * heads * tokens * tokens
    fma_s = 4.0 * scores * head_dim / profile.fma_peak(threads)
    exp_rate = profile.unary_rate("exp") * max(1, min(threads, profile.cores))
    exp_s = scores / profile.lanes / exp_rate if exp_rate > 0 else 0.0
    return {"roof_s": fma_s + exp_s, "fma_s": fma_s, "exp_s": exp_s,
            "fma_peak_flops_per_s": profile.fma_peak(threads), "exp_vectors_per_s": exp_rate}


def report(result: dict, profile) -> dict:
    params, threads = result["params"], result["settings"]["threads"]
    roof = attention_roof(params["batch"], params["heads"], params["tokens"], params["head_dim"], threads, profile)
    arms = result["in_process"]["roofline"]["arms"]
    sdpa = arms.get("torch-sdpa", {}).get("median_s")
    rows = {}
    for label, arm in arms.items():
        median = arm["median_s"]
        rows[label] = {"median_s": median, "of_roof": roof["roof_s"] / median,
                       "sdpa_over_arm": (sdpa / median) if sdpa else None,
                       "bench_floor_fraction": arm["fraction_of_floor"]}
    return {"params": params, "threads": threads, "roof": roof, "arms": rows,
            "profile_id": profile.profile_id}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, help="a weft bench attention result (--out FILE.json)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    result = json.loads(args.result.read_text())
    if result.get("workload") != "attention":
        print(f"{args.result}: not an attention result (workload {result.get('workload')!r})", file=sys.stderr)
        return 2
    profile = machine_profile(config_from_env().cache_dir)
    out = report(result, profile)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    roof = out["roof"]
    print(f"attention {out['params']} at {out['threads']} thread(s), profile {out['profile_id']}")
    print(f"roof {roof['roof_s'] * 1e3:.2f} ms = FMA {roof['fma_s'] * 1e3:.2f} ms "
          f"(peak {roof['fma_peak_flops_per_s'] / 1e9:.0f} GFLOP/s) + exp {roof['exp_s'] * 1e3:.2f} ms "
          f"({roof['exp_vectors_per_s'] / 1e6:.0f} M vectors/s)")
    for label, row in out["arms"].items():
        sdpa = f"{row['sdpa_over_arm']:.2f}x" if row["sdpa_over_arm"] else "-"
        print(f"  {label:28s} median {row['median_s'] * 1e3:9.2f} ms  of roof {row['of_roof']:6.1%}  "
              f"SDPA time / this {sdpa:>6s}  (bench floor column {row['bench_floor_fraction']:.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
