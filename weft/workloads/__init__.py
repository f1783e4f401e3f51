"""Built-in workloads: traced plans with random inputs and a PyTorch twin.

    from weft.workloads import get_workload
    attention = get_workload("attention")
    plan = attention.plan(tokens=1024)           # tracing only: fast at any size
    q, k, v = attention.inputs(seed=0, tokens=1024)
"""

from __future__ import annotations

from weft.errors import WorkloadError
from weft.workloads.base import Workload
from weft.workloads.kernels import ADAM, ATTENTION, CROSS_ENTROPY, LAYERNORM, LM_HEAD_LOSS, SOFTMAX
from weft.workloads.program import is_program_reference, load_program, program_workload
from weft.workloads.qwen import QWEN_DECODE_STEP
from weft.workloads.sam3 import SAM3_ENCODER
from weft.workloads.vit import VIT_BLOCK

WORKLOADS: dict[str, Workload] = {
    workload.name: workload
    for workload in (ATTENTION, LAYERNORM, SOFTMAX, ADAM, CROSS_ENTROPY, LM_HEAD_LOSS, VIT_BLOCK, SAM3_ENCODER, QWEN_DECODE_STEP)
}


def get_workload(name: str) -> Workload:
    """The workload called ``name`` ('_' and '-' are interchangeable), or your own
    program ``FILE.py:FUNCTION`` (see ``weft.workloads.program``); else ``WorkloadError``."""
    if is_program_reference(name):
        return load_program(name)
    key = str(name).strip().lower().replace("_", "-")
    if key not in WORKLOADS:
        raise WorkloadError(f"unknown workload {name!r}; valid: {', '.join(WORKLOADS)}, or your own program"
                            " as FILE.py:FUNCTION (FUNCTION(**params) returns (fn, inputs))")
    return WORKLOADS[key]


__all__ = ["WORKLOADS", "Workload", "get_workload", "load_program", "program_workload"]
