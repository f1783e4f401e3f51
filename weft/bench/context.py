"""What one benchmark process times: a workload's plan and inputs (or a stage of it),
and the runner of one arm over them. Shared by the in-process driver (``run``) and
the per-arm child processes (``processes``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from weft.bench.arms import ArmSpec, Runner, build_runner, parse_arm
from weft.bench.stage import resolve_members, stage_inputs, stage_plan
from weft.workloads import get_workload

CONTROL_SUFFIX = ":control"


@dataclass
class Context:
    """The workload, its parameters, and the plan and inputs being timed."""

    workload: object
    params: dict
    plan: object
    arrays: tuple
    whole_plan: object
    whole_arrays: tuple
    stage_members: tuple[str, ...] | None = None


def build_context(workload_name: str, params: dict, seed: int = 0, stage: str | None = None) -> Context:
    workload = get_workload(workload_name) if isinstance(workload_name, str) else workload_name
    full = {**dict(getattr(workload, "defaults", {}) or {}), **params}
    plan = workload.plan(**full)
    arrays = tuple(workload.inputs(seed=seed, **full))
    if not stage:
        return Context(workload, full, plan, arrays, plan, arrays)
    members = resolve_members(plan, stage)
    cut = stage_plan(plan, members)
    return Context(workload, full, cut, stage_inputs(plan, cut, arrays, seed), plan, arrays, members)


def _spec_for(label: str, threads: int, allow_test_arms: bool) -> ArmSpec:
    if label.endswith(CONTROL_SUFFIX):
        return replace(parse_arm(label[: -len(CONTROL_SUFFIX)], threads, allow_test_arms), label=label)
    return parse_arm(label, threads, allow_test_arms)


def build_arm_runner(context: Context, label: str, threads: int, allow_test_arms: bool = False) -> Runner:
    spec = _spec_for(label, threads, allow_test_arms)
    return build_runner(spec, context.workload, context.params, context.plan, context.arrays)
