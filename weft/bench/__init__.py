"""Measuring: interleaved arms, an A/A control, parity, verdicts, provenance.

    from weft.bench import BenchOptions, run_bench, recompute
    result = run_bench("attention", BenchOptions(arms="unfused,torch-sdpa"), machine_profile())

The method is BENCHMARKING.md; ``weft bench --help`` lists the arms.
"""

from weft.bench.arms import ArmSpec, ArmUnavailable, BenchError, parse_arm, parse_arms
from weft.bench.result import load_result, recompute, save_result
from weft.bench.run import BenchOptions, run_bench
from weft.bench.verdict import Block, Verdict, compare, decide, judge_all

__all__ = [
    "ArmSpec", "ArmUnavailable", "BenchError", "BenchOptions", "Block", "Verdict", "compare", "decide",
    "judge_all", "load_result", "parse_arm", "parse_arms", "recompute", "run_bench", "save_result",
]
