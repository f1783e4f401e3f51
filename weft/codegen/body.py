"""Render a member's body expression as C statements, scalar or across vector lanes.

Each IR node becomes one local (``t12``), so a node used twice is computed once
(the memo is keyed by the node and the values of the axes it reads). In vector
mode a node that does not depend on the vector axis stays scalar and is splat
only where it meets a vector; loads are contiguous vector loads, broadcasts, or
lane-by-lane gathers. Every op is the same IEEE float32 operation in both modes,
so scalar tails and vector bodies agree bit for bit with each other and with the
oracle.

    t3 = wfc_load_f(&b_x[(i * 10) + j]);   /* x[i, j] along j */
    t4 = wf_exp(t3);
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from weft.codegen.values import c_value
from weft.ir import (
    COMPARISONS,
    AxisIndex,
    Binary,
    BinaryOp,
    Cast,
    Const,
    DType,
    Expr,
    IndexAdd,
    IndexConst,
    IndexExpr,
    IndexFloorDiv,
    IndexMod,
    IndexMul,
    IndexOf,
    IndexValue,
    Load,
    Unary,
    UnaryOp,
    Where,
    expr_axes,
    expr_loads,
    index_axes,
    index_range,
)
from weft.lower.access import Access, address_step, axis_step, lane_pattern, load_access, unwrapped_step
from weft.lower.access import has_index_of as _has_index_of
from weft.lower.nest import BufferView, LoweredFunction

SCALAR_TYPE = {DType.FLOAT32: "float", DType.INT32: "int32_t", DType.INT64: "int64_t", DType.BOOL: "int"}
VECTOR_TYPE = {DType.FLOAT32: "wf_vf", DType.INT32: "wf_vi", DType.INT64: "wf_vl", DType.BOOL: "wf_vi"}
SUFFIX = {DType.FLOAT32: "f", DType.INT32: "i", DType.INT64: "l", DType.BOOL: "i"}
STORAGE_TYPE = {DType.FLOAT32: "float", DType.INT32: "int32_t", DType.INT64: "int64_t", DType.BOOL: "uint8_t"}

def c_parameters(function: LoweredFunction, writes: Callable[[BufferView], bool]) -> list[str]:
    """The C parameters of ``function``'s buffer views,
    each ``const`` unless ``writes(view)`` (the function and its packing function write
    different views) and ``restrict`` unless it may share memory with another
    (``function.aliased``: an output written over an input)."""
    return [f"{'' if writes(view) else 'const '}{STORAGE_TYPE[view.dtype]} "
            f"*{'' if position in function.aliased else 'restrict '}{view.pointer}"
            for position, view in enumerate(function.params)]


C_INFIX = {
    BinaryOp.ADD: "+", BinaryOp.SUB: "-", BinaryOp.MUL: "*",
    BinaryOp.LT: "<", BinaryOp.LE: "<=", BinaryOp.GT: ">", BinaryOp.GE: ">=",
    BinaryOp.EQ: "==", BinaryOp.NE: "!=",
}
# Weft's transcendentals (from weft.mathf's C source: vector fn, scalar fn_s).
C_MATH = {
    UnaryOp.EXP: "wf_exp", UnaryOp.LOG: "wf_log", UnaryOp.TANH: "wf_tanh",
    UnaryOp.ERF: "wf_erf", UnaryOp.SIGMOID: "wf_sigmoid", UnaryOp.SIN: "wf_sin", UnaryOp.COS: "wf_cos",
}


@dataclass(frozen=True, slots=True)
class Value:
    code: str
    dtype: DType
    vector: bool


class Counter:
    """Fresh local names, shared by every renderer of one C function."""

    def __init__(self) -> None:
        self.next = 0

    def fresh(self, prefix: str = "t") -> str:
        self.next += 1
        return f"{prefix}{self.next}"


def c_literal(value, dtype: DType) -> str:
    if dtype is DType.FLOAT32:
        number = float(value)
        if number != number:
            return "__builtin_nanf(\"\")"
        if number in (float("inf"), float("-inf")):
            return "__builtin_inff()" if number > 0 else "(-__builtin_inff())"
        return f"{number.hex()}f" if number != int(number) or abs(number) > 2**24 else f"{number!r}f"
    if dtype is DType.BOOL:
        return "1" if value else "0"
    if dtype is DType.INT64:
        return f"INT64_C({int(value)})" if int(value) > -(2**63) else "INT64_MIN"
    return f"((int32_t){int(value)})" if int(value) >= -(2**31) + 1 else "INT32_MIN"


class BodyRenderer:
    """Appends C statements for expressions to ``lines`` within one scope."""

    def __init__(
        self,
        views: Mapping[str, BufferView],
        extents: Mapping[str, int],
        lanes: int,
        lines: list[str],
        indent: str,
        counter: Counter,
        env: Mapping[str, str],
        vector_axis: str | None = None,
        reciprocal_divisors: bool = False,
    ) -> None:
        self.views = views
        self.extents = extents
        self.lanes = lanes
        self.lines = lines
        self.indent = indent
        self.counter = counter
        self.env = env
        self.vector_axis = vector_axis
        # Inference (MemberNest.reciprocal_divisors): lanes / scalar d -> lanes * (1 / d)
        self.reciprocal_divisors = reciprocal_divisors
        self.memo: dict = {}
        # load -> (panel pointer, fold axes, lanes per panel row, lane axis): served from a packed panel
        self.packed: dict[Load, tuple[str, tuple[tuple[str, int], ...], int, str]] = {}
        # a fold-laned contraction (weft.codegen.fold_lanes): load -> (stage pointer, offset) read
        # from its staged copy; ``aligned``: loads whose vectors start on a 64-byte line here;
        # ``span``: (first lane, lane count) C expressions, only those lanes read (masked)
        self.staged: dict[Load, tuple[str, str]] = {}
        self.aligned: frozenset[Load] = frozenset()
        self.span: tuple[str, str] | None = None
        # contiguous float32 vectors read as whole 64-byte lines (two aligned loads and a permute:
        # cheaper for a memory stream); False: one unaligned load (a compute-bound loop, whose
        # permutes would compete with its arithmetic: weft.codegen.online_rows)
        self.line_loads = True

    # ------------------------------------------------------------------ helpers

    def emit(self, line: str) -> None:
        self.lines.append(self.indent + line)

    def local(self, dtype: DType, vector: bool, code: str) -> Value:
        name = self.counter.fresh()
        ctype = VECTOR_TYPE[dtype] if vector else SCALAR_TYPE[dtype]
        self.emit(f"{ctype} {name} = {code};")
        return Value(name, dtype, vector)

    def is_vector(self, expr: Expr) -> bool:
        return self.vector_axis is not None and self.vector_axis in expr_axes(expr)

    def splat(self, value: Value) -> str:
        if value.vector:
            return value.code
        if value.dtype is DType.BOOL:
            return f"wfc_splat_i(-({value.code}))"
        return f"wfc_splat_{SUFFIX[value.dtype]}({value.code})"

    def sub_renderer(self, lines: list[str], indent: str, env: Mapping[str, str], vector_axis) -> BodyRenderer:
        return BodyRenderer(self.views, self.extents, self.lanes, lines, indent, self.counter, env, vector_axis,
                            self.reciprocal_divisors)

    # ------------------------------------------------------------------ index

    def index(self, index: IndexExpr) -> str:
        """A C int64 expression for an index (always scalar)."""
        match index:
            case AxisIndex(axis):
                return f"({self.env[axis]})"
            case IndexConst(value):
                return f"INT64_C({value})"
            case IndexAdd(left, right):
                return f"({self.index(left)} + {self.index(right)})"
            case IndexMul(operand, factor):
                return f"({self.index(operand)} * INT64_C({factor}))"
            case IndexFloorDiv(operand, divisor):
                if self._nonnegative(operand):
                    return f"({self.index(operand)} / INT64_C({divisor}))"
                return f"wfc_floordiv({self.index(operand)}, INT64_C({divisor}))"
            case IndexMod(operand, divisor):
                if self._nonnegative(operand):
                    return f"({self.index(operand)} % INT64_C({divisor}))"
                return f"wfc_floormod({self.index(operand)}, INT64_C({divisor}))"
            case IndexOf(value):
                inner = self.render(value)
                return f"((int64_t)({inner.code}))"
        raise TypeError(f"not an index expression: {index!r}")

    def _nonnegative(self, index: IndexExpr) -> bool:
        bounds = index_range(index, self.extents)
        return bounds is not None and bounds[0] >= 0

    # ------------------------------------------------------------------ expressions

    def memo_key(self, expr: Expr, vector: bool) -> tuple:
        """A node's identity in this scope: itself, its mode, and the values of the axes it reads."""
        return (expr, vector, tuple((a, self.env.get(a)) for a in sorted(expr_axes(expr))))

    def render(self, expr: Expr) -> Value:
        vector = self.is_vector(expr)
        key = self.memo_key(expr, vector)
        if key not in self.memo:
            if vector:
                self.memo[key] = self._vector(expr)
            else:
                self.memo[key] = self._scalar(expr)
        return self.memo[key]

    def _scalar(self, expr: Expr) -> Value:
        match expr:
            case Load():
                return self.scalar_load(expr)
            case Const(value, dtype):
                return Value(c_literal(value, dtype), dtype, False)
            case IndexValue(index, dtype):
                return self.local(dtype, False, f"({SCALAR_TYPE[dtype]}){self.index(index)}")
            case Unary(op, operand):
                inner = self.render(operand)
                return self.local(self._unary_dtype(op, inner), False, scalar_unary(op, inner))
            case Binary(op, left, right):
                a, b = self.render(left), self.render(right)
                dtype = DType.BOOL if op in C_INFIX and op not in _ARITH else a.dtype
                return self.local(dtype, False, scalar_binary(op, a, b))
            case Where(condition, if_true, if_false):
                c, a, b = self.render(condition), self.render(if_true), self.render(if_false)
                return self.local(a.dtype, False, f"({c.code} ? {a.code} : {b.code})")
            case Cast(operand, dtype):
                inner = self.render(operand)
                return self.local(dtype, False, scalar_cast(inner, dtype))
        raise TypeError(f"not an expression: {expr!r}")

    def _unary_dtype(self, op: UnaryOp, inner: Value) -> DType:
        return inner.dtype

    def _vector(self, expr: Expr) -> Value:
        match expr:
            case Load():
                return self.vector_load(expr)
            case IndexValue(index, dtype):
                step = axis_step(index, self.vector_axis)
                if step is None:
                    return self.patterned_index(expr)
                # affine along the lanes (a causal mask's j): base + step * (0, 1, 2, ...)
                stepped = "wfc_iota_l()" if step == 1 else f"wfc_iota_l() * INT64_C({step})"
                lanes = self.local(DType.INT64, True, f"(wfc_splat_l({self.index(index)}) + {stepped})")
                return self.local(dtype, True, vector_cast(lanes, dtype))
            case Unary(op, operand):
                inner = self.render(operand)
                return self.local(inner.dtype, True, vector_unary(op, inner))
            case Binary(op, left, right):
                if op in COMPARISONS:
                    narrow = self.narrow_compare(op, left, right)
                    if narrow is not None:
                        return narrow
                a, b = self.render(left), self.render(right)
                if (a.dtype is not DType.FLOAT32 and op is BinaryOp.DIV) or op is BinaryOp.FMOD:
                    # guarded lane by lane: no vector integer division (and no trap) exists
                    return self.lanewise(expr)
                if op is BinaryOp.DIV and self.reciprocal_divisors and not b.vector:
                    return self.reciprocal_divide(a, b)
                return self.local(_binary_dtype(op, a.dtype), True, vector_binary(op, a, b, self.splat))
            case Where(condition, if_true, if_false):
                c = self.render(condition)
                if not c.vector and self.branch_worth_skipping(if_true, if_false):
                    return self.branched_where(expr, c)
                a, b = self.render(if_true), self.render(if_false)
                mask = self.splat(c)
                if a.dtype is DType.INT64:
                    mask = f"__builtin_convertvector({mask}, wf_vl)"
                return self.local(a.dtype, True, f"wfc_sel_{SUFFIX[a.dtype]}({mask}, {self.splat(a)}, {self.splat(b)})")
            case Cast(operand, dtype):
                inner = self.render(operand)
                return self.local(dtype, True, vector_cast(inner, dtype))
        raise TypeError(f"vector rendering of {expr!r}")

    def branch_worth_skipping(self, if_true: Expr, if_false: Expr) -> bool:
        """A branch reads a buffer (a select would load what it throws away; an accumulator an
        epilogue is served is no read), and neither gathers (a gather out of its table is
        flagged wherever it sits: the oracle evaluates both branches)."""
        loads = [load for branch in (if_true, if_false) for load in expr_loads(branch) if load.buffer in self.views]
        return bool(loads) and not any(_has_index_of(index) for load in loads for index in load.index)

    def branched_where(self, expr: Where, condition: Value) -> Value:
        """Lanes of ``where(c, a, b)`` whose condition ``c`` is the same at every lane (it
        reads no axis of the lanes: a concatenation's ``j < 1024`` in a nest laned along
        ``d``): only the branch taken is computed. A select computes both and throws one
        away; decode's attention read the cached key and the new one for every vector of
        every key, each with its bounds check. The value is the select's, bit for bit."""
        branches = []
        for branch in (expr.if_true, expr.if_false):
            inner = copy.copy(self)  # the same counter and served loads; its own lines and scope
            inner.lines, inner.indent, inner.memo = [], self.indent + "    ", dict(self.memo)
            branches.append((inner, inner.render(branch)))
        dtype = branches[0][1].dtype
        name = self.counter.fresh()
        self.emit(f"{VECTOR_TYPE[dtype]} {name};")
        for opening, (inner, value) in zip((f"if ({condition.code}) {{", "} else {"), branches, strict=True):
            self.emit(opening)
            inner.emit(f"{name} = {inner.splat(value)};")
            self.lines.extend(inner.lines)
        self.emit("}")
        return Value(name, dtype, True)

    def patterned_index(self, expr: IndexValue) -> Value:
        """An index value with a constant lane pattern (``i // 2`` along ``i``): lane 0's value
        plus the pattern, where the vector starts at a multiple of the lanes; lane by lane
        otherwise (and for any other index)."""
        pattern = None if _has_index_of(expr.index) else lane_pattern(expr.index, self.vector_axis, self.lanes)
        if pattern is None:
            return self.lanewise(expr)
        name = self.counter.fresh()
        self.emit(f"{VECTOR_TYPE[expr.dtype]} {name};")
        lanes = self.local(DType.INT64, True, f"(wfc_splat_l({self.index(expr.index)}) + "
                                              f"(wf_vl){{{', '.join(map(str, pattern))}}})")
        self.emit(f"if {self.lane_guard()} {name} = {vector_cast(lanes, expr.dtype)}; else {{")
        inner = self.sub_renderer(self.lines, self.indent + "    ", self.env, self.vector_axis)
        inner.lanewise(expr, into=name)
        self.emit("}")
        return Value(name, expr.dtype, True)

    def reciprocal_divide(self, a: Value, b: Value) -> Value:
        """Lanes ``a`` over the scalar ``b`` as ``a * (1 / b)``: one division per scope instead
        of one per vector (two roundings: Inference only). Where ``1 / b`` would leave float32's
        normal range (``b`` zero, denormal, above 2^126, infinite or NaN) the lanes are divided
        exactly, so every non-finite result is the division's."""
        key = ("reciprocal", b.code)
        if key not in self.memo:
            self.memo[key] = self.local(DType.FLOAT32, False, f"(1.0f / {b.code})")
        inverse = self.memo[key].code
        return self.local(DType.FLOAT32, True, f"(wfc_recip_ok_f({b.code}) ? {a.code} * wfc_splat_f({inverse})"
                                               f" : {a.code} / wfc_splat_f({b.code}))")

    def narrow_int(self, expr: Expr) -> str | None:
        """int32 lanes for an integer index value or constant that provably fits in int32
        (a mask's positions): 16 int64 lanes would take two registers and conversions."""
        match expr:
            case IndexValue(index, DType.INT64 | DType.INT32):
                bounds = index_range(index, self.extents)
                if bounds is None or bounds[0] < -(2**31) or bounds[1] >= 2**31:
                    return None
                step = axis_step(index, self.vector_axis)
                if step is None:
                    return None
                base = f"wfc_splat_i((int32_t){self.index(index)})"
                if step == 0:
                    return base
                return f"({base} + wfc_iota_i())" if step == 1 else f"({base} + wfc_iota_i() * {step})"
            case Const(value, DType.INT64 | DType.INT32) if -(2**31) < int(value) < 2**31:
                return f"wfc_splat_i({int(value)})"
        return None

    def narrow_compare(self, op: BinaryOp, left: Expr, right: Expr) -> Value | None:
        a, b = self.narrow_int(left), self.narrow_int(right)
        if a is None or b is None:
            return None
        return self.local(DType.BOOL, True, f"({a} {C_INFIX[op]} {b})")

    def lanewise(self, expr: Expr, into: str | None = None) -> Value:
        """Build a vector lane by lane from the scalar rendering at each lane's position."""
        dtype = _dtype_of(expr, self)
        name = into or self.counter.fresh()
        lane = self.counter.fresh("l")
        if into is None:
            self.emit(f"{VECTOR_TYPE[dtype]} {name};")
        self.emit(f"for (int {lane} = 0; {lane} < {self.lanes}; {lane}++) {{")
        env = dict(self.env)
        env[self.vector_axis] = f"{self.env[self.vector_axis]} + {lane}"
        inner = self.sub_renderer(self.lines, self.indent + "    ", env, None)
        value = inner.render(expr)
        code = f"-({value.code})" if dtype is DType.BOOL else value.code
        inner.emit(f"{name}[{lane}] = {code};")
        self.emit("}")
        return Value(name, dtype, True)

    # ------------------------------------------------------------------ loads and stores

    def address(self, view: BufferView, index: tuple[IndexExpr, ...] | tuple[str, ...]) -> str:
        terms = []
        for position, stride, offset in zip(index, view.strides, view.offsets, strict=True):
            code = position if isinstance(position, str) else self.index(position)
            if offset != 0:
                code = f"({code} - ({c_value(offset)}))"
            terms.append(code if stride == 1 else f"{code} * {stride}")
        return " + ".join(terms) if terms else "0"

    def panel_address(self, load: Load) -> tuple[str, str]:
        pointer, fold_axes, span, lane_axis = self.packed[load]
        flat = "0"
        for name, extent in fold_axes:
            flat = f"({flat}) * {extent} + ({self.env[name]})" if flat != "0" else f"({self.env[name]})"
        return pointer, f"({flat}) * {span} + ({self.env[lane_axis]} - wf_v0)"

    def scalar_load(self, load: Load) -> Value:
        if load in self.packed:
            pointer, address = self.panel_address(load)
            return self.local(DType.FLOAT32, False, f"{pointer}[{address}]")
        view = self.views[load.buffer]
        dtype = view.dtype
        gathered = [i for i, idx in enumerate(load.index) if _has_index_of(idx)]
        if load.padding is None and not gathered:
            code = f"{view.pointer}[{self.address(view, load.index)}]"
            return self.local(dtype, False, f"({code} != 0)" if dtype is DType.BOOL else code)
        positions = [self.local(DType.INT64, False, self.index(idx)).code for idx in load.index]
        extents = view.shape
        if load.padding is None:
            # A gather index outside the table: flag it (the runner turns it into an
            # InputError) and read element 0 instead of out of bounds.
            for position in gathered:
                p = positions[position]
                self.emit(f"if ((uint64_t){p} >= (uint64_t){extents[position]}) {{ __atomic_store_n(&wf_bad_gather, 1, __ATOMIC_RELAXED); {p} = 0; }}")
            code = f"{view.pointer}[{self.address(view, tuple(positions))}]"
            return self.local(dtype, False, f"({code} != 0)" if dtype is DType.BOOL else code)
        checks = []
        for position, idx in enumerate(load.index):
            bounds = index_range(idx, self.extents)
            if bounds is None or bounds[0] < 0 or bounds[1] >= extents[position]:
                checks.append(f"(uint64_t){positions[position]} < (uint64_t){extents[position]}")
        code = f"{view.pointer}[{self.address(view, tuple(positions))}]"
        if dtype is DType.BOOL:
            code = f"({code} != 0)"
        if not checks:
            return self.local(dtype, False, code)
        pad = c_literal(load.padding, dtype)
        return self.local(dtype, False, f"({' && '.join(checks)}) ? {code} : {pad}")

    def at_lane(self, index: IndexExpr, lane: int) -> str:
        """The C value of an index at one lane of the current vector."""
        saved = self.env
        self.env = {**saved, self.vector_axis: f"{saved[self.vector_axis]} + {lane}" if lane else saved[self.vector_axis]}
        try:
            return self.index(index)
        finally:
            self.env = saved

    def unwrapped_load(self, load: Load, view: BufferView) -> Value | None:
        """A reshaped or rotated read (floor-div/mod along the lanes): one contiguous load
        when no quotient changes across the lanes, lane by lane where one does."""
        total, conditions = 0, []
        for index, stride in zip(load.index, view.strides, strict=True):
            analysed = unwrapped_step(index, self.vector_axis)
            if analysed is None:
                return None
            total += analysed[0] * stride
            conditions += analysed[1]
        if total != 1 or not conditions:
            return None
        last = self.lanes - 1
        checks = [
            f"wfc_floordiv({self.at_lane(operand, 0)}, INT64_C({divisor})) =="
            f" wfc_floordiv({self.at_lane(operand, last)}, INT64_C({divisor}))"
            for operand, divisor in dict.fromkeys(conditions)
        ]
        name = self.counter.fresh()
        self.emit(f"{VECTOR_TYPE[view.dtype]} {name};")
        self.emit(f"if ({' && '.join(checks)}) {{")
        self.emit(f"    {name} = wfc_load_{SUFFIX[view.dtype]}(&{view.pointer}[{self.address(view, load.index)}]);")
        self.emit("} else {")
        inner = self.sub_renderer(self.lines, self.indent + "    ", self.env, self.vector_axis)
        inner.lanewise(load, into=name)
        self.emit("}")
        return Value(name, view.dtype, True)

    def padded_vector_load(self, load: Load, view: BufferView) -> Value:
        """A halo read (convolution, shifted window): one contiguous load when every lane
        is in range (an affine index is in range at all lanes iff at the first and last),
        lane by lane with the padding value only near the edges."""
        lane_axis = self.vector_axis
        checks = []
        for position, index in enumerate(load.index):
            bounds = index_range(index, self.extents)
            if bounds is not None and bounds[0] >= 0 and bounds[1] < view.shape[position]:
                continue
            for lane in (0, self.lanes - 1):
                saved = self.env[lane_axis]
                self.env = {**self.env, lane_axis: f"{saved} + {lane}" if lane else saved}
                checks.append(f"(uint64_t){self.index(index)} < (uint64_t){view.shape[position]}")
                self.env = {**self.env, lane_axis: saved}
        name = self.counter.fresh()
        self.emit(f"{VECTOR_TYPE[view.dtype]} {name};")
        self.emit(f"if ({' && '.join(checks) or '1'}) {{")
        self.emit(f"    {name} = wfc_load_{SUFFIX[view.dtype]}(&{view.pointer}[{self.address(view, load.index)}]);")
        self.emit("} else {")
        inner = self.sub_renderer(self.lines, self.indent + "    ", self.env, lane_axis)
        masked = self.masked_halo_load(load, view, name, inner)
        inner.lanewise(load, into=name)
        if masked:
            self.emit("#endif")
        self.emit("}")
        return Value(name, view.dtype, True)

    def masked_halo_load(self, load: Load, view: BufferView, name: str, inner: BodyRenderer) -> bool:
        """Near an edge, one AVX-512 masked load of the lanes inside the buffer (the others
        take the padding and are never read) instead of a lane-by-lane loop, when one
        dimension moves with the lanes (step 1) and float32 is read. Opens ``#if``/``#else``
        (True): the caller's lane-by-lane fallback follows and the caller closes it."""
        lane_axis = self.vector_axis
        moving = [position for position, index in enumerate(load.index) if lane_axis in index_axes(index)]
        if self.lanes != 16 or view.dtype is not DType.FLOAT32 or len(moving) != 1 or \
                axis_step(load.index[moving[0]], lane_axis) != 1:
            return False
        inside = []
        for position, index in enumerate(load.index):
            if position == moving[0]:
                continue
            bounds = index_range(index, self.extents)
            if bounds is None or bounds[0] < 0 or bounds[1] >= view.shape[position]:
                inside.append(f"(uint64_t)({inner.index(index)}) < (uint64_t){view.shape[position]}")
        first = inner.local(DType.INT64, False, inner.index(load.index[moving[0]])).code
        extent = view.shape[moving[0]]
        pad = c_literal(load.padding, DType.FLOAT32)
        self.emit("#if defined(__AVX512F__)")
        inner.emit(f"const long {name}_a = {first} < 0 ? -{first} : 0, {name}_e = {extent} - {first} < 16 ? {extent} - {first} : 16;")
        keep = f"{name}_a < {name}_e ? (__mmask16)(((1u << {name}_e) - 1u) & ~((1u << {name}_a) - 1u)) : (__mmask16)0"
        if inside:
            keep = f"({' && '.join(inside)}) ? ({keep}) : (__mmask16)0"
        inner.emit(f"{name} = (wf_vf)_mm512_mask_loadu_ps(_mm512_set1_ps({pad}), {keep}, "
                   f"&{view.pointer}[{self.address(view, load.index)}]);")
        self.emit("#else")
        return True

    def checked_position(self, load: Load, view: BufferView, dimension: int) -> str:
        """The index of one dimension; a gathered one is bounds-checked (flag + element 0)."""
        index = load.index[dimension]
        if not _has_index_of(index):
            return self.index(index)
        position = self.local(DType.INT64, False, self.index(index)).code
        extent = view.shape[dimension]
        self.emit(f"if ((uint64_t){position} >= (uint64_t){extent}) "
                  f"{{ __atomic_store_n(&wf_bad_gather, 1, __ATOMIC_RELAXED); {position} = 0; }}")
        return position

    def vector_load(self, load: Load) -> Value:
        if load in self.staged or load in self.aligned or self.span is not None:
            return self.fold_lane_load(load)
        if load in self.packed:
            pointer, address = self.panel_address(load)
            return self.local(DType.FLOAT32, True, f"wfc_load_f(&{pointer}[{address}])")
        view = self.views[load.buffer]
        access = load_access(load, view.strides, self.vector_axis)
        if access is Access.CONTIGUOUS and view.dtype is not DType.BOOL:
            if any(map(_has_index_of, load.index)):
                # a gathered row read along the lanes (an embedding): one checked scalar
                # index per gathered dimension, then a contiguous load
                positions = tuple(self.checked_position(load, view, n) for n in range(len(load.index)))
                address = self.address(view, positions)
            else:
                address = self.address(view, load.index)
            loader = (("wfc_load_lines_f" if self.line_loads else "wfc_load_f") if view.dtype is DType.FLOAT32
                      else f"wfc_load_{SUFFIX[view.dtype]}")
            return self.local(view.dtype, True, f"{loader}(&{view.pointer}[{address}])")
        step = address_step(load, view.strides, self.vector_axis)
        if step is None and load.padding is None and view.dtype in (DType.FLOAT32, DType.INT32):
            unwrapped = self.unwrapped_load(load, view)
            if unwrapped is not None:
                return unwrapped
        if (
            load.padding is not None and step == 1 and view.dtype in (DType.FLOAT32, DType.INT32)
            and not any(map(_has_index_of, load.index))
        ):
            return self.padded_vector_load(load, view)
        if (
            load.padding is None and step is not None and abs(step) * self.lanes < 2**31
            and view.dtype in (DType.FLOAT32, DType.INT32) and not any(map(_has_index_of, load.index))
        ):
            address = self.address(view, load.index)
            return self.local(view.dtype, True, f"wfc_gather_{SUFFIX[view.dtype]}(&{view.pointer}[{address}], {step})")
        if load.padding is None and view.dtype in (DType.FLOAT32, DType.INT32):
            permuted = self.permuted_load(load, view)
            if permuted is not None:
                return permuted
        return self.lanewise(load)

    def fold_lane_load(self, load: Load) -> Value:
        """A contiguous float32 read along a fold-laned contraction's fold: from its staged copy
        or its own buffer; a masked load of the span's lanes (the others 0, never read), or one
        known to start on a 64-byte line."""
        if load in self.staged:
            pointer, offset = self.staged[load]
            address = f"{offset} + ({self.env[self.vector_axis]})"
        else:
            view = self.views[load.buffer]
            pointer, address = view.pointer, self.address(view, load.index)
        if self.span is not None:
            first, count = self.span
            return self.local(DType.FLOAT32, True, f"wfc_load_span_f(&{pointer}[{address}], {first}, {count})")
        if load in self.staged:
            loader = "wfc_load_held_f" if load in self.aligned else "wfc_load_lines_f"
        else:
            loader = "wfc_load_a_f" if load in self.aligned else "wfc_load_lines_f"
        return self.local(DType.FLOAT32, True, f"{loader}(&{pointer}[{address}])")

    def lane_guard(self) -> str:
        """True at run time when the vector's first point along its axis is a multiple of the
        lanes: where ``lane_pattern``'s constant patterns hold."""
        return f"((({self.env[self.vector_axis]}) & {self.lanes - 1}) == 0)"

    def permuted_load(self, load: Load, view: BufferView) -> Value | None:
        """A read whose lanes fall, in a constant order, inside one span of ``lanes`` elements
        (a rotation's partner ``x[i ^ 1]``, a table per pair ``t[i // 2]``): one masked load of
        the span and one permutation (AVX-512), where the vector starts at a multiple of the
        lanes; lane by lane elsewhere. The lanes read exactly the elements the lane-by-lane
        loop reads (the mask keeps the others untouched), so no byte changes."""
        if self.lanes != 16 or any(map(_has_index_of, load.index)):
            return None
        offsets = [0] * self.lanes
        for index, stride in zip(load.index, view.strides, strict=True):
            pattern = lane_pattern(index, self.vector_axis, self.lanes)
            if pattern is None:
                return None
            offsets = [total + stride * step for total, step in zip(offsets, pattern, strict=True)]
        low = min(offsets)
        if max(offsets) - low >= self.lanes or len(set(offsets)) == 1:
            return None
        mask = sum(1 << (offset - low) for offset in set(offsets))
        order = ", ".join(str(offset - low) for offset in offsets)
        kind = "ps" if view.dtype is DType.FLOAT32 else "epi32"
        name = self.counter.fresh()
        self.emit(f"{VECTOR_TYPE[view.dtype]} {name};")
        self.emit("#if defined(__AVX512F__)")
        self.emit(f"if {self.lane_guard()} {name} = ({VECTOR_TYPE[view.dtype]})_mm512_permutexvar_{kind}("
                  f"_mm512_setr_epi32({order}), _mm512_maskz_loadu_{kind}((__mmask16){mask:#06x}, "
                  f"&{view.pointer}[{self.address(view, load.index)} + ({low})])); else")
        self.emit("#endif")
        self.emit("{")
        inner = self.sub_renderer(self.lines, self.indent + "    ", self.env, self.vector_axis)
        inner.lanewise(load, into=name)
        self.emit("}")
        return Value(name, view.dtype, True)


_ARITH = frozenset({BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL})


def _binary_dtype(op: BinaryOp, operand: DType) -> DType:
    if op in _ARITH or op in (BinaryOp.DIV, BinaryOp.FMOD, BinaryOp.MAX, BinaryOp.MIN):
        return operand
    return DType.BOOL


def _dtype_of(expr: Expr, renderer: BodyRenderer) -> DType:
    from weft.ir import expr_dtype

    buffers = {name: _FakeBuffer(view.dtype) for name, view in renderer.views.items()}
    return expr_dtype(expr, buffers)


@dataclass(frozen=True, slots=True)
class _FakeBuffer:
    dtype: DType


# --------------------------------------------------------------------------- op tables


# (scalar, vector) C of the unary ops that are not Weft's math functions (``C_MATH``)
_UNARY = {
    UnaryOp.NEG: ("(-{c})", "(-{c})"),
    UnaryOp.NOT: ("(!{c})", "(~{c})"),  # vector lanes hold true as -1
    UnaryOp.SQRT: ("wf_sqrt_s({c})", "wf_sqrt({c})"),
    UnaryOp.RSQRT: ("(1.0f / wf_sqrt_s({c}))", "(wfc_splat_f(1.0f) / wf_sqrt({c}))"),
}


def scalar_unary(op: UnaryOp, x: Value) -> str:
    c = x.code
    if op is UnaryOp.ABS:
        return f"__builtin_fabsf({c})" if x.dtype is DType.FLOAT32 else f"({c} < 0 ? -{c} : {c})"
    return _UNARY[op][0].format(c=c) if op in _UNARY else f"{C_MATH[op]}_s({c})"


def vector_unary(op: UnaryOp, x: Value) -> str:
    c = x.code
    if op is UnaryOp.ABS:
        return f"wfc_abs_{SUFFIX[x.dtype]}({c})"
    return _UNARY[op][1].format(c=c) if op in _UNARY else f"{C_MATH[op]}({c})"


def _extremum_or_bitwise(op: BinaryOp, x: str, y: str, dtype: DType, scalar: bool) -> str:
    """MAX/MIN by the prelude's functions (``wfc_smax_f`` scalar, ``wfc_max_f`` vector); AND/OR bitwise."""
    if op in (BinaryOp.MAX, BinaryOp.MIN):
        return f"wfc_{'s' if scalar else ''}{op.value}_{SUFFIX[dtype]}({x}, {y})"
    if op is BinaryOp.AND:
        return f"({x} & {y})"
    if op is BinaryOp.OR:
        return f"({x} | {y})"
    raise TypeError(f"binary op {op}")


def scalar_binary(op: BinaryOp, a: Value, b: Value) -> str:
    x, y = a.code, b.code
    if op in C_INFIX:
        return f"({x} {C_INFIX[op]} {y})"
    if op is BinaryOp.DIV:
        if a.dtype is DType.FLOAT32:
            return f"({x} / {y})"
        # defined for every pair, as in the oracle: x / 0 = 0, INT_MIN / -1 = INT_MIN (-fwrapv
        # makes -x wrap); x86 idiv would trap on both
        return f"({y} == 0 ? 0 : {y} == -1 ? -{x} : {x} / {y})"
    if op is BinaryOp.FMOD:
        if a.dtype is DType.FLOAT32:
            return f"fmodf({x}, {y})"  # exact (IEEE remainder of truncation): libm cannot differ
        return f"({y} == 0 ? {x} : {y} == -1 ? 0 : {x} % {y})"
    return _extremum_or_bitwise(op, x, y, a.dtype, scalar=True)


_MIRRORED = {BinaryOp.LT: BinaryOp.GT, BinaryOp.LE: BinaryOp.GE, BinaryOp.GT: BinaryOp.LT, BinaryOp.GE: BinaryOp.LE}


def vector_binary(op: BinaryOp, a: Value, b: Value, splat: Callable[[Value], str]) -> str:
    x, y = splat(a), splat(b)
    if a.dtype is DType.BOOL and op in _MIRRORED:
        # lanes hold true as -1 (a mask), so the order of bools is mirrored: a < b <=> -a > -b
        op = _MIRRORED[op]
    if op in C_INFIX:
        code = f"({x} {C_INFIX[op]} {y})"
        if op not in _ARITH and a.dtype is DType.INT64:
            return f"__builtin_convertvector({code}, wf_vi)"
        return code
    if op is BinaryOp.DIV:
        return f"({x} / {y})"
    return _extremum_or_bitwise(op, x, y, a.dtype, scalar=False)


def scalar_cast(x: Value, dtype: DType) -> str:
    if dtype is DType.BOOL:
        return f"({x.code} != 0)"
    if x.dtype is DType.FLOAT32 and dtype in _FLOAT_TO_INT:
        return f"{_FLOAT_TO_INT[dtype]}_s({x.code})"  # saturating, NaN -> 0 (C leaves it undefined)
    return f"(({SCALAR_TYPE[dtype]}){x.code})"


# float -> int conversions defined for every input (prelude): the oracle's rule
_FLOAT_TO_INT = {DType.INT32: "wfc_f2i", DType.INT64: "wfc_f2l"}


def vector_cast(x: Value, dtype: DType) -> str:
    if dtype is x.dtype:
        return x.code
    if dtype is DType.BOOL:
        zero = f"wfc_splat_{SUFFIX[x.dtype]}(0)"
        code = f"({x.code} != {zero})"
        return f"__builtin_convertvector({code}, wf_vi)" if x.dtype is DType.INT64 else code
    if x.dtype is DType.FLOAT32 and dtype in _FLOAT_TO_INT:
        return f"{_FLOAT_TO_INT[dtype]}({x.code})"
    source = f"(-{x.code})" if x.dtype is DType.BOOL else x.code
    return f"__builtin_convertvector({source}, {VECTOR_TYPE[dtype]})"
