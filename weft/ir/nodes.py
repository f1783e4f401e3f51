"""The IR: buffers, index expressions, body expressions, kernels (members), plans.

Every node is a frozen dataclass; passes build new nodes with
``dataclasses.replace`` and never mutate. The IR knows nothing of C or NumPy.

A kernel (one *member* of a plan) writes one buffer::

    out[i, j] = fold_{k} body(i, j, k)        # fold: sum | max | min over axes k
    out[i, j] = body(i, j)                    # no fold: elementwise / index map

Index expressions are affine in the axes plus floor-div and mod, so transpose,
reshape, broadcast, slice, concat and window partition are index maps inside a
``Load``, never copy kernels. ``IndexOf`` lifts an integer-valued expression into
an index (gather: embedding lookup, cross-entropy targets).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields


class DType(enum.Enum):
    FLOAT32 = "float32"
    INT32 = "int32"
    INT64 = "int64"
    BOOL = "bool"

    @property
    def is_float(self) -> bool:
        return self is DType.FLOAT32

    @property
    def is_int(self) -> bool:
        return self in (DType.INT32, DType.INT64)

    @property
    def itemsize(self) -> int:
        return {"float32": 4, "int32": 4, "int64": 8, "bool": 1}[self.value]

    @property
    def short(self) -> str:
        return {"float32": "f32", "int32": "i32", "int64": "i64", "bool": "bool"}[self.value]


class Role(enum.Enum):
    INPUT = "input"
    PARAM = "param"
    INTERMEDIATE = "intermediate"
    OUTPUT = "output"


@dataclass(frozen=True, slots=True)
class Buffer:
    name: str
    shape: tuple[int, ...]
    dtype: DType
    role: Role

    @property
    def size(self) -> int:
        n = 1
        for extent in self.shape:
            n *= extent
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


# --------------------------------------------------------------------------- index


class IndexExpr:
    """An integer index: affine in axis variables, plus floor-div and mod."""

    __slots__ = ()

    def __add__(self, other: IndexExpr | int) -> IndexExpr:
        return index_add(self, as_index(other))

    __radd__ = __add__

    def __sub__(self, other: IndexExpr | int) -> IndexExpr:
        return index_add(self, index_mul(as_index(other), -1))

    def __mul__(self, factor: int) -> IndexExpr:
        return index_mul(self, factor)

    __rmul__ = __mul__

    def __floordiv__(self, divisor: int) -> IndexExpr:
        return IndexFloorDiv(self, divisor) if divisor != 1 else self

    def __mod__(self, divisor: int) -> IndexExpr:
        return IndexMod(self, divisor)


@dataclass(frozen=True, slots=True)
class AxisIndex(IndexExpr):
    axis: str


@dataclass(frozen=True, slots=True)
class IndexConst(IndexExpr):
    value: int


@dataclass(frozen=True, slots=True)
class IndexAdd(IndexExpr):
    left: IndexExpr
    right: IndexExpr


@dataclass(frozen=True, slots=True)
class IndexMul(IndexExpr):
    operand: IndexExpr
    factor: int


@dataclass(frozen=True, slots=True)
class IndexFloorDiv(IndexExpr):
    operand: IndexExpr
    divisor: int


@dataclass(frozen=True, slots=True)
class IndexMod(IndexExpr):
    operand: IndexExpr
    divisor: int


@dataclass(frozen=True, slots=True)
class IndexOf(IndexExpr):
    """A data-dependent index: the value of an integer expression (a gather)."""

    value: Expr


def as_index(value: IndexExpr | int) -> IndexExpr:
    if isinstance(value, IndexExpr):
        return value
    return IndexConst(int(value))


def index_add(left: IndexExpr, right: IndexExpr) -> IndexExpr:
    if isinstance(right, IndexConst) and right.value == 0:
        return left
    if isinstance(left, IndexConst) and left.value == 0:
        return right
    if isinstance(left, IndexConst) and isinstance(right, IndexConst):
        return IndexConst(left.value + right.value)
    return IndexAdd(left, right)


def index_mul(operand: IndexExpr, factor: int) -> IndexExpr:
    if factor == 1:
        return operand
    if factor == 0:
        return IndexConst(0)
    if isinstance(operand, IndexConst):
        return IndexConst(operand.value * factor)
    return IndexMul(operand, factor)


def index_axes(index: IndexExpr) -> frozenset[str]:
    """Axis names an index expression reads (including inside ``IndexOf``)."""
    match index:
        case AxisIndex(axis):
            return frozenset((axis,))
        case IndexConst():
            return frozenset()
        case IndexAdd(left, right):
            return index_axes(left) | index_axes(right)
        case IndexMul(operand, _) | IndexFloorDiv(operand, _) | IndexMod(operand, _):
            return index_axes(operand)
        case IndexOf(value):
            return expr_axes(value)
    raise TypeError(f"not an index expression: {index!r}")


# --------------------------------------------------------------------------- body


class UnaryOp(enum.Enum):
    NEG = "neg"
    ABS = "abs"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    TANH = "tanh"
    ERF = "erf"
    SIGMOID = "sigmoid"
    SIN = "sin"
    COS = "cos"
    NOT = "not"


class BinaryOp(enum.Enum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    FMOD = "fmod"  # remainder of the truncating division: the sign of the dividend (C's %, fmodf)
    MAX = "max"
    MIN = "min"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    EQ = "eq"
    NE = "ne"
    AND = "and"
    OR = "or"


COMPARISONS = frozenset({BinaryOp.LT, BinaryOp.LE, BinaryOp.GT, BinaryOp.GE, BinaryOp.EQ, BinaryOp.NE})
LOGICAL = frozenset({BinaryOp.AND, BinaryOp.OR})
TRANSCENDENTAL = frozenset(
    {UnaryOp.EXP, UnaryOp.LOG, UnaryOp.TANH, UnaryOp.ERF, UnaryOp.SIGMOID, UnaryOp.SIN, UnaryOp.COS}
)


class Expr:
    """A body expression, evaluated at one point of a kernel's iteration space."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Load(Expr):
    """Read ``buffer[index]``. With ``padding`` set, an out-of-range index reads
    that value instead (convolution padding, concatenation); without it an
    out-of-range index is an IR error."""

    buffer: str
    index: tuple[IndexExpr, ...]
    padding: float | None = None


@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: float | int | bool
    dtype: DType = DType.FLOAT32


@dataclass(frozen=True, slots=True)
class IndexValue(Expr):
    """The value of an index expression (an axis variable used as data)."""

    index: IndexExpr
    dtype: DType = DType.INT64


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    op: UnaryOp
    operand: Expr


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    op: BinaryOp
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Where(Expr):
    condition: Expr
    if_true: Expr
    if_false: Expr


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    operand: Expr
    dtype: DType


def expr_children(expr: Expr) -> tuple[Expr, ...]:
    match expr:
        case Load(_, index, _):
            return tuple(i.value for i in _walk_index_of(index))
        case Const() | IndexValue():
            return ()
        case Unary(_, operand) | Cast(operand, _):
            return (operand,)
        case Binary(_, left, right):
            return (left, right)
        case Where(condition, if_true, if_false):
            return (condition, if_true, if_false)
    raise TypeError(f"not an expression: {expr!r}")


def _walk_index_of(index: tuple[IndexExpr, ...]):
    stack = list(index)
    while stack:
        node = stack.pop()
        match node:
            case IndexOf():
                yield node
            case IndexAdd(left, right):
                stack += [left, right]
            case IndexMul(operand, _) | IndexFloorDiv(operand, _) | IndexMod(operand, _):
                stack.append(operand)


def walk_expr(expr: Expr):
    """Yield every node of an expression tree, parents before children."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(expr_children(node)))


def expr_loads(expr: Expr) -> tuple[Load, ...]:
    return tuple(node for node in walk_expr(expr) if isinstance(node, Load))


def expr_axes(expr: Expr) -> frozenset[str]:
    axes: set[str] = set()
    for node in walk_expr(expr):
        if isinstance(node, Load):
            for index in node.index:
                axes |= index_axes(index)
        elif isinstance(node, IndexValue):
            axes |= index_axes(node.index)
    return frozenset(axes)


# --------------------------------------------------------------------------- kernel


class Combiner(enum.Enum):
    SUM = "sum"
    MAX = "max"
    MIN = "min"


@dataclass(frozen=True, slots=True)
class Axis:
    name: str
    extent: int


@dataclass(frozen=True, slots=True)
class Fold:
    """Reduce the body over ``axes`` (row-major order, ascending) with ``combiner``."""

    axes: tuple[Axis, ...]
    combiner: Combiner


@dataclass(frozen=True, slots=True)
class Kernel:
    """One member: writes buffer ``output`` over ``axes``; at most one fold."""

    output: str
    axes: tuple[Axis, ...]
    body: Expr
    fold: Fold | None = None
    # memo of ``loads`` (a pure function of ``body``): no part of the value, its equality or hash
    _loads: tuple[Load, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _reads: tuple[str, ...] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.output

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(axis.extent for axis in self.axes)

    @property
    def fold_axes(self) -> tuple[Axis, ...]:
        return self.fold.axes if self.fold else ()

    @property
    def all_axes(self) -> tuple[Axis, ...]:
        return self.axes + self.fold_axes

    @property
    def loads(self) -> tuple[Load, ...]:
        """``expr_loads(self.body)``, walked once per kernel and remembered."""
        if self._loads is None:
            object.__setattr__(self, "_loads", expr_loads(self.body))
        return self._loads

    @property
    def reads(self) -> tuple[str, ...]:
        """Buffers read, in first-read order, without repeats."""
        if self._reads is None:
            object.__setattr__(self, "_reads", tuple(dict.fromkeys(load.buffer for load in self.loads)))
        return self._reads

    def __getstate__(self):
        return (self.output, self.axes, self.body, self.fold)

    def __setstate__(self, state) -> None:
        for name, value in zip(("output", "axes", "body", "fold"), state, strict=True):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_loads", None)
        object.__setattr__(self, "_reads", None)

    @property
    def is_contraction(self) -> bool:
        """A sum fold whose body multiplies loads (matmul, conv): compute-dense."""
        if not self.fold or self.fold.combiner is not Combiner.SUM:
            return False
        return any(
            isinstance(node, Binary) and node.op is BinaryOp.MUL
            and isinstance(node.left, Load | Cast) and isinstance(node.right, Load | Cast)
            for node in walk_expr(self.body)
        )


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True, slots=True)
class PlanIndex:
    """Lookups over one plan, built once (``Plan.index``): members and buffers by name,
    each member's position, and the readers of every buffer.

    Passes ask these questions for every member of every candidate region; answering
    each by scanning the plan made a compile quadratic in the number of members. The
    readers walk every member's body, so they are found on first use (a warm compile,
    which looks members and buffers up by name, never walks the bodies).
    """

    kernels: dict[str, Kernel]
    buffers: dict[str, Buffer]
    position: dict[str, int]
    outputs: frozenset[str]
    # the plan's members and outputs in order, for the readers (each output adds OUTSIDE)
    plan_kernels: tuple[Kernel, ...] = field(default=(), repr=False)
    plan_outputs: tuple[str, ...] = field(default=(), repr=False)
    # per-member facts derived on demand by later passes (``weft.ir.canonical``), kept with the plan
    derived: dict[str, object] = field(default_factory=dict)
    _readers: dict[str, tuple[str, ...]] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def readers(self) -> dict[str, tuple[str, ...]]:
        """Buffer name -> the members reading it, in plan order (a plan output adds OUTSIDE)."""
        if self._readers is None:
            readers: dict[str, list[str]] = {name: [] for name in self.buffers}
            for kernel in self.plan_kernels:
                for name in kernel.reads:
                    readers.setdefault(name, []).append(kernel.output)
            for name in self.plan_outputs:
                readers.setdefault(name, []).append(OUTSIDE)
            object.__setattr__(self, "_readers", {name: tuple(names) for name, names in readers.items()})
        return self._readers


def build_plan_index(plan: Plan) -> PlanIndex:
    return PlanIndex(
        kernels={kernel.output: kernel for kernel in plan.kernels},
        buffers={buffer.name: buffer for buffer in plan.buffers},
        position={kernel.output: position for position, kernel in enumerate(plan.kernels)},
        outputs=frozenset(plan.outputs),
        plan_kernels=plan.kernels,
        plan_outputs=plan.outputs,
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """Members in topological order, with the plan's inputs and outputs (by name)."""

    buffers: tuple[Buffer, ...]
    kernels: tuple[Kernel, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    name: str = "plan"
    # memo of ``index`` (a pure function of the fields above): no part of the value
    _index: PlanIndex | None = field(default=None, init=False, repr=False, compare=False)
    _text: str | None = field(default=None, init=False, repr=False, compare=False)  # memo of ``text()``

    @property
    def index(self) -> PlanIndex:
        """The plan's lookups, built on first use and kept with the (immutable) plan."""
        if self._index is None:
            object.__setattr__(self, "_index", build_plan_index(self))
        return self._index

    def __getstate__(self):
        return (self.buffers, self.kernels, self.inputs, self.outputs, self.name)

    def __setstate__(self, state) -> None:
        for name, value in zip(("buffers", "kernels", "inputs", "outputs", "name"), state, strict=True):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_index", None)
        object.__setattr__(self, "_text", None)

    def text(self) -> str:
        """Everything the plan says, as text: its name, each buffer's name, shape, dtype and
        role, every member (its ``repr``), its inputs and outputs. Two plans with the same
        text are the same program (``weft.runtime.record.record_key`` hashes it); made once
        per plan, which is immutable (a second compile of it does not walk it again)."""
        if self._text is None:
            # a buffer as repr(name):repr(shape):dtype:role; (enum members' ``_value_`` is their
            # value: ``.value`` is a descriptor call per access)
            buffers = "".join([f"{b.name!r}:{b.shape!r}:{b.dtype._value_}:{b.role._value_};" for b in self.buffers])
            object.__setattr__(self, "_text", repr((self.name, buffers, self.kernels, self.inputs, self.outputs)))
        return self._text

    @property
    def members(self) -> tuple[Kernel, ...]:
        """The plan's members (kernels), in topological order: the documented name;
        ``kernels`` is the same tuple."""
        return self.kernels

    def buffer(self, name: str) -> Buffer:
        return self.index.buffers[name]

    def buffer_map(self) -> dict[str, Buffer]:
        return dict(self.index.buffers)

    def kernel(self, output: str) -> Kernel:
        return self.index.kernels[output]

    def producers(self) -> dict[str, Kernel]:
        return dict(self.index.kernels)

    def position(self, output: str) -> int:
        """Where member ``output`` runs in the plan (0 first)."""
        return self.index.position[output]

    def readers(self) -> dict[str, tuple[str, ...]]:
        """Buffer name -> names of the kernels reading it (plan outputs add '<output>')."""
        return dict(self.index.readers)

    def readers_of(self, buffer: str) -> tuple[str, ...]:
        """The kernels reading ``buffer`` ('<output>' for a plan output), without copying the index."""
        return self.index.readers.get(buffer, ())


OUTSIDE = "<output>"



def _repr_with_the_name_written_in(*classes: type) -> None:
    """Give the IR's dataclasses a ``__repr__`` that writes the generated one's text
    (``Load(buffer='x', index=(AxisIndex(axis='i'),), padding=None)``) at about 0.4 of
    its cost. The generated one is wrapped in ``reprlib``'s recursion guard (a set of
    object ids per thread, consulted on every node; frozen nodes built bottom-up cannot
    form a cycle) and looks ``self.__class__.__qualname__`` up on every node; here the
    name is written into the function (IR nodes are not subclassed). A warm compile
    hashes the ``repr`` of the whole plan (``weft.runtime.record.record_key``), so this
    cost is per node of the plan. Made as ``dataclasses`` makes its own: from the fields."""
    enums = {cls.__name__ for cls in _ENUMS}
    for cls in classes:
        # a field holding one of the IR's enums writes its stored repr (_enum_repr_once) with no call
        shown = ", ".join(f"{f.name}={{self.{f.name}._repr_text}}" if f.type in enums else f"{f.name}={{self.{f.name}!r}}"
                          for f in fields(cls) if f.repr)
        namespace: dict[str, object] = {}
        exec(f"def __repr__(self):\n    return f'{cls.__qualname__}({shown})'", namespace)  # noqa: S102
        namespace["__repr__"].__qualname__ = f"{cls.__qualname__}.__repr__"
        cls.__repr__ = namespace["__repr__"]


def _enum_repr_once(*enums: type[enum.Enum]) -> None:
    """Each member's ``repr`` (``<DType.FLOAT32: 'float32'>``, as ``enum`` writes it) made
    once, not formatted anew for every node that holds it (same reason as above)."""
    for cls in enums:
        for member in cls:
            member._repr_text = enum.Enum.__repr__(member)
        cls.__repr__ = _stored_repr


def _stored_repr(member: enum.Enum) -> str:
    return member._repr_text


_ENUMS = (DType, Role, UnaryOp, BinaryOp, Combiner)
_enum_repr_once(*_ENUMS)
_repr_with_the_name_written_in(Buffer, AxisIndex, IndexConst, IndexAdd, IndexMul, IndexFloorDiv, IndexMod, IndexOf,
                         Load, Const, IndexValue, Unary, Binary, Where, Cast, Axis, Fold, Kernel)
