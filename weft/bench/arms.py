"""Arms: what a benchmark compares, parsed from ``NAME[+CONTRACT][@THREADS]``.

Names:

==============  ==============================================================
unfused         Weft, every member its own function (fusion off), Strict
greedy          Weft, regions fused greedily (composition engine), Strict
priced          Weft, regions fused where the price says it pays, Strict
matchers        Weft, matched library bodies fuse on sight, Strict
strict          Weft, the default fusion policy, Strict
inference       Weft, the default fusion policy, Inference
torch-eager     the workload's PyTorch function, run eagerly
torch-compile   the same function under ``torch.compile``
torch-sdpa      PyTorch's ``scaled_dot_product_attention`` (attention only)
torch-adam-fused ``torch.optim.Adam(fused=True)`` stepping the same state (adam only)
slowed          test-only: the unfused plan run three times per call
==============  ==============================================================

``+inference`` / ``+strict`` sets a Weft arm's contract (``greedy+inference``);
``@N`` sets its thread count (``unfused@2``); without it the ``--threads`` value is
used. Examples: ``unfused,greedy``  ``unfused@1,unfused@2``  ``unfused,torch-sdpa``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from weft.compile import compile as compile_plan_natively
from weft.errors import WeftError

WEFT_ARMS = {
    "unfused": ("off", "strict"),
    "greedy": ("greedy", "strict"),
    "priced": ("priced", "strict"),
    "matchers": ("matchers", "strict"),
    "strict": (None, "strict"),
    "inference": (None, "inference"),
}
PEER_ARMS = ("torch-eager", "torch-compile", "torch-sdpa", "torch-adam-fused")
TEST_ARMS = ("slowed",)
SLOWED_REPEATS = 3


class BenchError(WeftError):
    """A benchmark cannot run as asked: an unknown or unavailable arm, a parity failure."""


class ArmUnavailable(BenchError):
    """A peer arm cannot run here (PyTorch missing, no equivalent, compile failed)."""


@dataclass(frozen=True, slots=True)
class ArmSpec:
    label: str
    name: str
    kind: str  # weft | peer | test
    fusion: str | None
    contract: str  # strict | inference | peer
    threads: int

    @property
    def exact(self) -> bool:
        """Strict Weft arms must match the reference byte for byte."""
        return self.kind in ("weft", "test") and self.contract == "strict"

    def to_json(self) -> dict:
        return {"label": self.label, "name": self.name, "kind": self.kind, "fusion": self.fusion,
                "contract": self.contract, "threads": self.threads}


def parse_arm(text: str, default_threads: int = 1, allow_test_arms: bool = False) -> ArmSpec:
    """``NAME[+CONTRACT][@THREADS]`` -> ArmSpec (see the module docstring)."""
    label = text.strip()
    body, _, threads_text = label.partition("@")
    name, _, contract_text = body.partition("+")
    threads = default_threads
    if threads_text:
        if not threads_text.isdigit() or int(threads_text) < 1:
            raise BenchError(f"arm {label!r}: thread count {threads_text!r} must be a positive integer (e.g. unfused@2)")
        threads = int(threads_text)
    known = sorted(WEFT_ARMS) + list(PEER_ARMS)
    if name in WEFT_ARMS:
        fusion, contract = WEFT_ARMS[name]
        if contract_text:
            if contract_text not in ("strict", "inference"):
                raise BenchError(f"arm {label!r}: contract {contract_text!r} must be strict or inference")
            contract = contract_text
        return ArmSpec(label, name, "weft", fusion, contract, threads)
    if contract_text:
        raise BenchError(f"arm {label!r}: only Weft arms take a +contract ({', '.join(WEFT_ARMS)})")
    if name in PEER_ARMS:
        return ArmSpec(label, name, "peer", None, "peer", threads)
    if name in TEST_ARMS:
        if not allow_test_arms:
            raise BenchError(f"arm {label!r} is a test-only arm (it adds work on purpose); known arms: {', '.join(known)}")
        return ArmSpec(label, name, "test", "off", "strict", threads)
    raise BenchError(f"unknown arm {name!r} in {label!r}; known arms: {', '.join(known)} (see weft bench --help)")


def parse_arms(text: str, default_threads: int = 1, allow_test_arms: bool = False) -> list[ArmSpec]:
    specs = [parse_arm(part, default_threads, allow_test_arms) for part in text.split(",") if part.strip()]
    if not specs:
        raise BenchError("--arms needs at least one arm, e.g. --arms unfused,torch-eager")
    labels = [spec.label for spec in specs]
    if len(set(labels)) != len(labels):
        raise BenchError(f"--arms {text!r} names an arm twice; the A/A control is added automatically")
    return specs


@dataclass
class Runner:
    """A built arm: ``call()`` runs one step (what is timed); ``outputs`` from one run."""

    spec: ArmSpec
    call: Callable[[], object]
    outputs: tuple[np.ndarray, ...]
    provenance: dict = field(default_factory=dict)
    memory_bytes: int | None = None
    build_seconds: float = 0.0
    compiled: object = None  # the CompiledPlan of a Weft arm (for profile()), None for peers


def as_tuple(outputs) -> tuple[np.ndarray, ...]:
    if isinstance(outputs, tuple | list):
        return tuple(np.asarray(o) for o in outputs)
    return (np.asarray(outputs),)


def compile_plan(plan, spec: ArmSpec, in_place: dict[str, str] | None = None):
    """weft.compile for a Weft arm; a fusion policy that cannot compile is a BenchError."""
    options = {"contract": spec.contract, "threads": spec.threads}
    if in_place:
        options["in_place"] = in_place
    if spec.fusion is not None:
        options["fusion"] = spec.fusion
    try:
        return compile_plan_natively(plan, **options)
    except WeftError as error:
        if spec.fusion not in (None, "off"):
            raise BenchError(f"arm {spec.label} (fusion={spec.fusion}): {error}") from error
        raise


def build_weft_runner(spec: ArmSpec, plan, arrays, in_place: dict[str, str] | None = None) -> Runner:
    """A Weft arm: ``plan`` compiled for ``spec``, its inputs bound once (``prepare``).
    ``in_place`` (output -> input): those outputs are written over the inputs, on this arm's
    own copy of them, so each timed call is one more step on its state (as
    ``torch.optim.Adam`` steps); the first step's outputs are kept for parity."""
    start = time.perf_counter()
    compiled = compile_plan(plan, spec, in_place)
    if in_place:
        arrays = [np.array(array, copy=True) for array in arrays]
        outputs = tuple(np.array(output, copy=True) for output in as_tuple(compiled(*arrays)))
    else:
        outputs = as_tuple(compiled(*arrays))
    step = compiled.prepare(*arrays)
    if spec.kind == "test":
        def call(step=step):
            for _ in range(SLOWED_REPEATS):
                step()
    else:
        call = step
    return Runner(spec, call, outputs, dict(compiled.provenance), compiled.memory_bytes(), time.perf_counter() - start, compiled)


def _import_torch():
    # PyTorch's best configuration on this machine: huge-page allocations (docs/benchmarking.md rule 8).
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    try:
        import torch
    except ImportError as error:
        raise ArmUnavailable(f"PyTorch is not installed ({error}); pip install torch to run peer arms") from None
    return torch


def build_adam_fused_runner(spec: ArmSpec, params: dict, arrays, copy: bool = True) -> Runner:
    """``torch.optim.Adam(fused=True)`` (PyTorch's fastest Adam on CPU) on the workload's state:
    its parameters, gradients and moments are copies of the inputs (``copy=False``: the
    arrays themselves, stepped in place), its step counter at ``step - 1``, so the first step
    computes the plan's outputs (kept for parity). Every timed call is one more step, in
    place: the same work each time."""
    from weft.workloads.kernels import _ADAM

    torch = _import_torch()
    start = time.perf_counter()
    torch.set_num_threads(spec.threads)
    tensors = [torch.from_numpy(np.array(array, np.float32, copy=True) if copy else array) for array in arrays]
    groups = [tensors[number:number + 4] for number in range(0, len(tensors), 4)]
    weights = []
    for param, grad, _, _ in groups:
        weight = torch.nn.Parameter(param)
        weight.grad = grad
        weights.append(weight)
    try:
        optimizer = torch.optim.Adam(weights, lr=_ADAM["lr"], betas=(_ADAM["beta1"], _ADAM["beta2"]),
                                     eps=_ADAM["eps"], fused=True)
    except (RuntimeError, TypeError, ValueError) as error:
        raise ArmUnavailable(f"arm {spec.label}: torch.optim.Adam(fused=True) is unavailable: {error}") from None
    for weight, (_, _, first, second) in zip(weights, groups, strict=True):
        optimizer.state[weight] = {"step": torch.tensor(float(params["step"] - 1)), "exp_avg": first,
                                   "exp_avg_sq": second}

    def call():
        if torch.get_num_threads() != spec.threads:
            torch.set_num_threads(spec.threads)
        optimizer.step()

    call()
    outputs = tuple(x.detach().numpy().copy() for weight in weights
                    for x in (weight, optimizer.state[weight]["exp_avg"], optimizer.state[weight]["exp_avg_sq"]))
    provenance = {"torch": torch.__version__, "torch_threads": spec.threads, "torch_adam": "fused=True"}
    return Runner(spec, call, outputs, provenance, None, time.perf_counter() - start)


def build_peer_runner(spec: ArmSpec, workload, params: dict, arrays) -> Runner:
    torch = _import_torch()
    if spec.name == "torch-adam-fused":
        if workload.name != "adam":
            raise ArmUnavailable(f"arm {spec.label}: torch.optim.Adam has no equivalent in workload {workload.name}")
        return build_adam_fused_runner(spec, params, arrays)
    if spec.name == "torch-sdpa" and workload.name != "attention":
        raise ArmUnavailable(f"arm {spec.label}: scaled_dot_product_attention has no equivalent in workload {workload.name}")
    function = workload.torch_fn(**params)
    if function is None:
        raise ArmUnavailable(f"arm {spec.label}: workload {workload.name} has no PyTorch equivalent")
    start = time.perf_counter()
    torch.set_num_threads(spec.threads)
    if spec.name == "torch-compile":
        try:
            function = torch.compile(function)
        except Exception as error:  # noqa: BLE001 - any failure makes the peer unavailable, with its reason
            raise ArmUnavailable(f"arm {spec.label}: torch.compile failed: {type(error).__name__}: {error}") from None
    tensors = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)

    def call():
        if torch.get_num_threads() != spec.threads:
            torch.set_num_threads(spec.threads)
        with torch.inference_mode():
            return function(*tensors)

    try:
        result = call()
    except Exception as error:  # noqa: BLE001
        raise ArmUnavailable(f"arm {spec.label}: the PyTorch function failed: {type(error).__name__}: {error}") from None
    results = result if isinstance(result, tuple | list) else (result,)
    outputs = tuple(r.detach().numpy().copy() for r in results)
    provenance = {"torch": torch.__version__, "torch_threads": spec.threads,
                  "THP_MEM_ALLOC_ENABLE": os.environ.get("THP_MEM_ALLOC_ENABLE", "")}
    return Runner(spec, call, outputs, provenance, None, time.perf_counter() - start)


def build_runner(spec: ArmSpec, workload, params: dict, plan, arrays) -> Runner:
    if spec.kind == "peer":
        return build_peer_runner(spec, workload, params, arrays)
    pairs = workload.in_place(**params) if hasattr(workload, "in_place") else {}
    # a stage (a cut of the plan) keeps only the pairs whose output and input it still has
    pairs = {output: source for output, source in pairs.items() if output in plan.outputs and source in plan.inputs}
    return build_weft_runner(spec, plan, arrays, pairs)


def control_runner(twin: Runner, spec: ArmSpec, plan, arrays) -> Runner:
    """The A/A control of ``twin``: the very same call (same code, same bound inputs, same
    output arrays), labelled ``spec.label``. Two runs of one call differ only by noise and
    position; a control with outputs of its own would also differ by where they lie in
    memory, a real offset for a call of a few microseconds that the A/A would then report
    as noise."""
    return Runner(spec, twin.call, twin.outputs, dict(twin.provenance), twin.memory_bytes, 0.0, twin.compiled)
