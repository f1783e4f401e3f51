"""The fused Adam step body: its matcher and its price.

Matches the three members ``weft.nn.adam_step`` emits (no weight decay), in any order
of discovery, over identical flat or n-d shapes read element for element::

    m' = b1 * m + c1 * g
    v' = b2 * v + (c2 * g) * g
    p' = p - s * (m' / (sqrt(v') / q + eps))

and recovers every constant from the members' bodies (nothing is assumed about the
hyperparameters). The body (``weft.lower.library``, C in ``weft.codegen.library``) is
one pass reading p, g, m, v once and writing p', m', v' once, vectorised, parallel over
chunks: the same operations in the same order per element as the members, so it is
byte-identical to the oracle under Strict (no FMA there) and honours both contracts.
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.ir import AxisIndex, Binary, BinaryOp, Const, DType, Expr, Load, Plan, Unary, UnaryOp

ADAM_ROLES = ("param", "grad", "m", "v", "new_param", "new_m", "new_v")


@dataclass(frozen=True, slots=True)
class LibraryMatch:
    """What a matcher proved: which body, each role's buffer, the constants it recovered,
    and the element count. Plain data: the lowering (``weft.lower.library``) reads it."""

    body: str
    roles: tuple[tuple[str, str], ...]  # (role, buffer name)
    constants: tuple[tuple[str, float], ...]
    shape: tuple[int, ...]
    outputs: tuple[str, ...]  # the members it writes

    def role(self, name: str) -> str:
        return dict(self.roles)[name]

    def constant(self, name: str) -> float:
        return dict(self.constants)[name]


def stream_parts(reads: tuple[tuple[str, float], ...], writes: tuple[tuple[str, float], ...], numbers,
                 homes: dict[str, int] | None) -> tuple[float, float]:
    """(L1 cycles, cycles beyond L1) to read each (buffer, bytes) of ``reads`` and write each of
    ``writes`` once: a buffer from the level the plan leaves it at (``homes``, as the generic
    forms are priced), else from the level the whole set fits."""
    together = sum(size for _, size in reads) + sum(size for _, size in writes)
    fits = next((number for number, capacity in enumerate(numbers.capacities) if together <= capacity),
                len(numbers.capacities))
    homes = homes or {}
    parts = [0.0, 0.0]
    for streams, bandwidth in ((reads, numbers.read_bytes_per_cycle), (writes, numbers.write_bytes_per_cycle)):
        for name, size in streams:
            level = homes.get(name, fits)
            parts[level > 0] += size / bandwidth[level]
    return parts[0], parts[1]


def _elementwise_load(expr: Expr, axes: tuple[str, ...]) -> str | None:
    if isinstance(expr, Load) and expr.padding is None and tuple(
            index.axis if isinstance(index, AxisIndex) else None for index in expr.index) == axes:
        return expr.buffer
    return None


def _const(expr: Expr) -> float | None:
    return float(expr.value) if isinstance(expr, Const) and expr.dtype is DType.FLOAT32 else None


@dataclass(frozen=True, slots=True)
class _Scalar:
    """A float32 constant, bound to ``name``."""

    name: str


@dataclass(frozen=True, slots=True)
class _Element:
    """A buffer read element for element (no padding), bound to ``name``; a name met twice
    must be the same buffer."""

    name: str


@dataclass(frozen=True, slots=True)
class _Op:
    op: BinaryOp | UnaryOp
    operands: tuple


def _bind(pattern, expr: Expr, axes: tuple[str, ...], bound: dict[str, object]) -> bool:
    """Whether ``expr`` has the shape of ``pattern``; what the pattern names goes into ``bound``."""
    match pattern:
        case _Scalar(name):
            value = _const(expr)
        case _Element(name):
            value = _elementwise_load(expr, axes)
        case _Op(op, operands):
            if isinstance(op, UnaryOp):
                return isinstance(expr, Unary) and expr.op is op and _bind(operands[0], expr.operand, axes, bound)
            return (isinstance(expr, Binary) and expr.op is op and _bind(operands[0], expr.left, axes, bound)
                    and _bind(operands[1], expr.right, axes, bound))
    if value is None or (name in bound and bound[name] != value):
        return False
    bound[name] = value
    return True


def _add(left, right) -> _Op:
    return _Op(BinaryOp.ADD, (left, right))


def _mul(left, right) -> _Op:
    return _Op(BinaryOp.MUL, (left, right))


def _div(left, right) -> _Op:
    return _Op(BinaryOp.DIV, (left, right))


# the three members of one step, as weft.nn.adam_step writes them (module doc)
ADAM_MEMBERS = {
    "first": _add(_mul(_Scalar("b1"), _Element("m")), _mul(_Scalar("c1"), _Element("grad"))),
    "second": _add(_mul(_Scalar("b2"), _Element("v")), _mul(_mul(_Scalar("c2"), _Element("grad")), _Element("grad"))),
    "update": _Op(BinaryOp.SUB, (_Element("param"), _mul(_Scalar("step"), _div(
        _Element("new_m"), _add(_div(_Op(UnaryOp.SQRT, (_Element("new_v"),)), _Scalar("root")), _Scalar("eps")))))),
}


def match_adam(plan: Plan, members: tuple[str, ...]) -> LibraryMatch | None:
    """A ``LibraryMatch`` for "fused adam" when ``members`` are exactly one Adam step (see
    module doc): float32 buffers of one shape, every read element for element; else None."""
    if len(members) != 3:
        return None
    kernels = [plan.kernel(member) for member in members]
    if any(kernel.fold is not None for kernel in kernels):
        return None
    axes = tuple(axis.name for axis in kernels[0].axes)
    shape = tuple(axis.extent for axis in kernels[0].axes)
    if any(tuple(axis.extent for axis in kernel.axes) != shape for kernel in kernels):
        return None
    found: dict[str, tuple[str, dict[str, object]]] = {}
    for kernel in kernels:
        own_axes = tuple(axis.name for axis in kernel.axes)
        for name, pattern in ADAM_MEMBERS.items():
            bound: dict[str, object] = {}
            if _bind(pattern, kernel.body, own_axes, bound) and name not in found:
                found[name] = (kernel.output, bound)
                break
    if set(found) != set(ADAM_MEMBERS):
        return None
    (new_m, first), (new_v, second), (new_param, update) = found["first"], found["second"], found["update"]
    if first["grad"] != second["grad"] or update["new_m"] != new_m or update["new_v"] != new_v:
        return None
    roles = (("param", update["param"]), ("grad", first["grad"]), ("m", first["m"]), ("v", second["v"]),
             ("new_param", new_param), ("new_m", new_m), ("new_v", new_v))
    buffers = plan.buffer_map()
    if any(buffers[name].dtype is not DType.FLOAT32 or buffers[name].shape != shape for _, name in roles):
        return None
    if len({name for _, name in roles}) != len(roles):
        return None  # an input read as two roles (or updated in place): not the step the body writes
    constants = tuple((name, {**first, **second, **update}[name]) for name in ("b1", "c1", "b2", "c2", "step", "root", "eps"))
    del axes
    return LibraryMatch("fused adam", roles, constants, shape, (new_m, new_v, new_param))


def price_adam(match: LibraryMatch, numbers, homes: dict[str, int] | None = None) -> float:
    """Cycles of one pass: 4 streams read and 3 written once each, from and to the levels the
    plan leaves them at (``homes``; else where the whole set fits), plus one square root and
    one divide per vector, combined as a generated nest's (``weft.cost.model.body_cycles``:
    the body prefetches nothing, so the divides wait on the transfers from beyond L1)."""
    from weft.cost.model import body_cycles

    elements = 1
    for extent in match.shape:
        elements *= extent
    size = 4.0 * elements
    written = set(match.outputs)
    reads = tuple((name, size) for role, name in match.roles if name not in written)
    writes = tuple((name, size) for name in match.outputs)
    l1, exposed = stream_parts(reads, writes, numbers, homes)
    vectors = -(-elements // max(numbers.lanes, 1))
    arithmetic = vectors * 2 * numbers.divide_cycles / max(numbers.threads, 1)
    parallel = numbers.parallel_region_cycles if elements >= 65536 and numbers.threads > 1 else 0.0
    return body_cycles(arithmetic, l1, exposed) + parallel
