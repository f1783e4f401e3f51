"""``weft.compile``: a plan to a callable backed by native code.

The stages run in order, each a plain function over immutable values::

    compose  weft.fuse -> weft.compose.choose_regions   -> Partition (fusion="off": none)
    lower    weft.fuse -> weft.lower.lower_partition    -> LoweredPlan (one function per distinct
             / lower_plan                                  region, called once per occurrence;
                                                           weft.lower.reuse)
    render   weft.runtime.plan_arena, weft.codegen.render_source -> C source
    build    weft.codegen.build            -> cached shared object (the C compiler when cold)
    load     weft.runtime.NativeRunner     -> one C call per plan run

A compile record (``weft.runtime.record``: keyed by the plan, the options and Weft's own
source) keeps the lowered plan, arena and C of each compile, so a warm compile skips
compose, lower and render. ``CompiledPlan.stage_seconds`` records the time of each stage.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import subprocess
import time

import numpy as np

from weft.arguments import arrange_inputs, bind_params, describe_value
from weft.codegen.cpu import cpu_features, cpu_model, lanes_for
from weft.codegen.driver import build
from weft.codegen.prelude import uses_reference_math
from weft.codegen.runner import batch_prefix, render_batch, render_source
from weft.config import DEFAULT_FUSION, Config, config_from_env
from weft.decide.verdicts import DecideReport
from weft.errors import CompileError, ConfigError, InputError, WeftError
from weft.fuse import (
    admitted_in,
    choose_partition,
    decision_key_base,
    has_empty_buffer,
    lower_decided,
    lower_matched,
    online_lowering_for,
    still_recorded,
)
from weft.ir import Kernel, Plan, Role, output_digest, verify
from weft.lower import Target, lower_plan
from weft.lower.contraction_prepack import prepack_bound
from weft.lower.fused import lower_partition
from weft.lower.in_place import check_in_place, check_in_place_names, in_place_lowering
from weft.lower.nest import LoweredPlan
from weft.oracle.interpreter import NUMPY_DTYPE, check_inputs
from weft.runtime.binding import NativeRunner, pointer_array, scipy_sgemm_pointer
from weft.runtime.memory import ArenaPlan, aligned_outputs, plan_arena
from weft.runtime.record import Recorded, load_record, record_key, save_record, summarize
from weft.threads import BlasThreads, thread_pools_record


def compiler_identity(cc: str) -> str:
    """The C compiler a verdict was timed with (path and version line)."""
    from weft.codegen.driver import find_compiler

    compiler = find_compiler(cc)
    return f"{compiler.path} {compiler.version}"


def race_contenders(pricing, config: Config, target: Target):
    """The race's builder (``weft.decide.verdicts.DecidedPricing``): the two contenders ``names``
    (the members unfused, the fused form in the tiling the model chose, a library body
    ``library:NAME``), each lowered on the region's own sub-plan, rendered together into one
    C translation unit (one compiler run per race) and bound to the same random inputs, as
    {name: run}."""
    from weft.compose.partition import Partition
    from weft.decide.library import admissions
    from weft.decide.race import RaceInputs
    from weft.lower.fused import region_tiling

    def contenders_of(region, form: str, tiling, budget, names=("unfused", "fused")):
        sub = pricing.subplan(region)
        tilings = {}
        if form == "fused" and tiling:
            primary, size = tiling[-1]
            tilings[region.anchor] = region_tiling(sub, region, size, primary)
        partition = Partition(sub.name, "priced", config.contract, (region,), (), ())
        online = online_lowering_for(config.contract) if form == "one pass" else None

        def lowered_as(name: str):
            if name == "unfused":
                return lower_plan(sub, None, target)
            if name == "fused":
                return lower_partition(sub, partition, target, online_lowering=online, tilings=tilings)
            body = name.split(":", 1)[1]
            match = next((m for b, m in admissions(sub, region.members, config.contract) if b.name == body), None)
            return None if match is None else lower_partition(sub, partition, target, bodies={region.anchor: match})

        built = []
        for name in names:
            lowered = lowered_as(name)
            if budget.left() <= 0 or lowered is None:
                return None
            built.append((name, lowered, plan_arena(sub, lowered)))
        # every contender in one translation unit: one compiler run per race; a compiler still
        # running when the race share ends is killed (the race gives up)
        source = render_batch([(sub, lowered, arena) for _, lowered, arena in built])
        try:
            artifact = build(source, config.cc, config.cache_dir, config.contract, timeout_s=budget.left())
        except subprocess.TimeoutExpired:
            return None
        if budget.left() <= 0:
            return None
        inputs = RaceInputs().for_plan(sub)  # only for a race that will be timed
        return {name: CompiledPlan(sub, config, lowered, arena, artifact,
                                   entry_prefix=batch_prefix(number)).prepare(*inputs)
                for number, (name, lowered, arena) in enumerate(built)}

    return contenders_of


def _lower(plan: Plan, config: Config, target: Target, seconds: dict[str, float]):
    """The fusion seam (``weft.fuse``): (LoweredPlan, Partition or None, DecideReport or None,
    matched bodies or None). Unfused lowering, or the regions the policy chooses, lowered
    (``seconds`` receives the time of each stage: compose, lower). A plan holding an empty
    tensor is lowered unfused (there is no traffic for a region to save)."""
    if config.fusion == "off" or has_empty_buffer(plan):
        with _timed(seconds, "lower"):
            return lower_plan(plan, None, target), None, None, None
    if config.fusion == "matchers":  # WEFT_GENERIC_FUSION=off turns "priced" into this (weft.config)
        with _timed(seconds, "compose"):
            lowered, partition, bodies = lower_matched(plan, config, target)
        return lowered, partition, None, bodies
    if config.fusion == "priced":
        with _timed(seconds, "compose"):  # pricing, racing and lowering together
            lowered, partition, report = lower_decided(
                plan, config, target, lambda pricing: race_contenders(pricing, config, target),
                compiler_identity(config.cc))
        return lowered, partition, report, admitted_in(plan, partition)
    with _timed(seconds, "compose"):
        partition = choose_partition(plan, config, target)
    with _timed(seconds, "lower"):
        return lower_partition(plan, partition, target, online_lowering=online_lowering_for(config.contract)), \
            None, None, None


@contextlib.contextmanager
def _timed(seconds: dict[str, float], stage: str):
    """Add the wall time of the block to ``seconds[stage]`` and its CPU time (this process)
    to ``seconds[stage + "_cpu"]`` (on a shared machine wall time includes waiting for a core)."""
    start, start_cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - start
        seconds[stage + "_cpu"] = seconds.get(stage + "_cpu", 0.0) + time.process_time() - start_cpu


def _where(traceback) -> str:
    """The region (or lowered function) and member being worked on where ``traceback`` ends."""
    group = member = None
    frames = []
    while traceback is not None:
        frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    for frame in reversed(frames):  # innermost first
        for value in frame.f_locals.values():
            if member is None:
                kernel = value if isinstance(value, Kernel) else _kernel_of(value)
                member = kernel.output if kernel is not None else None
            if group is None and type(value).__name__ in ("Region", "LoweredFunction"):
                group = tuple(getattr(value, "members", ()))
    parts = []
    if group:
        parts.append(f"region {', '.join(group)}")
    if member:
        parts.append(f"member {member}")
    return " (" + "; ".join(parts) + ")" if parts else ""


def _kernel_of(value) -> Kernel | None:
    """The member a lowering value is about (a nest or a pass dependent carries ``kernel``)."""
    try:
        kernel = getattr(value, "kernel", None)
    except Exception:  # a property that fails: not what we are looking for
        return None
    return kernel if isinstance(kernel, Kernel) else None


def _stage(stage: str, plan: Plan, function, *args):
    """``function(*args)``; an unexpected exception (a Weft bug, not bad input) becomes a
    ``CompileError`` naming the stage, the plan and the region and member; ``WeftError``s pass."""
    try:
        return function(*args)
    except (WeftError, MemoryError):
        raise
    except Exception as problem:
        raise CompileError(
            f"internal error while {stage} plan {plan.name}{_where(problem.__traceback__)}: "
            f"{type(problem).__name__}: {problem}. This is a bug in Weft, not in the program: please report it "
            "with the plan and the compile options; fusion='off' may avoid it meanwhile."
        ) from problem


class Prepared:
    """A plan bound to the caller's input arrays and preallocated outputs: ``prepared()``
    runs only the C call.

    Inputs are bound live, never copied: every call reads the arrays' contents at that
    moment, so writing new values into an input in place (``x[...] = next_batch``) is seen
    by the next call. (Rebinding a name to a new array is not; prepare again.) That is why
    ``prepare`` accepts only C-contiguous inputs.
    """

    def __init__(self, compiled: CompiledPlan, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
        self.compiled = compiled
        self.inputs = inputs
        self.outputs = outputs
        self._in = pointer_array(inputs)
        self._out = pointer_array(outputs)

    def __call__(self) -> None:
        status = self.compiled.run_native(self._in, self._out)
        if status:
            raise self.compiled.gather_error(status)

    def result(self):
        """The outputs of the last call (one array or a tuple), reused by every call."""
        return self.compiled.results(self.outputs)


class CompiledPlan:
    """A plan compiled to native code. Call it with NumPy arrays, as ``weft.oracle.run``."""

    def __init__(self, plan: Plan, config: Config, lowered: LoweredPlan | None, arena: ArenaPlan | None, artifact,
                 params: dict[str, np.ndarray] | None = None, entry_prefix: str = "wf_",
                 recorded: Recorded | None = None, in_place: dict[str, str] | None = None) -> None:
        """``recorded`` (a warm compile): ``lowered`` and ``arena`` are None; the compile record
        gives what loading needs now (its ``LoweringSummary``) and them on first use.
        ``in_place``: output -> the input it is written over (``weft.lower.in_place``)."""
        self.plan = plan
        self.params = dict(params or {})  # inputs bound at compile time (weft.compile(..., params=))
        self.in_place = dict(in_place or {})
        self.config = config
        self._lowering = (lowered, arena) if recorded is None else None
        self._recorded = recorded
        summary = summarize(lowered, arena) if recorded is None else recorded.summary
        self.source_path = artifact.source_path
        self.so_path = artifact.so_path
        self.compiled_now = artifact.compiled
        self.arena_bytes = summary.arena_bytes
        self.output_names = tuple(dict.fromkeys(plan.outputs))
        self.provenance = {
            "compiler": artifact.compiler.path,
            "compiler_version": artifact.compiler.version,
            "flags": list(artifact.flags),
            "cpu_features": list(cpu_features()),
            "cpu_model": cpu_model(),
            "lanes": summary.lanes,
            "contract": config.contract,
            "threads": config.threads,
            "fusion": config.fusion,
            "cache_key": artifact.key,
            # the command that built the shared object (the same for a cached one)
            "command": [artifact.compiler.path, *artifact.flags, "-o", str(artifact.so_path),
                        str(artifact.source_path), "-lm"],
            "compiled_now": artifact.compiled,
            "math": "weft.mathf" if uses_reference_math() else "fallback (double libm, rounded)",
            "blas": summary.blas,
        }
        self.provenance["thread_pools"] = thread_pools_record(config.threads, self.provenance["blas"])
        self._raw_outputs: list[np.ndarray] | None = None
        # seconds per compile stage (compose, lower, render, build, load; wall, and "<stage>_cpu"
        # for this process's CPU time), set by ``compile``
        self.stage_seconds: dict[str, float] = {}
        self.from_record = False  # True: regions, lowering and C came from the compile record
        self._partition = None  # fusion="priced": the priced partition (explain shows its prices)
        self.decide_report = None  # fusion="priced": what deciding did (record hits, prices, races)
        self.bodies = None  # fusion="matchers": anchor -> library bodies the matchers admitted
        self.runner = NativeRunner(artifact.so_path, summary.arena_bytes, summary.calls, entry_prefix)
        if summary.packs_weights:  # bound weights packed into the arena now, read by every call
            bound_inputs = (ctypes.c_void_p * max(1, len(plan.inputs)))(
                *[self.params[name].ctypes.data if name in self.params else None for name in plan.inputs])
            self.runner.prepack(bound_inputs, config.threads)
        buffers = plan.buffer_map()
        self._output_specs = [(buffers[name].shape, NUMPY_DTYPE[buffers[name].dtype]) for name in self.output_names]

    @property
    def lowered(self) -> LoweredPlan:
        """The lowered plan (a warm compile reads it from the compile record on first use)."""
        return self._lowered_and_arena()[0]

    @property
    def arena(self) -> ArenaPlan:
        return self._lowered_and_arena()[1]

    def _lowered_and_arena(self) -> tuple[LoweredPlan, ArenaPlan]:
        lowering = self._lowering
        if lowering is None:  # two threads asking at once both read it: the same value
            lowering = self._lowering = self._recorded.lowering()
        return lowering

    @functools.cached_property
    def groups(self) -> tuple[tuple[str, ...], ...]:
        """The members of each call, in order."""
        return tuple(function.members for function in self.lowered.functions)

    @functools.cached_property
    def function_names(self) -> tuple[str, ...]:
        return tuple(function.name for function in self.lowered.functions)

    # ------------------------------------------------------------------ calling

    def run_native(self, in_pointers, out_pointers) -> int:
        """One C call with every pool at ``config.threads``: OpenMP by the runner itself,
        BLAS (when the plan calls it) limited for this call only (``weft.threads``)."""
        if not self.provenance["blas"]:
            return self.runner.run(in_pointers, out_pointers, self.config.threads)
        with BlasThreads(self.config.threads):
            return self.runner.run(in_pointers, out_pointers, self.config.threads)

    @property
    def input_names(self) -> tuple[str, ...]:
        """The inputs a call takes (the plan's inputs less those bound with params=), in order."""
        return tuple(name for name in self.plan.inputs if name not in self.params)

    def _inputs(self, arrays, named=None) -> list[np.ndarray]:
        ordered = arrange_inputs(self.plan.name, self.plan.inputs, arrays, named or {}, self.params)
        # a C-contiguous array as it is (ascontiguousarray would make a 0-d one a new 1-d array)
        inputs = [array if array.flags.c_contiguous else np.ascontiguousarray(array)
                  for array in check_inputs(self.plan, ordered)]
        self._check_updated(ordered, inputs)
        return inputs

    def _check_updated(self, given, inputs: list[np.ndarray]) -> None:
        """An input that ``in_place`` writes over must be the caller's own array, usable as is
        (a copy would take the update, and the caller would never see it)."""
        for output, name in self.in_place.items():
            position = self.plan.inputs.index(name)
            array = given[position]
            if inputs[position] is not array or not array.flags.writeable:
                raise InputError(f"plan {self.plan.name}: input {name} is updated in place (in_place= writes "
                                 f"{output} over it), so it must be a writeable C-contiguous array; pass "
                                 "numpy.ascontiguousarray(x) and keep that array")

    def _outputs(self, out, inputs: list[np.ndarray]) -> list[np.ndarray]:
        over = {output: inputs[self.plan.inputs.index(name)] for output, name in self.in_place.items()}
        if out is None:
            fresh = iter(aligned_outputs([spec for name, spec in zip(self.output_names, self._output_specs,
                                                                      strict=True) if name not in over], inputs))
            return [over[name] if name in over else next(fresh) for name in self.output_names]
        given = list(out) if isinstance(out, tuple | list) else [out]
        if len(given) != len(self.output_names):
            raise InputError(f"plan {self.plan.name}: out= needs {len(self.output_names)} arrays "
                             f"({', '.join(self.output_names)}), got {len(given)}")
        for name, array in zip(self.output_names, given, strict=True):
            if name in over and array is not over[name]:
                raise InputError(f"plan {self.plan.name}: out= for {name} must be input {self.in_place[name]}'s "
                                 "own array (in_place= writes it there), or leave out= out")
        for name, array, (shape, dtype) in zip(self.output_names, given, self._output_specs, strict=True):
            if name in over:
                continue
            if not isinstance(array, np.ndarray) or array.shape != shape or array.dtype != dtype:
                got = (array.shape, array.dtype) if isinstance(array, np.ndarray) else type(array).__name__
                raise InputError(f"plan {self.plan.name}: out array for {name} must have shape {shape} and "
                                 f"dtype {dtype}, got {got}")
            if not array.flags.c_contiguous or not array.flags.writeable:
                raise InputError(f"plan {self.plan.name}: out array for {name} must be C-contiguous and "
                                 "writeable; pass numpy.empty(shape, dtype)")
            if any(np.shares_memory(array, source) for source in inputs):
                raise InputError(f"plan {self.plan.name}: out array for {name} overlaps an input; "
                                 "pass a separate array")
        for position, (name, array) in enumerate(zip(self.output_names, given, strict=True)):
            for other_name, other in zip(self.output_names[:position], given[:position], strict=True):
                if np.shares_memory(array, other):
                    raise InputError(f"plan {self.plan.name}: out arrays for {other_name} and {name} overlap "
                                     "(each output needs its own memory); pass separate arrays")
        return given

    def gather_error(self, status: int) -> InputError:
        members = ", ".join(self.groups[status - 1])
        return InputError(
            f"plan {self.plan.name}: member {members}: a gather index (e.g. a token id or target) lies outside "
            "the table it indexes; check the integer inputs' range"
        )

    def results(self, outputs: list[np.ndarray]):
        by_name = dict(zip(self.output_names, outputs, strict=True))
        values = tuple(by_name[name] for name in self.plan.outputs)
        return values[0] if len(values) == 1 else values

    def __call__(self, *arrays: np.ndarray, out=None, **named: np.ndarray):
        """Run the plan; returns one array or a tuple (as ``weft.oracle.run``).

        Inputs are given positionally in the plan's input order, by keyword (the
        names ``weft.trace`` gave them; a pytree keyword names its leaves by path), or
        both; inputs bound at compile time (``params=``) are not passed. Inputs are
        only read. With ``out=`` (an array or a tuple, one per distinct output)
        results are written there instead of fresh arrays.
        """
        inputs = self._inputs(arrays, named)
        outputs = self._outputs(out, inputs)
        status = self.run_native(pointer_array(inputs), pointer_array(outputs))
        if status:
            raise self.gather_error(status)
        return self.results(outputs)

    def prepare(self, *arrays: np.ndarray, out=None, **named: np.ndarray) -> Prepared:
        """Bind inputs and preallocated outputs once; the returned callable runs only the C call.

        The inputs are bound live (no copy): each call reads their contents at that moment,
        so an in-place update between calls is seen. Each input must therefore be
        C-contiguous (``InputError`` otherwise: pass ``numpy.ascontiguousarray(x)`` and keep
        that array to update). Inputs bound with ``params=`` are the compile-time copies.
        """
        ordered = arrange_inputs(self.plan.name, self.plan.inputs, arrays, named, self.params)
        checked = check_inputs(self.plan, ordered)
        for name, array in zip(self.plan.inputs, checked, strict=True):
            if not array.flags.c_contiguous:
                raise InputError(
                    f"plan {self.plan.name}: prepare() binds input {name} live and reads it in place, so it must"
                    " be C-contiguous; pass numpy.ascontiguousarray(x) (and update that array between calls)"
                )
        return Prepared(self, checked, self._outputs(out, checked))

    def run_raw(self, *arrays: np.ndarray, **named: np.ndarray) -> None:
        """Run into outputs allocated once and reused (see ``raw_outputs``); returns nothing.

        For timing loops that should measure the C call, not allocation. ``prepare``
        also skips input validation on every call.
        """
        inputs = self._inputs(arrays, named)
        if self._raw_outputs is None or self.in_place:  # written over this call's inputs
            self._raw_outputs = self._outputs(None, inputs)
        status = self.run_native(pointer_array(inputs), pointer_array(self._raw_outputs))
        if status:
            raise self.gather_error(status)

    @property
    def raw_outputs(self):
        """The outputs of the last ``run_raw`` (one array or a tuple), or None before it."""
        return None if self._raw_outputs is None else self.results(self._raw_outputs)

    def profile(self, *arrays: np.ndarray, repeats: int = 1, **named: np.ndarray) -> list[tuple[str, tuple[str, ...], float]]:
        """Seconds per call of each lowered function (name, members, seconds), from a timed runner
        (on copies of the inputs ``in_place`` writes over: the caller's arrays keep their values)."""
        inputs = self._spared(self._inputs(arrays, named))
        outputs = self._outputs(None, inputs)
        in_pointers, out_pointers = pointer_array(inputs), pointer_array(outputs)
        # one untimed run first: fresh outputs fault their pages in on first write
        status = self.run_native(in_pointers, out_pointers)
        if status:
            raise self.gather_error(status)
        with BlasThreads(self.config.threads):
            status, seconds = self.runner.run_profile(
                in_pointers, out_pointers, self.config.threads, max(1, int(repeats))
            )
        if status:
            raise self.gather_error(status)
        return [(name, members, s) for name, members, s in zip(self.function_names, self.groups, seconds, strict=True)]

    def kernel_set(self) -> str:
        """The plan identity of what runs (docs/design.md section 2): a digest of the lowered
        functions' structure (members, nests, tilings, scratch, lanes, contract), never of
        times, notes or where a verdict came from. Two compiles that run the same code agree."""
        return kernel_set_digest(self.lowered)

    def output_digest(self, *inputs: np.ndarray) -> str:
        """A digest of the outputs' bytes (with shapes and dtypes) on ``inputs`` (run on copies of
        those ``in_place`` writes over, so asking twice gives the same digest)."""
        if not self.in_place:
            return output_digest(self(*inputs))
        spared = self._spared(self._inputs(inputs))
        outputs = self._outputs(None, spared)
        status = self.run_native(pointer_array(spared), pointer_array(outputs))
        if status:
            raise self.gather_error(status)
        return output_digest(self.results(outputs))

    def _spared(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """``inputs`` with a copy of each one ``in_place`` writes over."""
        updated = set(self.in_place.values())
        return [array.copy() if name in updated else array for name, array in zip(self.plan.inputs, inputs, strict=True)]

    def explain(self, file=None, every_price: bool = False) -> None:
        """Print the composition engine's account of this compile: anchors, candidate
        regions, the chosen ones, the rewrite, unfused members and why, and what was lowered.
        ``every_price`` (fusion="priced"): each candidate's price, not only the chosen one's."""
        import dataclasses

        from weft.explain import explain_partition, explain_plan, format_lowering

        if self.partition is not None:  # fusion="priced": the decisions this compile made, with prices
            explanation = explain_partition(self.plan, self.partition, self.lowered)
            text = dataclasses.replace(explanation, show_prices=every_price).text()
            if self.decide_report is not None:
                text += "\n" + self.decide_report.describe()
            if self.bodies is not None:
                from weft.decide.legacy import describe_bodies

                text += "\n" + describe_bodies(self.bodies)
            print(text + "\n" + format_lowering(self.lowered), file=file)
            return
        policy = self.config.fusion if self.config.fusion in ("off", "greedy") else "off"
        target = Target(lanes=self.lowered.lanes, contract=self.config.contract)  # the regions this compile chose
        text = explain_plan(self.plan, policy, self.config.contract, target=target, lowered=self.lowered).text()
        print(text + "\n" + format_lowering(self.lowered), file=file)

    @property
    def partition(self):
        """``fusion="priced"`` or ``"matchers"``: the partition this compile chose (None for the
        other policies). A priced compile taken whole from the compile record decides it again
        from the decision record on first access (no price, no race): a warm compile skips it."""
        if self._partition is None and self.config.fusion == "priced" and self.from_record:
            target = Target(lanes=self.lowered.lanes, contract=self.config.contract)
            _, self._partition, _ = lower_decided(self.plan, self.config, target, lambda pricing: None,
                                                  compiler_identity(self.config.cc), survey=False)
        return self._partition

    @partition.setter
    def partition(self, value) -> None:
        self._partition = value

    def describe(self) -> str:
        """How each lowered function runs: one line per nest."""
        lines = [f"{self!r}"]
        seen: set[str] = set()
        for function in self.lowered.functions:
            if function.name in seen:  # a shared function (weft.lower.reuse): the same nests again
                lines.append(f"  {function.name} again, on {', '.join(function.members)}")
                continue
            seen.add(function.name)
            tile = f" (tiles of {function.tile_loop.size} along {function.tile_loop.variable})" \
                if function.tile_loop else ""
            over = [f"{output} over {name}" for output, name in self.in_place.items() if output in function.members]
            written = f"; written in place: {', '.join(over)}" if over else ""
            lines.append(f"  {function.name}{tile}{written}")
            for nest in function.nests:
                text = nest.describe() if hasattr(nest, "describe") else type(nest).__name__
                lines.append(f"    {text}")
        return "\n".join(lines)

    def memory_bytes(self) -> int:
        """Arena, tile-local scratch (per thread, library bodies' included) and outputs, in bytes."""
        scratch = 0
        for function in self.lowered.functions:
            per_thread = sum(s.elements * s.dtype.itemsize for s in function.scratch)
            threads = self.config.threads if function.tile_loop and function.tile_loop.parallel else 1
            scratch += per_thread * threads
            for nest in function.nests:  # a library body's own scratch, per work item running at once
                body_scratch = getattr(nest, "scratch_bytes", 0)
                if body_scratch:
                    scratch += body_scratch * (self.config.threads if nest.parallel else 1)
        outputs = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in self._output_specs)
        return self.arena_bytes + scratch + outputs

    def __repr__(self) -> str:
        distinct = len(set(self.function_names))
        return (f"CompiledPlan({self.plan.name}, contract={self.config.contract}, "
                f"functions={distinct}, calls={len(self.groups)}, arena={self.arena_bytes} B, so={self.so_path.name})")


def kernel_set_digest(lowered: LoweredPlan) -> str:
    """sha256 of the lowered plan's structure (its frozen dataclasses' repr: no addresses, no times)."""
    import hashlib

    return hashlib.sha256(repr(lowered).encode()).hexdigest()[:32]


def check_plan_argument(plan: object) -> Plan:
    """``weft.compile``'s first argument must be a traced Plan; say how to get one."""
    if isinstance(plan, Plan):
        return plan
    if callable(plan):
        name = getattr(plan, "__name__", type(plan).__name__)
        raise WeftError(
            f"weft.compile takes a traced plan, not the function {name}: trace it first with"
            f" plan = weft.trace({name}, *specs) (one weft.spec(shape, dtype) per input), then weft.compile(plan)"
        )
    raise WeftError(f"weft.compile takes a plan from weft.trace(fn, *specs), got {describe_value(plan)}")


def bind_compile_params(plan: Plan, params) -> dict[str, np.ndarray]:
    """``params=`` of ``weft.compile``: inputs bound once (weights). Each must be an input
    with its shape and dtype; when any are bound, every input traced as a param
    (``weft.spec(..., param=True)``) must be among them."""
    if params is None:
        return {}
    bound = bind_params(plan, params)
    declared = [b.name for b in plan.buffers if b.role is Role.PARAM and b.name in plan.inputs]
    missing = [name for name in declared if name not in bound]
    if missing:
        raise InputError(f"plan {plan.name}: params= leaves out {', '.join(missing)}, traced as params"
                         " (weft.spec(..., param=True)); bind them too, or trace them as plain inputs")
    return bound


def compile(  # noqa: A001 - the public name is weft.compile
    plan: Plan,
    contract: str = "strict",
    threads: int | None = None,
    fusion: str = DEFAULT_FUSION,
    *,
    blas: bool | None = None,
    lanes: int | None = None,
    config: Config | None = None,
    params: dict | None = None,
    in_place: dict | None = None,
) -> CompiledPlan:
    """Compile ``plan`` to native code.

    ``contract``: "strict" (bit-identical to ``weft.oracle.run``) or "inference"
    (reassociation and FMA allowed; within rtol 1e-4 of a float64 reference).
    ``threads``: threads of every pool a call drives, OpenMP and BLAS (None:
    WEFT_THREADS or the CPU count).
    ``fusion``: "priced" (a region where its price on this machine beats its members
    unfused, raced where the margin is thin; verdicts recorded; the default,
    ``weft.config.DEFAULT_FUSION``), "off" (each member its own function), "greedy"
    (the largest legal region per anchor) or "matchers" (the legacy mode: matched
    patterns fuse on sight).
    ``blas``: serve plain GEMM members by SciPy's BLAS (Inference only; None: no, the
    generated contraction microkernel serves every contraction, see
    ``weft.lower.contraction``; True: BLAS where SciPy is importable).
    ``config``: a complete ``Config`` (then ``contract``, ``threads`` and ``fusion``
    come from it, not from the arguments).
    ``lanes``: float32 vector lanes (None: from the CPU, 16 with AVX-512, 8 with
    AVX2, else 4); a narrower width is for experiments and tests.
    ``params``: inputs bound now (``{name: array}``, or a nested dict named by path as
    at trace time), copied once and not passed per call; a name that is not an
    input, or a wrong shape or dtype, is an ``InputError``.
    ``in_place``: ``{output: input}``, each output written over that input's array (an
    optimizer step, a cache update): a call updates the caller's array and returns it.
    Legal where each read of the input comes before the element is overwritten
    (``weft.lower.in_place`` proves it, or says why not as an ``InputError``).
    """
    plan = check_plan_argument(plan)
    if isinstance(contract, Config) or isinstance(threads, Config) or isinstance(fusion, Config):
        raise ConfigError("weft.compile(plan, Config(...)): a Config goes by name, weft.compile(plan, config=...);"
                          " the positional arguments after the plan are contract ('strict' or 'inference'),"
                          " threads and fusion")
    bound = bind_compile_params(plan, params)
    pairs = dict(in_place or {}) if isinstance(in_place, dict | type(None)) else in_place
    check_in_place_names(plan, pairs, frozenset(bound))
    if config is None:
        config = config_from_env(contract=contract, threads=threads, fusion=fusion)
    use_blas = bool(blas) and config.contract == "inference" and scipy_sgemm_pointer() is not None
    if lanes is None:
        lanes = lanes_for(cpu_features())
    elif lanes not in (4, 8, 16):
        raise ConfigError(f"lanes={lanes!r}: use 4, 8 or 16 float32 lanes (or None for the CPU's width)")
    target = Target(lanes=lanes, contract=config.contract, use_blas=use_blas)
    seconds: dict[str, float] = {}
    partition = decide_report = bodies = None
    # unfused and greedy compiles are recorded whole; a priced one too, and reused while every
    # verdict it rested on is still in the decision record as it was (else decided again);
    # matched ones always rebuild their partition (explain shows it)
    recordable = config.fusion in ("off", "greedy", "priced")
    with _timed(seconds, "record"):
        deciding = ""
        if config.fusion == "priced":
            deciding = repr(sorted(decision_key_base(config, compiler_identity(config.cc)).items()))
        key = record_key(plan, config.fusion, config.contract, lanes, use_blas, deciding,
                         tuple(bound), tuple(sorted(pairs.items()))) if recordable else ""
        recorded = load_record(config.cache_dir, key, plan) if recordable else None
        if recorded is not None and config.fusion == "priced":
            undecided, budget_s = recorded.undecided or ((), None)
            # candidates the budget left undecided: a larger budget may price them
            if (budget_s is None or config.budget_s <= budget_s) and still_recorded(recorded.rests_on,
                                                                                    config.cache_dir, undecided):
                decide_report = DecideReport(recorded=len(recorded.rests_on), rests_on=recorded.rests_on,
                                             from_compile_record=True, undecided=undecided)
            else:
                recorded = None
    if recorded is not None:  # a warm compile: the regions, lowering and C of an earlier one
        lowered = arena = None  # (of this very plan, verified then: records follow compiles), read on first use
        source = recorded.source
    else:
        verify(plan)
        lowered, partition, decide_report, bodies = _stage("lowering", plan, _lower, plan, config, target, seconds)
        lowered = prepack_bound(lowered, frozenset(bound))  # bound weights' panels packed once, at load
        if pairs:
            check_in_place(plan, lowered, pairs)
            lowered = in_place_lowering(plan, lowered, pairs)
        with _timed(seconds, "render"):
            arena = _stage("laying out the arena of", plan, plan_arena, plan, lowered)
            source = _stage("rendering C for", plan, render_source, plan, lowered, arena)
    with _timed(seconds, "build"):  # the C compiler, or the cache lookup of a warm compile
        artifact = build(source, config.cc, config.cache_dir, config.contract)
    rests_on = decide_report.rests_on if decide_report is not None else ()
    left = decide_report.undecided if decide_report is not None else ()
    # a priced compile is recorded when it rests on recorded verdicts, or had none to make
    # (no anchor with a fused candidate: its regions cannot change while the code is the same)
    nothing_to_decide = partition is not None and not any(d.verdicts for d in partition.decisions)
    if recorded is None and recordable and (config.fusion != "priced" or rests_on or left or nothing_to_decide):
        with _timed(seconds, "record"):
            save_record(config.cache_dir, key, plan, lowered, arena, source, rests_on,
                        (left, config.budget_s) if left else None)
    with _timed(seconds, "load"):
        compiled = CompiledPlan(plan, config, lowered, arena, artifact, bound, recorded=recorded, in_place=pairs)
    compiled.from_record = recorded is not None
    compiled.stage_seconds = seconds
    compiled.partition = partition
    compiled.decide_report = decide_report
    compiled.bodies = bodies
    return compiled


__all__ = ["CompiledPlan", "Prepared", "compile", "kernel_set_digest", "output_digest"]
