"""A stage: one region of a plan cut out as a plan of its own, to time in isolation.

``--stage s,m,e`` names members (see ``weft plan WORKLOAD`` for their names);
``--stage auto`` takes the fusion opportunity ``weft diagnose`` ranks first. The
stage plan reads every buffer the members read from outside the region (plan inputs
keep their values; intermediates get seeded random values: same inputs for every
arm, never zeros) and writes what the rest of the plan reads from it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from weft.bench.arms import BenchError
from weft.ir import OUTSIDE, DType, Plan, Role, verify
from weft.oracle.interpreter import NUMPY_DTYPE


def resolve_members(plan: Plan, region: str) -> tuple[str, ...]:
    names = [kernel.output for kernel in plan.kernels]
    if region.strip() == "auto":
        from weft.cost.chains import find_chains, rank_chains
        from weft.cost.machine import machine_profile

        profile = machine_profile()
        chains = rank_chains(find_chains(plan), profile.bandwidth(1), profile.peak_flops(1))
        if not chains:
            raise BenchError(f"--stage auto: plan {plan.name} has no fusion opportunity; name members instead: {', '.join(names)}")
        return chains[0].members  # the flagged chain that could save the most time
    wanted = [part.strip() for part in region.split(",") if part.strip()]
    unknown = [name for name in wanted if name not in names]
    if unknown or not wanted:
        raise BenchError(f"--stage {region!r}: unknown members {unknown}; plan {plan.name} has members {', '.join(names)}")
    return tuple(name for name in names if name in wanted)  # plan (topological) order


def stage_plan(plan: Plan, members: tuple[str, ...]) -> Plan:
    inside = set(members)
    kernels = tuple(kernel for kernel in plan.kernels if kernel.output in inside)
    readers = plan.readers()
    external = list(dict.fromkeys(name for kernel in kernels for name in kernel.reads if name not in inside))
    outputs = tuple(name for name in members if any(r == OUTSIDE or r not in inside for r in readers.get(name, ())))
    buffers = []
    for buffer in plan.buffers:
        if buffer.name in external:
            buffers.append(replace(buffer, role=Role.INPUT))
        elif buffer.name in outputs:
            buffers.append(replace(buffer, role=Role.OUTPUT))
        elif buffer.name in inside:
            buffers.append(replace(buffer, role=Role.INTERMEDIATE))
    stage = Plan(tuple(buffers), kernels, tuple(external), outputs, name=f"{plan.name}-stage")
    verify(stage)
    return stage


def stage_inputs(plan: Plan, stage: Plan, arrays, seed: int = 0) -> tuple[np.ndarray, ...]:
    given = dict(zip(plan.inputs, arrays, strict=False))
    rng = np.random.default_rng(seed + 1)
    values = []
    for name in stage.inputs:
        if name in given:
            values.append(given[name])
            continue
        buffer = stage.buffer(name)
        if buffer.dtype is DType.FLOAT32:
            values.append(rng.standard_normal(buffer.shape, dtype=np.float32))
        elif buffer.dtype is DType.BOOL:
            values.append(rng.random(buffer.shape) < 0.5)
        else:
            values.append(rng.integers(1, 3, buffer.shape).astype(NUMPY_DTYPE[buffer.dtype]))
    return tuple(values)
