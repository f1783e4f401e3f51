"""Check programs in this process: trace, compile, run, compare under the contract.

``check_batch`` compiles several programs as one plan (gcc's start-up dominates small
plans); any failure of the batch as a whole (a refusal, an exception) is attributed
by the caller re-running the batch's programs one at a time.
"""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass

import numpy as np

from weft.errors import WeftError
from weft.fuzz import compare
from weft.fuzz.program import Program, input_arrays, trace_batch


@dataclass(frozen=True)
class Outcome:
    """What happened to one program.

    status: ok, mismatch (output breaks the contract), crash (an exception that is not a
    WeftError, or the process died), refusal (a WeftError: Weft declined a program the
    generator considers legal), or batch (the batch failed as a whole: re-run singly).
    stage: trace, compile, run, oracle, reference or compare.
    """

    status: str
    message: str = ""
    stage: str = ""
    unchecked: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Settings:
    contract: str = "strict"
    fusion: str = "off"
    threads: int = 1
    in_place: bool = False  # also write each output over an input where Weft proves it legal


def in_place_pairs(plan, lowered) -> dict[str, str]:
    """Output -> input pairs ``weft.lower.in_place`` accepts on ``lowered``: for each output,
    the first unused input of its shape and dtype that it may be written over."""
    from weft.errors import InputError
    from weft.lower.in_place import check_in_place

    buffers = plan.buffer_map()
    pairs: dict[str, str] = {}
    for output in dict.fromkeys(plan.outputs):
        for name in plan.inputs:
            same = (buffers[name].shape, buffers[name].dtype) == (buffers[output].shape, buffers[output].dtype)
            if not same or name in pairs.values() or name in plan.outputs:
                continue
            try:
                check_in_place(plan, lowered, {output: name})
            except InputError:
                continue
            pairs[output] = name
            break
    return pairs


def _failure(stage: str, error: BaseException) -> Outcome:
    """A ``WeftError`` is a refusal, unless it wraps an internal error (``compile``'s "this is
    a bug in Weft" CompileError raised from a KeyError, say): that is a crash, with the
    traceback of the cause, so it is counted, listed and shrunk like any other."""
    cause = error.__cause__
    internal = cause is not None and not isinstance(cause, (WeftError, MemoryError))
    if isinstance(error, WeftError) and not internal:
        return Outcome("refusal", f"{type(error).__name__}: {error}", stage)
    origin = cause if internal else error
    detail = "".join(traceback.format_exception(type(origin), origin, origin.__traceback__, limit=-4))
    return Outcome("crash", f"{type(error).__name__}: {error}\n{detail}", stage)


def _as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def verdicts(plan, arrays: list[np.ndarray], got, contract: str) -> list[compare.Verdict]:
    """One verdict per output of ``plan``: ``got`` (the compiled outputs) under ``contract``."""
    from weft.fuzz.reference64 import bounds64
    from weft.oracle import run

    got = _as_tuple(got)
    oracle = _as_tuple(run(plan, *arrays))
    if len(got) != len(oracle):
        raise AssertionError(f"the compiled plan returned {len(got)} outputs, the oracle {len(oracle)}")
    if contract == "strict":
        return [compare.strict(np.asarray(g), np.asarray(o)) for g, o in zip(got, oracle, strict=True)]
    values, magnitudes = bounds64(plan, *arrays)
    results = []
    for g, o, name in zip(got, oracle, plan.outputs, strict=True):
        verdict = compare.inference(np.asarray(g), np.asarray(o), values[name], magnitudes.get(name))
        # the bound must hold for the oracle too; where it does not, the oracle or the
        # bound is wrong, and either is a finding (never a silent pass or a blamed compile)
        oracle_verdict = compare.inference(np.asarray(o), np.asarray(o), values[name], magnitudes.get(name))
        if oracle_verdict.problem:
            verdict = _off_float64(np.asarray(g), np.asarray(o), values[name], magnitudes.get(name), oracle_verdict)
        results.append(verdict)
    return results


def _off_float64(got: np.ndarray, oracle: np.ndarray, reference, magnitude, oracle_verdict) -> compare.Verdict:
    """The oracle itself breaks the bound against float64 somewhere. Where the compiled output
    agrees with the oracle (within the rule, the oracle as reference), the definition is off
    float64 there, not the compile (a documented range limit, e.g. ``rms_norm`` of rows beyond
    its range, docs/unsupported.md): those elements are counted as unchecked. Any other
    element that breaks the bound is a finding."""
    beside_oracle = compare.inference(got, oracle, oracle.astype(np.float64), np.zeros(oracle.shape))
    if beside_oracle.problem:
        return compare.Verdict(f"the oracle itself disagrees with float64: {oracle_verdict.problem}",
                               oracle_verdict.unchecked)
    reference = np.asarray(reference, np.float64)
    magnitude = None if magnitude is None else np.asarray(magnitude, np.float64)
    g = got.astype(np.float64) if got.dtype.kind == "f" else got
    if got.dtype.kind != "f":
        return compare.Verdict(None, oracle_verdict.unchecked)
    o = oracle.astype(np.float64)
    m = np.zeros_like(reference) if magnitude is None else magnitude
    off = ~(compare.inference_within(o, reference, m) | (np.isnan(o) & np.isnan(reference)) | (o == reference))
    return compare.Verdict(None, int(np.count_nonzero(off | ~np.isfinite(g) & ~np.isfinite(reference))))


def check_outputs(plan, arrays: list[np.ndarray], got, contract: str = "strict") -> None:
    """Raise AssertionError naming each output of ``plan`` whose compiled value ``got``
    breaks ``contract`` (Strict: the oracle's bytes; Inference: float64 within tolerance)."""
    problems = [f"output {n} ({plan.outputs[n]}): {v.problem}"
                for n, v in enumerate(verdicts(plan, arrays, got, contract)) if v.problem]
    if problems:
        raise AssertionError(f"{contract} contract broken:\n" + "\n".join(problems))


def check_batch(programs: list[Program], settings: Settings) -> list[Outcome]:
    """One outcome per program; on a failure of the whole batch (more than one program),
    every outcome is ``batch`` with the message."""
    from weft.compile import compile as compile_plan

    stage = "trace"
    try:
        plan, positions = trace_batch(programs)
        arrays = [a for p in programs for a in input_arrays(p)]
        stage = "compile"
        compiled = compile_plan(plan, contract=settings.contract, fusion=settings.fusion, threads=settings.threads)
        pairs = in_place_pairs(plan, compiled.lowered) if settings.in_place else {}
        if pairs:  # the same plan again, its outputs written over the inputs: run on copies
            compiled = compile_plan(plan, contract=settings.contract, fusion=settings.fusion,
                                    threads=settings.threads, in_place=pairs)
        stage = "run"
        state = [np.array(array, order="C", copy=True) for array in arrays] if pairs else arrays
        got = compiled(*state)
        for output, source in pairs.items():
            if _as_tuple(got)[list(plan.outputs).index(output)] is not state[plan.inputs.index(source)]:
                raise AssertionError(f"output {output} was not written over input {source}")
        stage = "compare"
        results = verdicts(plan, arrays, got, settings.contract)
    except Exception as error:  # noqa: BLE001 - every failure is a finding, classified
        outcome = _failure(stage, error)
        if len(programs) > 1:
            return [Outcome("batch", outcome.message, stage)] * len(programs)
        return [outcome]
    outcomes = []
    for program, where in zip(programs, positions, strict=True):
        problems, unchecked = [], 0
        for number, position in enumerate(where):
            unchecked += results[position].unchecked
            if results[position].problem:
                problems.append(f"output {number} ({program.outputs[number]}): {results[position].problem}")
        status = "mismatch" if problems else "ok"
        outcomes.append(Outcome(status, "\n".join(problems), "compare" if problems else "", unchecked))
    return outcomes


def check_program(program: Program, settings: Settings) -> Outcome:
    return check_batch([program], settings)[0]
