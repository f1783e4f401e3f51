"""The attention roof of issue 10 beside a ``weft bench attention`` result.

The roof of one attention call (B x H heads, T queries and keys, head dim D) on this
machine, from its calibrated profile (``weft machine``)::

    roof = 4 * B * H * T^2 * D / FMA peak(threads)          (q kᵀ and p v, one FMA = 2 FLOP)
         + B * H * T^2 / lanes / exp rate(threads)          (one exp per score, in vectors)

The FMA peak is ``MachineProfile.fma_peak`` (per core with every core busy, times the
threads); the exp rate is the measured vectors/s of one core, times the threads. The bench's
own "floor" column divides every member's FLOPs by the NumPy GEMM rate instead, so it is a
different number; this script reports both, and each arm's ratio to ``torch-sdpa``.

The profile is measured once per machine and kept; the clock of a shared host moves (one
Zen 5 host read 3.97 GHz in one calibration and 4.53 GHz in the next, ten hours apart), and
a stale profile moves the roof with it (attention 5184 x 32 at one thread was "102%" of a
roof from the slow calibration and 87% of one measured beside it). So this script also
measures the FMA peak and the exp rate now, with the profile's own probes
(``weft.cost.probes``, a few seconds; ``--no-live`` skips them), and reports the roof from
both; the live one is the one to quote.

    weft bench attention --arms greedy+inference,priced+inference,torch-sdpa \\
        --set heads=16 --set tokens=5184 --set head_dim=64 --threads 2 --out result.json
    python benchmarks/attention_roof.py result.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
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


@dataclass(frozen=True)
class LiveRates:
    """The two rates of the roof measured now, as the profile measures them (its probes):
    per-core FMA FLOP/s with ``cores`` cores busy, and exp vectors/s of one core."""

    lanes: int
    cores: int
    fma_flops_per_core: float
    exp_vectors_per_s: float

    def fma_peak(self, threads: int) -> float:
        return self.fma_flops_per_core * max(1, min(threads, self.cores))

    def unary_rate(self, kind: str) -> float:
        return self.exp_vectors_per_s if kind == "exp" else 0.0


def live_rates(profile, cc: str, cache_dir: Path) -> LiveRates:
    from weft.cost.machine import UNARY_KINDS
    from weft.cost.probes import Probes

    probes = Probes.build(profile.lanes, cc, cache_dir)
    return LiveRates(profile.lanes, profile.cores, probes.fma_flops(profile.cores, profile.lanes),
                     probes.unary_vectors(UNARY_KINDS.index("exp"), profile.lanes))


def report(result: dict, profile, live: LiveRates | None = None) -> dict:
    params, threads = result["params"], result["settings"]["threads"]
    shape = (params["batch"], params["heads"], params["tokens"], params["head_dim"], threads)
    roof = attention_roof(*shape, profile)
    roof_live = attention_roof(*shape, live) if live else None
    arms = result["in_process"]["roofline"]["arms"]
    sdpa = arms.get("torch-sdpa", {}).get("median_s")
    rows = {}
    for label, arm in arms.items():
        median = arm["median_s"]
        rows[label] = {"median_s": median, "of_roof": roof["roof_s"] / median,
                       "of_live_roof": roof_live["roof_s"] / median if roof_live else None,
                       "sdpa_over_arm": (sdpa / median) if sdpa else None,
                       "bench_floor_fraction": arm["fraction_of_floor"]}
    return {"params": params, "threads": threads, "roof": roof, "live_roof": roof_live, "arms": rows,
            "profile_id": profile.profile_id, "profile_measured_at": profile.measured_at}


def _roof_line(name: str, roof: dict) -> str:
    return (f"{name} {roof['roof_s'] * 1e3:.2f} ms = FMA {roof['fma_s'] * 1e3:.2f} ms "
            f"(peak {roof['fma_peak_flops_per_s'] / 1e9:.0f} GFLOP/s) + exp {roof['exp_s'] * 1e3:.2f} ms "
            f"({roof['exp_vectors_per_s'] / 1e6:.0f} M vectors/s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, help="a weft bench attention result (--out FILE.json)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-live", action="store_true",
                        help="the profile's rates only (do not measure the FMA peak and exp rate now)")
    args = parser.parse_args(argv)
    result = json.loads(args.result.read_text())
    if result.get("workload") != "attention":
        print(f"{args.result}: not an attention result (workload {result.get('workload')!r})", file=sys.stderr)
        return 2
    config = config_from_env()
    profile = machine_profile(config.cache_dir)
    live = None if args.no_live else live_rates(profile, config.cc, config.cache_dir)
    out = report(result, profile, live)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"attention {out['params']} at {out['threads']} thread(s), profile {out['profile_id']} "
          f"(measured {out['profile_measured_at']})")
    print(_roof_line("roof (profile)", out["roof"]))
    if out["live_roof"]:
        print(_roof_line("roof (now)    ", out["live_roof"]))
    for label, row in out["arms"].items():
        sdpa = f"{row['sdpa_over_arm']:.2f}x" if row["sdpa_over_arm"] else "-"
        now = f"  of roof now {row['of_live_roof']:6.1%}" if row["of_live_roof"] else ""
        print(f"  {label:28s} median {row['median_s'] * 1e3:9.2f} ms  of roof {row['of_roof']:6.1%}{now}  "
              f"SDPA time / this {sdpa:>6s}  (bench floor column {row['bench_floor_fraction']:.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
