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

from weft.ir import AxisIndex, Binary, BinaryOp, Const, DType, Expr, Kernel, Load, Plan, Unary, UnaryOp

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


def stream_cycles(reads: tuple[tuple[str, float], ...], writes: tuple[tuple[str, float], ...], numbers,
                  homes: dict[str, int] | None) -> float:
    """Cycles to read each (buffer, bytes) of ``reads`` and write each of ``writes`` once: a
    buffer from the level the plan leaves it at (``homes``, as the generic forms are priced),
    else from the level the whole set fits."""
    together = sum(size for _, size in reads) + sum(size for _, size in writes)
    fits = next((number for number, capacity in enumerate(numbers.capacities) if together <= capacity),
                len(numbers.capacities))
    homes = homes or {}
    return (sum(size / numbers.read_bytes_per_cycle[homes.get(name, fits)] for name, size in reads)
            + sum(size / numbers.write_bytes_per_cycle[homes.get(name, fits)] for name, size in writes))


def _elementwise_load(expr: Expr, axes: tuple[str, ...]) -> str | None:
    if isinstance(expr, Load) and expr.padding is None and tuple(
            index.axis if isinstance(index, AxisIndex) else None for index in expr.index) == axes:
        return expr.buffer
    return None


def _binary(expr: Expr, op: BinaryOp) -> tuple[Expr, Expr] | None:
    return (expr.left, expr.right) if isinstance(expr, Binary) and expr.op is op else None


def _const(expr: Expr) -> float | None:
    return float(expr.value) if isinstance(expr, Const) and expr.dtype is DType.FLOAT32 else None


def _scaled(expr: Expr, axes) -> tuple[float, str] | None:
    """``Const * Load``."""
    parts = _binary(expr, BinaryOp.MUL)
    if parts is None or _const(parts[0]) is None:
        return None
    buffer = _elementwise_load(parts[1], axes)
    return None if buffer is None else (_const(parts[0]), buffer)


def _first_moment(kernel: Kernel, axes) -> tuple[float, str, float, str] | None:
    """(b1, m, c1, g) of ``b1 * m + c1 * g``."""
    parts = _binary(kernel.body, BinaryOp.ADD)
    if parts is None:
        return None
    decay, fresh = _scaled(parts[0], axes), _scaled(parts[1], axes)
    if decay is None or fresh is None:
        return None
    return decay[0], decay[1], fresh[0], fresh[1]


def _second_moment(kernel: Kernel, axes) -> tuple[float, str, float, str] | None:
    """(b2, v, c2, g) of ``b2 * v + (c2 * g) * g``."""
    parts = _binary(kernel.body, BinaryOp.ADD)
    if parts is None:
        return None
    decay = _scaled(parts[0], axes)
    square = _binary(parts[1], BinaryOp.MUL)
    if decay is None or square is None:
        return None
    scaled, again = _scaled(square[0], axes), _elementwise_load(square[1], axes)
    if scaled is None or again != scaled[1]:
        return None
    return decay[0], decay[1], scaled[0], scaled[1]


def _update(kernel: Kernel, axes) -> tuple[str, float, str, str, float, float] | None:
    """(p, s, m', v', q, eps) of ``p - s * (m' / (sqrt(v') / q + eps))``."""
    parts = _binary(kernel.body, BinaryOp.SUB)
    if parts is None:
        return None
    param = _elementwise_load(parts[0], axes)
    step = _binary(parts[1], BinaryOp.MUL)
    if param is None or step is None or _const(step[0]) is None:
        return None
    ratio = _binary(step[1], BinaryOp.DIV)
    if ratio is None:
        return None
    moment = _elementwise_load(ratio[0], axes)
    denominator = _binary(ratio[1], BinaryOp.ADD)
    if moment is None or denominator is None or _const(denominator[1]) is None:
        return None
    root = _binary(denominator[0], BinaryOp.DIV)
    if root is None or _const(root[1]) is None:
        return None
    if not (isinstance(root[0], Unary) and root[0].op is UnaryOp.SQRT):
        return None
    second = _elementwise_load(root[0].operand, axes)
    if second is None:
        return None
    return param, _const(step[0]), moment, second, _const(root[1]), _const(denominator[1])


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
    found = {}
    for kernel in kernels:
        own_axes = tuple(axis.name for axis in kernel.axes)
        for name, reader in (("first", _first_moment), ("second", _second_moment), ("update", _update)):
            parsed = reader(kernel, own_axes)
            if parsed is not None and name not in found:
                found[name] = (kernel.output, parsed)
                break
    if set(found) != {"first", "second", "update"}:
        return None
    new_m, (b1, m, c1, grad) = found["first"]
    new_v, (b2, v, c2, grad_again) = found["second"]
    new_param, (param, step, moment, second, root, eps) = found["update"]
    if grad != grad_again or moment != new_m or second != new_v:
        return None
    roles = (("param", param), ("grad", grad), ("m", m), ("v", v), ("new_param", new_param), ("new_m", new_m),
             ("new_v", new_v))
    buffers = plan.buffer_map()
    if any(buffers[name].dtype is not DType.FLOAT32 or buffers[name].shape != shape for _, name in roles):
        return None
    if len({name for _, name in roles}) != len(roles):
        return None  # an input read as two roles (or updated in place): not the step the body writes
    constants = (("b1", b1), ("c1", c1), ("b2", b2), ("c2", c2), ("step", step), ("root", root), ("eps", eps))
    del axes
    return LibraryMatch("fused adam", roles, constants, shape, (new_m, new_v, new_param))


def price_adam(match: LibraryMatch, numbers, homes: dict[str, int] | None = None) -> float:
    """Cycles of one pass: 4 streams read and 3 written once each, from and to the levels the
    plan leaves them at (``homes``; else where the whole set fits), plus one square root and
    one divide per vector (the divide throughput bounds it when the streams fit in cache)."""
    elements = 1
    for extent in match.shape:
        elements *= extent
    size = 4.0 * elements
    written = set(match.outputs)
    reads = tuple((name, size) for role, name in match.roles if name not in written)
    writes = tuple((name, size) for name in match.outputs)
    memory = stream_cycles(reads, writes, numbers, homes)
    vectors = -(-elements // max(numbers.lanes, 1))
    arithmetic = vectors * 2 * numbers.divide_cycles / max(numbers.threads, 1)
    parallel = numbers.parallel_region_cycles if elements >= 65536 and numbers.threads > 1 else 0.0
    return max(memory, arithmetic) + parallel
