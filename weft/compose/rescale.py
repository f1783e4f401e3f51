"""The one rewrite: fold against a running reference, correct afterwards.

Derived from member bodies only; nothing here knows what softmax is. Within a
region, inline the elementwise members into the folds, then look for folds over
the *same* axis (they index the same buffer dimension with their fold variable)
where a later fold's term reads an earlier fold's result ``R``. The rewrite
merges them into one pass when every such term splits algebraically:

* sum folds: ``term = g(x) · h(R)`` where each factor that mixes the fold axis
  with ``R`` is ``exp(a(x) + b(R))`` (``h`` is exp-like: ``exp(u+v) = exp(u)·exp(v)``);
  folding ``exp(a(x) + b(m))`` against the running reference ``m`` and scaling the
  accumulator by ``exp(b(m_new) - b(m_old))`` whenever ``m`` moves is exact in
  real arithmetic. Factors constant along the axis (``1 / L[i]``) are applied
  once after the pass.
* max/min folds: ``term = g(x) + h(R)``; ``h(R)`` is added after the pass.

Before (attention, after inlining)::

    M[i] = max_j S[i,j]
    L[i] = sum_j exp(S[i,j] - M[i])
    O[i,e] = sum_j exp(S[i,j] - M[i]) / L[i] * V[j,e]

After: one pass over j with running m, l, o; each step scales l and o by
``exp(m_old - m_new)``; at the end ``o / l``. Reassociation, so Inference only.
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.compose.regions import Region
from weft.ir import (
    AxisIndex,
    Binary,
    BinaryOp,
    Combiner,
    Const,
    Expr,
    Kernel,
    Load,
    Plan,
    Unary,
    UnaryOp,
    expr_axes,
    expr_loads,
)
from weft.ir.printer import format_expr
from weft.ir.substitute import inline_members, substitute_axes

STRICT_REFUSAL = "Strict forbids reassociation (the online rescaling reorders the folds)"


@dataclass(frozen=True, slots=True)
class OnlineDependent:
    """A fold merged into the pass. Per step: ``acc = acc·exp(b(m_new) - b(m_old)) + term``.

    ``term`` reads the reference's output, which during the pass holds the running
    value. After the pass: ``acc · Π scale_by / Π divide_by`` (sum folds) or
    ``acc + Σ offsets`` (max/min folds; offsets are (sign, expr) pairs).
    """

    member: str
    combiner: Combiner
    fold_axis: str
    term: Expr
    exponent: Expr | None
    scale_by: tuple[Expr, ...] = ()
    divide_by: tuple[Expr, ...] = ()
    offsets: tuple[tuple[int, Expr], ...] = ()


@dataclass(frozen=True, slots=True)
class OnlineFold:
    """One pass replacing ``1 + len(dependents)`` folds over the same axis."""

    anchor: str
    reference: str
    reference_combiner: Combiner
    reference_axis: str
    reference_term: Expr
    extent: int
    dependents: tuple[OnlineDependent, ...]
    dissolved: tuple[str, ...]

    @property
    def members(self) -> tuple[str, ...]:
        return (self.reference,) + tuple(dependent.member for dependent in self.dependents)

    def describe(self) -> str:
        parts = [f"one pass over {self.reference_axis}:{self.extent} replaces {len(self.members)} folds"]
        parts.append(f"running {self.reference_combiner.value} {self.reference}")
        for dependent in self.dependents:
            text = f"{dependent.combiner.value} {dependent.member}"
            if dependent.exponent is not None:
                text += f" rescaled by exp(Δ {format_expr(dependent.exponent)})"
            if dependent.scale_by or dependent.divide_by:
                text += " then " + " ".join(
                    [f"* {format_expr(e)}" for e in dependent.scale_by] + [f"/ {format_expr(e)}" for e in dependent.divide_by]
                )
            parts.append(text)
        if self.dissolved:
            parts.append(f"never materialised: {', '.join(self.dissolved)}")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class RewriteRefusal:
    """The rewrite does not apply; ``applicable`` says the algebra held but the contract forbade it."""

    anchor: str
    reason: str
    applicable: bool = False
    online: OnlineFold | None = None


class _NoSplit(Exception):
    pass


def _flatten(expr: Expr, op: BinaryOp, inverse: BinaryOp, sign: int = 1) -> list[tuple[Expr, int]]:
    """``expr`` as (operand, sign) under ``op`` and its ``inverse``: for MUL/DIV the sign is
    the power (``a / b`` -> (a, 1), (b, -1)), for ADD/SUB the sign (``a - b`` -> (a, 1), (b, -1));
    a negation is a factor -1 of a product, a flipped sign in a sum."""
    match expr:
        case Binary(found, left, right) if found in (op, inverse):
            return _flatten(left, op, inverse, sign) + _flatten(right, op, inverse, sign if found is op else -sign)
        case Unary(UnaryOp.NEG, operand):
            if op is BinaryOp.MUL:
                return [(Const(-1.0), 1)] + _flatten(operand, op, inverse, sign)
            return _flatten(operand, op, inverse, -sign)
    return [(expr, sign)]


def _flatten_product(expr: Expr, power: int = 1) -> list[tuple[Expr, int]]:
    return _flatten(expr, BinaryOp.MUL, BinaryOp.DIV, power)


def _flatten_sum(expr: Expr, sign: int = 1) -> list[tuple[Expr, int]]:
    return _flatten(expr, BinaryOp.ADD, BinaryOp.SUB, sign)


def _product(factors: list[tuple[Expr, int]]) -> Expr:
    numerator: Expr | None = None
    for factor, power in factors:
        if power > 0:
            numerator = factor if numerator is None else Binary(BinaryOp.MUL, numerator, factor)
    result = numerator if numerator is not None else Const(1.0)
    for factor, power in factors:
        if power < 0:
            result = Binary(BinaryOp.DIV, result, factor)
    return result


def _signed_sum(terms: list[tuple[Expr, int]]) -> Expr:
    result: Expr | None = None
    for term, sign in terms:
        if result is None:
            result = term if sign > 0 else Unary(UnaryOp.NEG, term)
        else:
            result = Binary(BinaryOp.ADD if sign > 0 else BinaryOp.SUB, result, term)
    return result if result is not None else Const(0.0)


def _reads(expr: Expr, names: set[str]) -> set[str]:
    return {load.buffer for load in expr_loads(expr) if load.buffer in names}


def _axis_keys(term: Expr, axis: str) -> set[tuple[str, int]]:
    """(buffer, dimension) pairs a fold's variable indexes exactly: what the fold walks along."""
    return {
        (load.buffer, position)
        for load in expr_loads(term)
        for position, index in enumerate(load.index)
        if index == AxisIndex(axis)
    }


def _split_sum_fold(member: str, term: Expr, axis: str, group: set[str], reference: str) -> OnlineDependent:
    kept: list[tuple[Expr, int]] = []
    scale_by: list[Expr] = []
    divide_by: list[Expr] = []
    exponents: list[tuple[Expr, int]] = []
    for factor, power in _flatten_product(term):
        read = _reads(factor, group)
        mixes = axis in expr_axes(factor)
        if not read:
            kept.append((factor, power))
        elif not mixes:
            (scale_by if power > 0 else divide_by).append(factor)
        elif isinstance(factor, Unary) and factor.op is UnaryOp.EXP:
            for part, sign in _flatten_sum(factor.operand):
                part_reads = _reads(part, group)
                if part_reads and axis in expr_axes(part):
                    raise _NoSplit(
                        f"{member}: exponent term {format_expr(part)} mixes the fold axis {axis} with"
                        f" {', '.join(sorted(part_reads))}, so exp(...) does not split as g(x)·h(R)"
                    )
                if part_reads - {reference}:
                    raise _NoSplit(
                        f"{member}: exponent reads {', '.join(sorted(part_reads - {reference}))}, which is"
                        f" itself folded in this pass (only {reference} can be a running reference)"
                    )
                if part_reads:
                    exponents.append((part, sign * power))
            kept.append((factor, power))
        else:
            raise _NoSplit(
                f"{member}: factor {format_expr(factor)} mixes the fold axis {axis} with"
                f" {', '.join(sorted(read))} and is not exp(...), so the term does not split as g(x)·h(R)"
            )
    exponent = _signed_sum(exponents) if exponents else None
    return OnlineDependent(member, Combiner.SUM, axis, _product(kept), exponent, tuple(scale_by), tuple(divide_by))


def _split_extremum_fold(member: str, combiner: Combiner, term: Expr, axis: str, group: set[str]) -> OnlineDependent:
    kept: list[tuple[Expr, int]] = []
    offsets: list[tuple[int, Expr]] = []
    for part, sign in _flatten_sum(term):
        read = _reads(part, group)
        if not read:
            kept.append((part, sign))
        elif axis not in expr_axes(part):
            offsets.append((sign, part))
        else:
            raise _NoSplit(
                f"{member}: term {format_expr(part)} mixes the fold axis {axis} with"
                f" {', '.join(sorted(read))}, so the {combiner.value} fold does not split as g(x) + h(R)"
            )
    return OnlineDependent(member, combiner, axis, _signed_sum(kept), None, offsets=tuple(offsets))


def _check_distance(member: str, dependent: OnlineDependent, reference: Kernel, reference_term: Expr) -> None:
    """Every exp factor of ``dependent``'s term that reads the reference ``R`` must be the
    distance of the reference's own term below it: ``exp(t - R)`` for a max (``exp(R - t)``
    for a min), ``t`` the term ``R`` folds, at the same point.

    That is what makes a masked prefix exact (``weft.lower.online``): while ``R`` is still
    the fold's identity (every ``t`` so far -inf), each such factor against the final
    reference is ``exp(-inf) = 0``, so the prefix contributes exactly ``0 * g`` (0, or NaN
    where the rest ``g`` is not finite), and a row that stays at the identity is NaN
    (``exp(-inf - -inf)``). A factor ``exp(y - R)`` of some other ``y`` would need the
    final reference for its prefix terms, which the pass does not have."""
    sign = -1 if reference.fold.combiner is Combiner.MAX else 1
    for factor, _ in _flatten_product(dependent.term):
        if not (isinstance(factor, Unary) and factor.op is UnaryOp.EXP and _reads(factor, {reference.output})):
            continue
        parts = _flatten_sum(factor.operand)
        at_reference = [(part, s) for part, s in parts if _reads(part, {reference.output})]
        rest = [(part, s) for part, s in parts if not _reads(part, {reference.output})]
        load = at_reference[0][0] if len(at_reference) == 1 else None
        if load is None or not isinstance(load, Load) or at_reference[0][1] != sign or load.padding is not None:
            raise _NoSplit(f"{member}: exponent {format_expr(factor.operand)} is not one distance to {reference.output}")
        mapping = {axis.name: index for axis, index in zip(reference.axes, load.index, strict=True)}
        mapping[reference.fold.axes[0].name] = AxisIndex(dependent.fold_axis)
        expected = [(part, -sign * s) for part, s in _flatten_sum(substitute_axes(reference_term, mapping))]
        if sorted(map(repr, rest)) != sorted(map(repr, expected)):
            raise _NoSplit(
                f"{member}: exponent {format_expr(factor.operand)} is not the distance of {reference.output}'s own"
                " term below it, so a masked prefix of the pass could not be restarted exactly"
            )


def derive_online_fold(plan: Plan, region: Region, contract: str = "inference") -> OnlineFold | RewriteRefusal | None:
    """The rescaling rewrite for ``region``; None when no fold reads another fold over its axis."""
    kernels = {name: plan.kernel(name) for name in region.members}
    elementwise = {name: kernel for name, kernel in kernels.items() if kernel.fold is None and name != region.anchor}
    folds: dict[str, tuple[Kernel, Expr]] = {}
    for name, kernel in kernels.items():
        if kernel.fold is not None and len(kernel.fold.axes) == 1:
            folds[name] = (kernel, inline_members(kernel.body, elementwise))
    keys = {name: _axis_keys(term, kernel.fold.axes[0].name) for name, (kernel, term) in folds.items()}
    extent = {name: kernel.fold.axes[0].extent for name, (kernel, _) in folds.items()}
    # edges: a fold reading another fold over the same axis
    edges: dict[str, set[str]] = {name: set() for name in folds}
    for name, (_, term) in folds.items():
        for other in _reads(term, set(folds) - {name}):
            if keys[name] & keys[other] and extent[name] == extent[other]:
                edges[name].add(other)
    linked = {name for name, sources in edges.items() if sources} | {s for sources in edges.values() for s in sources}
    if not linked:
        return None
    order = [name for name in kernels if name in linked]
    group = _component(order[0], edges)
    members = [name for name in order if name in group]
    sources = [name for name in members if not edges[name] & group]
    # The running reference is the one max/min fold among the sources (a sum one if
    # there is none); other sources fold alongside it in the same pass, unrescaled.
    extrema = [name for name in sources if folds[name][0].fold.combiner is not Combiner.SUM]
    if len(extrema) > 1:
        return RewriteRefusal(region.anchor, f"folds {', '.join(extrema)} over one axis could each be the running reference")
    reference = extrema[0] if extrema else sources[0]
    reference_kernel, reference_term = folds[reference]
    dependents = []
    try:
        for name in members:
            if name == reference:
                continue
            kernel, term = folds[name]
            axis = kernel.fold.axes[0].name
            if kernel.fold.combiner is Combiner.SUM:
                dependent = _split_sum_fold(name, term, axis, group, reference)
            else:
                dependent = _split_extremum_fold(name, kernel.fold.combiner, term, axis, group)
            if dependent.exponent is not None and reference_kernel.fold.combiner is Combiner.SUM:
                raise _NoSplit(f"{name}: its exponent needs {reference}, a sum, as running reference; only max/min qualify")
            if dependent.exponent is not None:
                _check_distance(name, dependent, reference_kernel, reference_term)
            dependents.append(dependent)
    except _NoSplit as problem:
        return RewriteRefusal(region.anchor, f"term does not split: {problem}")
    online = OnlineFold(
        anchor=region.anchor,
        reference=reference,
        reference_combiner=reference_kernel.fold.combiner,
        reference_axis=reference_kernel.fold.axes[0].name,
        reference_term=reference_term,
        extent=extent[reference],
        dependents=tuple(dependents),
        dissolved=_dissolved(plan, region, set(members), elementwise),
    )
    if contract == "strict":
        return RewriteRefusal(region.anchor, STRICT_REFUSAL, applicable=True, online=online)
    return online


def _component(start: str, edges: dict[str, set[str]]) -> set[str]:
    neighbours: dict[str, set[str]] = {name: set(sources) for name, sources in edges.items()}
    for name, sources in edges.items():
        for source in sources:
            neighbours[source].add(name)
    seen, stack = {start}, [start]
    while stack:
        for other in neighbours[stack.pop()]:
            if other not in seen:
                seen.add(other)
                stack.append(other)
    return seen


def _dissolved(plan: Plan, region: Region, group: set[str], elementwise: dict[str, Kernel]) -> tuple[str, ...]:
    """Elementwise members read only by the merged folds (directly or through each other):
    inlined into the pass, they are never written (attention's E and P)."""
    readers = plan.index.readers
    dissolved: set[str] = set()
    for name in reversed(region.members):
        if name in elementwise and readers[name] and all(r in group or r in dissolved for r in readers[name]):
            dissolved.add(name)
    return tuple(name for name in region.members if name in dissolved)


def streamed_members(plan: Plan, region: Region, online: OnlineFold) -> dict[str, int]:
    """Private members read only by the pass, along the pass axis: computed per step of it
    (attention's scores). Returns member -> the dimension of its output the pass walks."""
    readers = plan.index.readers
    group = set(online.members) | set(online.dissolved)
    terms = [(online.reference_term, online.reference_axis)] + [(d.term, d.fold_axis) for d in online.dependents]
    streamed: dict[str, int] = {}
    for name in region.private:
        if name in group or not all(reader in group for reader in readers[name]):
            continue
        positions = set()
        for term, axis in terms:
            for load in expr_loads(term):
                if load.buffer == name:
                    found = [p for p, index in enumerate(load.index) if index == AxisIndex(axis)]
                    positions.add(found[0] if len(found) == 1 else None)
        if len(positions) == 1 and None not in positions:
            streamed[name] = positions.pop()
    return streamed


def pass_schedule(plan: Plan, region: Region, online: OnlineFold) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """Region members to run before and after the one pass, or None if no order works.

    The pass needs every member its terms (and its streamed members) read; every
    member reading a folded result must follow it. Members the pass makes
    unnecessary (dissolved, streamed) appear in neither list.
    """
    streamed = streamed_members(plan, region, online)
    group = set(online.members)
    skipped = set(online.dissolved) | set(streamed)
    exprs = [online.reference_term]
    for dependent in online.dependents:
        exprs += [dependent.term, *dependent.scale_by, *dependent.divide_by, *(e for _, e in dependent.offsets)]
        if dependent.exponent is not None:
            exprs.append(dependent.exponent)
    exprs += [plan.kernel(name).body for name in streamed]
    needed = {load.buffer for expr in exprs for load in expr_loads(expr)} - group - skipped
    order = [name for name in region.members if name not in group and name not in skipped]
    last_needed = max((order.index(name) for name in needed if name in order), default=-1)
    before, after = tuple(order[: last_needed + 1]), tuple(order[last_needed + 1:])
    kernels = {name: plan.kernel(name) for name in before}
    if any(set(kernels[name].reads) & group for name in before):
        return None
    return before, after


@dataclass(frozen=True, slots=True)
class OnePass:
    """What the one-pass lowering needs from the rewrite, as data (``weft.lower.online``
    reads it and imports nothing from here).

    ``streamed``: (member, the dimension of its output the pass walks), in region order;
    ``schedule``: the members to run before and after the pass, None if no order works.
    """

    online: OnlineFold
    streamed: tuple[tuple[str, int], ...]
    schedule: tuple[tuple[str, ...], tuple[str, ...]] | None


def one_pass(plan: Plan, region: Region, contract: str) -> OnePass | None:
    """The rewrite's one pass over ``region`` (None: it does not apply, or ``contract`` forbids it)."""
    online = derive_online_fold(plan, region, contract)
    if not isinstance(online, OnlineFold):
        return None
    streamed = tuple(streamed_members(plan, region, online).items())
    return OnePass(online, streamed, pass_schedule(plan, region, online))
