"""Zero-size tensors through the compiled path: a small rewrite before lowering.

A plan may hold buffers with an extent of 0 (PyTorch's empty tensors). Lowering and the C
never see them: ``without_empty`` drops every member whose output has no element (there is
nothing to compute), turns a fold over an empty axis into a fill with the fold's identity
(sum 0, max -inf, min +inf; the oracle gives the same, its loop running zero times), and
removes the empty buffers from the inputs and outputs. ``EmptyAwarePlan`` calls the
compiled rest with the non-empty inputs and hands back fresh empty arrays for the empty
outputs, in the plan's order.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from weft.errors import WeftIRError
from weft.ir import Const, Plan, verify
from weft.ir.nodes import expr_loads
from weft.oracle.interpreter import NUMPY_DTYPE, check_inputs, fold_identity


def has_empty(plan: Plan) -> bool:
    """Whether any buffer or axis of ``plan`` has an extent of 0."""
    return any(0 in buffer.shape for buffer in plan.buffers) or any(
        axis.extent == 0 for kernel in plan.kernels for axis in kernel.all_axes)


def without_empty(plan: Plan) -> Plan:
    """``plan`` with its empty members dropped and folds over empty axes made fills."""
    empty = {buffer.name for buffer in plan.buffers if 0 in buffer.shape}
    buffers = plan.buffer_map()
    kernels = []
    for kernel in plan.kernels:
        if kernel.output in empty:
            continue
        if kernel.fold is not None and any(axis.extent == 0 for axis in kernel.fold.axes):
            dtype = buffers[kernel.output].dtype
            identity = fold_identity(kernel.fold.combiner, dtype).item()
            kernel = replace(kernel, body=Const(identity, dtype), fold=None)
        reads_empty = sorted({load.buffer for load in expr_loads(kernel.body)} & empty)
        if reads_empty:
            raise WeftIRError(f"plan {plan.name}: member {kernel.output} has elements but reads the empty buffer"
                              f" {reads_empty[0]} outside a fold over its empty axis; this plan cannot be compiled")
        kernels.append(kernel)
    return verify(Plan(
        buffers=tuple(b for b in plan.buffers if b.name not in empty),
        kernels=tuple(kernels),
        inputs=tuple(n for n in plan.inputs if n not in empty),
        outputs=tuple(n for n in plan.outputs if n not in empty),
        name=plan.name,
    ))


class EmptyAwarePlan:
    """A compiled plan with empty inputs or outputs: the non-empty rest runs compiled."""

    def __init__(self, plan: Plan, inner) -> None:
        self.plan = plan
        self.inner = inner  # the CompiledPlan of without_empty(plan), or None when nothing is left
        self.config = getattr(inner, "config", None)
        buffers = plan.buffer_map()
        self._empty_inputs = {name for name in plan.inputs if 0 in buffers[name].shape}
        self._kept_outputs = () if inner is None else tuple(dict.fromkeys(inner.plan.outputs))

    def __call__(self, *arrays: np.ndarray):
        """Run the plan; returns one array or a tuple (as ``weft.oracle.run``)."""
        checked = check_inputs(self.plan, arrays)
        kept = [a for name, a in zip(self.plan.inputs, checked, strict=True) if name not in self._empty_inputs]
        values: dict[str, np.ndarray] = {}
        if self.inner is not None:
            result = self.inner(*kept)
            results = result if isinstance(result, tuple) else (result,)
            values = dict(zip(self.inner.plan.outputs, results, strict=True))
        outputs = []
        for name in self.plan.outputs:
            if name not in values:
                buffer = self.plan.buffer(name)
                values[name] = np.empty(buffer.shape, NUMPY_DTYPE[buffer.dtype])
            outputs.append(values[name])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __repr__(self) -> str:
        return f"EmptyAwarePlan({self.plan.name}, compiled rest: {self.inner!r})"
