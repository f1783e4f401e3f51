"""The profiling procedure of docs/benchmarking.md, cheapest step first.

1. time the whole step (the baseline);
2. break it down per lowered function (member or fused region), sort, keep the top ten;
3. count each one's bytes and FLOPs from shapes; compare the intensity with the
   machine's ridge point (memory- or compute-bound), and the time with its floor;
4. flag the fusion-opportunity signature (``weft.cost.chains``);
5. measure memory at two sizes of the workload's sequence axis: a ratio near 4 when
   the length doubles is quadratic growth (a T x T tensor exists: a fast path is not
   running), and name the members whose buffers grow that way;
6. time outside members: Python around the C call (whole step minus the C call) and,
   inside the C call, the runner between functions (C call minus the functions' sum).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

from weft.bench.arms import BenchError, build_weft_runner, compile_plan, parse_arm
from weft.cost.chains import Chain, find_chains, rank_chains
from weft.cost.work import Work, floor, group_work, plan_work, unfused_work
from weft.ir import Plan, Role

TOP = 10
QUADRATIC_EXPONENT = 1.5  # growth exponent at or past which a buffer counts as quadratic


@dataclass(frozen=True)
class FunctionRow:
    name: str
    members: tuple[str, ...]
    seconds: float
    share: float
    work: Work
    bound: str  # memory | compute (from intensity vs ridge)
    floor_s: float

    @property
    def fraction_of_floor(self) -> float:
        return self.floor_s / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class BufferGrowth:
    buffer: str
    producer: str
    shape_small: tuple[int, ...]
    shape_large: tuple[int, ...]
    bytes_small: int
    bytes_large: int
    exponent: float  # log(bytes ratio) / log(size ratio)


@dataclass(frozen=True)
class MemoryScaling:
    param: str
    sizes: tuple[int, int]
    bytes: tuple[int, int]
    source: str  # "compiled plan" or "IR buffers"
    growth: tuple[BufferGrowth, ...]

    @property
    def ratio(self) -> float:
        return self.bytes[1] / self.bytes[0]

    @property
    def exponent(self) -> float:
        return math.log(self.ratio) / math.log(self.sizes[1] / self.sizes[0])

    @property
    def quadratic(self) -> bool:
        return self.exponent >= QUADRATIC_EXPONENT

    @property
    def responsible(self) -> tuple[BufferGrowth, ...]:
        """Buffers behind quadratic growth; none when the compiled plan's memory is not
        quadratic (its quadratic IR buffers then live in tile-local scratch)."""
        return self.quadratic_in_ir if self.quadratic else ()

    @property
    def quadratic_in_ir(self) -> tuple[BufferGrowth, ...]:
        return tuple(g for g in self.growth if g.exponent >= QUADRATIC_EXPONENT)


@dataclass
class Diagnosis:
    workload: str
    params: dict
    arm: str
    threads: int
    bandwidth: float
    peak_flops: float
    plan_work: Work
    unfused: Work
    whole_step_s: float | None = None
    c_call_s: float | None = None
    functions: list[FunctionRow] = field(default_factory=list)
    timing_note: str = ""
    chains: list[Chain] = field(default_factory=list)
    memory: MemoryScaling | None = None
    memory_note: str = ""

    def to_json(self) -> dict:
        """The diagnosis as plain data (``weft diagnose --json FILE``)."""
        chains = [{
            "members": list(c.members), "intermediate": c.intermediate, "intermediate_bytes": c.intermediate_bytes,
            "boundary_bytes": c.boundary_bytes, "avoidable_bytes": c.avoidable_bytes,
            "unfused_floor_s": c.unfused_floor(self.bandwidth, self.peak_flops),
            "fused_floor_s": c.fused_floor(self.bandwidth, self.peak_flops),
            "fusion_gain": c.fusion_gain(self.bandwidth, self.peak_flops),
            "flagged": c.holds(self.bandwidth, self.peak_flops),
        } for c in self.chains]
        functions = [{
            "name": r.name, "members": list(r.members), "seconds": r.seconds, "share": r.share, "flops": r.work.flops,
            "bytes": r.work.bytes, "intensity": r.work.intensity, "bound": r.bound, "floor_s": r.floor_s,
        } for r in self.functions]
        memory = None
        if self.memory is not None:
            memory = {"param": self.memory.param, "sizes": list(self.memory.sizes), "bytes": list(self.memory.bytes),
                      "ratio": self.memory.ratio, "exponent": self.memory.exponent, "source": self.memory.source,
                      "quadratic": self.memory.quadratic,
                      "responsible": [g.producer for g in self.memory.responsible]}
        return {
            "schema": "weft-diagnose/1", "workload": self.workload, "params": self.params, "arm": self.arm,
            "threads": self.threads, "bandwidth_bytes_per_s": self.bandwidth, "peak_flops_per_s": self.peak_flops,
            "ridge_point": self.ridge_point, "whole_step_s": self.whole_step_s, "c_call_s": self.c_call_s,
            "python_s": self.python_s, "runner_s": self.runner_s, "timing_note": self.timing_note,
            "functions": functions, "chains": chains, "memory": memory, "memory_note": self.memory_note,
        }

    @property
    def ridge_point(self) -> float:
        return self.peak_flops / self.bandwidth

    @property
    def members_s(self) -> float:
        return sum(row.seconds for row in self.functions)

    @property
    def outside_s(self) -> float | None:
        """Whole step minus the functions' sum (negative: within the profile's noise)."""
        if self.whole_step_s is None or not self.functions:
            return None
        return self.whole_step_s - self.members_s

    @property
    def python_s(self) -> float | None:
        """Python around the C call: argument checks, fresh output arrays, ctypes."""
        if self.whole_step_s is None or self.c_call_s is None:
            return None
        return self.whole_step_s - self.c_call_s

    @property
    def runner_s(self) -> float | None:
        """Inside the C call but outside every function: the generated runner."""
        if self.c_call_s is None or not self.functions:
            return None
        return self.c_call_s - self.members_s


LONG_STEP_S = 2.0  # past this, a step is timed twice at most: it averages over its own noise


def _median_time(call, repeats: int) -> float:
    start = time.perf_counter()
    call()
    times = [time.perf_counter() - start]
    if times[0] > LONG_STEP_S:
        repeats = min(repeats, 2)
    for _ in range(repeats - 1):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def function_rows(plan: Plan, profile_rows, bandwidth: float, peak: float) -> list[FunctionRow]:
    total = sum(seconds for _, _, seconds in profile_rows) or 1.0
    rows = []
    for name, members, seconds in profile_rows:
        members = tuple(members) or (name,)
        work = group_work(plan, members)
        bound = floor(work, bandwidth, peak)
        label = "memory" if work.intensity < peak / bandwidth else "compute"
        rows.append(FunctionRow(name, members, seconds, seconds / total, work, label, bound.seconds))
    rows.sort(key=lambda row: -row.seconds)
    return rows


def buffer_growth(small: Plan, large: Plan, size_ratio: float) -> tuple[BufferGrowth, ...]:
    large_buffers = large.buffer_map()
    rows = []
    for buffer in small.buffers:
        other = large_buffers.get(buffer.name)
        if other is None or buffer.role is Role.INPUT or buffer.nbytes == 0:
            continue
        exponent = math.log(other.nbytes / buffer.nbytes) / math.log(size_ratio) if other.nbytes else 0.0
        rows.append(BufferGrowth(buffer.name, buffer.name, buffer.shape, other.shape, buffer.nbytes, other.nbytes, exponent))
    rows.sort(key=lambda g: (-g.exponent, -g.bytes_large))
    return tuple(rows)


def _plan_memory(plan: Plan, spec, arrays_for) -> tuple[int, str]:
    """Bytes of the compiled plan's memory if Weft can compile it, else every buffer in the IR."""
    try:
        return int(compile_plan(plan, spec).memory_bytes()), "compiled plan"
    except (BenchError, MemoryError, OSError):
        pass  # not compilable here (or its arena cannot even be reserved): count the IR instead
    return sum(buffer.nbytes for buffer in plan.buffers), "IR buffers (every member's output held)"


def memory_scaling(workload, params: dict, spec, sizes: tuple[int, int] | None) -> tuple[MemoryScaling | None, str]:
    param = getattr(workload, "sequence_param", None)
    if not param:
        return None, f"workload {workload.name} has no sequence axis; memory scaling does not apply"
    if sizes is None:
        base = int(params[param])
        sizes = (base, 2 * base)
    plans = [workload.plan(**{**params, param: size}) for size in sizes]
    measured = [_plan_memory(plan, spec, None) for plan in plans]
    source = measured[0][1] if measured[0][1] == measured[1][1] else "IR buffers"
    if source == "IR buffers":
        measured = [(sum(b.nbytes for b in plan.buffers), source) for plan in plans]
    growth = buffer_growth(plans[0], plans[1], sizes[1] / sizes[0])
    producers = {kernel.output for kernel in plans[0].kernels}
    growth = tuple(g for g in growth if g.buffer in producers)
    return MemoryScaling(param, tuple(sizes), (measured[0][0], measured[1][0]), source, growth), ""


def diagnose(workload, params: dict, profile, arm: str = "unfused", threads: int = 1,
             sizes: tuple[int, int] | None = None, repeats: int = 5, seed: int = 0) -> Diagnosis:
    """Run the procedure on one workload; steps that need the compiler say why they were skipped."""
    full = {**dict(getattr(workload, "defaults", {}) or {}), **params}
    if sizes is not None and getattr(workload, "sequence_param", None):
        full[workload.sequence_param] = sizes[0]
    plan = workload.plan(**full)
    spec = parse_arm(arm, threads)
    if spec.kind != "weft":
        raise BenchError(f"weft diagnose profiles Weft arms only (unfused, greedy, priced, matchers, strict, inference), not {arm}")
    result = Diagnosis(workload.name, full, arm, spec.threads, profile.bandwidth(spec.threads),
                       profile.peak_flops(spec.threads), plan_work(plan), unfused_work(plan))
    arrays = tuple(workload.inputs(seed=seed, **full))
    try:
        runner = build_weft_runner(spec, plan, arrays)
    except BenchError as error:
        result.timing_note = f"timing skipped: {error}"
        runner = None
    if runner is not None:
        compiled = runner.compiled
        runner.call()
        result.whole_step_s = _median_time(lambda: compiled(*arrays), repeats)
        result.c_call_s = _median_time(runner.call, repeats)
        rows = compiled.profile(*arrays, repeats=repeats if result.c_call_s < LONG_STEP_S else 1)
        result.functions = function_rows(plan, rows, result.bandwidth, result.peak_flops)
    result.chains = rank_chains(find_chains(plan), result.bandwidth, result.peak_flops)
    result.memory, result.memory_note = memory_scaling(workload, full, spec, sizes)
    return result
