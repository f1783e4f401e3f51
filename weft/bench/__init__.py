"""Measuring: interleaved arms, an A/A control, parity, verdicts, provenance.

    from weft.bench import BenchOptions, run_bench, recompute
    result = run_bench("attention", BenchOptions(arms="unfused,torch-sdpa"), machine_profile())
    result = run(my_fn, {"x": x, "w": w}, arms="unfused,inference")   # your own function

``run`` (a function) shadows the submodule ``weft.bench.run`` as an attribute;
``from weft.bench.run import ...`` still reaches the module.

The method is docs/benchmarking.md; ``weft bench --help`` lists the arms.
"""

from weft.bench.arms import ArmSpec, ArmUnavailable, BenchError, parse_arm, parse_arms
from weft.bench.result import load_result, recompute, save_result
from weft.bench.run import BenchOptions, run_bench
from weft.bench.verdict import Block, Verdict, compare, decide, judge_all

__all__ = [
    "ArmSpec", "ArmUnavailable", "BenchError", "BenchOptions", "Block", "Verdict", "compare", "decide",
    "judge_all", "load_result", "parse_arm", "parse_arms", "recompute", "run", "run_bench", "save_result",
]

# after the submodule weft.bench.run is loaded, so the function owns the attribute ``run``
from weft.bench.program import run  # noqa: E402
