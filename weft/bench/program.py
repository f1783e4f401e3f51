"""``weft.bench.run(fn, inputs, arms=...)``: benchmark your own function from Python.

    import weft.bench
    result = weft.bench.run(block, {"x": x, "w": w}, arms="unfused,inference,torch-eager", torch_fn=twin)
    result["in_process"]["verdicts"]          # the same result as ``weft bench``

It is ``weft bench FILE.py:FUNCTION`` without the file: the same arms, parity check,
A/A control, verdicts and provenance (``weft.workloads.program`` describes
``inputs`` and ``torch_fn``).
"""

from __future__ import annotations

from collections.abc import Callable

from weft.bench.run import BenchOptions, run_bench


def run(fn: Callable[..., object], inputs, arms: str = "unfused", *, torch_fn: Callable | None = None,
        threads: int = 1, rounds: int = 6, warmup: int = 1, round_ms: float = 50.0, name: str | None = None,
        profile=None, progress=None) -> dict:
    """Time ``fn`` over ``inputs`` (a dict for ``fn(**inputs)`` or a tuple for ``fn(*inputs)``)
    under each arm (``"unfused,inference,torch-eager"``; see ``weft bench --help``) and
    return the result dict (``weft.bench.save_result`` writes it, ``recompute`` checks it).

    ``profile``: a machine profile (default: the calibrated one, measured once and
    cached). Fresh-process rounds (``--processes``) need a file: use the CLI."""
    from weft.workloads.program import program_workload

    built = (fn, inputs) if torch_fn is None else (fn, inputs, torch_fn)
    workload = program_workload(built=built, name=name or getattr(fn, "__name__", "program"))
    if profile is None:
        from weft.cost.machine import machine_profile

        profile = machine_profile()
    options = BenchOptions(arms=arms, threads=threads, blocks=rounds, warmup=warmup, target_round_s=round_ms / 1e3)
    return run_bench(workload, options, profile, progress)


__all__ = ["run"]
