"""The fusion-opportunity signature (BACKGROUND.md), found from the IR alone.

All three marks must hold:

1. a **chain**: two or more members, each reading a tensor and writing a tensor;
2. an **intermediate at least as large as the chain's inputs and outputs** (it makes
   round trips to memory the result never needed; *strictly* larger is the strongest
   sign, e.g. attention's T x T scores against T x d inputs);
3. **low intensity**: the chain's elementwise and reduction members (every member
   that is not a contraction) do fewer FLOPs per byte they move unfused than the
   machine's ridge point: the traffic through the intermediate is driven by steps
   worth a few operations per byte, not a matrix product's worth. (A chain of
   contractions only is judged on all its members.) The whole chain's unfused
   intensity is reported beside it.

Finding chains: take private intermediates from the largest down. Around one,
``X``, start with its producer and its readers; absorb the producer of any chain
input, or the readers of any chain output, that is an intermediate at least as large
as ``X`` (so no big tensor crosses the chain's edge); then absorb small non-matmul
producers whose every reader is inside (row statistics such as a mean). Before::

    s = q @ k^T;  m = max_j s;  e = exp(s - m);  l = sum_j e;  p = e / l;  o = p @ v

around ``s`` the chain grows to all six members: inputs q, k, v and output o are
T x d while s, e, p are T x T.
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.bench.roofline import Work, group_work, unfused_work
from weft.ir import OUTSIDE, Plan, Role


@dataclass(frozen=True, slots=True)
class Chain:
    members: tuple[str, ...]
    intermediate: str  # the largest private intermediate
    intermediate_bytes: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    boundary_bytes: int  # the largest input or output of the chain
    unfused: Work  # what the members move as separate functions
    fused: Work  # what the chain moves as one
    steps: Work  # unfused work of the non-contraction members (all members if none)
    step_members: tuple[str, ...]

    @property
    def is_chain(self) -> bool:
        return len(self.members) >= 2

    @property
    def large_intermediate(self) -> bool:
        return self.intermediate_bytes >= self.boundary_bytes

    @property
    def strictly_larger(self) -> bool:
        return self.intermediate_bytes > self.boundary_bytes

    def low_intensity(self, ridge_point: float) -> bool:
        return self.steps.intensity < ridge_point

    def holds(self, ridge_point: float) -> bool:
        return self.is_chain and self.large_intermediate and self.low_intensity(ridge_point)

    @property
    def avoidable_bytes(self) -> float:
        return max(0.0, self.unfused.bytes - self.fused.bytes)


def _grow(plan: Plan, seed: str) -> set[str]:
    producers = plan.producers()
    readers = plan.readers()
    buffers = plan.buffer_map()
    plan_outputs = set(plan.outputs)
    size = buffers[seed].nbytes
    chain = {seed} | {r for r in readers[seed] if r != OUTSIDE}
    changed = True
    while changed:
        changed = False
        for member in list(chain):
            kernel = producers[member]
            for source in kernel.reads:
                if source in chain or source not in producers:
                    continue
                private = all(r in chain for r in readers[source]) and source not in plan_outputs
                small_statistic = private and buffers[source].nbytes < size and not producers[source].is_contraction
                if buffers[source].nbytes >= size or small_statistic:
                    chain.add(source)
                    changed = True
            if member not in plan_outputs and buffers[member].nbytes >= size:
                outside = {r for r in readers[member] if r != OUTSIDE and r not in chain}
                if outside:
                    chain |= outside
                    changed = True
    return chain


def chain_of(plan: Plan, members: set[str] | tuple[str, ...], intermediate: str | None = None) -> Chain:
    """Describe a set of members as a chain (boundary, biggest private intermediate, work)."""
    inside = set(members)
    ordered = tuple(kernel.output for kernel in plan.kernels if kernel.output in inside)
    readers = plan.readers()
    buffers = plan.buffer_map()
    inputs = tuple(dict.fromkeys(s for m in ordered for s in plan.kernel(m).reads if s not in inside))
    outputs = tuple(m for m in ordered if any(r == OUTSIDE or r not in inside for r in readers[m]))
    private = [m for m in ordered if m not in outputs]
    if intermediate is None:
        intermediate = max(private, key=lambda m: buffers[m].nbytes) if private else ordered[-1]
    boundary = max((buffers[name].nbytes for name in inputs + outputs), default=0)
    steps = tuple(m for m in ordered if not plan.kernel(m).is_contraction) or ordered
    return Chain(
        members=ordered,
        intermediate=intermediate,
        intermediate_bytes=buffers[intermediate].nbytes,
        inputs=inputs,
        outputs=outputs,
        boundary_bytes=boundary,
        unfused=unfused_work(_subplan_view(plan, inside)),
        fused=group_work(plan, ordered),
        steps=unfused_work(_subplan_view(plan, set(steps))),
        step_members=steps,
    )


def _subplan_view(plan: Plan, inside: set[str]) -> Plan:
    return Plan(plan.buffers, tuple(k for k in plan.kernels if k.output in inside), plan.inputs, plan.outputs, plan.name)


def find_chains(plan: Plan) -> list[Chain]:
    """Candidate chains around private intermediates, largest intermediate first."""
    buffers = plan.buffer_map()
    plan_outputs = set(plan.outputs)
    candidates = [
        kernel.output for kernel in plan.kernels
        if kernel.output not in plan_outputs and buffers[kernel.output].role is not Role.OUTPUT
    ]
    candidates.sort(key=lambda name: -buffers[name].nbytes)
    covered: set[str] = set()
    chains = []
    for seed in candidates:
        if seed in covered:
            continue
        members = _grow(plan, seed)
        covered |= members
        chain = chain_of(plan, members, intermediate=seed)
        if chain.is_chain:
            chains.append(chain)
    return chains
