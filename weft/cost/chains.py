"""The fusion-opportunity signature (docs/benchmarking.md, "Where fusion pays"), found from the IR alone.

All three marks must hold:

1. a **chain**: two or more members, each reading a tensor and writing a tensor;
2. an **intermediate at least as large as the chain's inputs and outputs** (it makes
   round trips to memory the result never needed; *strictly* larger is the strongest
   sign, e.g. attention's T x T scores against T x d inputs);
3. **low intensity where it matters**: members below the machine's ridge point
   (memory-bound: a few operations per byte, an elementwise step or a reduction)
   carry enough of the chain's time that fusing pays. Measured on the roofline:
   the per-member floors, added up, exceed the floor of the chain run as one region
   by at least ``FUSION_GAIN`` of the former. A chain dominated by big matrix
   products (a feed-forward block) fails this mark: it is compute-bound and fusion
   does not help it.

Finding chains: take private intermediates from the largest down. Around one,
``X``, start with its producer and its readers; absorb the producer of any chain
input, or the readers of any chain output, that is an intermediate at least as large
as ``X`` (so no big tensor crosses the chain's edge); absorb smaller non-matmul
producers whose every reader is inside (row statistics, a bias add). A contraction
joins only through an operand larger than its other operands and its output (the
T x T probabilities into ``P V``, not an activation into a weight matrix). Members
of an earlier chain are not taken again. Before::

    s = q @ k^T;  m = max_j s;  e = exp(s - m);  l = sum_j e;  p = e / l;  o = p @ v

around ``s`` the chain grows to all six members: inputs q, k, v and output o are
T x d while s, e, p are T x T.
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.cost.work import Work, floor, group_work, member_work, unfused_work
from weft.ir import OUTSIDE, Kernel, Plan, Role

FUSION_GAIN = 0.10
"""Mark 3 holds when fusing would cut at least this share of the chain's roofline time."""


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
    member_works: tuple[Work, ...]  # per member, in ``members`` order

    @property
    def is_chain(self) -> bool:
        return len(self.members) >= 2

    @property
    def large_intermediate(self) -> bool:
        return self.intermediate_bytes >= self.boundary_bytes

    @property
    def strictly_larger(self) -> bool:
        return self.intermediate_bytes > self.boundary_bytes

    def memory_bound_members(self, bandwidth: float, peak: float) -> tuple[str, ...]:
        ridge = peak / bandwidth
        return tuple(m for m, w in zip(self.members, self.member_works, strict=True) if w.intensity < ridge)

    def unfused_floor(self, bandwidth: float, peak: float) -> float:
        """Sum of every member's roofline floor (each runs on its own)."""
        return sum(floor(w, bandwidth, peak).seconds for w in self.member_works)

    def fused_floor(self, bandwidth: float, peak: float) -> float:
        """Roofline floor of the chain run as one region (only its edges touch memory)."""
        return floor(self.fused, bandwidth, peak).seconds

    def fusion_gain(self, bandwidth: float, peak: float) -> float:
        unfused = self.unfused_floor(bandwidth, peak)
        return 1.0 - self.fused_floor(bandwidth, peak) / unfused if unfused > 0 else 0.0

    def low_intensity(self, bandwidth: float, peak: float) -> bool:
        return self.fusion_gain(bandwidth, peak) >= FUSION_GAIN

    def holds(self, bandwidth: float, peak: float) -> bool:
        return self.is_chain and self.large_intermediate and self.low_intensity(bandwidth, peak)

    @property
    def avoidable_bytes(self) -> float:
        return max(0.0, self.unfused.bytes - self.fused.bytes)


def _contraction_joins_through(kernel: Kernel, operand: str, sizes: dict[str, int]) -> bool:
    others = [name for name in kernel.reads if name != operand] + [kernel.output]
    return all(sizes[operand] > sizes[name] for name in others)


def _grow(plan: Plan, seed: str, taken: set[str]) -> set[str]:
    producers = plan.producers()
    readers = plan.readers()
    sizes = {buffer.name: buffer.nbytes for buffer in plan.buffers}
    plan_outputs = set(plan.outputs)
    size = sizes[seed]

    def reader_may_join(reader: str, through: str) -> bool:
        if reader == OUTSIDE or reader in taken:
            return False
        kernel = producers[reader]
        return not kernel.is_contraction or _contraction_joins_through(kernel, through, sizes)

    chain = {seed} | {r for r in readers[seed] if reader_may_join(r, seed)}
    changed = True
    while changed:
        changed = False
        for member in sorted(chain):
            for source in producers[member].reads:
                if source in chain or source not in producers or source in taken:
                    continue
                producer = producers[source]
                private = all(r in chain for r in readers[source]) and source not in plan_outputs
                big = sizes[source] >= size
                if producer.is_contraction:
                    # a matmul joins as a producer only when its output outgrows its operands (scores)
                    joins = big and all(sizes[source] > sizes[r] for r in producer.reads)
                else:
                    joins = big or (private and sizes[source] < size)
                if joins:
                    chain.add(source)
                    changed = True
            if member not in plan_outputs and sizes[member] >= size:
                joining = {r for r in readers[member] if r not in chain and reader_may_join(r, member)}
                if joining:
                    chain |= joining
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
    if intermediate is None or intermediate not in private:
        intermediate = max(private, key=lambda m: buffers[m].nbytes) if private else ordered[-1]
    boundary = max((buffers[name].nbytes for name in inputs + outputs), default=0)
    view = Plan(plan.buffers, tuple(k for k in plan.kernels if k.output in inside), plan.inputs, plan.outputs, plan.name)
    return Chain(
        members=ordered,
        intermediate=intermediate,
        intermediate_bytes=buffers[intermediate].nbytes,
        inputs=inputs,
        outputs=outputs,
        boundary_bytes=boundary,
        unfused=unfused_work(view),
        fused=group_work(plan, ordered),
        member_works=tuple(member_work(plan, plan.kernel(m)) for m in ordered),
    )


def find_chains(plan: Plan) -> list[Chain]:
    """Candidate chains around private intermediates, largest intermediate first."""
    buffers = plan.buffer_map()
    plan_outputs = set(plan.outputs)
    candidates = [
        kernel.output for kernel in plan.kernels
        if kernel.output not in plan_outputs and buffers[kernel.output].role is not Role.OUTPUT
    ]
    candidates.sort(key=lambda name: -buffers[name].nbytes)
    taken: set[str] = set()
    chains = []
    for seed in candidates:
        if seed in taken:
            continue
        members = _grow(plan, seed, taken)
        chain = chain_of(plan, members, intermediate=seed)
        if chain.is_chain:
            taken |= members
            chains.append(chain)
    return chains


def rank_chains(chains: list[Chain], bandwidth: float, peak: float) -> list[Chain]:
    """Flagged chains first, then by the time fusing could save."""
    def saving(chain: Chain) -> float:
        return chain.unfused_floor(bandwidth, peak) - chain.fused_floor(bandwidth, peak)

    return sorted(chains, key=lambda c: (not c.holds(bandwidth, peak), -saving(c)))
